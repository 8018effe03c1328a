"""The decoder forward's fast path (numbert.model.decoder) on the committed fixtures (tests/fixtures/decoder): the
numbers do not depend on the row threads (attention's (sequence, key/value head) pairs, the q/k norms and rotation,
the residual adds shared among them), BLAS's thread count is given back after attention held it to one, and the
stacked products keep no second copy of their weights. Parity with transformers: tests/test_decoder_family.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import numbert
from numbert.model import decoder
from numbert.model.tensors import decoder_layer_names
from numbert.runtime import row_threads

FIXTURES = Path(__file__).parent / "fixtures" / "decoder"
MODEL_TYPES = ("qwen3", "gemma3_text")


def padded(lengths: tuple[int, ...], vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids and a right-padded mask of rows of `lengths` tokens."""
    ids = np.random.default_rng(0).integers(3, vocab, (len(lengths), max(lengths)))
    mask = (np.arange(max(lengths)) < np.array(lengths)[:, None]).astype(np.int64)
    return ids * mask, mask


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_the_numbers_do_not_depend_on_the_row_threads(model_type):
    """Sixteen rows (32 pairs of a sequence and a key/value head: shared between two row threads), and one row long
    enough that its two pairs are, on one row thread and on two: the same bits."""
    model = numbert.load(FIXTURES / model_type)
    vocab = model.encoder.config.vocab_size
    before = row_threads.count()
    try:
        for lengths in ((12,) * 16, (200,)):
            ids, mask = padded(lengths, vocab)
            runs = []
            for threads in (1, 2):
                row_threads.use(threads)
                runs.append(model.forward(ids, attention_mask=mask).hidden_states)
            assert np.array_equal(runs[0], runs[1])
    finally:
        row_threads.use(before)


def test_attention_gives_blas_threads_back():
    """Attention on two row threads holds BLAS to one thread while its pairs run; afterwards it has as many as
    before."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    model = numbert.load(FIXTURES / "qwen3")
    ids, mask = padded((12,) * 16, model.encoder.config.vocab_size)
    counts = lambda: [pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"]
    before, rows = counts(), row_threads.count()
    try:
        row_threads.use(2)
        model.forward(ids, attention_mask=mask)
    finally:
        row_threads.use(rows)
    assert counts() == before


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_stacked_products_keep_no_second_copy(model_type):
    """Weights in the process's own memory (as a bf16 checkpoint's, widened): each layer's queries, keys and values
    (and its gate and up) are views of one matrix, found by `stacked`, and so are the tensors by those names, the
    originals not kept beside it; the same numbers as unstacked within 1e-5, parity's bound (a wider product may sum
    in another order). Float32 weights mapped from the file stay the file's: a copy would hold them twice, and
    --workers processes would no longer share their pages."""
    mapped = numbert.load(FIXTURES / model_type).encoder
    for layer in mapped.layers:
        assert decoder.stacked((layer.query, layer.key, layer.value)) is None
        assert decoder.file_backed(layer.query.weight) and decoder.file_backed(layer.gate.weight)
    private = {name: np.array(tensor) for name, tensor in mapped.weights.items()}  # copies, as widened ones are
    encoder = decoder.DecoderEncoder(mapped.config, private)
    for i, layer in enumerate(encoder.layers):
        names = decoder_layer_names(encoder.config, i)
        for fields in (("query", "key", "value"), ("gate", "up")):
            whole = decoder.stacked(tuple(getattr(layer, field) for field in fields))
            assert whole is not None and not decoder.file_backed(whole.weight)
            assert len(whole.weight) == sum(len(getattr(layer, field).weight) for field in fields)
            assert all(encoder.weights[names[field] + ".weight"].base is whole.weight for field in fields)
        assert decoder.stacked((layer.key, layer.query, layer.value)) is None  # out of order: not one product
    ids, mask = padded((9, 5, 7), mapped.config.vocab_size)
    want = mapped.forward(ids, attention_mask=mask).hidden_states
    np.testing.assert_allclose(encoder.forward(ids, attention_mask=mask).hidden_states, want, rtol=0, atol=1e-5)
