"""Row threads: the forward's element-wise phases (softmax, GELU, LayerNorm) on several cores.

GELU, softmax and LayerNorm treat each row (a token's vector, a query's scores) on its own, in blocks of
rows that stay in the CPU cache (numbert.model.layers), and NumPy lets go of Python's lock inside its loops: blocks
given to several Python threads run on several cores at once. The BLAS threads do the same for the matrix
products; between two products their cores would otherwise wait while one thread runs the element-wise passes.

    row_threads.use(2)                          # from now on, blocks on 2 threads (1: the caller's alone)
    row_threads.each(work, rows, step)          # work(slice) for every block of `step` rows

One thread unless asked: numbert's own processes (the command, the server, its workers) use as many as
they have BLAS threads while idle BLAS threads sleep (numbert.runtime.blas); in a user's process nothing starts
until `row_threads.use(n)`. The numbers never depend on the thread count: the blocks are the same on any number of
threads, and each is computed as it would be alone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

MIN_SHARE = 8  # blocks (2 MiB): a thread handed less costs about what it saves (bert-base 1x128, MiniLM corpus)
_threads = 1
_pool: ThreadPoolExecutor | None = None  # threads - 1 helpers: the calling thread takes a share too
_lock = threading.Lock()


def use(n: int) -> None:
    """Share element-wise blocks among `n` threads from now on (1: the calling thread does them all)."""
    global _threads, _pool
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"row threads must be an integer >= 1, got {n!r}")
    with _lock:
        if n == _threads:
            return
        old = _pool
        _pool = ThreadPoolExecutor(n - 1, thread_name_prefix="numbert-rows") if n > 1 else None
        _threads = n
    if old is not None:
        old.shutdown(wait=False)


def count() -> int:
    """The threads element-wise blocks are shared among."""
    return _threads


def shares(rows: int, step: int, least: int = MIN_SHARE) -> int:
    """How many threads `each` deals blocks of `step` of `rows` rows out to: 1 (the caller alone) up to `count`."""
    return max(1, min(_threads if _pool is not None else 1, len(range(0, rows, step)) // least))


def each(work: Callable[[slice], object], rows: int, step: int, least: int = MIN_SHARE) -> None:
    """work(slice(start, start + step)) for every block of `step` of `rows` rows. On several threads the
    blocks are dealt out in contiguous shares of at least `least` blocks (MIN_SHARE unless a block is much more
    work than a cache-sized one), one a thread, the calling thread taking the first; returns when all are done
    (raising the first error any raised)."""
    starts = range(0, rows, step)
    pool, shares = _pool, min(_threads, len(starts) // least)

    def run(part: range) -> None:
        for start in part:
            work(slice(start, start + step))

    if pool is None or shares < 2:
        run(starts)
        return
    bounds = [len(starts) * i // shares for i in range(shares + 1)]
    parts = [starts[bounds[i] : bounds[i + 1]] for i in range(shares)]
    helpers = [pool.submit(run, part) for part in parts[1:]]
    try:
        run(parts[0])
    finally:
        for helper in helpers:
            helper.result()


def _forget_after_fork() -> None:
    """A forked child has none of its parent's threads: it starts over with one (its owner may call use)."""
    global _threads, _pool, _lock
    _threads, _pool, _lock = 1, None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
