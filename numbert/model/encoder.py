"""The BERT encoder: embeddings, a stack of attention + feed-forward layers, and the pooler.

Section 3 of the BERT paper (Devlin et al., 2018) over the fast blocks of numbert/model/layers.py:
`embeddings` sums the token, position and segment embeddings; each `encoder_layer` is multi-head
self-attention followed by a position-wise feed-forward network, both wrapped in a residual
connection and LayerNorm; `pool` is the dense + tanh over [CLS] used for sentence-level tasks.
numbert/model/reference.py is the same pass written plainly; tests/test_reference.py proves the two equal.
BERT's relatives (numbert.model.config.FAMILY) run this same encoder with the options their config sets: positions
past the padding index, no token types, a projected embedding, a relative-position bias on the attention
scores (docs/family.md). The modern family adds five: rotary positions instead of a position table, a gated
feed-forward, pre-norm layers with a final norm (ModernBERT), sliding-window layers (ModernBERT), and task
adapters chosen per call (jina-embeddings-v3, `Encoder.adapted`); long sequences' attention runs a block of
queries at a time (numbert/model/attention_blocks.py).
A reader of each row's first token alone ([CLS]: classifiers, rerank, CLS pooling) asks for `first_only`: the last
layer then computes that token's query, attention output, feed-forward and norms only (`first_position_layer`).
Token ids in, an `Output` out: text is numbert/pipeline/bert.py's business.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .config import BertConfig
from .layers import (
    ACTIVATIONS,
    Linear,
    LowRank,
    Norm,
    feed_forward,
    gated_feed_forward,
    layer_norm,
    linear,
    positions_past_padding,
    relative_position_buckets,
)
from .packing import Packing, attention_by_group, first_query_attention
from .pooling import Layers, Word, sentence_vectors, token_vectors, word_vectors
from .rotary import Rope, rotate, rotation_table
from .scratch import Scratch, scratch_array
from .tensors import (
    EMBEDDING_NAMES,
    FINAL_NORM_NAME,
    LAYER_NAMES,
    POOLER_NAME,
    PROJECTION_NAME,
    RELATIVE_ATTENTION_NAME,
    ROTARY_LAYER_NAMES,
)

FIRST_POOLINGS = {"cls", "pooler"}  # the sentence vectors that read each row's first position alone


class EncoderLayer(NamedTuple):
    """The weights of one transformer layer (their checkpoint names: tensors.LAYER_NAMES, ROTARY_LAYER_NAMES)."""

    query: Linear
    key: Linear
    value: Linear
    attention_output: Linear  # W_O, after the heads are concatenated
    attention_norm: Norm | None  # after attention; before it in pre-norm layers (ModernBERT: none in layer 0)
    up: Linear  # the feed-forward network: hidden -> intermediate,
    down: Linear  # and back: intermediate -> hidden
    feed_forward_norm: Norm  # after the feed-forward; before it in pre-norm layers
    gate: Linear | None = None  # a gated feed-forward's gate, hidden -> intermediate (the modern family)
    # the decoder-shaped embedders' (numbert.model.decoder: Qwen3, Gemma3), RMSNorm gains; None for the others
    query_norm: Norm | None = None  # each query head's, before the rotation
    key_norm: Norm | None = None  # each key head's
    attention_output_norm: Norm | None = None  # Gemma3: attention's output, before it is added to the input
    feed_forward_output_norm: Norm | None = None  # Gemma3: the feed-forward's output, before it is added


@dataclass(repr=False)
class Output:
    """Everything one forward pass computes. Arrays are float32; `[batch]` is absent for one input.

    hidden_states: (layers + 1, [batch,] seq, hidden); index 0 is the embedding layer's output,
        index i the output of layer i, as transformers' `hidden_states` (zeros at right padding).
    pooler_output: ([batch,] hidden), tanh(W h_[CLS] + b) over the last layer, or None if the
        checkpoint has no pooler (one saved from BertForMaskedLM, say).
    attentions: (layers, [batch,] heads, seq, seq), the softmax probabilities (zeros where the query or
        key is right padding), or None.
    first_only: True when the forward ran for the first tokens alone (`Encoder.forward`'s first_only): then
        hidden_states is (layers + 1, [batch,] 1, hidden), each layer's first position ([CLS]), and only the
        "cls" and "pooler" sentence vectors can be read from it.
    """

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    attention_mask: np.ndarray
    hidden_states: np.ndarray
    pooler_output: np.ndarray | None
    attentions: np.ndarray | None = None
    tokens: list | None = None  # list[str], or one list per batch row (padding shows as [PAD])
    encodings: list | None = None  # the tokenizer's Encoding per input (offsets, word ids)
    first_only: bool = False  # hidden_states hold each row's first position only (Encoder.forward's first_only)

    def __repr__(self) -> str:
        """The shapes, not the numbers (an Output holds every layer's hidden states), and the first tokens."""
        shape = lambda array: None if array is None else tuple(array.shape)
        tokens = self.tokens
        if tokens and isinstance(tokens[0], list):  # a batch: its first row
            tokens = tokens[0]
        shown = None if tokens is None else [str(t)[:20] for t in tokens[:8]] + (["..."] if len(tokens) > 8 else [])
        return (
            f"Output(hidden_states={shape(self.hidden_states)}, pooler_output={shape(self.pooler_output)}, "
            f"attentions={shape(self.attentions)}, input_ids={shape(self.input_ids)}, tokens={shown})"
        )

    @property
    def batched(self) -> bool:
        """True if the arrays have a batch axis (the model ran a list of inputs), False for one input."""
        return self.input_ids.ndim == 2

    @property
    def last_hidden_state(self) -> np.ndarray:
        """([batch,] seq, hidden)"""
        return self.hidden_states[-1]

    # --- recipes: thin wrappers over numbert.model.pooling, where each recipe is defined ------------------

    def token_vectors(self, layers: Layers = "sum_last_four", combine: str | None = None) -> np.ndarray:
        """One vector per token. ([batch,] seq, dim); padding positions are zero.

        `layers` is a strategy ("embeddings", "last", "second_to_last", "sum_last_four",
        "concat_last_four", "sum_all"), a layer index, or a list of indices combined by
        `combine` ("sum", "mean" or "concat").
        """
        if self.first_only:
            raise ValueError("this Output holds the first tokens only (first_only): run the forward without it")
        return token_vectors(self.hidden_states, layers, combine, self.attention_mask)

    def word_vectors(
        self, layers: Layers = "sum_last_four", combine: str | None = None, merge: str = "mean"
    ) -> list[Word] | list[list[Word]]:
        """The token vectors merged back into words ("mean", "sum", "first" or "last" of the pieces).

        One list of `Word(text, span, vector, tokens, segment)` per input, [CLS]/[SEP]/padding left out.
        The output does not keep the input text, so `Word.text` is spelled from the pieces (lowercase for
        an uncased model); `Bert.word_vectors(text)` cuts it from the text instead.
        """
        if self.encodings is None:
            raise ValueError("word vectors need the tokenizer's word ids: call the model on text, not on ids")
        vectors = self.token_vectors(layers, combine)
        if not self.batched:
            return word_vectors(vectors, self.encodings[0], merge=merge)
        return [word_vectors(v, e, merge=merge) for v, e in zip(vectors, self.encodings)]

    def sentence_vector(
        self, pooling: str | Sequence[str] = "mean", layers: Layers = -2, combine: str | None = None
    ) -> np.ndarray:
        """One vector per input: `pooling` ("mean", "max", "mean_max", "cls", "sep", "pooler",
        "mean_sqrt_len", "weighted_mean") of the token vectors of `layers`; padding never counts.
        The default, the mean of the second-to-last layer, is bert-as-service's. ([batch,] dim)
        """
        hidden, mask, pooled = self.hidden_states, self.attention_mask, self.pooler_output
        if self.first_only and not set([pooling] if isinstance(pooling, str) else pooling) <= FIRST_POOLINGS:
            raise ValueError(
                f"this Output holds the first tokens only (first_only): it cannot be pooled by {pooling!r}"
            )
        if self.first_only:
            mask = mask[..., :1]
        if not self.batched:  # one input: add the batch axis and take it away again
            hidden, mask, pooled = hidden[:, None], mask[None], None if pooled is None else pooled[None]
        vectors = sentence_vectors(hidden, mask, pooling, layers, combine, pooled)
        return vectors if self.batched else vectors[0]


class Encoder:
    """BERT's encoder: token ids in, hidden states out, on a config and the checkpoint's tensors by name."""

    def __init__(self, config: BertConfig, weights: dict[str, np.ndarray], task: str | None = None):
        self.config = config
        self.weights = weights  # the checkpoint's tensors, by bare BertModel name
        self.task = task  # jina-embeddings-v3: the task whose adapters this encoder runs (`adapted`); None: none
        self._adapted: dict[str | None, Encoder] = {task: self}
        table = lambda name: weights[name + ".weight"]
        pair = lambda kind, name: kind(weights[name + ".weight"], weights[name + ".bias"])
        self.word_embeddings = table(EMBEDDING_NAMES["word"])  # (vocab, hidden)
        # (max_positions, hidden); None for the modern family, whose positions rotate queries and keys instead
        self.position_embeddings = None if config.member.rotary else table(EMBEDDING_NAMES["position"])
        # (type_vocab, hidden); None for DistilBERT and MPNet, which have no token types
        self.token_type_embeddings = table(EMBEDDING_NAMES["segment"]) if config.type_vocab_size else None
        self.embedding_norm = self._norm(EMBEDDING_NAMES["norm"])
        # ELECTRA: (hidden, embedding_size), the embeddings projected up to hidden_size; None where they are that wide
        self.embedding_projection = pair(Linear, PROJECTION_NAME) if PROJECTION_NAME + ".weight" in weights else None
        # MPNet: (buckets, heads), a learned bias per relative distance bucket and head; None for the others
        self.relative_attention_bias = table(RELATIVE_ATTENTION_NAME) if config.member.relative_attention else None
        if config.member.rotary:
            self.layers = [self._rotary_layer(i) for i in range(config.num_hidden_layers)]
        else:
            self.layers = [
                EncoderLayer(
                    **{
                        field: pair(Norm if field.endswith("norm") else Linear, f"encoder.layer.{i}.{name}")
                        for field, name in LAYER_NAMES.items()
                    }
                )
                for i in range(config.num_hidden_layers)
            ]
        # ModernBERT: the LayerNorm after the last layer (pre-norm layers leave their output unnormalised)
        self.final_norm = self._norm(FINAL_NORM_NAME) if config.member.pre_norm else None
        self.pooler = self._linear(POOLER_NAME) if POOLER_NAME + ".weight" in weights else None
        self.activation = ACTIVATIONS[config.hidden_act]
        # jina's task adapters on the embedding tables: rows E[ids] + A[ids] (scale B); None without a task
        self.word_adapter = self._low_rank(EMBEDDING_NAMES["word"], table=True)
        self.segment_adapter = self._low_rank(EMBEDDING_NAMES["segment"], table=True)

    # --- building the modern family's layers from their tensors -----------------------------------------

    def _norm(self, name: str) -> Norm:
        """A LayerNorm; its shift None where the checkpoint has none (ModernBERT)."""
        return Norm(self.weights[name + ".weight"], self.weights.get(name + ".bias"))

    def _low_rank(self, name: str, table: bool = False, rows: slice = slice(None)) -> LowRank | None:
        """This encoder's task's adapter of the weight `name` (its `rows` of a fused weight), scale folded into B;
        None without a task. A table's adapter is A (rows, r) and B (r, hidden); a Linear's A (r, in), B (out, r)."""
        if self.task is None or name + ".lora_A" not in self.weights:
            return None
        t, scale = (
            self.config.task_adapters.index(self.task),
            np.float32(self.config.lora_alpha / self.config.lora_rank),
        )
        a, b = self.weights[name + ".lora_A"][t], self.weights[name + ".lora_B"][t] * scale
        return LowRank(a, b) if table else LowRank(a, b[rows])

    def _linear(self, name: str, rows: slice = slice(None)) -> Linear:
        """A Linear (its `rows` of a fused weight: views, not copies), its bias None where the checkpoint has none,
        with this encoder's task adapter."""
        bias = self.weights.get(name + ".bias")
        return Linear(
            self.weights[name + ".weight"][rows], None if bias is None else bias[rows], self._low_rank(name, rows=rows)
        )

    def _rotary_layer(self, i: int) -> EncoderLayer:
        """Layer i of the modern family: Q, K and V cut from the fused qkv; the gated feed-forward's gate and up
        from their fused Linear in the checkpoint's order (Member.glu), or NomicBERT's two."""
        c, names = self.config, {field: f"encoder.layer.{i}.{name}" for field, name in ROTARY_LAYER_NAMES.items()}
        h, n, glu = c.hidden_size, c.intermediate_size, c.member.glu
        q, k, v = (self._linear(names["qkv"], slice(j * h, (j + 1) * h)) for j in range(3))
        gate: Linear | None = None
        if glu in ("gate_first", "up_first"):
            first, second = self._linear(names["up"], slice(0, n)), self._linear(names["up"], slice(n, 2 * n))
            gate, up = (first, second) if glu == "gate_first" else (second, first)
        else:
            gate, up = (self._linear(names["gate"]) if glu == "two" else None), self._linear(names["up"])
        attention_norm = names["attention_norm"]
        return EncoderLayer(
            q,
            k,
            v,
            self._linear(names["attention_output"]),
            self._norm(attention_norm) if attention_norm + ".weight" in self.weights else None,
            up,
            self._linear(names["down"]),
            self._norm(names["feed_forward_norm"]),
            gate,
        )

    def adapted(self, task: str | None) -> Encoder:
        """This encoder with `task`'s adapters (jina-embeddings-v3's LoRA: every table and Linear W becomes
        W + (alpha / rank) B A, applied as two thin products), sharing every weight; None: without adapters.
        Made once per task and kept."""
        if task not in self._adapted:
            if task is not None and task not in self.config.task_adapters:
                tasks = ", ".join(self.config.task_adapters) or "none: it has no task adapters"
                raise ValueError(f"unknown task {task!r}; this model's tasks are {tasks}")
            adapted = Encoder(self.config, self.weights, task)
            adapted._adapted = self._adapted  # one table of them, whichever was asked
            self._adapted[task] = adapted
        return self._adapted[task]

    def embeddings(
        self, input_ids: np.ndarray, token_type_ids: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Token + position + segment embeddings, then LayerNorm, into `out` if given.
        (batch, seq) -> (batch, seq, hidden). Reference: `reference.embeddings`.

        The relatives: positions past the padding index (RoBERTa, XLM-R, MPNet), no segments (DistilBERT,
        MPNet), and the normalised embeddings projected to hidden (ELECTRA, when embedding_size is smaller)."""
        c, seq = self.config, input_ids.shape[1]
        x = self.word_embeddings[input_ids]
        if self.word_adapter is not None:  # jina's task adapter: + A[ids] (scale B)
            x += self.word_adapter.a[input_ids] @ self.word_adapter.b
        if self.position_embeddings is None:  # the modern family: positions rotate queries and keys instead
            pass
        elif c.member.positions_past_padding:
            x += self.position_embeddings[positions_past_padding(input_ids, c.pad_token_id)]
        else:
            x += self.position_embeddings[:seq]
        if self.token_type_embeddings is not None:
            x += self.token_type_embeddings[token_type_ids]
            if self.segment_adapter is not None:
                x += self.segment_adapter.a[token_type_ids] @ self.segment_adapter.b
        if self.embedding_projection is None:
            return layer_norm(x, self.embedding_norm, c.layer_norm_eps, out=x if out is None else out)
        return linear(layer_norm(x, self.embedding_norm, c.layer_norm_eps, out=x), self.embedding_projection, out)

    def position_bias(self, seq: int) -> np.ndarray | None:
        """MPNet's relative position bias, the same for every layer and row: each head's learned value for the
        bucket of each key's distance from the query. (heads, seq, seq); None for the others.
        Reference: `reference.position_bias`."""
        if self.relative_attention_bias is None:
            return None
        buckets = relative_position_buckets(seq)  # (seq, seq); transformers always uses 32 (RELATIVE_BUCKETS) here
        return np.ascontiguousarray(self.relative_attention_bias[buckets].transpose(2, 0, 1))

    def rotations(self, seq: int, packing: Packing) -> dict[Rope, tuple[np.ndarray, np.ndarray]]:
        """The modern family's rotary tables, cos and sin (tokens, head_size) at each packed token's position
        (its index in its row, as transformers' position_ids), one pair per layer kind's Rope; {} for the others."""
        c = self.config
        ropes = {c.layer_rope(i) for i in range(c.num_hidden_layers)} - {None}
        positions = packing.index % seq  # each packed token's place in its padded row
        tables = {}
        for rope in ropes:
            assert rope is not None
            cos, sin = rotation_table(rope, c.head_size, seq, c.max_position_embeddings)
            tables[rope] = (cos[positions], sin[positions])
        return tables

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
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """One transformer layer on a batch's real tokens, packed (numbert/model/packing.py):
        x: (tokens, hidden) -> (tokens, hidden), and the attention probabilities (batch, heads, seq, seq)
        if output_probs, else None; written into `out` and `probs_out` (zeros) if given, else new arrays.
        score_bias: (heads, seq, seq) added to the attention scores (MPNet's
        `position_bias`), or None. rotation: the modern family's cos and sin at each token (`rotations`),
        rotating queries and keys; window: a sliding-window layer's reach (ModernBERT), or None.
        Reference: `reference.encoder_layer`, on the padded batch."""
        if self.config.member.pre_norm:
            return self.pre_norm_layer(x, packing, layer, output_probs, out, probs_out, rotation, window)
        eps = self.config.layer_norm_eps
        tokens, hidden = x.shape
        # Multi-head self-attention, then Add & Norm: the products on every token, attention per group.
        context, probs = self.attention(x, packing, layer, output_probs, probs_out, score_bias, rotation, window)
        h = linear(context, layer.attention_output, scratch_array(tokens, hidden))
        h += x
        assert layer.attention_norm is not None  # post-norm layers all have it
        layer_norm(h, layer.attention_norm, eps, out=h)
        # Position-wise feed-forward network, then Add & Norm.
        f = self.feed_forward(h, layer, scratch_array(tokens, hidden))
        f += h
        return layer_norm(f, layer.feed_forward_norm, eps, out=out), probs

    def pre_norm_layer(
        self,
        x: np.ndarray,
        packing: Packing,
        layer: EncoderLayer,
        output_probs: bool,
        out: np.ndarray | None,
        probs_out: np.ndarray | None,
        rotation: tuple[np.ndarray, np.ndarray] | None,
        window: int | None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """ModernBERT's layer: each sublayer reads its input normalised and adds its output to the input as it
        was, x + attention(norm(x)), then h + feed_forward(norm(h)); layer 0's attention reads x itself.
        Reference: `reference.pre_norm_layer`."""
        eps = self.config.layer_norm_eps
        tokens, hidden = x.shape
        a = (
            x
            if layer.attention_norm is None
            else layer_norm(x, layer.attention_norm, eps, out=scratch_array(tokens, hidden))
        )
        context, probs = self.attention(a, packing, layer, output_probs, probs_out, None, rotation, window)
        h = linear(context, layer.attention_output, scratch_array(tokens, hidden))
        h += x
        f = self.feed_forward(
            layer_norm(h, layer.feed_forward_norm, eps, out=scratch_array(tokens, hidden)), layer, out
        )
        f += h
        return f, probs

    def attention(
        self,
        x: np.ndarray,
        packing: Packing,
        layer: EncoderLayer,
        output_probs: bool,
        probs_out: np.ndarray | None,
        score_bias: np.ndarray | None,
        rotation: tuple[np.ndarray, np.ndarray] | None,
        window: int | None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Multi-head self-attention's context before W_O: the Q, K, V products on every token, the modern
        family's rotation of queries and keys, attention per group. -> (tokens, hidden), probabilities or None"""
        heads = self.config.num_attention_heads
        tokens, hidden = x.shape
        q, k, v = (linear(x, p, scratch_array(tokens, hidden)) for p in (layer.query, layer.key, layer.value))
        if rotation is not None:
            for a in (q, k):
                rotate(a.reshape(tokens, heads, hidden // heads), *rotation)
        context = scratch_array(tokens, hidden)
        probs = attention_by_group(
            q, k, v, packing, heads, score_bias, output_probs, out=context, probs_out=probs_out, window=window
        )
        return context, probs

    def first_position_layer(
        self,
        x: np.ndarray,
        packing: Packing,
        layer: EncoderLayer,
        *,
        score_bias: np.ndarray | None = None,
        rotation: tuple[np.ndarray, np.ndarray] | None = None,
        window: int | None = None,
    ) -> np.ndarray:
        """`encoder_layer` for the first token of each row only ([CLS]), as a last layer whose other positions
        nobody reads: keys and values from every token, the query, attention output, feed-forward and norms of the
        first tokens alone. x: (tokens, hidden) packed -> (rows, hidden) in `packing.firsts` order.
        Equal to the whole layer's first positions within rounding (tests/test_reference.py); it skips the last
        layer's products for every other row. Reference: `reference.encoder_layer`."""
        c, eps = self.config, self.config.layer_norm_eps
        heads = c.num_attention_heads
        tokens, hidden = x.shape
        firsts = packing.firsts
        pre_norm = c.member.pre_norm
        a = x  # what attention reads: ModernBERT's normalised input (but in layer 0), else x
        if pre_norm and layer.attention_norm is not None:
            a = layer_norm(x, layer.attention_norm, eps, out=scratch_array(tokens, hidden))
        k, v = (linear(a, p, scratch_array(tokens, hidden)) for p in (layer.key, layer.value))
        q = linear(a[firsts], layer.query)  # (rows, hidden)
        if rotation is not None:
            cos, sin = rotation
            rotate(k.reshape(tokens, heads, hidden // heads), cos, sin)
            rotate(q.reshape(len(firsts), heads, hidden // heads), cos[firsts], sin[firsts])
        context = first_query_attention(q, k, v, packing, heads, score_bias, out=np.empty_like(q), window=window)
        h = linear(context, layer.attention_output)
        h += x[firsts]
        if pre_norm:  # x + attention(norm(x)), then h + feed_forward(norm(h))
            f = self.feed_forward(layer_norm(h, layer.feed_forward_norm, eps), layer, None)
            f += h
            return f
        assert layer.attention_norm is not None  # post-norm layers all have it
        layer_norm(h, layer.attention_norm, eps, out=h)
        f = self.feed_forward(h, layer, None)
        f += h
        return layer_norm(f, layer.feed_forward_norm, eps, out=f)

    def feed_forward(self, h: np.ndarray, layer: EncoderLayer, out: np.ndarray | None) -> np.ndarray:
        """The position-wise feed-forward network, gated where the layer has a gate (the modern family)."""
        if layer.gate is None:
            return feed_forward(h, layer.up, layer.down, self.activation, out)
        return gated_feed_forward(h, layer.gate, layer.up, layer.down, self.activation, out)

    def pooler_output(self, last_hidden_state: np.ndarray) -> np.ndarray | None:
        """The pooler: tanh(W h_[CLS] + b). ([batch,] seq, hidden) -> ([batch,] hidden); None without a pooler."""
        return None if self.pooler is None else np.tanh(linear(last_hidden_state[..., 0, :], self.pooler))

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        *,
        output_attentions: bool = False,
        every_position: bool = False,
        first_only: bool = False,
    ) -> Output:
        """Run the encoder on token ids of shape (seq,) or (batch, seq).

        token_type_ids default to 0 (one segment), attention_mask to 1 (no padding).
        The padding of a right-padded batch holds zeros in hidden_states and attentions; with every_position, the
        positions the mask hides get hidden states too, as in transformers: they attend to the others, which never
        attend to them (ColBERT's query expansion reads them).
        first_only: for a reader of each row's first token alone ([CLS]: a sequence classifier, next-sentence
        prediction, CLS pooling): the last layer computes that token only (`first_position_layer`), and the Output
        holds every layer's first position alone, hidden_states (layers + 1, [batch,] 1, hidden), its
        `first_only` set; equal to the whole forward's [:, :, :1] within rounding. Not with output_attentions.
        Reference: `reference.forward`; faster by running the layers on the real tokens only (Packing),
        by writing into hidden_states and attentions, and by reusing each layer's temporaries (Scratch).
        """
        ids, types, mask, single = self._check_inputs(input_ids, token_type_ids, attention_mask)
        if first_only and output_attentions:
            raise ValueError("first_only computes the last layer's first tokens only: it has no attentions to give")
        c = self.config
        batch, seq = ids.shape
        kept = 1 if first_only else seq  # the positions hidden_states keeps
        hidden_states = np.zeros((c.num_hidden_layers + 1, batch, kept, c.hidden_size), np.float32)
        attentions = (
            np.zeros((c.num_hidden_layers, batch, c.num_attention_heads, seq, seq), np.float32)
            if output_attentions
            else None
        )
        packing = Packing(mask, every_position)  # the layers run on the real tokens only (or on every position)
        score_bias = self.position_bias(seq)  # MPNet's, computed once for every layer; None for the others
        rotations = self.rotations(seq, packing)  # the modern family's, once per layer kind; {} for the others
        embedded = np.zeros((batch, seq, c.hidden_size), np.float32) if first_only else hidden_states[0]
        self.embeddings(ids, types, out=embedded)
        x = packing.pack(embedded)  # (tokens, hidden)
        if not every_position:
            embedded[mask == 0] = 0  # padding holds zeros in every layer
        if first_only:
            hidden_states[0] = embedded[:, :1]
        firsts, first_rows = packing.firsts, packing.first_rows
        scratch = Scratch()  # each layer's temporaries, reused by the next
        for i, layer in enumerate(self.layers):
            rope, last = c.layer_rope(i), i == len(self.layers) - 1
            rotation = None if rope is None else rotations[rope]
            window = c.window if c.layer_type(i) == "sliding_attention" else None
            with scratch:  # without padding each layer writes straight into hidden_states
                if first_only and last:
                    x = self.first_position_layer(  # (rows, hidden)
                        x, packing, layer, score_bias=score_bias, rotation=rotation, window=window
                    )
                else:
                    x, _ = self.encoder_layer(
                        x,
                        packing,
                        layer,
                        output_attentions,
                        out=packing.pack(hidden_states[i + 1]) if packing.whole and not first_only else None,
                        probs_out=None if attentions is None else attentions[i],
                        score_bias=score_bias,
                        rotation=rotation,
                        window=window,
                    )
                if self.final_norm is not None and last:  # ModernBERT: its last state, normalised
                    layer_norm(x, self.final_norm, c.layer_norm_eps, out=x)
                if not first_only:
                    packing.unpack(x, out=hidden_states[i + 1])
                else:
                    hidden_states[i + 1, first_rows, 0] = x if last else x[firsts]
        if single:
            hidden_states = hidden_states[:, 0]
            attentions = None if attentions is None else attentions[:, 0]
            ids, types, mask = ids[0], types[0], mask[0]
        output = Output(ids, types, mask, hidden_states, self.pooler_output(hidden_states[-1]), attentions)
        output.first_only = first_only
        return output

    def empty_output(self, output_attentions: bool = False) -> Output:
        """The Output of a batch of no inputs: arrays with a batch (and seq) of 0."""
        c = self.config
        ids = np.zeros((0, 0), np.int64)
        return Output(
            ids,
            ids.copy(),
            ids.copy(),
            np.zeros((c.num_hidden_layers + 1, 0, 0, c.hidden_size), np.float32),
            None if self.pooler is None else np.zeros((0, c.hidden_size), np.float32),
            np.zeros((c.num_hidden_layers, 0, c.num_attention_heads, 0, 0), np.float32) if output_attentions else None,
            tokens=[],
            encodings=[],
        )

    def _check_inputs(self, input_ids, token_type_ids, attention_mask):
        """Validate the id arrays at the public boundary; return them as (batch, seq) int64 arrays."""
        c = self.config
        ids = _int_array("input_ids", input_ids)
        single = ids.ndim == 1
        ids = ids.reshape(1, -1) if single else ids
        types = np.zeros_like(ids) if token_type_ids is None else _int_array("token_type_ids", token_type_ids)
        mask = np.ones_like(ids) if attention_mask is None else _int_array("attention_mask", attention_mask)
        types, mask = (a.reshape(1, -1) if single else a for a in (types, mask))
        for name, a in (("token_type_ids", types), ("attention_mask", mask)):
            if a.shape != ids.shape:
                raise ValueError(f"{name} has shape {a.shape}, input_ids has shape {ids.shape}; they must match")
        if ids.shape[1] == 0 or ids.shape[0] == 0:
            raise ValueError(f"input_ids is empty (shape {ids.shape})")
        if ids.shape[1] > c.max_tokens:
            raise ValueError(
                f"the input is {ids.shape[1]} tokens long; this model has "
                f"{c.max_tokens} positions (truncate it or use long='window')"
            )
        checked = [("input_ids", ids, c.vocab_size)]
        if self.token_type_embeddings is not None:  # a model without segments (DistilBERT, MPNet) ignores them
            checked.append(("token_type_ids", types, c.type_vocab_size))
        for name, a, limit in checked:
            if a.min() < 0 or a.max() >= limit:
                raise ValueError(f"{name} must lie in [0, {limit}); found values {a.min()}..{a.max()}")
        return ids, types, mask, single


def _int_array(name: str, a) -> np.ndarray:
    """An integer array of 1 or 2 dimensions, or a TypeError / ValueError naming `name`."""
    try:
        arr = np.asarray(a)
    except ValueError:  # rows of different lengths
        raise ValueError(f"{name} must be rectangular, (seq,) or (batch, seq): pad its rows to one length") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise TypeError(f"{name} must be an array of integers, got dtype {arr.dtype}")
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (seq,) or (batch, seq), got {arr.shape}")
    return arr.astype(np.int64, copy=False)
