"""BERT's forward pass as the paper writes it, in plain NumPy: read this first.

The same weights as numbert.model.encoder's fast Encoder (an `Encoder` is passed in), none of its tricks: no
scratch memory, no blocking, no tuning constants. tests/test_reference.py proves the two equal.
Shapes: (batch, seq, hidden), bert-base's hidden 768 = 12 heads x 64.

BERT's relatives (docs/family.md) differ in the lines marked with their names: `position_ids` (RoBERTa,
XLM-R, MPNet), `embeddings` (DistilBERT and MPNet have no segments; ELECTRA projects), `position_bias` (MPNet).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .layers import Linear, Norm, relative_position_buckets

if TYPE_CHECKING:
    from .encoder import Encoder, EncoderLayer


def linear(x: np.ndarray, p: Linear) -> np.ndarray:
    return x @ p.weight.T + p.bias  # the weight is stored (out, in), as torch does


def gelu(x: np.ndarray) -> np.ndarray:
    """x * Phi(x), Phi the standard normal CDF, with the exact erf (math.erf: NumPy has none)."""
    return x * (1 + np.vectorize(math.erf, otypes=[x.dtype])(x / math.sqrt(2))) / 2


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """The tanh approximation of GELU that Google's original code used ("gelu_new")."""
    return x / 2 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


ACTIVATIONS = {"gelu": gelu, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "relu": relu}


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))  # shifted by the row max, so exp cannot overflow
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm(x: np.ndarray, p: Norm, eps: float) -> np.ndarray:
    mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * p.weight + p.bias


def attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask_bias: np.ndarray, bias: np.ndarray | float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention, every head at once: softmax(q k^T / sqrt(d) + bias + mask) v; the bias is
    0 but for MPNet. (batch, heads, seq, d) each -> context (batch, heads, seq, d), probabilities
    (batch, heads, seq, seq)."""
    probs = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]) + bias + mask_bias)
    return probs @ v, probs


def multi_head_attention(
    x: np.ndarray, mask: np.ndarray, bias: np.ndarray, layer: EncoderLayer, heads: int
) -> tuple[np.ndarray, ...]:
    """Q, K, V split into heads, attention per head, the heads concatenated, then W_O. mask: (batch, seq) of 1/0."""
    batch, seq, hidden = x.shape
    split = lambda y: y.reshape(batch, seq, heads, hidden // heads).transpose(0, 2, 1, 3)
    mask_bias = np.where(mask[:, None, None, :] > 0, 0, np.finfo(x.dtype).min).astype(x.dtype)  # -inf, but finite
    q, k, v = (split(linear(x, p)) for p in (layer.query, layer.key, layer.value))
    context, probs = attention(q, k, v, mask_bias, bias)
    return linear(context.transpose(0, 2, 1, 3).reshape(batch, seq, hidden), layer.attention_output), probs


def feed_forward(x: np.ndarray, layer: EncoderLayer, activation: str) -> np.ndarray:
    return linear(ACTIVATIONS[activation](linear(x, layer.up)), layer.down)


def encoder_layer(
    x: np.ndarray, mask: np.ndarray, bias: np.ndarray, layer: EncoderLayer, encoder: Encoder
) -> tuple[np.ndarray, ...]:
    """Attention, then the feed-forward network, each added to its input and normalised."""
    c = encoder.config
    a, probs = multi_head_attention(x, mask, bias, layer, c.num_attention_heads)
    h = layer_norm(x + a, layer.attention_norm, c.layer_norm_eps)
    return layer_norm(h + feed_forward(h, layer, c.hidden_act), layer.feed_forward_norm, c.layer_norm_eps), probs


def position_ids(encoder: Encoder, input_ids: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... for each row. RoBERTa, XLM-R, MPNet: counted from the padding index + 1 over the real
    tokens (told by their id), padding at the padding index. (batch, seq) -> (batch, seq)"""
    c = encoder.config
    if not c.relative.positions_past_padding:
        return np.broadcast_to(np.arange(input_ids.shape[1]), input_ids.shape)
    real = input_ids != c.pad_token_id
    return np.cumsum(real, axis=1) * real + c.pad_token_id


def embeddings(encoder: Encoder, input_ids: np.ndarray, token_type_ids: np.ndarray) -> np.ndarray:
    """Word + position + segment embeddings, normalised. (batch, seq) -> (batch, seq, hidden)"""
    e = encoder
    x = e.word_embeddings[input_ids] + e.position_embeddings[position_ids(e, input_ids)]
    if e.token_type_embeddings is not None:  # DistilBERT, MPNet: no segments
        x = x + e.token_type_embeddings[token_type_ids]
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
    e = encoder
    hidden_states = [embeddings(e, input_ids, token_type_ids)]
    bias = position_bias(e, input_ids.shape[1])
    attentions = []
    for layer in e.layers:
        x, probs = encoder_layer(hidden_states[-1], attention_mask, bias, layer, e)
        hidden_states.append(x)
        attentions.append(probs)
    pooled = None if e.pooler is None else np.tanh(linear(hidden_states[-1][:, 0], e.pooler))
    return np.stack(hidden_states), np.stack(attentions), pooled
