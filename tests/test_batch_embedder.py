"""numbert.engines.batch_embedder: the picklable texts -> vectors callable that engines map over partitions."""

from __future__ import annotations

import pickle

import numpy as np

import numbert
from numbert.engines.batch_embedder import BatchEmbedder, _load


def test_a_batch_embedder_pickles_small_and_loads_the_model_once_per_process(minilm_dir):
    encode = BatchEmbedder(minilm_dir, pooling="cls", normalize=True)
    shipped = pickle.dumps(encode)
    assert len(shipped) < 1000  # the name and options, not the weights
    texts = ["A man is eating food.", "A man is eating a meal.", ""]
    first = pickle.loads(shipped)(texts)
    misses = _load.cache_info().misses
    second = pickle.loads(shipped)(iter(texts))  # another object, the same loaded model
    assert _load.cache_info().misses == misses
    expected = numbert.load(minilm_dir).embed(texts, pooling="cls", normalize=True)
    assert np.array_equal(first, expected) and np.array_equal(second, expected)
    assert encode.dim == 384 and first.dtype == np.float32
