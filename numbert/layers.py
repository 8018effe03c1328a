"""The building blocks of a BERT layer, each a few lines of NumPy, float32 in and out.

Shapes use `tokens` for any leading axes (batch, seq) and bert-base numbers as examples:
hidden 768, 12 heads of size 64, intermediate 3072.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .parallel import by_rows

f32 = np.float32


class Linear(NamedTuple):
    weight: np.ndarray  # (out, in), as torch stores it
    bias: np.ndarray  # (out,)


class Norm(NamedTuple):
    weight: np.ndarray  # (hidden,) the gain, gamma
    bias: np.ndarray  # (hidden,) the shift, beta


def linear(x: np.ndarray, p: Linear) -> np.ndarray:
    """y = x W^T + b over the last axis. (..., in) -> (..., out)

    Flattened to one 2-D matmul so BLAS sees a single large GEMM instead of one per sequence.
    """
    y = x.reshape(-1, x.shape[-1]) @ p.weight.T
    y += p.bias
    return y.reshape(*x.shape[:-1], y.shape[-1])


def layer_norm(x: np.ndarray, p: Norm, eps: float) -> np.ndarray:
    """LayerNorm(x) = (x - mean) / sqrt(var + eps) * gamma + beta over the hidden axis; overwrites x.

    BERT uses eps = 1e-12 (config `layer_norm_eps`). (tokens, hidden) -> (tokens, hidden)
    """
    x -= x.mean(axis=-1, keepdims=True)
    var = np.square(x).mean(axis=-1, keepdims=True)
    x *= 1 / np.sqrt(var + f32(eps))
    x *= p.weight
    x += p.bias
    return x


# erf(a) for 0 <= a < 1 is a + a * P(a^2): the leading term a stays exact, P is a small correction.
_ERF_SMALL = tuple(map(f32, (0.12837915122509003, -0.3761260509490967, 0.11283430457115173,
                             -0.02684859186410904, 0.005179749336093664, -0.000794235325884074,
                             7.64710785006173e-05)))
# erf(a) for 1 <= a <= 4 is 1 - erfc(a) with log erfc(a) = Q(a), a smooth polynomial; erf(4) = 1 in float32.
_ERF_LARGE = tuple(map(f32, (-0.002671690657734871, -1.117438554763794, -0.6544889211654663,
                             -0.08863420784473419, 0.014778129756450653, -0.0011504233116284013)))


def polynomial(coefficients: tuple, x: np.ndarray) -> np.ndarray:
    """c0 + c1 x + c2 x^2 + ... by Horner's rule."""
    y = coefficients[-1] * x
    y += coefficients[-2]
    for c in reversed(coefficients[:-2]):
        y *= x
        y += c
    return y


def erf(x: np.ndarray) -> np.ndarray:
    """The Gauss error function in float32, absolute error below 1e-7 (NumPy has no erf).

    Two least-squares fits, each in a form that float32 evaluates without cancellation:
    a + a P(a^2) below 1, and 1 - exp(Q(a)) above, where the exp carries erfc's fast decay.
    """
    a = np.minimum(np.abs(x), f32(4), order="C")  # C order: ravel() below must be a view
    y = polynomial(_ERF_SMALL, a * a)
    y *= a
    y += a
    tail = np.flatnonzero(a >= 1)  # usually few: the second fit runs on those elements only
    if tail.size:
        at = a.ravel()[tail]
        y.ravel()[tail] = f32(1) - np.exp(polynomial(_ERF_LARGE, at))
    return np.copysign(y, x)


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)), the exact form BERT uses ("gelu")."""
    y = erf(x * f32(1 / np.sqrt(2)))
    y += f32(1)
    y *= x
    y *= f32(0.5)
    return y


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """The tanh approximation of GELU of Google's original code ("gelu_new", "gelu_pytorch_tanh")."""
    y = np.tanh(f32(np.sqrt(2 / np.pi)) * (x + f32(0.044715) * x * x * x))
    y += f32(1)
    y *= x
    y *= f32(0.5)
    return y


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, f32(0))


def feed_forward(x: np.ndarray, up: Linear, down: Linear, activation) -> np.ndarray:
    """FFN(x) = activation(x W1^T + b1) W2^T + b2, the same two-layer network at every position.

    (tokens, hidden) -> (tokens, intermediate) -> (tokens, hidden); 768 -> 3072 -> 768 for bert-base.
    """
    return linear(by_rows(activation, linear(x, up)), down)  # by_rows: in cache-sized blocks, on every core


ACTIVATIONS = {"gelu": gelu, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "relu": relu}


def softmax(x: np.ndarray) -> np.ndarray:
    """softmax over the last axis, in place; subtracting the max keeps exp from overflowing."""
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def attention_mask_bias(attention_mask: np.ndarray) -> np.ndarray:
    """The additive mask transformers uses: 0 where a token is real, float32's minimum on padding.

    (batch, seq) of 1/0 -> (batch, 1, 1, seq), broadcast over heads and query positions.
    """
    bias = np.where(attention_mask[:, None, None, :] > 0, f32(0), np.finfo(np.float32).min)
    return bias.astype(np.float32, copy=False)


def split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(batch, seq, hidden) -> (batch, heads, seq, head_size)"""
    batch, seq, hidden = x.shape
    return x.reshape(batch, seq, heads, hidden // heads).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(batch, heads, seq, head_size) -> (batch, seq, hidden)"""
    batch, heads, seq, head_size = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * head_size)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray,
              mask_bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention: softmax(q k^T / sqrt(d) + mask) v, for every head at once.

    q, k, v: (batch, heads, seq, head_size); mask_bias: (batch, 1, 1, seq), or None without padding.
    Returns the context (batch, heads, seq, head_size) and the probabilities (batch, heads, seq, seq).
    """
    scores = q @ k.transpose(0, 1, 3, 2)
    scores *= f32(1 / np.sqrt(q.shape[-1]))
    if mask_bias is not None:
        scores += mask_bias
    probs = by_rows(softmax, scores)  # in cache-sized blocks, on every core
    return probs @ v, probs
