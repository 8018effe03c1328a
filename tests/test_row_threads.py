"""Row threads (numbert.runtime.row_threads): the element-wise blocks of the forward shared among threads give the
same numbers, bit for bit, as one thread; numbert's own processes use as many as their BLAS threads (while
idle BLAS threads sleep), a user's process one unless it calls `row_threads.use(n)`."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_blas import run_python

import numbert
from numbert.runtime import blas, row_threads


@pytest.fixture
def restore_row_threads():
    before = row_threads.count()
    yield
    row_threads.use(before)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("rows, step", [(0, 4), (1, 4), (10, 4), (12, 4), (7, 100)])
def test_each_block_runs_once(restore_row_threads, threads, rows, step):
    row_threads.use(threads)
    seen, workers = [], set()
    lock = threading.Lock()

    def work(block: slice) -> None:
        with lock:
            seen.append((block.start, block.stop))
            workers.add(threading.current_thread().name)

    row_threads.each(work, rows, step)
    assert sorted(seen) == [(s, s + step) for s in range(0, rows, step)]
    assert len(workers) <= threads


def test_an_error_in_a_block_reaches_the_caller(restore_row_threads):
    row_threads.use(2)

    def work(block: slice) -> None:
        if block.start == 8:
            raise ValueError("block 8")

    with pytest.raises(ValueError, match="block 8"):
        row_threads.each(work, 12, 4)
    with pytest.raises(ValueError, match="row threads must be an integer >= 1"):
        row_threads.use(0)


def test_the_forward_is_the_same_on_any_number_of_row_threads(restore_row_threads, minilm, bert_base):
    rng = np.random.default_rng(0)
    for model, shape in ((minilm, (8, 40)), (bert_base, (2, 200))):
        ids = rng.integers(1000, 20000, shape)
        mask = np.ones(shape, np.int64)
        mask[1, shape[1] // 2 :] = 0  # padding: attention by groups, packed tokens
        outputs = []
        for threads in (1, 2):
            row_threads.use(threads)
            out = model.forward(ids, attention_mask=mask, output_attentions=True)
            outputs.append((out.hidden_states, out.attentions))
        for one, two in zip(*outputs):
            np.testing.assert_array_equal(one, two)


def test_threads_limits_blas_only(restore_row_threads):
    pytest.importorskip("threadpoolctl")
    row_threads.use(1)
    with numbert.threads(2):  # a user's process: its idle BLAS threads spin, row threads would only wait
        assert row_threads.count() == 1


def test_numberts_own_processes_use_their_blas_threads():
    assert blas.process_threads({"OPENBLAS_NUM_THREADS": "3"}) == 3
    assert blas.process_threads({"OPENBLAS_NUM_THREADS": "", "OMP_NUM_THREADS": "2"}) == 2
    assert blas.process_threads({}) == blas.cores()
    code = """if True:
        import os
        from numbert.runtime import blas, row_threads
        assert row_threads.count() == 1  # a user's process: one
        blas.configure_own_process()
        print(row_threads.count())
        if os.fork() == 0:  # a forked child has none of the pool's threads: it starts over with one
            os._exit(0 if row_threads.count() == 1 else 1)
        assert os.wait()[1] == 0
    """
    result = run_python(["-c", code], OPENBLAS_NUM_THREADS="2")
    assert result.returncode == 0 and result.stdout.strip() == "2", result.stderr
    spinning = run_python(["-c", code], OPENBLAS_NUM_THREADS="2", OPENBLAS_THREAD_TIMEOUT="28")
    assert spinning.stdout.strip() == "1", spinning.stderr  # idle BLAS threads spin: no row threads
