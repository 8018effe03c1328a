"""The building blocks, each checked against its definition computed independently in float64."""

import math

import numpy as np
import pytest

from numbert.model import layers
from numbert.model.layers import Linear, Norm
from numbert.model.scratch import Scratch, scratch_array

f32 = np.float32


def exact_gelu(x: np.ndarray) -> np.ndarray:
    return np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64).tolist()])


# GELU's logistic curve raises e or 2 to its power, whichever NumPy runs faster on the CPU: both are checked
EXP_BASES = pytest.mark.parametrize("base", [(np.exp, 1.0), (np.exp2, layers.LOG2_E)], ids=["e", "2"])


@EXP_BASES
def test_gelu_is_x_times_normal_cdf_to_float32_precision(monkeypatch, base):
    monkeypatch.setattr(layers, "EXP", base[0])
    monkeypatch.setattr(layers, "EXP_PER_E", base[1])
    x = np.concatenate(
        [np.linspace(-12, 12, 2_400_001, dtype=f32), np.random.default_rng(0).uniform(-6, 6, 1_000_000).astype(f32)]
    )
    got = layers.gelu(x)
    assert got.dtype == np.float32
    # float32 itself spaces numbers near |x| by 6e-8 |x|; torch's own float32 GELU is off by up to 3.7e-7 max(1, |x|)
    assert (np.abs(got - exact_gelu(x)) / np.maximum(1, np.abs(x))).max() <= 1.5e-7


@EXP_BASES
def test_gelu_special_values(monkeypatch, base):
    monkeypatch.setattr(layers, "EXP", base[0])
    monkeypatch.setattr(layers, "EXP_PER_E", base[1])
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 30.0, -30.0, np.inf], f32)
    np.testing.assert_allclose(layers.gelu(x), exact_gelu(x), atol=1e-6, rtol=1e-7)
    assert np.isnan(layers.gelu(np.array([np.nan], f32)))[0]


def test_gelu_tanh_and_relu():
    x = np.linspace(-12, 12, 20_001, dtype=f32)
    x64 = x.astype(np.float64)
    tanh_form = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))
    np.testing.assert_allclose(layers.gelu_tanh(x), tanh_form, atol=2e-6)
    np.testing.assert_array_equal(layers.relu(x), np.maximum(x, 0))
    assert set(layers.ACTIVATIONS) == {"gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu"}


@EXP_BASES
def test_silu_is_x_times_its_sigmoid(monkeypatch, base):
    monkeypatch.setattr(layers, "EXP", base[0])
    monkeypatch.setattr(layers, "EXP_PER_E", base[1])
    x = np.concatenate([np.linspace(-120, 120, 20_001, dtype=f32), np.array([0.0, -0.0, np.inf], f32)])
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        exact = np.where(np.isinf(x64), np.maximum(x64, 0), x64 / (1 + np.exp(-x64)))
    np.testing.assert_allclose(layers.silu(x), exact, atol=1e-6, rtol=1e-6)


def test_exp_base_is_the_one_numpy_vectorizes():
    assert (layers.EXP is np.exp2) == layers.simd_exp2()
    assert layers.EXP_PER_E == (layers.LOG2_E if layers.EXP is np.exp2 else 1.0)


def test_layer_norm_matches_the_formula():
    rng = np.random.default_rng(1)
    x = rng.normal(3, 2, (4, 5, 768)).astype(f32)
    gamma, beta = rng.normal(1, 0.1, 768).astype(f32), rng.normal(0, 0.1, 768).astype(f32)
    x64 = x.astype(np.float64)
    mean, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    expected = (x64 - mean) / np.sqrt(var + 1e-12) * gamma + beta
    got = layers.layer_norm(x.copy(), Norm(gamma, beta), 1e-12)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=5e-6)


def softmax(x):
    """softmax as attention computes it: exp_shifted over its row sums."""
    e = layers.exp_shifted(x)
    return e / layers.row_sums(e)


def test_softmax_rows_sum_to_one_and_survive_large_and_masked_scores():
    x = np.array([[1000.0, 1001.0, 1002.0], [0.0, np.finfo(f32).min, 0.0]], f32)
    got = softmax(x.copy())
    np.testing.assert_allclose(got.sum(-1), 1, rtol=1e-6)
    np.testing.assert_allclose(got[0], np.exp([-2, -1, 0]) / np.exp([-2, -1, 0]).sum(), rtol=1e-6)
    assert got[1, 1] == 0 and got[1, 0] == pytest.approx(0.5)


@pytest.mark.parametrize("spread", [10, 500, 520, 5000])  # x / 8 within +-64: no shift; beyond: the row max
def test_softmax_matches_float64_with_and_without_the_shift(spread):
    x = np.random.default_rng(3).uniform(-spread, spread, (64, 128)).astype(f32)
    x64 = x.astype(np.float64) * 0.125
    expected = np.exp(x64 - x64.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(softmax(x * f32(0.125)), expected, rtol=2e-6, atol=1e-9)


def test_a_fully_masked_row_gets_uniform_weights_as_in_transformers():
    x = np.full((1, 4), np.finfo(f32).min, f32)
    np.testing.assert_allclose(softmax(x * f32(0.125)), 0.25)


def test_linear_is_x_w_transpose_plus_b_on_any_leading_shape():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 8), dtype=f32)
    w, b = rng.standard_normal((5, 8), dtype=f32), rng.standard_normal(5, dtype=f32)
    got = layers.linear(x, Linear(w, b))
    assert got.shape == (2, 3, 5) and got.dtype == np.float32
    np.testing.assert_allclose(got, np.einsum("bsi,oi->bso", x, w) + b, rtol=1e-5, atol=1e-5)


def test_attention_against_a_per_head_loop():
    rng = np.random.default_rng(3)
    batch, heads, seq, d = 2, 3, 5, 4
    q, k, v = (rng.standard_normal((batch, heads, seq, d), dtype=f32) for _ in range(3))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    context, probs = layers.attention(q, k, v, layers.attention_mask_bias(mask), output_probs=True)
    without_probs = layers.attention(q, k, v, layers.attention_mask_bias(mask))
    assert without_probs[1] is None
    np.testing.assert_allclose(without_probs[0], context, rtol=1e-6, atol=1e-7)
    for b in range(batch):
        n = mask[b].sum()
        for h in range(heads):
            s = q[b, h].astype(np.float64) @ k[b, h, :n].T.astype(np.float64) / math.sqrt(d)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            np.testing.assert_allclose(probs[b, h, :, :n], p, atol=1e-6)
            assert not probs[b, h, :, n:].any()
            np.testing.assert_allclose(context[b, h], p @ v[b, h, :n], atol=1e-5)


@pytest.mark.parametrize("tokens", [1, layers.FEW_ROWS, layers.FEW_ROWS + 1])  # (W x^T)^T up to FEW_ROWS, then x W^T
def test_matmul_weight_is_x_w_transpose_either_way_round(tokens):
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((tokens, 96), dtype=f32), rng.standard_normal((40, 96), dtype=f32)
    got = layers.matmul_weight(x, w)
    assert got.flags.c_contiguous and got.dtype == np.float32
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_split_and_merge_heads_are_inverse():
    x = np.arange(2 * 3 * 12, dtype=f32).reshape(2, 3, 12)
    heads = layers.split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 3)
    np.testing.assert_array_equal(heads[1, 2, 0], x[1, 0, 6:9])
    np.testing.assert_array_equal(layers.merge_heads(heads), x)


def test_gelu_on_strided_and_fortran_arrays():
    x = np.linspace(-5, 5, 6000, dtype=f32).reshape(60, 100)
    for view in (x.T, x[:, ::3], np.asfortranarray(x)):
        np.testing.assert_array_equal(layers.gelu(view), layers.gelu(np.ascontiguousarray(view)))


@pytest.mark.parametrize("shape", [(1, 5), (7, 3072), (300, 3072), (2, 12, 128, 128)])
def test_by_rows_equals_the_whole_array_result_written_over_its_input(shape):
    x = np.random.default_rng(0).standard_normal(shape, dtype=f32)
    expected = layers.gelu(x)
    work = x.copy()
    got = layers.by_rows(layers.gelu, work)
    np.testing.assert_array_equal(got, expected)
    assert got is work
    np.testing.assert_array_equal(layers.by_rows(layers.exp_shifted, x.copy()), layers.exp_shifted(x.copy()))


def test_by_rows_on_a_non_contiguous_array():
    x = np.random.default_rng(2).standard_normal((40, 3072), dtype=f32)
    np.testing.assert_array_equal(layers.by_rows(layers.gelu, np.asfortranarray(x)), layers.gelu(x))


def test_scratch_hands_each_layer_the_arrays_the_layer_before_made():
    scratch = Scratch()
    with scratch:
        a, b = scratch_array(2, 3), scratch_array(4)
    with scratch:
        c, d, e = scratch_array(2, 3), scratch_array(5), scratch_array(4)
    assert c is a and d is not b and e is not b  # same place and shape: the same array, else a new one
    assert d.shape == (5,) and e.shape == (4,) and c.dtype == np.float32
    assert scratch_array(2, 3) is not a  # outside `with scratch:` every array is new
    with scratch:
        with Scratch():
            assert scratch_array(2, 3) is not a
        assert scratch_array(2, 3) is a  # the outer scratch is back
