"""Pooling over a row with no real token (an all-zero attention mask): defined and finite for every pooling."""

from __future__ import annotations

import numpy as np
import pytest

from numbert.model.pooling import POOLINGS, pool


@pytest.mark.parametrize("pooling", [p for p in POOLINGS if p != "pooler"])  # pooler: a layer on [CLS], no mask
def test_an_all_zero_mask_row_pools_to_finite_values(pooling):
    x = np.random.default_rng(0).standard_normal((3, 5, 4)).astype(np.float32) - 10  # every value negative
    mask = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=np.int64)
    pooled = pool(x, mask, pooling)
    assert pooled.dtype == np.float32 and np.isfinite(pooled).all()
    if pooling in ("mean", "max", "mean_max", "mean_sqrt_len", "weighted_mean"):
        np.testing.assert_array_equal(pooled[1], 0)  # nothing to pool: zeros, as mean always gave
        assert (pooled[[0, 2]] < 0).all()  # the other rows are untouched by the empty one


def test_max_ignores_padding_even_when_it_is_larger():
    x = np.array([[[1.0, -2.0], [5.0, 7.0]]], dtype=np.float32)
    np.testing.assert_array_equal(pool(x, np.array([[1, 0]]), "max"), [[1.0, -2.0]])
