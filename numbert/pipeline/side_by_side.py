"""Batches side by side: a corpus's planned batches run several at once, each on a thread with one BLAS thread.

Between two matrix products a forward runs its element-wise passes (GELU, softmax, LayerNorm, the bias adds):
one NumPy loop each, on one core, while the BLAS threads that shared the product wait. Two batches on two Python
threads (NumPy and BLAS let go of Python's lock) keep both cores busy through both kinds of work, without worker
processes, pickling or a second copy of the weights:

    for answer in in_order(work, batches, threads=2):   # work(batch) for each, two at a time, answers in order
        ...

Each batch runs as it would alone on one BLAS thread (the same plan, the same shapes, the same blocks), so the
answers are those of a one-BLAS-thread run, bit for bit (docs/architecture.md's numeric contract). BLAS is held
to one thread (threadpoolctl) and the row threads (numbert.model.row_threads) to one while batches run side by
side, and given back after. Who runs side by side is numbert.model.blas.side_by_side's rule: numbert's own
processes, and a user's process after `numbert.threads(n)`. The BLAS limit is the process's: a program that calls
`embed` from several threads of its own at once should keep them at one BLAS thread each (`numbert.threads(1)`, the
rule of docs/usage.md's Threads), which runs each call's batches one after the other.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from ..model import row_threads

T = TypeVar("T")
R = TypeVar("R")


def in_order(work: Callable[[T], R], items: Iterable[T], threads: int) -> Iterator[R]:
    """work(item) for each item, `threads` at a time on threads of their own with one BLAS thread each, the
    results in the items' order; one after the other on the calling thread if threads is 1. Items are taken from
    `items` as threads free up (one ahead), so a lazy plan is tokenized as it runs."""
    if threads == 1:
        yield from map(work, items)
        return
    limits = one_blas_thread()
    rows = row_threads.count()
    with limits, ThreadPoolExecutor(threads, thread_name_prefix="numbert-batch") as pool:
        row_threads.use(1)
        pending: deque[Future[R]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(work, item))
                if len(pending) > threads:  # all busy and one waiting: hand back the oldest
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
            row_threads.use(rows)


def one_blas_thread() -> contextlib.AbstractContextManager:
    """threadpoolctl's limit of BLAS to one thread in this process (undone when the block ends). Imported here:
    threadpoolctl sets KMP_DUPLICATE_LIB_OK when it loads, and `import numbert` changes nothing."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    return threadpool_limits(limits=1, user_api="blas")
