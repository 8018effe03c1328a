"""Run the element-wise work of a layer on every core, in cache-sized blocks.

BLAS spreads each matmul over the cores, but a NumPy ufunc (exp, multiply, ...) runs on one. Outside
the matmuls, a BERT layer's work is GELU over (tokens, 3072) and softmax over (batch, heads, seq, seq):
functions of each row on its own, made of many passes over the array. `by_rows` cuts such an array
into blocks of rows small enough to stay in the CPU cache for all the passes, and runs the blocks in
a thread pool; ufuncs release the GIL, so the threads truly run in parallel.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

BLOCK_BYTES = 1 << 20  # a block and its temporaries stay in the 1-2 MiB L2 cache; fewer, larger blocks keep GIL hand-offs rare


def num_threads() -> int:
    """The thread count BLAS uses too: OMP_NUM_THREADS or OPENBLAS_NUM_THREADS if the user set one,
    else the CPUs this process may run on."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@functools.cache
def _pool(pid: int, threads: int) -> ThreadPoolExecutor:
    """One pool per process (keyed by pid: a forked child cannot use its parent's threads)."""
    return ThreadPoolExecutor(threads, thread_name_prefix="numbert")


def by_rows(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """f(x) for an f that treats each row (last axis) on its own, such as GELU or softmax.

    (..., n) -> (..., n), float32. The result is written over x (no new array to allocate: the
    inputs here are temporaries) and returned.
    """
    x = np.ascontiguousarray(x)
    rows = x.reshape(-1, x.shape[-1])
    step = max(1, BLOCK_BYTES // rows[0].nbytes)
    blocks = [slice(i, i + step) for i in range(0, len(rows), step)]

    def run(block: slice) -> None:
        rows[block] = f(rows[block])  # NumPy skips the copy when f worked in place (softmax)

    threads = num_threads()
    if threads == 1 or len(blocks) == 1:
        for block in blocks:
            run(block)
    else:
        for _ in _pool(os.getpid(), threads).map(run, blocks):
            pass
    return x
