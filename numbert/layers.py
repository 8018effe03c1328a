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
    """y = x W^T + b over the last axis. (..., in) -> (..., out)"""
    y = matmul_weight(x, p.weight)
    y += p.bias
    return y


FEW_ROWS = 192  # up to here, OpenBLAS's GEMM kernels run faster with the weight as the left operand


def matmul_weight(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """x W^T for W (out, in) as stored, over the last axis. (..., in) -> (..., out)

    Flattened to one 2-D matmul so BLAS sees a single large GEMM instead of one per sequence; for a
    few tokens, (W x^T)^T computes the same product up to 25 % faster (measured on OpenBLAS).
    """
    rows = x.reshape(-1, x.shape[-1])
    y = np.ascontiguousarray((weight @ rows.T).T) if len(rows) <= FEW_ROWS else rows @ weight.T
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


# artanh(erf(x)) is odd, smooth and grows like x^2: erf(x) = tanh(x P(x^2)) with P of degree 9,
# fitted (minimax, weighted by tanh's slope) on |x| <= 3.92; beyond, erf is +-1 in float32.
_ERF = tuple(map(f32, (1.128379225730896, 0.10277145355939865, -0.00020455803314689547, -0.000597895763348788,
                       7.092004670994356e-05, 7.886662842793157e-07, -1.187444468087051e-06,
                       1.4557555516603315e-07, -7.909346955159435e-09, 1.6722918882994264e-10)))
_ERF_CLAMP = f32(3.92)


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

    In the form tanh(x P(x^2)): only multiplications, additions and one tanh, no branches, and tanh
    saturates exactly where erf does, so large |x| cost nothing extra.
    """
    a = np.clip(x, -_ERF_CLAMP, _ERF_CLAMP)
    y = polynomial(_ERF, a * a)
    y *= a
    return np.tanh(y, out=y)


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
    # by_rows: the bias and the activation in cache-sized blocks, on every core
    h = by_rows(lambda rows: activation(rows + up.bias), matmul_weight(x, up.weight))
    return linear(h, down)


ACTIVATIONS = {"gelu": gelu, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "relu": relu}


def softmax(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """softmax(scale * x) over the last axis, in place; subtracting the max keeps exp from overflowing."""
    x -= x.max(axis=-1, keepdims=True)
    if scale != 1:
        x *= f32(scale)
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
    if mask_bias is not None:
        scores += mask_bias
    scale = 1 / np.sqrt(q.shape[-1])  # softmax(scale * (qk + mask)) = softmax(scale * qk + mask): the mask is -inf-like
    probs = by_rows(lambda rows: softmax(rows, scale), scores)  # in cache-sized blocks, on every core
    return probs @ v, probs
