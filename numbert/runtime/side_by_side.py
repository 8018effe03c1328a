"""Batches side by side: a corpus's planned batches run several at once, each on a thread with one BLAS thread.

Between two matrix products a forward runs its element-wise passes (GELU, softmax, LayerNorm, the bias adds):
one NumPy loop each, on one core, while the BLAS threads that shared the product wait. Two batches on two Python
threads (NumPy and BLAS let go of Python's lock) keep both cores busy through both kinds of work, without worker
processes, pickling or a second copy of the weights:

    for answer in in_order(work, batches, threads=2):   # work(batch) for each, two at a time, answers in order
        ...

Each batch runs as it would alone on one BLAS thread (the same plan, the same shapes, the same blocks), so the
answers are those of a one-BLAS-thread run, bit for bit (docs/house.md's numeric contract). BLAS is held
to one thread (threadpoolctl) and the row threads (numbert.runtime.row_threads) to one while batches run side by
side, and given back after. Who runs side by side is numbert.runtime.blas.batches_at_once's rule: numbert's own
processes, and a user's process after `numbert.threads(n)`. The BLAS limit is the process's: a program that calls
`embed` from several threads of its own at once should keep them at one BLAS thread each (`numbert.threads(1)`, the
rule of docs/usage.md's Threads), which runs each call's batches one after the other.

A server's queue has no plan ahead of time: its batches come as requests arrive. `Lanes` runs them as they come,
up to n at once: a batch with nothing beside it and nothing queued behind it runs alone with the process's BLAS and
row threads (a lone request is as fast as it was), and while two or more are in hand each runs with one of each.
The threads change only while no batch runs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from . import row_threads
from .blas import blas_controller, let_go_of_blas

T = TypeVar("T")
R = TypeVar("R")


def in_order(work: Callable[[T], R], items: Iterable[T], threads: int) -> Iterator[R]:
    """work(item) for each item, `threads` at a time on threads of their own with one BLAS thread each, the
    results in the items' order; one after the other on the calling thread if threads is 1. Items are taken from
    `items` as threads free up (one ahead), so a lazy plan is tokenized as it runs."""
    if threads == 1:
        yield from map(work, items)
        return
    held = OneThreadEach()
    try:
        with ThreadPoolExecutor(threads, thread_name_prefix="numbert-batch") as pool:
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
    finally:
        held.release()


class Lanes:
    """Batches side by side as a queue hands them out (numbert.pipeline.batcher): up to `n` at once, each on a lane
    (a thread of its own). Driven by one thread (the queue's), which calls `start` when `free` and `done` when a
    lane reports its batch finished.

    A batch started with no other running and none `waiting` runs alone, with the process's BLAS and row threads,
    and no other starts until it is done (short rows may run inside it, at its points: the Batcher's turns);
    otherwise each batch runs with one BLAS thread and one row thread, so that two of them use both cores through
    the element-wise work as well as the products. The switch between the two happens only while no batch runs
    (BLAS's thread count is the process's)."""

    def __init__(self, n: int):
        self.n = n
        self.pool = ThreadPoolExecutor(n, thread_name_prefix="numbert-lane")
        self.running = 0
        self.alone = False  # the running batch has the process's threads to itself
        self.held: OneThreadEach | None = None  # while batches run side by side

    def free(self) -> bool:
        """Whether a batch may start now."""
        return self.running < self.n and not self.alone

    def alone_if(self, waiting: bool) -> bool:
        """Whether a batch started now would run alone: nothing runs and nothing else is `waiting`, or one lane is
        all there is."""
        return self.n == 1 or (self.running == 0 and not waiting)

    def start(self, work: Callable[[], object], waiting: bool) -> None:
        """work() on a free lane: alone if nothing runs and nothing else is `waiting` (or one lane is all there
        is), else side by side with one BLAS thread."""
        assert self.free()
        alone = self.alone_if(waiting)
        if alone and self.held is not None:
            self.held.release()
            self.held = None
        elif not alone and self.held is None:
            self.held = OneThreadEach()
        self.alone = alone
        self.running += 1
        self.pool.submit(work)

    def done(self) -> None:
        """A lane's batch has finished (its work has returned)."""
        self.running -= 1
        self.alone = False

    def close(self) -> None:
        """Wait for the running batches, then give the process its BLAS and row threads back."""
        self.pool.shutdown(wait=True)
        if self.held is not None:
            self.held.release()
            self.held = None


class OneThreadEach:
    """BLAS held to one thread and the element-wise work to one row thread in this process, while batches run
    side by side; `release` gives the process back what it had (through the process's one kept controller).
    Either may run on any thread: each hands threadpoolctl's control of BLAS back (numbert.runtime.blas's controlling
    thread), so a hold made on a lane's queue thread takes effect after `numbert.threads(n)` on another thread."""

    def __init__(self) -> None:
        self.limits = blas_controller().limit(limits=1, user_api="blas")
        let_go_of_blas()
        self.rows = row_threads.count()
        row_threads.use(1)

    def release(self) -> None:
        self.limits.restore_original_limits()
        let_go_of_blas()
        row_threads.use(self.rows)
