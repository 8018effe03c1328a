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
A reader of one token a row asks for `one_token`: "first" for its first ([CLS]: classifiers, rerank, CLS pooling),
"last" for its last real one (a decoder's last-token pooling and score). The last layer then computes that token's
query, attention output, feed-forward and norms only (`encoder_layer`'s one_token); a reader of the last layers
alone asks for `last_layers`, and the others are not kept.
Token ids in, an `Output` out: text is numbert/pipeline/bert.py's business.
"""

from __future__ import annotations

import functools
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
from .pooling import Layers, Word, normalize, sentence_vectors, token_vectors, word_vectors
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

# The sentence vectors that read one token a row, by the token (Encoder.forward's one_token): the first, the last real
ONE_TOKEN_POOLINGS = {"first": {"cls", "pooler"}, "last": {"sep"}}
ONE_TOKENS = tuple(ONE_TOKEN_POOLINGS)


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
    one_token: "first" or "last" when the forward ran for one token a row (`Encoder.forward`'s one_token): then
        hidden_states is (layers + 1, [batch,] 1, hidden), each layer's first position ([CLS]) or last real one,
        and only the sentence vectors of that token can be read from it ("cls" and "pooler", or "sep").
    """

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    attention_mask: np.ndarray
    hidden_states: np.ndarray
    pooler_output: np.ndarray | None
    attentions: np.ndarray | None = None
    tokens: list | None = None  # list[str], or one list per batch row (padding shows as [PAD])
    encodings: list | None = None  # the tokenizer's Encoding per input (offsets, word ids)
    one_token: str | None = None  # hidden_states hold each row's first or last token only (Encoder.forward's)

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

    @property
    def states_mask(self) -> np.ndarray:
        """The attention mask of the positions hidden_states hold: the mask, or ones for one token a row (one_token).
        ([batch,] seq or 1)"""
        return np.ones_like(self.attention_mask[..., :1]) if self.one_token else self.attention_mask

    # --- recipes: thin wrappers over numbert.model.pooling, where each recipe is defined ------------------

    def token_vectors(self, layers: Layers = "sum_last_four", combine: str | None = None) -> np.ndarray:
        """One vector per token. ([batch,] seq, dim); padding positions are zero.

        `layers` is a strategy ("embeddings", "last", "second_to_last", "sum_last_four",
        "concat_last_four", "sum_all"), a layer index, or a list of indices combined by
        `combine` ("sum", "mean" or "concat").
        """
        if self.one_token:
            raise ValueError(f"this Output holds one token a row (one_token={self.one_token!r}): run it without")
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
        hidden, mask, pooled = self.hidden_states, self.states_mask, self.pooler_output
        asked = set([pooling] if isinstance(pooling, str) else pooling)
        if self.one_token and not asked <= ONE_TOKEN_POOLINGS[self.one_token]:
            raise ValueError(
                f"this Output holds one token a row (one_token={self.one_token!r}): it cannot be pooled by {pooling!r}"
            )
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

    @functools.cached_property
    def unit_word_embeddings(self) -> np.ndarray:
        """The word-embedding rows scaled to unit length, computed once. (vocab, hidden)"""
        return normalize(self.word_embeddings)

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
        one_token: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """One transformer layer on a batch's real tokens, packed (numbert/model/packing.py): multi-head
        self-attention, then the position-wise feed-forward network, each in a residual connection with a LayerNorm.

        The norm's place is the config's: after each sublayer (BERT: norm(x + attention(x)), then
        norm(h + feed_forward(h))), or before it (pre-norm, ModernBERT: x + attention(norm(x)), then
        h + feed_forward(norm(h)); layer 0's attention reads x itself).
        The rows read: every token, x (tokens, hidden) -> (tokens, hidden); or, with `one_token`, one token of each
        row alone, for a last layer whose other positions nobody reads, -> (rows, hidden) in `packing.firsts` order:
        "first" ([CLS]): keys and values from every token, the query, attention output, feed-forward and norms of the
        first tokens only, equal to the whole layer's first positions within rounding; "last": the whole layer, each
        row's last real token kept (`packing.lasts`).
        Written into `out` and `probs_out` (zeros) if given, else new arrays; the attention probabilities
        (batch, heads, seq, seq) if output_probs, else None. score_bias: (heads, seq, seq) added to the attention
        scores (MPNet's `position_bias`), or None. rotation: the modern family's cos and sin at each token
        (`rotations`), rotating queries and keys; window: a sliding-window layer's reach (ModernBERT), or None.
        Reference: `reference.encoder_layer` and `reference.pre_norm_layer`, on the padded batch."""
        if one_token == "last":
            whole, _ = self.encoder_layer(x, packing, layer, score_bias=score_bias, rotation=rotation, window=window)
            return whole[packing.lasts], None
        eps, pre_norm = self.config.layer_norm_eps, self.config.member.pre_norm
        tokens, hidden = x.shape

        def temporary() -> np.ndarray | None:
            """A (tokens, hidden) temporary of the layer's scratch; for the first tokens alone, None: a new array."""
            return None if one_token else scratch_array(tokens, hidden)

        a = x  # what attention reads: the normalised input in a pre-norm layer (but layer 0), else x
        if pre_norm and layer.attention_norm is not None:
            a = layer_norm(x, layer.attention_norm, eps, out=scratch_array(tokens, hidden))
        context, probs = self.attention(
            a, packing, layer, output_probs, probs_out, score_bias, rotation, window, one_token
        )  # (rows, hidden): rows = tokens, or the batch's rows for the first tokens alone
        h = linear(context, layer.attention_output, temporary())
        h += x[packing.firsts] if one_token else x
        if pre_norm:  # then h + feed_forward(norm(h))
            f = self.feed_forward(layer_norm(h, layer.feed_forward_norm, eps, out=temporary()), layer, out)
            f += h
            return f, probs
        assert layer.attention_norm is not None  # post-norm layers all have it
        layer_norm(h, layer.attention_norm, eps, out=h)  # norm(x + attention(x)), then norm(h + feed_forward(h))
        f = self.feed_forward(h, layer, temporary())
        f += h
        return layer_norm(f, layer.feed_forward_norm, eps, out=f if one_token else out), probs

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
        one_token: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Multi-head self-attention's context before W_O: the K and V products on every token, the Q product on
        every token (or, `one_token`, on each row's first token alone), the modern family's rotation of queries
        and keys, attention per group. -> (tokens or rows, hidden), the probabilities or None"""
        heads = self.config.num_attention_heads
        tokens, hidden = x.shape
        firsts = packing.firsts
        k, v = (linear(x, p, scratch_array(tokens, hidden)) for p in (layer.key, layer.value))
        q = linear(x[firsts], layer.query) if one_token else linear(x, layer.query, scratch_array(tokens, hidden))
        if rotation is not None:
            cos, sin = rotation
            rotate(k.reshape(tokens, heads, hidden // heads), cos, sin)
            q_cos, q_sin = (cos[firsts], sin[firsts]) if one_token else (cos, sin)
            rotate(q.reshape(len(q), heads, hidden // heads), q_cos, q_sin)
        if one_token:
            context = first_query_attention(q, k, v, packing, heads, score_bias, out=np.empty_like(q), window=window)
            return context, None
        context = scratch_array(tokens, hidden)
        probs = attention_by_group(
            q, k, v, packing, heads, score_bias, output_probs, out=context, probs_out=probs_out, window=window
        )
        return context, probs

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
        one_token: str | None = None,
        last_layers: int | None = None,
    ) -> Output:
        """Run the encoder on token ids of shape (seq,) or (batch, seq).

        token_type_ids default to 0 (one segment), attention_mask to 1 (no padding).
        The padding of a right-padded batch holds zeros in hidden_states and attentions; with every_position, the
        positions the mask hides get hidden states too, as in transformers: they attend to the others, which never
        attend to them (ColBERT's query expansion reads them).
        one_token: for a reader of one token a row, "first" ([CLS]: a sequence classifier, next-sentence
        prediction, CLS pooling) or "last" (its last real token: a decoder's last-token pooling or score): the last
        layer computes that token only (`encoder_layer`'s one_token), and the Output holds every layer's state at
        that token alone, hidden_states (layers + 1, [batch,] 1, hidden), its `one_token` set; equal to the whole
        forward's states there within rounding. Not with output_attentions; "last" has no pooler output.
        last_layers: keep only the last hidden states a reader reads, hidden_states (last_layers, [batch,] seq,
        hidden), the same numbers as the whole forward's [-last_layers:] (None: every layer's).
        Reference: `reference.forward`; faster by running the layers on the real tokens only (Packing),
        by writing into hidden_states and attentions, and by reusing each layer's temporaries (Scratch).
        """
        ids, types, mask, single = self._check_inputs(input_ids, token_type_ids, attention_mask)
        if one_token not in (None, *ONE_TOKENS):
            raise ValueError(f"one_token must be one of {ONE_TOKENS} or None, got {one_token!r}")
        if one_token and output_attentions:
            raise ValueError("one_token computes one token a row in the last layer: it has no attentions to give")
        c, n = self.config, len(self.layers)
        batch, seq = ids.shape
        kept = n + 1 if last_layers is None else max(1, min(int(last_layers), n + 1))  # the hidden states kept
        hidden_states = np.zeros((kept, batch, 1 if one_token else seq, c.hidden_size), np.float32)
        attentions = np.zeros((n, batch, c.num_attention_heads, seq, seq), np.float32) if output_attentions else None
        packing = Packing(mask, every_position)  # the layers run on the real tokens only (or on every position)
        keeps_embedded = kept == n + 1  # the embedding output is hidden_states[0]
        into_states = keeps_embedded and not one_token
        embedded = hidden_states[0] if into_states else np.zeros((batch, seq, c.hidden_size), np.float32)
        self.embeddings(ids, types, out=embedded)  # (batch, seq, hidden)
        x = packing.pack(embedded)  # (tokens, hidden): the real tokens
        if not every_position:
            embedded[mask == 0] = 0  # padding holds zeros in every layer
        if keeps_embedded and one_token == "first":
            hidden_states[0] = embedded[:, :1]
        elif keeps_embedded and one_token:
            hidden_states[0][packing.first_rows, 0] = x[packing.positions(one_token)]
        self.through_layers(x, packing, hidden_states, attentions, one_token)
        if single:
            hidden_states = hidden_states[:, 0]
            attentions = None if attentions is None else attentions[:, 0]
            ids, types, mask = ids[0], types[0], mask[0]
        pooled = None if one_token == "last" else self.pooler_output(hidden_states[-1])  # the pooler reads [CLS]
        output = Output(ids, types, mask, hidden_states, pooled, attentions)
        output.one_token = one_token
        return output

    def through_layers(
        self,
        x: np.ndarray,
        packing: Packing,
        hidden_states: np.ndarray,
        attentions: np.ndarray | None,
        one_token: str | None,
    ) -> None:
        """The embedded tokens x (tokens, hidden) through every layer, each layer's output written into its place
        in hidden_states (kept layers, batch, seq, hidden) if it is kept there (the last ones are), its attention
        probabilities into attentions (layers, batch, heads, seq, seq) if given; with one_token, the last layer
        for each row's first or last real token alone and hidden_states (kept layers, batch, 1, hidden)."""
        c, n = self.config, len(self.layers)
        skipped = n + 1 - len(hidden_states)  # hidden state j is kept as hidden_states[j - skipped]
        seq = packing.shape[1]
        score_bias = self.position_bias(seq)  # (heads, seq, seq): MPNet's, for every layer; None for the others
        rotations = self.rotations(seq, packing)  # the modern family's (cos, sin) per layer kind; {} for the others
        scratch = Scratch()  # each layer's temporaries, reused by the next
        for i, layer in enumerate(self.layers):
            last = i == n - 1
            state = hidden_states[i + 1 - skipped] if i + 1 >= skipped else None  # (batch, seq or 1, hidden)
            direct = packing.whole and not one_token  # no padding: a kept layer's output is written straight in
            with scratch:
                x, _ = self.encoder_layer(  # (tokens, hidden); one_token's last: (rows, hidden)
                    x,
                    packing,
                    layer,
                    attentions is not None,
                    out=packing.pack(state) if direct and state is not None else None,
                    probs_out=None if attentions is None else attentions[i],
                    score_bias=score_bias,
                    rotation=None if (rope := c.layer_rope(i)) is None else rotations[rope],
                    window=c.window if c.layer_type(i) == "sliding_attention" else None,
                    one_token=one_token if last else None,
                )
                if self.final_norm is not None and last:  # ModernBERT: its last state, normalised
                    layer_norm(x, self.final_norm, c.layer_norm_eps, out=x)
                if state is not None and one_token is None:
                    packing.unpack(x, out=state)
                elif state is not None and one_token is not None:
                    state[packing.first_rows, 0] = x if last else x[packing.positions(one_token)]

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
