"""by_rows gives exactly what the function gives on the whole array, on any number of threads, written over its input."""

import os

import numpy as np
import pytest

from numbert import layers, parallel


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("shape", [(1, 5), (7, 3072), (300, 3072), (2, 12, 128, 128)])
def test_by_rows_equals_the_whole_array_result(monkeypatch, threads, shape):
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    expected = layers.gelu(x)
    work = x.copy()
    got = parallel.by_rows(layers.gelu, work)
    np.testing.assert_array_equal(got, expected)
    assert got is work  # written over the input, no new array
    np.testing.assert_array_equal(parallel.by_rows(layers.softmax, x.copy()), layers.softmax(x.copy()))


def test_by_rows_on_a_non_contiguous_array():
    x = np.random.default_rng(2).standard_normal((40, 3072), dtype=np.float32)
    np.testing.assert_array_equal(parallel.by_rows(layers.gelu, x.T.copy().T), layers.gelu(x))


def test_thread_count_follows_the_users_variables(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert parallel.num_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert parallel.num_threads() == 1
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    assert parallel.num_threads() == len(os.sched_getaffinity(0))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_its_own_pool(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    x = np.random.default_rng(1).standard_normal((400, 3072), dtype=np.float32)
    expected = layers.gelu(x)
    parallel.by_rows(layers.gelu, x.copy())  # the parent's pool exists before the fork
    pid = os.fork()
    if pid == 0:
        os._exit(0 if np.array_equal(parallel.by_rows(layers.gelu, x.copy()), expected) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
