"""Decoder-shaped embedders on numbert's encoder: Qwen3 (Qwen3-Embedding) and Gemma3 (EmbeddingGemma).

Both are pre-norm transformers like ModernBERT (each sublayer reads its input normalised and adds its output to
the input as it was, a final norm after the last layer), with rotary positions and a gated feed-forward (SwiGLU for
Qwen3, GeGLU with tanh GELU for Gemma3), built from numbert.model.layers' blocks. What they change (docs/family.md):

- RMSNorm instead of LayerNorm: x / sqrt(mean(x^2) + eps) times a gain, no mean subtracted, no shift; the gain is
  the stored weight w (Qwen3) or 1 + w (Gemma3, whose weights are stored as offsets from 1);
- grouped-query attention: `num_key_value_heads` key/value heads, each shared by a group of query heads (Qwen3-
  Embedding-0.6B: 16 query heads, 8 key/value heads); the queries of one group attend against its key/value head
  in one product, the keys never repeated (`grouped_attention`);
- an RMSNorm of each query and key head (its own gain, one head wide) before the rotation;
- Qwen3 is causal: a token attends to itself and the tokens before it only (the embedding is read at the last
  token, which has seen the whole text); EmbeddingGemma attends both ways, its sliding-window layers within
  sliding_window // 2 tokens either side (`BertConfig.window`), its global layers everywhere, each kind with
  its own rope theta;
- Gemma3: the word embeddings times sqrt(hidden), in float32; scores scaled by 1 / sqrt(query_pre_attn_scalar);
  two more norms a layer, on attention's and the feed-forward's outputs before each is added to the input.

`DecoderEncoder` is the `Encoder` with these layers; `build_encoder` picks the class a config needs. Reference:
`reference.decoder_layer`, the same pass on the padded batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..runtime import row_threads
from ..runtime.blas import products_in_row_threads
from .config import BertConfig
from .encoder import Encoder, EncoderLayer, Output
from .layers import (
    ACTIVATIONS,
    BLOCK_BYTES,
    EXP,
    EXP_PER_E,
    Linear,
    Norm,
    linear,
    result,
    row_sums,
)
from .packing import Packing
from .rotary import rotate_on_tables
from .scratch import scratch_array
from .tensors import EMBEDDING_NAMES, FINAL_NORM_NAME, decoder_layer_names, file_backed

f32 = np.float32
SCORE_BYTES = 32 << 20  # bytes of one block of queries' scores (a long text's attention runs a block at a time)
MIN_QUERIES = 32  # queries per block at least: fewer make the products too thin


def gain_offset(config: BertConfig) -> float:
    """What RMSNorm adds to its stored weight to get its gain: 1 for Gemma3 (x (1 + w)), 0 for Qwen3 (x w)."""
    return 1.0 if config.member.decoder == "gemma3" else 0.0


def in_large_blocks(work: Callable[[slice], object], rows: np.ndarray) -> None:
    """`layers.in_blocks` with blocks twice the size, for passes that make one temporary of a block at most: half
    as many hand-overs of Python's lock between the row threads, whose NumPy calls on a block are each short."""
    step = max(1, 2 * BLOCK_BYTES // max(1, rows[:1].nbytes))
    row_threads.each(work, len(rows), step, least=row_threads.MIN_SHARE // 2)


def rms_norm(
    x: np.ndarray,
    p: Norm,
    eps: float,
    offset: float = 0.0,
    out: np.ndarray | None = None,
    residual: np.ndarray | None = None,
) -> np.ndarray:
    """RMSNorm(x) = x / sqrt(mean(x^2) + eps) * (offset + w) over the last axis, in float32 as transformers computes
    it, into `out` (out=x: in place), else a new array; with a `residual`, x += residual first (x then holds the
    sum), in the same pass. Reference: `reference.rms_norm`. Faster by einsum's sums of squares and in
    cache-sized blocks of rows shared among the row threads. (..., width) -> (..., width)"""
    width = x.shape[-1]
    y = result(out, *x.shape)
    x_rows, y_rows = x.reshape(-1, width), y.reshape(-1, width)
    gain = p.weight if offset == 0 else p.weight + f32(offset)

    def normalize(rows: slice) -> None:
        block = x_rows[rows]
        if residual is not None:
            block += residual.reshape(-1, width)[rows]
        mean_square = np.einsum("...i,...i->...", block, block) / f32(width)
        scaled = np.multiply(block, (f32(1) / np.sqrt(mean_square + f32(eps)))[..., None], out=y_rows[rows])
        scaled *= gain

    in_large_blocks(normalize, y_rows)
    return y


def norm_and_rotate(
    x: np.ndarray, p: Norm, eps: float, offset: float, rotation: tuple[np.ndarray, np.ndarray] | None
) -> np.ndarray:
    """Each head's RMSNorm (`rms_norm`, one head wide), then its rotation (`rotary.rotate`), in place: one pass
    over the projected queries or keys, in cache-sized blocks of tokens shared among the row threads, instead of
    a pass of each over the whole array. x: (tokens, heads, head) with cos, sin (tokens, head) at each token's
    position (rotation None: the norm alone). Reference: `reference.rms_norm`, then `reference.rotate`.

    The gain goes into the rotation's tables, once a call: with x's halves (x1, x2), gains (g1, g2) and r each head's
    1 / rms, the rotated norm is r (x g c + swap(x) t), t = (-g2 sin, g1 sin), swap(x) = (x2, x1), on whole heads
    (`rotary.rotate_on_tables`). The same maths as the norm and the rotation in turn, within float32 rounding."""
    tokens, heads, width = x.shape
    half = width // 2
    gain = p.weight if offset == 0 else p.weight + f32(offset)
    rows = x.reshape(tokens, heads * width)
    if rotation is not None:
        cos, sin = rotation  # (tokens, head), the two halves sharing their angles
        times_cos = cos * gain  # (tokens, head): g1 cos | g2 cos
        times_sin = np.empty_like(sin)  # -g2 sin | g1 sin: rotate_half's signs and gains
        np.multiply(sin[:, :half], -gain[half:], out=times_sin[:, :half])
        np.multiply(sin[:, half:], gain[:half], out=times_sin[:, half:])

    def work(block: slice) -> None:
        part = x[block]  # (b, heads, head)
        mean_square = np.einsum("...i,...i->...", part, part) / f32(width)
        inverse_rms = (f32(1) / np.sqrt(mean_square + f32(eps)))[..., None]  # (b, heads, 1)
        if rotation is None:
            part *= inverse_rms
            part *= gain
            return
        rotate_on_tables(part, times_cos[block, None], times_sin[block, None], np.empty_like(part))
        part *= inverse_rms

    in_large_blocks(work, rows)
    return x


def stack_rows(weights: dict[str, np.ndarray], names: list[str]) -> None:
    """The weights (and biases, if all have one) of products that read the same input, named `names` (less
    `.weight`), copied once into one matrix, their rows one after the other; each name in `weights` then a view of
    its rows, so the originals are freed and no second copy is kept. `stacked` finds the matrix again: one GEMM
    for the several (queries, keys and values; gate and up), as wide GEMMs run nearer BLAS's best speed. Only
    weights in the process's own memory (widened from bf16, read from a .bin) are stacked: float32 tensors mapped
    from the checkpoint's file stay as they are, since a copy would hold them twice (the map's pages and the copy)
    and `--workers` processes would no longer share them."""
    if any(file_backed(weights[name + ".weight"]) for name in names):
        return
    for suffix in (".weight", ".bias"):
        if suffix == ".bias" and not all(name + suffix in weights for name in names):
            return
        parts = [weights[name + suffix] for name in names]
        rows = np.concatenate(parts)
        del parts  # (the originals go as their names are rebound below)
        start = 0
        for name in names:
            end = start + len(weights[name + suffix])
            weights[name + suffix] = rows[start:end]
            start = end


def stacked(parts: tuple[Linear, ...]) -> Linear | None:
    """One Linear for `parts` whose weights are consecutive rows of one matrix, in order (`stack_rows` made them
    so at load): its rows are the parts' outputs side by side. None where they are not, or have adapters, or
    only some a bias."""
    weights, biases = [p.weight for p in parts], [p.bias for p in parts if p.bias is not None]
    matrix = weights[0].base
    if matrix is None or any(p.low_rank is not None for p in parts) or not consecutive(weights, matrix):
        return None
    if not biases:
        return Linear(matrix, None)
    if len(biases) < len(parts) or not consecutive(biases, biases[0].base):
        return None
    return Linear(matrix, biases[0].base)


def consecutive(parts: list, whole: np.ndarray | None) -> bool:
    """Whether `parts` are `whole`'s rows from the first, one after the other, to the last."""
    if whole is None or not whole.flags.c_contiguous or sum(len(p) for p in parts) != len(whole):
        return False
    start, row_bytes = whole.__array_interface__["data"][0], whole[:1].nbytes
    for part in parts:
        if part.base is not whole or part.__array_interface__["data"][0] != start:
            return False
        start += len(part) * row_bytes
    return True


def products(x: np.ndarray, parts: tuple[Linear, ...]) -> list[np.ndarray]:
    """`linear(x, p)` for each of `parts`, in scratch memory: one GEMM where they are `stacked`, the outputs then
    views of its columns. (tokens, in) -> [(tokens, out_p), ...]"""
    whole = stacked(parts)
    if whole is None:
        return [linear(x, p, scratch_array(len(x), len(p.weight))) for p in parts]
    y = linear(x, whole, scratch_array(len(x), len(whole.weight)))
    bounds = np.cumsum([0] + [len(p.weight) for p in parts])
    return [y[:, start:end] for start, end in zip(bounds[:-1], bounds[1:])]


def stacked_feed_forward(
    x: np.ndarray,
    gate: Linear,
    up: Linear,
    down: Linear,
    activation: Callable[..., np.ndarray],
    out: np.ndarray | None = None,
) -> np.ndarray:
    """`layers.gated_feed_forward`, the gate and up products as one where they are `stacked` (`products`): the
    activation and the product in place in the gate's columns, in cache-sized blocks on the row threads, and
    the down product reading them there. Reference: `reference.feed_forward`'s gated line."""
    g, u = products(x, (gate, up))

    def gated(rows: slice) -> None:
        block = g[rows]
        activation(block, out=block)
        block *= u[rows]

    in_large_blocks(gated, g)
    return linear(g, down, out)


def seen_keys(queries: range, keys: range, causal: bool, window: int | None) -> np.ndarray | None:
    """Which keys a block of queries sees (positions in the sequence): none after the query, if causal; none beyond
    `window` of it, if a window. -> (queries, keys) float32, 1 seen, 0 hidden; or None where every key is seen."""
    if not causal and window is None:
        return None
    distance = np.arange(keys.start, keys.stop)[None, :] - np.arange(queries.start, queries.stop)[:, None]
    seen = np.ones(distance.shape, bool)
    if causal:
        seen &= distance <= 0
    if window is not None:
        seen &= np.abs(distance) <= window
    return seen.astype(f32)


def hiding_bias(seen: np.ndarray) -> np.ndarray:
    """The additive mask of `seen_keys`: 0 where a key is seen, float32's minimum where it is hidden."""
    return np.where(seen != 0, f32(0), np.finfo(f32).min).astype(f32)


def key_range(start: int, end: int, length: int, causal: bool, window: int | None) -> range:
    """The keys a block of queries [start, end) can see: up to the last query if causal, within the window."""
    first = 0 if window is None else max(0, start - window)
    last = end if causal else (length if window is None else min(length, end + window))
    return range(first, last)


def grouped_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    packing: Packing,
    key_value_heads: int,
    scale: float,
    causal: bool,
    window: int | None,
    *,
    out: np.ndarray,
) -> np.ndarray:
    """Grouped-query attention over the packed tokens: softmax(scale q k^T + mask) v, query head h reading key/value
    head h // (heads / key_value_heads), as transformers' repeat_kv pairs them, without repeating K and V: the
    group's query heads are an axis the product broadcasts the keys over.

    q, out: (tokens, heads x head); k, v: (tokens, key_value_heads x head), packed by `packing`; causal: keys
    after the query hidden; window: keys beyond it hidden, or None. Each group of sequences runs a block of
    queries at a time (SCORE_BYTES), against the keys the block can see. Reference: `reference.grouped_attention`."""
    head = k.shape[-1] // key_value_heads
    group = q.shape[-1] // k.shape[-1]  # query heads per key/value head
    for g in packing.groups:
        n, length, part = len(g.rows), g.length, g.tokens
        q_g, k_g, v_g = (  # (n, kv, group or 1, length, head): views
            a[part].reshape(n, length, key_value_heads, -1, head).transpose(0, 2, 3, 1, 4) for a in (q, k, v)
        )
        padding = None if g.mask_bias is None else g.mask_bias[:, :, None]  # (n, 1, 1, 1, length)
        context = out[part].reshape(n, length, key_value_heads, group, head).transpose(0, 2, 3, 1, 4)
        block = max(MIN_QUERIES, SCORE_BYTES // (4 * n * key_value_heads * group * length))
        for start in range(0, length, block):
            end = min(length, start + block)
            keys = key_range(start, end, length, causal, window)
            seen, bias = seen_keys(range(start, end), keys, causal, window), None
            if padding is not None:  # hidden either way: the minimum of the two masks, never their sum (-inf)
                cut = padding[..., keys.start : keys.stop]
                bias = cut if seen is None else np.minimum(hiding_bias(seen), cut)
                seen = None
            key_part, queries = slice(keys.start, keys.stop), slice(start, end)
            k_part, v_part = k_g[:, :, :, key_part], v_g[:, :, :, key_part]
            block_attention(q_g[:, :, :, queries], k_part, v_part, scale, bias, context[:, :, :, queries], seen)
    return out


def last_query_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    packing: Packing,
    key_value_heads: int,
    scale: float,
    window: int | None,
    *,
    out: np.ndarray,
) -> np.ndarray:
    """`grouped_attention` for each row's last real token alone, against the keys of its row it sees: those before
    it (none after it is real), within `window` of it if a window; causal or not, the same keys.

    q, out: (rows, heads x head), the last tokens' queries in `packing.lasts` order; k, v: (tokens, key_value_heads
    x head), packed. Reference: `reference.grouped_attention`'s last query of each sequence."""
    head = k.shape[-1] // key_value_heads
    group = q.shape[-1] // k.shape[-1]  # query heads per key/value head
    done = 0
    for g in packing.groups:
        n, length, part = len(g.rows), g.length, g.tokens
        q_g, context = (  # (n, kv, group, 1, head): views
            a[done : done + n].reshape(n, 1, key_value_heads, group, head).transpose(0, 2, 3, 1, 4) for a in (q, out)
        )
        k_g, v_g = (a[part].reshape(n, length, key_value_heads, 1, head).transpose(0, 2, 3, 1, 4) for a in (k, v))
        bias = None if g.mask_bias is None else g.mask_bias[:, :, None]  # (n, 1, 1, 1, length)
        if window is not None:  # keys more than `window` before the row's last token hidden
            last = np.full(n, length - 1) if g.mask_bias is None else packing.last_columns[g.rows]
            before = np.arange(length)[None, :] < (last - window)[:, None]  # (n, length)
            cut = np.where(before, np.finfo(f32).min, f32(0)).astype(f32)[:, None, None, None, :]
            bias = cut if bias is None else np.minimum(bias, cut)
        block_attention(q_g, k_g, v_g, scale, bias, context)
        done += n
    return out


def block_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scale: float,
    bias: np.ndarray | None,
    out: np.ndarray,
    seen: np.ndarray | None = None,
) -> np.ndarray:
    """softmax(scale q k^T + bias) v for a block of queries: q (n, kv, group, queries, head) against k, v (n, kv, 1,
    keys, head), into `out` (n, kv, group, queries, head). A key/value head's group of query heads is one stack of
    group x queries rows, so each product is one matrix per sequence and key/value head. The work goes by units:
    one key/value head over a few sequences, as many as make a cache-sized block of scores (BLOCK_BYTES), whose
    products are one stacked matmul each (NumPy's loop over the sequences, not Python's); the units are shared
    among the row threads, each unit's scores, softmax and context in one go while they are in the cache
    (`blas.products_in_row_threads`). bias: (queries, keys) or any shape that broadcasts to (n, kv, group, queries,
    keys); or instead `seen` (`seen_keys`), the keys each query sees as 1 and 0 (`softmax_numerators`)."""
    n, kv, group, queries, head = q.shape
    keys = k.shape[-2]
    biases, seens = (None if a is None else np.broadcast_to(a, (n, kv, group, queries, keys)) for a in (bias, seen))
    pair_bytes = group * queries * keys * 4  # one sequence and key/value head's scores
    per = max(1, min(n, BLOCK_BYTES // pair_bytes))  # sequences a unit
    chunks = -(-n // per)
    base_scale = f32(scale * EXP_PER_E)  # scores in the base of EXP (`layers.EXP`)

    def units(block: slice) -> None:
        for unit in range(block.start, min(block.stop, kv * chunks)):
            h, chunk = divmod(unit, chunks)
            rows = slice(chunk * per, min(n, (chunk + 1) * per))
            m = rows.stop - rows.start
            stacked = np.multiply(q[rows, h], base_scale, out=np.empty((m, group, queries, head), f32))
            keys_t = k[rows, h, 0].transpose(0, 2, 1)  # (m, head, keys)
            scores = np.matmul(stacked.reshape(m, group * queries, head), keys_t)  # (m, group x queries, keys)
            part_bias, part_seen = (None if a is None else a[rows, h] for a in (biases, seens))
            pairs = softmax_numerators(scores.reshape(m, group, queries, keys), part_bias, part_seen)
            weights = pairs.reshape(scores.shape)  # softmax = weights / their row sums
            context = np.matmul(weights, v[rows, h, 0])
            context /= row_sums(weights)
            out[rows, h] = context.reshape(m, group, queries, head)

    large = per * pair_bytes * 2 >= BLOCK_BYTES  # a unit's scores are half a cache-sized block or more
    products_in_row_threads(units, kv * chunks, 1, 1 if large else row_threads.MIN_SHARE)
    return out


def softmax_numerators(scores: np.ndarray, bias: np.ndarray | None, seen: np.ndarray | None) -> np.ndarray:
    """EXP(scores + bias - shift) in place, the shift any number a row shares (`layers.exp_shifted`): softmax is
    this over its row sums. Where every score lies within +-64 EXP neither overflows nor underflows, so no shift
    is needed, and the hidden keys of `seen` (1 seen, 0 hidden) are zeroed after the EXP: the causal mask as one
    product instead of a bias, a row maximum and a shift (a row always sees one key at least: itself). Else (and
    with a `bias`) the bias is added and each row shifted by its maximum. scores (..., queries, keys), bias and seen
    any shape that broadcasts to it. Reference: `reference.softmax` with `reference.causal_mask`."""
    if bias is None and -64 <= scores.min() and scores.max() <= 64:  # (false for NaN)
        EXP(scores, out=scores)
        if seen is not None:
            scores *= seen
        return scores
    if seen is not None:
        bias = hiding_bias(seen)
    if bias is not None:
        scores += bias
    scores -= np.fmax.reduce(scores, axis=-1, keepdims=True)  # fmax: the faster row maximum
    return EXP(scores, out=scores)


class DecoderEncoder(Encoder):
    """The encoder of a decoder-shaped embedder (Qwen3, Gemma3): token ids in, hidden states out, as `Encoder`,
    with `decoder_layer`s; the last hidden state is the final RMSNorm's output, as transformers' last_hidden_state."""

    def __init__(self, config: BertConfig, weights: dict[str, np.ndarray], task: str | None = None):
        if config.member.decoder is None:
            raise ValueError(f"{config.model_type} is not a decoder-shaped embedder: use Encoder")
        if task is not None:
            raise ValueError(f"unknown task {task!r}; this model's tasks are none: it has no task adapters")
        self.config, self.weights, self.task = config, weights, task
        self._adapted: dict[str | None, Encoder] = {None: self}
        self.word_embeddings = weights[EMBEDDING_NAMES["word"] + ".weight"]  # (vocab, hidden)
        # none of BERT's other embedding tables, adapters, projection, relative bias or pooler
        self.position_embeddings = self.token_type_embeddings = None
        self.embedding_projection = self.relative_attention_bias = self.pooler = None
        self.word_adapter = self.segment_adapter = None
        self.layers = [self._decoder_layer(i) for i in range(config.num_hidden_layers)]
        self.final_norm = None  # Encoder's LayerNorm: none; the decoders' RMSNorm is `last_norm`
        self.last_norm = Norm(weights[FINAL_NORM_NAME + ".weight"], None)
        self.activation = ACTIVATIONS[config.hidden_act]
        self.offset = gain_offset(config)  # RMSNorm's gain: offset + w

    def _decoder_layer(self, i: int) -> EncoderLayer:
        """Layer i's weights by their transformers names (tensors.DECODER_LAYER_NAMES); Qwen3 has no norms on the
        sublayers' outputs."""
        names, w = decoder_layer_names(self.config, i), self.weights
        for fields in (("query", "key", "value"), ("gate", "up")):  # one product each (`stacked`)
            stack_rows(w, [names[field] for field in fields])
        part = lambda field: Linear(w[names[field] + ".weight"], w.get(names[field] + ".bias"))
        norm = lambda field: Norm(w[names[field] + ".weight"], None) if field in names else None
        return EncoderLayer(
            part("query"),
            part("key"),
            part("value"),
            part("attention_output"),
            norm("attention_norm"),
            part("up"),
            part("down"),
            Norm(w[names["feed_forward_norm"] + ".weight"], None),
            part("gate"),
            norm("query_norm"),
            norm("key_norm"),
            norm("attention_output_norm"),
            norm("feed_forward_output_norm"),
        )

    def embeddings(
        self, input_ids: np.ndarray, token_type_ids: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        """The word embeddings (no positions, segments or norm); Gemma3's times sqrt(hidden) in float32, as
        transformers' Gemma3TextScaledWordEmbedding. (batch, seq) -> (batch, seq, hidden)"""
        y = result(out, *input_ids.shape, self.config.hidden_size)
        np.take(self.word_embeddings, input_ids, axis=0, out=y)
        if self.config.member.decoder == "gemma3":
            y *= f32(math.sqrt(self.config.hidden_size))
        return y

    def encoder_layer(
        self,
        x: np.ndarray,
        packing: Packing,
        layer: EncoderLayer,
        output_probs: bool = False,
        *,
        out: np.ndarray | None = None,
        probs_out: np.ndarray | None = None,
        score_bias: np.ndarray | None = None,
        rotation: tuple[np.ndarray, np.ndarray] | None = None,
        window: int | None = None,
        one_token: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """A decoder layer on the packed tokens: h = x + [norm](attention(norm(x))), then h + [norm](FFN(norm(h)))
        ([norm]: Gemma3's output norms). No probabilities (output_probs is refused by `forward`). one_token
        (`Encoder.encoder_layer`'s contract): "last", each row's last real token alone after the keys and values
        (`decoder_attention`), -> (rows, hidden) in `packing.lasts` order; "first", the whole layer, each row's first
        token kept. Reference: `reference.decoder_layer`."""
        if one_token == "first":
            f, _ = self.encoder_layer(x, packing, layer, rotation=rotation, window=window)
            return f[packing.firsts], None
        eps, offset = self.config.layer_norm_eps, self.offset
        assert layer.attention_norm is not None
        a = rms_norm(x, layer.attention_norm, eps, offset, out=scratch_array(*x.shape))
        context = self.decoder_attention(a, packing, layer, rotation, window, last_only=one_token == "last")
        if one_token == "last":
            x = x[packing.lasts]  # the residual of the rows computed
        tokens, hidden = x.shape
        h = linear(context, layer.attention_output, scratch_array(tokens, hidden))
        if layer.attention_output_norm is not None:  # Gemma3
            rms_norm(h, layer.attention_output_norm, eps, offset, out=h)
        normed = rms_norm(
            h, layer.feed_forward_norm, eps, offset, out=scratch_array(tokens, hidden), residual=x
        )  # h += x
        assert layer.gate is not None
        f = stacked_feed_forward(normed, layer.gate, layer.up, layer.down, self.activation, out)
        if layer.feed_forward_output_norm is not None:  # Gemma3
            rms_norm(f, layer.feed_forward_output_norm, eps, offset, out=f)
        in_large_blocks(lambda rows: np.add(f[rows], h[rows], out=f[rows]), f)  # f += h, on the row threads
        return f, None

    def decoder_attention(
        self,
        a: np.ndarray,
        packing: Packing,
        layer: EncoderLayer,
        rotation: tuple[np.ndarray, np.ndarray] | None,
        window: int | None,
        last_only: bool = False,
    ) -> np.ndarray:
        """Grouped-query attention's context before the output product: the queries, keys and values of the
        normalised tokens a, each query and key head normalised and rotated, attention per group of sequences. With
        `last_only`, the queries of each row's last real token alone (a last layer read at that token): keys and
        values from every token, the query product, norm, rotation and attention for those rows only.
        (tokens, hidden) -> (tokens, or rows in `packing.lasts` order, heads x head)"""
        c, eps, offset = self.config, self.config.layer_norm_eps, self.offset
        tokens, heads, kv, d = len(a), c.num_attention_heads, c.key_value_heads, c.head_size
        assert layer.query_norm is not None and layer.key_norm is not None
        if last_only:
            lasts = packing.lasts
            k, v = products(a, (layer.key, layer.value))
            q = linear(a[lasts], layer.query)  # (rows, heads x head)
            q_rotation = None if rotation is None else (rotation[0][lasts], rotation[1][lasts])
        else:
            q, k, v = products(a, (layer.query, layer.key, layer.value))
            q_rotation = rotation
        norm_and_rotate(k.reshape(tokens, kv, d), layer.key_norm, eps, offset, rotation)
        norm_and_rotate(q.reshape(len(q), heads, d), layer.query_norm, eps, offset, q_rotation)
        if last_only:
            return last_query_attention(q, k, v, packing, kv, c.attention_scale, window, out=np.empty_like(q))
        context = scratch_array(tokens, heads * d)
        return grouped_attention(q, k, v, packing, kv, c.attention_scale, c.causal, window, out=context)

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        *,
        output_attentions: bool = False,
        every_position: bool = False,
        one_token: str | None = None,
        last_layers: int | None = None,
    ) -> Output:
        """`Encoder.forward`, the last hidden state through the final RMSNorm (zeros stay zeros). The attention
        probabilities are not computed for these models: output_attentions is refused."""
        if output_attentions:
            raise ValueError(f"{self.config.model_type} models return no attention probabilities (output_attentions)")
        output = super().forward(
            input_ids,
            token_type_ids,
            attention_mask,
            every_position=every_position,
            one_token=one_token,
            last_layers=last_layers,
        )
        last = output.hidden_states[-1]
        rms_norm(last, self.last_norm, self.config.layer_norm_eps, self.offset, out=last)
        return output


def build_encoder(config: BertConfig, weights: dict[str, np.ndarray]) -> Encoder:
    """The encoder `config` needs: a DecoderEncoder for the decoder-shaped embedders (Qwen3, Gemma3), else Encoder."""
    return Encoder(config, weights) if config.member.decoder is None else DecoderEncoder(config, weights)
