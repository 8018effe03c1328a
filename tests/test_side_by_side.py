"""Batches side by side (numbert.runtime.side_by_side): a corpus's planned batches two at a time on two threads of
one BLAS thread each give the bits of a one-BLAS-thread run of the same plan, in the same order; the settings are
given back after; `numbert.threads(n)` asks for it in a user's process and its block undoes it."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import numbert
from numbert.runtime import blas, row_threads
from numbert.runtime.side_by_side import OneThreadEach, in_order

TEXTS = [f"sentence {i} " + "word " * (i % 23) for i in range(90)]


def blas_threads() -> set[int]:
    return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}


@pytest.fixture
def side_by_side():
    """Restores the process's batches side by side after the test."""
    before = blas.batches_at_once()
    yield blas.use_side_by_side
    blas.use_side_by_side(before)


def test_side_by_side_gives_the_bits_of_one_blas_thread(minilm, side_by_side, monkeypatch):
    ran_on = set()
    run = minilm.runner.run

    def recorded(*args, **kwargs):
        ran_on.add(threading.current_thread().name)
        return run(*args, **kwargs)

    with threadpool_limits(1, user_api="blas"):
        side_by_side(1)
        one = minilm.embed(TEXTS, batch_size=8, progress=False)
        cls = minilm.embed(TEXTS, batch_size=8, progress=False, pooling="cls")  # the one_token="first" forward too
    side_by_side(2)
    monkeypatch.setattr(minilm.runner, "run", recorded)
    rows = row_threads.count()
    before = blas_threads()
    two = minilm.embed(TEXTS, batch_size=8, progress=False)
    assert np.array_equal(two, one)
    assert np.array_equal(minilm.embed(TEXTS, batch_size=8, progress=False, pooling="cls"), cls)
    assert len(ran_on) == 2 and all(name.startswith("numbert-batch") for name in ran_on)
    assert blas_threads() == before and row_threads.count() == rows  # given back
    ran_on.clear()
    minilm.embed(TEXTS[:8], batch_size=8, progress=False)  # one batch: run here, with the process's BLAS threads
    assert ran_on == {threading.current_thread().name}


def test_in_order_keeps_the_order_and_raises_what_a_batch_raised():
    def slow_first(i: int) -> int:
        time.sleep(0.02 if i % 3 == 0 else 0)
        if i == 7:
            raise ValueError("batch 7")
        return i * i

    assert list(in_order(slow_first, range(7), threads=2)) == [i * i for i in range(7)]
    assert list(in_order(slow_first, range(7), threads=1)) == [i * i for i in range(7)]
    with pytest.raises(ValueError, match="batch 7"):
        list(in_order(slow_first, range(10), threads=2))


def test_threads_asks_for_batches_side_by_side_within_its_block(side_by_side):
    side_by_side(1)
    with numbert.threads(2):
        assert blas.batches_at_once() == 2
    assert blas.batches_at_once() == 1


def test_a_hold_on_another_thread_holds_blas_after_threads_on_this_one(side_by_side):
    """threadpoolctl (3.8 on) lets one thread set OpenBLAS's process-wide threads (the first to set them, until a
    `with` block of its ends) and drops other threads' settings without a word. After `numbert.threads(2)` here,
    plain (the server's own_process_threads) or as a block, a hold made and released on another thread (a server's
    lanes, on its queue's thread) holds BLAS to one thread and gives back two, and so does a hold made here and
    released on another thread (a generator closed by the collector): numbert hands control back after each setting
    (the order of tests that once left BLAS at two threads inside the lanes of tests/test_planner.py)."""
    seen: list[set[int]] = []

    def hold_and_release() -> None:
        held = OneThreadEach()
        seen.append(blas_threads())
        held.release()
        seen.append(blas_threads())

    def on_another_thread(work) -> None:
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()

    before = blas_threads()
    outer = numbert.threads(2)
    try:
        on_another_thread(hold_and_release)
        with numbert.threads(2):
            pass
        on_another_thread(hold_and_release)
        held = OneThreadEach()
        seen.append(blas_threads())
        on_another_thread(held.release)
        seen.append(blas_threads())
    finally:
        outer.restore_original_limits()
    assert seen == [{1}, {2}] * 3
    assert blas_threads() == before


def test_rerank_side_by_side_gives_the_bits_of_one_blas_thread(side_by_side):
    from pathlib import Path

    model = numbert.load(Path(__file__).parent / "fixtures" / "cross_encoder")
    pairs = [(f"question {i}", "an answer " * (i % 9)) for i in range(40)]
    with threadpool_limits(1, user_api="blas"):
        side_by_side(1)
        one = model.predict(pairs, batch_size=4)
    side_by_side(2)
    assert np.array_equal(model.predict(pairs, batch_size=4), one)


def test_nothing_asked_runs_side_by_side_as_threads_does(minilm, side_by_side, monkeypatch):
    """The fast path without asking: `embed` of several batches in a process of 2 BLAS threads runs them side by
    side, the bits of `numbert.threads(2)`'s path, and the BLAS limits after the call are those before it;
    `numbert.threads(1)` keeps one batch after the other."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")  # what blas.process_threads reads: this process's BLAS threads
    with numbert.threads(2):
        asked = minilm.embed(TEXTS, batch_size=8, progress=False)
    side_by_side(None)
    assert blas.batches_at_once() == 2
    before = blas_threads()
    assert np.array_equal(minilm.embed(TEXTS, batch_size=8, progress=False), asked)
    assert blas_threads() == before
    with numbert.threads(1):
        assert blas.batches_at_once() == 1
    assert blas.batches_at_once() == 2


@pytest.mark.parametrize("kind", ["sparse", "multi", "m3"])
def test_the_other_corpus_calls_run_side_by_side_with_the_bits_of_one_blas_thread(
    kind, side_by_side, tmp_path, vocab_path
):
    """embed_sparse, embed_multi and embed_m3 plan their batches as embed does and run them side by side too."""
    from pathlib import Path

    from numbert.testing import write_random_splade

    fixtures = Path(__file__).parent / "fixtures"
    if kind == "sparse":
        from test_sparse import small_config

        model = numbert.load(write_random_splade(tmp_path, vocab_path, small_config()))
        call = lambda: [(v.ids, v.weights) for v in model.embed_sparse(TEXTS[:40], batch_size=4)]  # noqa: E731
    elif kind == "multi":
        model = numbert.load(fixtures / "colbert_pylate")
        call = lambda: model.embed_multi(TEXTS[:40], batch_size=4)  # noqa: E731
    else:
        model = numbert.load(fixtures / "bge_m3")
        call = lambda: [v for e in model.embed_m3(TEXTS[:40], batch_size=4) for v in e]  # noqa: E731
    with threadpool_limits(1, user_api="blas"):
        side_by_side(1)
        one = call()
    side_by_side(2)
    two = call()
    flat = lambda xs: [a for x in xs for a in (x if isinstance(x, tuple) else (x,))]  # noqa: E731
    assert all(np.array_equal(a, b) for a, b in zip(flat(two), flat(one), strict=True))


def test_a_hold_made_on_another_thread_takes_effect_after_threads(side_by_side):
    """threadpoolctl (3.8 on) lets only the thread that last set a pthreads OpenBLAS's limit set it again, and
    silently ignores the others: after `numbert.threads(n)` on the main thread, a server's model thread could not
    hold its lanes to one BLAS thread each (they ran with every thread, side by side). numbert hands the control
    back around each change."""
    from numbert.runtime.side_by_side import OneThreadEach

    with numbert.threads(2):
        pass
    limiter = numbert.threads(2)  # a plain call: the main thread set the limit last
    seen: list[set[int]] = []

    def hold_elsewhere() -> None:
        held = OneThreadEach()
        seen.append(blas_threads())
        held.release()
        seen.append(blas_threads())

    try:
        thread = threading.Thread(target=hold_elsewhere)
        thread.start()
        thread.join()
    finally:
        limiter.restore_original_limits()
    assert seen == [{1}, {2}], seen
