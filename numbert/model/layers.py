"""The building blocks of a BERT layer, fast: float32 in and out, each a few lines of NumPy.

numbert/model/reference.py writes each block as the paper does; tests/test_reference.py proves the two
equal. Every block here names its reference function and says what it does differently to be faster.
A block returns new arrays, or writes into the `out` array its caller passes (which may be its input);
only its own temporaries come from scratch memory (numbert/model/scratch.py), and none is ever returned.

Shapes use `tokens` for any leading axes (batch, seq) and bert-base numbers as examples:
hidden 768, 12 heads of size 64, intermediate 3072.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ..runtime import row_threads
from . import turns
from .scratch import scratch_array

f32 = np.float32
LOG2_E = 1 / np.log(2)  # exp(x) = 2^(x log2 e)


def simd_exp2() -> bool:
    """Whether NumPy runs float32 exp2 in SIMD code on this CPU. It has such a loop for AVX-512 (X86_V4) only,
    where exp2 is the faster; elsewhere (AVX2) its plain loop is the slower (docs/performance.md)."""
    try:
        from numpy.lib.introspect import opt_func_info  # NumPy >= 2.0
    except ImportError:
        return False
    loops = opt_func_info(func_name="^exp2$", signature="float32").get("exp2", {})
    return any(not loop["current"].startswith("baseline") for loop in loops.values())


# The faster of e^y and 2^y here, and the factor that turns a power of e into a power of its base
EXP, EXP_PER_E = (np.exp2, LOG2_E) if simd_exp2() else (np.exp, 1.0)

# Tuning constants, measured on the machine numbert was developed on: AMD EPYC, 2 cores with AVX-512
# (1 MiB L2 each), NumPy's OpenBLAS with OPENBLAS_CORETYPE=Haswell (AVX2 kernels) and without.
FEW_ROWS = 192  # up to here, OpenBLAS's GEMM kernels run faster with the weight as the left operand
BLOCK_BYTES = 256 << 10  # a block of rows plus the few temporaries a function makes of it fit in a 1 MiB L2 cache


def result(out: np.ndarray | None, *shape: int) -> np.ndarray:
    """The caller's `out` array seen as `shape` (a view, never a copy), or a new float32 array."""
    if out is None:
        return np.empty(shape, f32)
    view = out.view()
    view.shape = shape  # raises rather than copy if out cannot be seen as shape
    return view


class LowRank(NamedTuple):
    """A LoRA adapter's change of a weight, scale B A (jina-embeddings-v3's task adapters): rank r, much below
    the weight's sides, so x (W + scale B A)^T is computed as x W^T + ((x A^T) (scale B)^T), never forming B A."""

    a: np.ndarray  # (r, in)
    b: np.ndarray  # (out, r), already times the scale alpha / r


class Linear(NamedTuple):
    weight: np.ndarray  # (out, in), as torch stores it
    bias: np.ndarray | None  # (out,); None where the checkpoint has none (ModernBERT, NomicBERT)
    low_rank: LowRank | None = None  # a task adapter's change of the weight, or None


class Norm(NamedTuple):
    weight: np.ndarray  # (hidden,) the gain, gamma
    bias: np.ndarray | None  # (hidden,) the shift, beta; None where the checkpoint has none (ModernBERT)


def linear(x: np.ndarray, p: Linear, out: np.ndarray | None = None) -> np.ndarray:
    """y = x W^T + b over the last axis (with a task adapter: + x A^T B^T). (..., in) -> (..., out)

    Reference: `reference.linear`. Faster by `matmul_weight`, and by adding b in place.
    """
    y = matmul_weight(x, p.weight, out)
    if p.bias is not None:
        y += p.bias
    if p.low_rank is not None:
        y += (x @ p.low_rank.a.T) @ p.low_rank.b.T  # (..., r) then (..., out): the adapter's two thin products
    return y


def matmul_weight(x: np.ndarray, weight: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """x W^T for W (out, in) as stored, over the last axis. (..., in) -> (..., out)

    Flattened to one 2-D matmul so BLAS sees a single large GEMM instead of one per sequence; for up
    to FEW_ROWS tokens, (W x^T)^T computes the same product faster on OpenBLAS (docs/performance.md).
    """
    turns.point()  # between two steps of a forward: waiting short work may go first (numbert.model.turns)
    rows = x.reshape(-1, x.shape[-1])
    tokens, width = len(rows), len(weight)
    y = result(out, tokens, width)
    if tokens <= FEW_ROWS:
        y[...] = np.matmul(weight, rows.T, out=scratch_array(width, tokens)).T
    else:
        np.matmul(rows, weight.T, out=y)
    return y.reshape(*x.shape[:-1], width)


def row_sums(x: np.ndarray) -> np.ndarray:
    """Sums over the last axis, kept as a length-1 axis to divide by. (..., n) -> (..., 1)"""
    return np.einsum("...i->...", x)[..., None]  # einsum: no temporary array, faster than sum


def layer_norm(x: np.ndarray, p: Norm, eps: float, out: np.ndarray | None = None) -> np.ndarray:
    """LayerNorm(x) = (x - mean) / sqrt(var + eps) * gamma + beta over the hidden axis, into `out`
    (pass out=x to normalise in place), else a new array. BERT uses eps = 1e-12 (`layer_norm_eps`).

    Reference: `reference.layer_norm`. Faster by working in one array (no temporaries of x's size),
    by einsum's row sums, and in cache-sized blocks of rows (`in_blocks`). (tokens, hidden) -> (tokens, hidden)
    """
    n = f32(x.shape[-1])
    y = result(out, *x.shape)
    width = x.shape[-1]
    x_rows, y_rows = x.reshape(-1, width), result(y, y.size // width, width)  # y_rows a view, never a copy

    def normalize(rows: slice) -> None:
        block = np.subtract(x_rows[rows], row_sums(x_rows[rows]) / n, out=y_rows[rows])
        var = np.einsum("...i,...i->...", block, block) / n
        block *= (1 / np.sqrt(var + f32(eps)))[..., None]
        block *= p.weight
        if p.bias is not None:
            block += p.bias

    in_blocks(normalize, y_rows)
    return y


def polynomial(coefficients: Sequence[float], x: np.ndarray) -> np.ndarray:
    """c0 + c1 x + c2 x^2 + ... by Horner's rule, in x's precision."""
    c = [f32(v) for v in coefficients]
    y = c[-1] * x
    y += c[-2]
    for v in reversed(c[:-2]):
        y *= x
        y += v
    return y


def logistic_gelu(x: np.ndarray, logit: Sequence[float], clip: float, out: np.ndarray | None = None) -> np.ndarray:
    """x * sigmoid(x Q(x^2)): GELU written as x times a logistic curve, with Q's coefficients `logit`; into
    `out` if given (out=x: in place), else a new array.

    x is clipped to +-clip inside the sigmoid only, where the curve is 0 or 1 in float32 already.
    Evaluated as x / (1 + e^(-x Q(x^2))): one NumPy pass per operation, no branches; 18 passes for GELU's
    Q of degree 6. Where NumPy's exp2 is the faster (`EXP`), e^y is 2^(y log2 e), log2 e in Q's coefficients.
    """
    a = np.clip(x, f32(-clip), f32(clip))
    y = polynomial([-c * EXP_PER_E for c in logit], a * a)
    y *= a
    EXP(y, out=y)
    y += f32(1)
    return np.divide(x, y, out=y if out is None else out)


# The logit of the normal CDF, log(Phi / (1 - Phi)), is odd, smooth and grows like x^2 / 2, so
# Phi(x) = sigmoid(x Q(x^2)) with Q of degree 6, fitted (minimax over |x| <= 5.5) to the exact Phi.
# Its leading terms are those of the tanh approximation, 2 sqrt(2/pi) (x + 0.044715 x^3) ~ 1.5958 x + 0.0714 x^3.
_NORMAL_CDF_LOGIT = (
    1.595770615308214,
    0.07266412913352453,
    -6.348237037045421e-05,
    -0.00011120814393571492,
    8.025247292869388e-06,
    -2.714646412139976e-07,
    3.6934339475713784e-09,
)
_TANH_APPROXIMATION_LOGIT = (2 * np.sqrt(2 / np.pi), 2 * np.sqrt(2 / np.pi) * 0.044715)


def gelu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """GELU(x) = x * Phi(x), Phi the standard normal CDF: the exact form BERT uses ("gelu").

    Reference: `reference.gelu`, Phi = (1 + erf(x / sqrt 2)) / 2 with math.erf one number at a time
    (NumPy has no erf). Faster as `logistic_gelu`, whole-array passes; error below 1.5e-7 * max(1, |x|).
    """
    return logistic_gelu(x, _NORMAL_CDF_LOGIT, 5.5, out)


def gelu_tanh(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the approximation of Google's original code
    ("gelu_new", "gelu_pytorch_tanh"); (1 + tanh u) / 2 = sigmoid(2u).

    Reference: `reference.gelu_tanh`. Faster as `logistic_gelu`: fewer NumPy passes than tanh's form.
    """
    return logistic_gelu(x, _TANH_APPROXIMATION_LOGIT, 10, out)


def relu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """max(x, 0). Reference: `reference.relu`, the same."""
    return np.maximum(x, f32(0), out=out)


def silu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """x * sigmoid(x) = x / (1 + e^-x) (also called swish): NomicBERT's gate (SwiGLU). Reference: `reference.silu`.

    Faster by the base-2 exp where NumPy's is the faster (`EXP`); x is clipped to +-88 inside the exp only,
    where e^-x still fits float32 and the quotient is x or 0 already."""
    e = np.clip(x, f32(-88), f32(88))
    e *= f32(-EXP_PER_E)
    EXP(e, out=e)
    e += f32(1)
    return np.divide(x, e, out=e if out is None else out)


def in_blocks(work: Callable[[slice], object], rows: np.ndarray) -> None:
    """work(block) for consecutive blocks of the (n, width) `rows` that fit in the CPU cache with the few
    temporaries a function makes of them (BLOCK_BYTES), shared among the row threads (numbert.runtime.row_threads).

    GELU, softmax and LayerNorm are many NumPy passes each; on a block that stays in the cache, every pass
    after the first reads from the cache instead of memory. The blocks do not depend on the thread count.
    """
    row_threads.each(work, len(rows), max(1, BLOCK_BYTES // max(1, rows[:1].nbytes)))


def by_rows(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """f(x) for an f that treats each row (last axis) on its own, such as GELU or softmax, in blocks
    (`in_blocks`). (..., n) -> (..., n), float32, written over x (a temporary wherever it is used) and returned.
    """
    x = np.ascontiguousarray(x)
    rows = x.reshape(-1, x.shape[-1])

    def apply(block: slice) -> None:
        rows[block] = f(rows[block])  # NumPy skips the copy when f worked in place (softmax)

    in_blocks(apply, rows)
    return x


def feed_forward(
    x: np.ndarray,
    up: Linear,
    down: Linear,
    activation: Callable[..., np.ndarray],
    out: np.ndarray | None = None,
) -> np.ndarray:
    """FFN(x) = activation(x W1^T + b1) W2^T + b2, the same two-layer network at every position; the
    activation one of ACTIVATIONS, called as activation(x, out=x) to work in place.

    Reference: `reference.feed_forward`. Faster by adding b1 and applying the activation in place, in
    cache-sized blocks (`by_rows`), and by keeping the (tokens, intermediate) array in scratch memory.
    (tokens, hidden) -> (tokens, intermediate) -> (tokens, hidden); 768 -> 3072 -> 768 for bert-base.
    """
    inner = matmul_weight(x, up.weight, scratch_array(*x.shape[:-1], len(up.weight)))
    if up.low_rank is not None:  # jina's task adapter
        inner += (x @ up.low_rank.a.T) @ up.low_rank.b.T

    def activate(rows: np.ndarray) -> np.ndarray:
        if up.bias is not None:
            rows += up.bias
        return activation(rows, out=rows)

    h = by_rows(activate, inner)
    return linear(h, down, out)


def gated_feed_forward(
    x: np.ndarray,
    gate: Linear,
    up: Linear,
    down: Linear,
    activation: Callable[..., np.ndarray],
    out: np.ndarray | None = None,
) -> np.ndarray:
    """GLU(x) = (activation(x W_gate^T + b) * (x W_up^T + b)) W_down^T + b: the modern family's feed-forward, GeGLU
    with GELU (ModernBERT, GTE), SwiGLU with SiLU (NomicBERT). The gate decides, per number, how much of the up
    projection passes. Reference: `reference.feed_forward`'s gated line. Faster as `feed_forward`: the
    activation and the product in place, in cache-sized blocks, the two (tokens, intermediate) arrays in scratch.
    (tokens, hidden) -> 2 x (tokens, intermediate) -> (tokens, hidden)"""
    tokens = x.shape[:-1]
    g = linear(x, gate, scratch_array(*tokens, len(gate.weight)))
    u = linear(x, up, scratch_array(*tokens, len(up.weight)))
    g_rows, u_rows = g.reshape(-1, g.shape[-1]), u.reshape(-1, u.shape[-1])

    def gated(rows: slice) -> None:
        block = g_rows[rows]
        activation(block, out=block)
        block *= u_rows[rows]

    in_blocks(gated, g_rows)
    return linear(g, down, out)


ACTIVATIONS = {"gelu": gelu, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "relu": relu, "silu": silu}


def exp_shifted(x: np.ndarray) -> np.ndarray:
    """exp(x - shift) over the last axis, in place: softmax(x) is this divided by its row sums.

    Dividing by the sum cancels any shift of a row; the textbook shift, subtracting each row's max,
    only keeps exp from overflowing. Where every value lies within +-64, exp can neither overflow
    nor underflow, so the row maxima (NumPy's slowest reduction here) and the shift are skipped.
    Reference: the numerator of `reference.softmax`, which always shifts by the row max.
    """
    if not -64 <= x.min() <= x.max() <= 64:  # also true for NaN
        x -= np.fmax.reduce(x, axis=-1, keepdims=True)  # fmax: the faster row maximum (max also checks for NaN)
    return np.exp(x, out=x)


def attention_mask_bias(attention_mask: np.ndarray) -> np.ndarray:
    """The additive mask transformers uses: 0 where a token is real, float32's minimum on padding.

    (batch, seq) of 1/0 -> (batch, 1, 1, seq), broadcast over heads and query positions.
    """
    bias = np.where(attention_mask[:, None, None, :] > 0, f32(0), np.finfo(np.float32).min)
    return bias.astype(np.float32, copy=False)


def positions_past_padding(input_ids: np.ndarray, pad_token_id: int) -> np.ndarray:
    """RoBERTa's position ids: the real tokens count from pad_token_id + 1, padding stays at pad_token_id.
    (batch, seq) -> (batch, seq). As transformers' create_position_ids_from_input_ids, the padding is
    told by its id, not the attention mask. Reference: `reference.position_ids`, the same."""
    real = input_ids != pad_token_id
    return np.cumsum(real, axis=1) * real + pad_token_id


RELATIVE_BUCKETS = 32  # the buckets MPNet reads its relative position bias in (transformers always passes 32)


def relative_position_buckets(seq: int, num_buckets: int = RELATIVE_BUCKETS, max_distance: int = 128) -> np.ndarray:
    """MPNet's (and T5's) bucket of each relative distance key - query: half the buckets for keys before
    the query, half for keys after; in each half, distances below a quarter of the buckets get one bucket
    each, larger ones share buckets spaced logarithmically up to max_distance. (seq, seq) int64.
    In float32, as transformers computes it, so every bucket boundary falls where it does there."""
    distance = np.arange(seq)[None, :] - np.arange(seq)[:, None]  # key position - query position
    half = num_buckets // 2
    exact = half // 2
    n = np.abs(distance)
    with np.errstate(divide="ignore"):  # log(0) at n = 0, where the exact bucket is taken anyway
        scaled = np.log(n.astype(f32) / f32(exact)) / f32(np.log(max_distance / exact)) * f32(half - exact)
    large = np.minimum(exact + np.trunc(np.maximum(scaled, f32(-1))).astype(np.int64), half - 1)
    return np.where(distance > 0, half, 0) + np.where(n < exact, n, large)


def split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(batch, seq, hidden) -> (batch, heads, seq, head_size)"""
    batch, seq, hidden = x.shape
    return x.reshape(batch, seq, heads, hidden // heads).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(batch, heads, seq, head_size) -> (batch, seq, hidden)"""
    batch, heads, seq, head_size = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * head_size)


def heads_layout(x: np.ndarray) -> np.ndarray:
    """A (batch, seq, heads, head_size) array seen as (batch, heads, seq, head_size), as split_heads
    leaves one: filling it needs no transposing, and merge_heads on it is free."""
    return x.transpose(0, 2, 1, 3)


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask_bias: np.ndarray | None,
    output_probs: bool = False,
    *,
    out: np.ndarray | None = None,
    probs_out: np.ndarray | None = None,
    score_bias: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Scaled dot-product attention: softmax(q k^T / sqrt(d) + bias + mask) v, for every head at once.

    q, k, v: (batch, heads, seq, head_size) (k and v: keys, not seq, for a block of queries); mask_bias: (batch, 1,
    1, seq) or any shape that broadcasts to the scores, or None without padding;
    score_bias: (heads, seq, seq) added to every row's scores (MPNet's relative positions), or None.
    Returns the context (batch, heads, seq, head_size), written into `out` if given, and, if asked
    for, the probabilities (batch, heads, seq, seq), written into `probs_out` if given.

    Reference: `reference.attention`'s inner part. Faster by scaling q rather than the scores (fewer
    numbers), by the softmax in cache-sized blocks without its max shift where it cannot overflow
    (`exp_shifted`), and by dividing the context rather than the probabilities by the row sums.
    """
    batch, heads, seq, head_size = q.shape
    keys = k.shape[2]  # seq, but for a block of queries (numbert.model.attention_blocks)
    q = np.multiply(q, f32(1 / np.sqrt(head_size)), out=heads_layout(scratch_array(batch, seq, heads, head_size)))
    scores = result(probs_out, batch, heads, seq, keys) if output_probs else scratch_array(batch, heads, seq, keys)
    np.matmul(q, k.transpose(0, 1, 3, 2), out=scores)
    if score_bias is not None:
        scores += score_bias
    if mask_bias is not None:
        scores += mask_bias
    weights = by_rows(exp_shifted, scores)  # softmax = weights / total, in cache-sized blocks
    total = row_sums(weights)  # (batch, heads, seq, 1)
    context = heads_layout(np.empty((batch, seq, heads, head_size), f32)) if out is None else out
    np.matmul(weights, v, out=context)
    context /= total  # (weights / total) v: dividing seq x head_size numbers per head instead of seq x seq
    return context, (np.divide(weights, total, out=weights) if output_probs else None)
