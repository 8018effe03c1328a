"""Dynamic batching: admitted requests wait in a queue, and one model thread runs them a token budget at a time.

Each step takes the oldest waiting input together with neighbours by length (the waiting inputs
sorted longest first, as `Bert.batches` sorts a corpus), as many as make the forward cheapest per
real token within `max_batch_tokens` padded tokens and `max_batch_size` rows; it runs one forward,
pools each row with the model's sentence recipe (Dense layers included) and hands each request its
rows; a request is answered when its last row is done. Taking the oldest input first means no request
waits behind a stream of later ones; taking its neighbours by length keeps the padding small. The
event loop only enqueues and awaits: NumPy and BLAS run here, in the model thread.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..model import Output
from .metrics import Metrics

log = logging.getLogger("numbert.serve")
FORWARD_OVERHEAD = 32  # a forward's fixed cost, in padded tokens (all-MiniLM-L6-v2 on 2 cores: about 24)


@dataclass(eq=False)
class Job:
    """One request's inputs and, as the batches finish, their sentence vectors."""

    rows: list[np.ndarray]  # token ids per input, [CLS] ... [SEP], int32 (seq,)
    vectors: np.ndarray  # (inputs, dim) float32, pooled and not yet normalized
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    remaining: int = field(init=False)
    failed: bool = False

    def __post_init__(self) -> None:
        self.remaining = len(self.rows)


class Item(NamedTuple):
    """One input waiting for the model."""

    arrival: int  # order of arrival over the server's life: the oldest waiting input goes first
    length: int  # tokens
    job: Job
    position: int  # the input's index in its request


def next_batch(waiting: Sequence[Item], max_tokens: int, max_rows: int) -> list[Item]:
    """The oldest waiting input with the neighbours by length that make its forward cheapest per real token.

    The waiting inputs are sorted longest first (as `Bert.batches` sorts a corpus) and a batch is a run
    of them, padded to its first (longest) input: a forward costs FORWARD_OVERHEAD + rows x width.
    Of the runs holding the oldest input, within max_rows and max_tokens (rows x width), the one with
    the least cost per real token goes: inputs of like length, as many as keep the padding worth it.
    """
    order = sorted(waiting, key=lambda item: (-item.length, item.arrival))
    lengths = [item.length for item in order]
    k = min(range(len(order)), key=lambda i: order[i].arrival)
    best, best_cost = (k, k + 1), float("inf")
    for a in range(max(0, k - max_rows + 1), k + 1):
        width, real = lengths[a], sum(lengths[a:k])
        for b in range(k + 1, min(len(order), a + max_rows) + 1):
            real += lengths[b - 1]
            if (b - a) * width > max_tokens:
                break
            cost = (FORWARD_OVERHEAD + (b - a) * width) / real
            if cost < best_cost:
                best, best_cost = (a, b), cost
    return order[best[0] : best[1]]


class Batcher:
    """The queue of admitted inputs and the one thread that runs the model on them.

    `submit` (on the event loop) enqueues a request's token ids and returns a future of its
    (inputs, dim) pooled vectors; `stop` lets the thread finish everything queued, then end.
    """

    def __init__(
        self,
        model,
        sentence_vectors: Callable[[Output], np.ndarray],
        dim: int,
        max_batch_tokens: int,
        max_batch_size: int,
        metrics: Metrics,
    ):
        self.model = model
        self.sentence_vectors = sentence_vectors  # a forward's Output -> (rows, dim) pooled vectors
        self.dim = dim
        self.max_batch_tokens, self.max_batch_size = max_batch_tokens, max_batch_size
        self.metrics = metrics
        self.pad_id = model.config.pad_token_id
        self.inbox: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None

    def start(self, warm_up: Callable[[], None]) -> None:
        """Start the model thread: `warm_up` first (a forward that maps the weights' pages in), with requests
        queueing behind it, so that the server is ready before its first forward is done."""
        self.thread = threading.Thread(target=self.run, args=(warm_up,), name="numbert-model", daemon=True)
        self.thread.start()

    def submit(self, rows: list[np.ndarray]) -> asyncio.Future:
        """Queue one request's inputs; the future gets their (inputs, dim) float32 vectors."""
        loop = asyncio.get_running_loop()
        job = Job(rows, np.empty((len(rows), self.dim), np.float32), loop.create_future(), loop)
        self.metrics.queued(len(rows))
        self.inbox.put(job)
        return job.future

    def stop(self) -> None:
        """Finish the queued work, then end the thread (blocks until it has)."""
        self.inbox.put(None)
        if self.thread is not None:
            self.thread.join()

    def run(self, warm_up: Callable[[], None]) -> None:
        warm_up()
        waiting: list[Item] = []
        arrivals = itertools.count()
        stopping = False
        while not stopping or waiting:
            try:
                job = self.inbox.get(block=not waiting)
                while True:  # take everything that has arrived
                    if job is None:
                        stopping = True
                    else:
                        waiting += [Item(next(arrivals), len(r), job, i) for i, r in enumerate(job.rows)]
                    job = self.inbox.get_nowait()
            except queue.Empty:
                pass
            if waiting:
                batch = next_batch(waiting, self.max_batch_tokens, self.max_batch_size)
                taken = {id(item) for item in batch}
                waiting = [item for item in waiting if id(item) not in taken]
                self.run_batch(batch)

    def run_batch(self, batch: list[Item]) -> None:
        """One forward over the batch, right-padded to its longest input; each row goes to its request."""
        width = max(item.length for item in batch)
        ids = np.full((len(batch), width), self.pad_id, np.int64)  # (rows, width)
        mask = np.zeros((len(batch), width), np.int64)
        for r, item in enumerate(batch):
            ids[r, : item.length] = item.job.rows[item.position]
            mask[r, : item.length] = 1
        try:
            vectors = self.sentence_vectors(self.model.forward(ids, None, mask))  # (rows, dim)
        except Exception as e:  # a bug, not a bad request (those are refused before they queue): answer 500
            log.exception("the forward pass failed on a batch of %d x %d tokens", len(batch), width)
            for item in batch:
                if not item.job.failed:
                    item.job.failed = True
                    item.job.loop.call_soon_threadsafe(_settle, item.job.future, None, e)
        self.metrics.ran_batch(len(batch), len(batch) * width)
        for r, item in enumerate(batch):
            job = item.job
            if job.failed:  # its other inputs still run, and are dropped here
                continue
            job.vectors[item.position] = vectors[r]
            job.remaining -= 1
            if job.remaining == 0:
                job.loop.call_soon_threadsafe(_settle, job.future, job.vectors, None)


def _settle(future: asyncio.Future, result, error: BaseException | None) -> None:
    """Resolve a request's future on its event loop (unless the request has gone)."""
    if future.done():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
