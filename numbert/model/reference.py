"""BERT's forward pass as the paper writes it, in plain NumPy: read this first.

The same weights as numbert.model.encoder's fast Encoder (an `Encoder` is passed in), none of its tricks: no
scratch memory, no blocking, no tuning constants. tests/test_reference.py proves the two equal.
Shapes: (batch, seq, hidden), bert-base's hidden 768 = 12 heads x 64.

BERT's relatives (docs/family.md) differ in the lines marked with their names: `position_ids` (RoBERTa,
XLM-R, MPNet), `embeddings` (DistilBERT and MPNet have no segments; ELECTRA projects), `position_bias` (MPNet).
The modern family (ModernBERT, NomicBERT, GTE, jina-embeddings-v3) differs in the lines marked "modern" and
the short functions beside them: `rotate` (positions rotate queries and keys), `band` (ModernBERT's sliding
windows), the gated line of `feed_forward`, `pre_norm_layer` (ModernBERT), and a task adapter in `linear`.
The decoder-shaped embedders (Qwen3, Gemma3: numbert.model.decoder) differ in the lines marked "decoder" and their
short functions: `rms_norm`, `causal_mask`, `grouped_attention` (grouped-query attention, q/k norms) and
`decoder_layer`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .layers import Linear, Norm, relative_position_buckets
from .rotary import Rope

if TYPE_CHECKING:
    from .encoder import Encoder, EncoderLayer


def linear(x: np.ndarray, p: Linear) -> np.ndarray:
    w = p.weight if p.low_rank is None else p.weight + p.low_rank.b @ p.low_rank.a  # modern: jina's W + s B A
    return x @ w.T + (0 if p.bias is None else p.bias)  # the weight is stored (out, in), as torch does


def gelu(x: np.ndarray) -> np.ndarray:
    """x * Phi(x), Phi the standard normal CDF, with the exact erf (math.erf: NumPy has none)."""
    return x * (1 + np.vectorize(math.erf, otypes=[x.dtype])(x / math.sqrt(2))) / 2


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """The tanh approximation of GELU that Google's original code used ("gelu_new")."""
    return x / 2 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def silu(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x), NomicBERT's gate (SwiGLU)."""
    with np.errstate(over="ignore"):  # e^-x overflows for x below -88: x / inf = 0, as the limit is
        return x / (1 + np.exp(-x))


ACTIVATIONS = {"gelu": gelu, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "relu": relu, "silu": silu}


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))  # shifted by the row max, so exp cannot overflow
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm(x: np.ndarray, p: Norm, eps: float) -> np.ndarray:
    mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * p.weight + (0 if p.bias is None else p.bias)  # modern: ModernBERT's none


def attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask_bias: np.ndarray, bias: np.ndarray | float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention, every head at once: softmax(q k^T / sqrt(d) + bias + mask) v; the bias is
    0 but for MPNet. (batch, heads, seq, d) each -> context (batch, heads, seq, d), probabilities
    (batch, heads, seq, seq)."""
    probs = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]) + bias + mask_bias)
    return probs @ v, probs


def multi_head_attention(
    x: np.ndarray,
    mask: np.ndarray,
    bias: np.ndarray | float,
    layer: EncoderLayer,
    heads: int,
    rotation: tuple[np.ndarray, np.ndarray] | None = None,
    window: int | None = None,
) -> tuple[np.ndarray, ...]:
    """Q, K, V split into heads, attention per head, the heads concatenated, then W_O. mask: (batch, seq) of 1/0."""
    batch, seq, hidden = x.shape
    split = lambda y: y.reshape(batch, seq, heads, hidden // heads).transpose(0, 2, 1, 3)
    mask_bias = np.where(mask[:, None, None, :] > 0, 0, np.finfo(x.dtype).min).astype(x.dtype)  # -inf, but finite
    q, k, v = (split(linear(x, p)) for p in (layer.query, layer.key, layer.value))
    if rotation is not None:  # modern: positions rotate each query and key
        q, k = rotate(q, *rotation), rotate(k, *rotation)
    if window is not None:  # modern: ModernBERT's sliding-window layers mask the keys beyond the window too
        mask_bias = np.minimum(mask_bias, band(seq, window))
    context, probs = attention(q, k, v, mask_bias, bias)
    return linear(context.transpose(0, 2, 1, 3).reshape(batch, seq, hidden), layer.attention_output), probs


def feed_forward(x: np.ndarray, layer: EncoderLayer, activation: str) -> np.ndarray:
    if layer.gate is not None:  # modern: gated, activation(x W_gate) * (x W_up): GeGLU, SwiGLU
        return linear(ACTIVATIONS[activation](linear(x, layer.gate)) * linear(x, layer.up), layer.down)
    return linear(ACTIVATIONS[activation](linear(x, layer.up)), layer.down)


def encoder_layer(
    x: np.ndarray,
    mask: np.ndarray,
    bias: np.ndarray,
    layer: EncoderLayer,
    encoder: Encoder,
    rotation: tuple[np.ndarray, np.ndarray] | None = None,
    window: int | None = None,
) -> tuple[np.ndarray, ...]:
    """Attention, then the feed-forward network, each added to its input and normalised."""
    c = encoder.config
    if c.member.decoder is not None:  # decoder: Qwen3's and Gemma3's layers
        return decoder_layer(x, mask, layer, encoder, rotation, window)
    if c.member.pre_norm:  # modern: ModernBERT normalises before each sublayer instead
        return pre_norm_layer(x, mask, layer, encoder, rotation, window)
    a, probs = multi_head_attention(x, mask, bias, layer, c.num_attention_heads, rotation, window)
    assert layer.attention_norm is not None  # post-norm layers all have it
    h = layer_norm(x + a, layer.attention_norm, c.layer_norm_eps)
    return layer_norm(h + feed_forward(h, layer, c.hidden_act), layer.feed_forward_norm, c.layer_norm_eps), probs


def pre_norm_layer(
    x: np.ndarray,
    mask: np.ndarray,
    layer: EncoderLayer,
    encoder: Encoder,
    rotation: tuple[np.ndarray, np.ndarray] | None,
    window: int | None,
) -> tuple[np.ndarray, ...]:
    """ModernBERT: each sublayer reads its input normalised (layer 0's attention reads it as it is) and adds its
    output to the input unnormalised; the residual stream is normalised once, after the last layer."""
    c = encoder.config
    normed = x if layer.attention_norm is None else layer_norm(x, layer.attention_norm, c.layer_norm_eps)
    a, probs = multi_head_attention(normed, mask, 0, layer, c.num_attention_heads, rotation, window)
    h = x + a
    return h + feed_forward(layer_norm(h, layer.feed_forward_norm, c.layer_norm_eps), layer, c.hidden_act), probs


def rotation(rope: Rope, head_size: int, seq: int, max_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """Modern: the angles of position p are p * inv_freq, each frequency for a pair (i, i + d/2) of the head's
    numbers. -> cos, sin (seq, head_size), times the rope's attention scaling (YaRN's; 1 for the others)"""
    inv_freq, scaling = rope.frequencies(head_size, max_positions)
    angles = np.arange(seq, dtype=np.float32)[:, None] * inv_freq
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles) * np.float32(scaling), np.sin(angles) * np.float32(scaling)


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Modern: each pair (x_i, x_{i + d/2}) of a head's numbers turned by its angle: x cos + rotate_half(x) sin,
    rotate_half(x) = (-x2, x1) for the halves (x1, x2). (..., seq, head_size)"""
    half = x.shape[-1] // 2
    return x * cos + np.concatenate([-x[..., half:], x[..., :half]], axis=-1) * sin


def band(seq: int, window: int) -> np.ndarray:
    """Modern: ModernBERT's sliding window, 0 where the key lies within `window` tokens of the query, -inf (but
    finite) elsewhere. -> (seq, seq)"""
    distance = np.arange(seq)[None, :] - np.arange(seq)[:, None]
    return np.where(np.abs(distance) <= window, 0, np.finfo(np.float32).min).astype(np.float32)


def rms_norm(x: np.ndarray, p: Norm, eps: float, offset: float) -> np.ndarray:
    """Decoder: RMSNorm, x / sqrt(mean(x^2) + eps) times the gain offset + w (Qwen3: w; Gemma3: 1 + w); no mean
    subtracted, no shift."""
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * (offset + p.weight)


def causal_mask(seq: int) -> np.ndarray:
    """Decoder: Qwen3's causal mask, 0 where the key is the query or before it, -inf (but finite) after. (seq, seq)"""
    after = np.arange(seq)[None, :] > np.arange(seq)[:, None]
    return np.where(after, np.finfo(np.float32).min, 0).astype(np.float32)


def grouped_attention(
    x: np.ndarray,
    mask: np.ndarray,
    layer: EncoderLayer,
    encoder: Encoder,
    rotation: tuple[np.ndarray, np.ndarray] | None,
    window: int | None,
) -> tuple[np.ndarray, ...]:
    """Decoder: grouped-query attention. Q has `heads` heads, K and V `key_value_heads`, each repeated for its group
    of heads // key_value_heads query heads (transformers' repeat_kv); each query and key head RMS-normalised
    before the rotation; scores scaled by config.attention_scale; Qwen3's causal mask."""
    c, (batch, seq, _) = encoder.config, x.shape
    heads, kv, d = c.num_attention_heads, c.key_value_heads, c.head_size
    offset = 1.0 if c.member.decoder == "gemma3" else 0.0  # Gemma3's gains are 1 + w
    split = lambda y, n: y.reshape(batch, seq, n, d).transpose(0, 2, 1, 3)
    q, k, v = split(linear(x, layer.query), heads), split(linear(x, layer.key), kv), split(linear(x, layer.value), kv)
    assert layer.query_norm is not None and layer.key_norm is not None
    q, k = (
        rms_norm(q, layer.query_norm, c.layer_norm_eps, offset),
        rms_norm(k, layer.key_norm, c.layer_norm_eps, offset),
    )
    if rotation is not None:
        q, k = rotate(q, *rotation), rotate(k, *rotation)
    k, v = np.repeat(k, heads // kv, axis=1), np.repeat(v, heads // kv, axis=1)  # key/value head h // group
    mask_bias = np.where(mask[:, None, None, :] > 0, 0, np.finfo(x.dtype).min).astype(x.dtype)
    if c.causal:
        mask_bias = np.minimum(mask_bias, causal_mask(seq))
    if window is not None:  # Gemma3's sliding-window layers, both ways
        mask_bias = np.minimum(mask_bias, band(seq, window))
    probs = softmax(q @ k.transpose(0, 1, 3, 2) * np.float32(c.attention_scale) + mask_bias)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, heads * d)
    return linear(context, layer.attention_output), probs


def decoder_layer(
    x: np.ndarray,
    mask: np.ndarray,
    layer: EncoderLayer,
    encoder: Encoder,
    rotation: tuple[np.ndarray, np.ndarray] | None,
    window: int | None,
) -> tuple[np.ndarray, ...]:
    """Decoder: a pre-norm layer of RMSNorms, h = x + attention(norm(x)), then h + FFN(norm(h)); Gemma3 normalises
    each sublayer's output too, before it is added."""
    c = encoder.config
    offset = 1.0 if c.member.decoder == "gemma3" else 0.0
    norm = lambda y, p: y if p is None else rms_norm(y, p, c.layer_norm_eps, offset)
    a, probs = grouped_attention(norm(x, layer.attention_norm), mask, layer, encoder, rotation, window)
    h = x + norm(a, layer.attention_output_norm)  # Gemma3: post_attention_layernorm
    f = feed_forward(norm(h, layer.feed_forward_norm), layer, c.hidden_act)
    return h + norm(f, layer.feed_forward_output_norm), probs  # Gemma3: post_feedforward_layernorm


def position_ids(encoder: Encoder, input_ids: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... for each row. RoBERTa, XLM-R, MPNet: counted from the padding index + 1 over the real
    tokens (told by their id), padding at the padding index. (batch, seq) -> (batch, seq)"""
    c = encoder.config
    if not c.member.positions_past_padding:
        return np.broadcast_to(np.arange(input_ids.shape[1]), input_ids.shape)
    real = input_ids != c.pad_token_id
    return np.cumsum(real, axis=1) * real + c.pad_token_id


def embeddings(encoder: Encoder, input_ids: np.ndarray, token_type_ids: np.ndarray) -> np.ndarray:
    """Word + position + segment embeddings, normalised. (batch, seq) -> (batch, seq, hidden)"""
    e = encoder
    x = e.word_embeddings[input_ids]
    if e.config.member.decoder is not None:  # decoder: the table alone; Gemma3's times sqrt(hidden)
        return x * np.float32(math.sqrt(e.config.hidden_size)) if e.config.member.decoder == "gemma3" else x
    if e.word_adapter is not None:  # modern: jina's task adapter, the table E + s A B
        x = x + e.word_adapter.a[input_ids] @ e.word_adapter.b
    if e.position_embeddings is not None:  # modern: none, positions rotate queries and keys instead
        x = x + e.position_embeddings[position_ids(e, input_ids)]
    if e.token_type_embeddings is not None:  # DistilBERT, MPNet: no segments
        x = x + e.token_type_embeddings[token_type_ids]
        if e.segment_adapter is not None:  # modern: jina's task adapter
            x = x + e.segment_adapter.a[token_type_ids] @ e.segment_adapter.b
    x = layer_norm(x, e.embedding_norm, e.config.layer_norm_eps)
    if e.embedding_projection is not None:  # ELECTRA: embedding_size up to hidden_size
        x = linear(x, e.embedding_projection)
    return x


def position_bias(encoder: Encoder, seq: int) -> np.ndarray:
    """0, added to every attention score; MPNet: each head's learned bias for the relative distance of key and
    query, by bucket (layers.relative_position_buckets: exact for near keys, logarithmic for far ones).
    -> (heads, seq, seq)"""
    e = encoder
    if e.relative_attention_bias is None:
        return np.zeros((e.config.num_attention_heads, seq, seq), np.float32)
    return e.relative_attention_bias[relative_position_buckets(seq)].transpose(2, 0, 1)


def forward(
    encoder: Encoder, input_ids: np.ndarray, token_type_ids: np.ndarray, attention_mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(batch, seq) ids, segments and 1/0 mask -> hidden_states (layers + 1, batch, seq, hidden),
    attentions (layers, batch, heads, seq, seq) and the pooler's output (batch, hidden), or None."""
    e, c, seq = encoder, encoder.config, input_ids.shape[1]
    hidden_states = [embeddings(e, input_ids, token_type_ids)]
    bias = position_bias(e, seq)
    attentions = []
    for i, layer in enumerate(e.layers):
        rope = c.layer_rope(i)  # modern: each layer kind's rotation; ModernBERT's sliding layers' window
        turn = None if rope is None else rotation(rope, c.head_size, seq, c.max_position_embeddings)
        window = c.window if c.layer_type(i) == "sliding_attention" else None
        x, probs = encoder_layer(hidden_states[-1], attention_mask, bias, layer, e, turn, window)
        hidden_states.append(x)
        attentions.append(probs)
    if e.final_norm is not None:  # modern: ModernBERT's final norm
        hidden_states[-1] = layer_norm(hidden_states[-1], e.final_norm, c.layer_norm_eps)
    last_norm = getattr(e, "last_norm", None)  # decoder: the final RMSNorm (numbert.model.decoder)
    if last_norm is not None:
        offset = 1.0 if c.member.decoder == "gemma3" else 0.0
        hidden_states[-1] = rms_norm(hidden_states[-1], last_norm, c.layer_norm_eps, offset)
    pooled = None if e.pooler is None else np.tanh(linear(hidden_states[-1][:, 0], e.pooler))
    return np.stack(hidden_states), np.stack(attentions), pooled
