"""Dynamic batching: admitted requests wait in a queue, and one model thread runs them a token budget at a time.

A request queues its rows (token ids, and token type ids for a pair) with the readout that turns a
forward into its answers (numbert.pipeline.readouts: sentence vectors, classifier logits, ...). Each step takes
the oldest waiting row and, among the rows waiting for the same readout, the neighbours by length that
make the forward cheapest per real token (numbert.pipeline.planner.next_batch), within `max_batch_tokens` padded
tokens and `max_batch_size` rows; it runs one forward (Pipeline.forward_rows), reads each row's answer
off it and hands each request its rows' answers; a request is answered when its last row is done.
Taking the oldest row first means no request waits behind a stream of later ones; taking its neighbours
by length keeps the padding small. A request whose client has gone (its future cancelled) is dropped
before its rows run. The event loop only enqueues and awaits; the model thread plans, and the batches run on
its lanes (numbert.runtime.side_by_side.Lanes): in numbert's own processes two at a time, each with one BLAS
thread, while more than one batch is in hand, and a batch alone with the process's threads when it is all there is.

Turns keep a long request from holding the short ones behind it. A batch of more than GIVE_WAY_TOKENS padded
tokens is long; while one runs and no lane is free, the model thread offers the oldest short rows (of at most
TURN_TOKENS tokens, a batch of at most TURN_TOKENS padded tokens) as a turn, and the first long batch that reaches a
point of its forward (numbert.model.turns: before each weight product, each block of attention) after running
GIVE_WAY_AFTER seconds takes it and runs it there, on its own lane, to the end: the short answers go out, then the
long forward goes on. A short request thus waits about one step of a long forward (a product or a block of
attention, well under a second), not the whole of it; a long batch takes one turn a point, so it moves on however
many short ones come. Without a long batch running, nothing of this happens: batches are planned as before.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from ..model import turns
from ..model.encoder import Output
from ..runtime.side_by_side import Lanes
from .planner import Row, next_batch

log = logging.getLogger(__name__)

GIVE_WAY_AFTER = 0.25  # seconds a lane's batch runs before its points take turns (short batches never do)
GIVE_WAY_TOKENS = 4096  # a batch gives way only past this many padded tokens (8 turns; 32 short sentences are fewer)
TURN_TOKENS = 512  # a turn's rows hold at most this many tokens, and it at most this many padded tokens


class Counters(Protocol):
    """What a Batcher reports as it goes (numbert.serve.metrics.Metrics counts it for /metrics)."""

    def queued(self, inputs: int) -> None: ...

    def dropped(self, inputs: int) -> None: ...

    def ran_batch(self, inputs: int, padded_tokens: int) -> None: ...


class Readout(Protocol):
    """What a forward's rows become for one task (numbert.pipeline.readouts): one answer per row (an array, or a
    task's tuple of them)."""

    @property
    def task(self) -> str | None: ...  # the task adapters the rows run through (jina-embeddings-v3), or None

    @property
    def one_token(self) -> str | None: ...  # the one token a row it reads ("first", "last"), or None

    @property
    def last_layers(self) -> int | None: ...  # how many of the last hidden states it reads (None: every one)

    def __call__(self, out: Output) -> list: ...


class Elsewhere(Protocol):
    """Forwards run outside this process (numbert.serve.lanes: a lane process for each lane, off this process's
    Python lock): a side-by-side batch's answers, the same bits as a lane's, or None to run it on the lane."""

    def open(self) -> None: ...  # start, once the model thread's warm-up is done (in the background)

    def answers(self, rows: list[Row], readout: Readout) -> list | None: ...

    def close(self) -> None: ...


class Forward(Protocol):
    """One forward over rows (Pipeline.forward_rows): through `task`'s adapters, the last layer for one token a
    row if `one_token` ("first", "last"), keeping the `last_layers` hidden states alone if given."""

    def __call__(
        self, rows: list[Row], task: str | None = None, *, one_token: str | None = None, last_layers: int | None = None
    ) -> Output: ...


@dataclass(eq=False)
class Job:
    """One request's rows, the readout they wait for and, as the batches finish, their answers."""

    rows: list[Row]
    readout: Readout
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    forwards: list | None = None  # when traced: (start, end, rows, padded tokens) of each batch its rows ran in
    answers: list = field(init=False)  # one per row, filled as its batch runs
    remaining: int = field(init=False)
    failed: bool = False

    def __post_init__(self) -> None:
        self.answers = [None] * len(self.rows)
        self.remaining = len(self.rows)

    @property
    def gone(self) -> bool:
        """Whether nobody waits for the answer any more: the request was cancelled (its client left) or failed."""
        return self.failed or self.future.cancelled()


class Item(NamedTuple):
    """One row waiting for the model."""

    arrival: int  # order of arrival over the server's life: the oldest waiting row goes first
    length: int  # tokens
    job: Job
    position: int  # the row's index in its request


class Done(NamedTuple):
    """A lane's word to the model thread: its batch has run."""

    long: bool  # it was a batch that gives way (`gives_way`)


class Taken(NamedTuple):
    """A lane's word to the model thread: a running batch has taken the turn on offer (offer the next)."""


TAKEN = Taken()


class Turn:
    """The short batch on offer to the running ones while no lane is free: the first to reach a point of its forward
    takes it (`take`, on its lane); the model thread withdraws it when it plans afresh."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.offered: tuple[list[Item], Readout] | None = None

    def offer(self, batch: list[Item], readout: Readout) -> None:
        with self.lock:
            self.offered = (batch, readout)

    def take(self) -> tuple[list[Item], Readout] | None:
        """The batch on offer and its readout, now no longer on offer; None if there is none."""
        with self.lock:
            taken, self.offered = self.offered, None
        return taken

    def withdraw(self) -> list[Item]:
        """The rows on offer, if no running batch has taken them."""
        taken = self.take()
        return [] if taken is None else taken[0]


class Batcher:
    """The queue of admitted rows and the model thread that plans their batches and runs them on its lanes.

    `submit` (on the event loop) enqueues a request's rows and returns a future of their answers;
    `stop` lets the thread finish everything queued, then end. `lanes`: batches that may run at once
    (numbert.runtime.blas.batches_at_once() in numbert's own processes).
    """

    def __init__(
        self,
        forward: Forward,
        max_batch_tokens: int,
        max_batch_size: int,
        metrics: Counters,
        lanes: int = 1,
        give_way_after: float = GIVE_WAY_AFTER,
        elsewhere: Elsewhere | None = None,
    ):
        self.forward = forward  # rows, task -> one forward's Output (Pipeline.forward_rows)
        self.max_batch_tokens, self.max_batch_size = max_batch_tokens, max_batch_size
        self.metrics = metrics
        self.lanes = lanes
        self.give_way_after = give_way_after
        self.elsewhere = elsewhere  # where side-by-side batches may run instead of on their lanes (None: nowhere)
        self.inbox: queue.SimpleQueue[Job | Done | Taken | None] = queue.SimpleQueue()  # None: stop
        self.turn = Turn()
        self.answering = threading.Lock()  # lanes hand answers to the same request one at a time
        self.thread: threading.Thread | None = None

    def start(self, warm_up: Callable[[], None]) -> None:
        """Start the model thread: `warm_up` first (a forward that maps the weights' pages in), with requests
        queueing behind it, so that the server is ready before its first forward is done."""
        self.thread = threading.Thread(target=self.run, args=(warm_up,), name="numbert-model", daemon=True)
        self.thread.start()

    def submit(self, rows: list[Row], readout: Readout, forwards: list | None = None) -> asyncio.Future:
        """Queue one request's rows; the future gets their answers, one per row, in order. `forwards`, if given,
        gets the times of the forwards its rows run in (numbert.serve.tracing)."""
        loop = asyncio.get_running_loop()
        job = Job(rows, readout, loop.create_future(), loop, forwards)
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
        if self.elsewhere is not None:
            self.elsewhere.open()
        lanes = Lanes(self.lanes)
        waiting: list[Item] = []
        arrivals = itertools.count()
        stopping = False
        long_running = 0  # batches running that give way: while none does, no turn is offered
        try:
            while not stopping or waiting or lanes.running:
                try:  # wait for work only if none can start now
                    message = self.inbox.get(block=not (waiting and lanes.free()))
                    while True:  # take everything that has arrived
                        if message is None:
                            stopping = True
                        elif isinstance(message, Done):
                            lanes.done()
                            long_running -= message.long
                        elif isinstance(message, Job):
                            rows = enumerate(message.rows)
                            waiting += [Item(next(arrivals), len(r.ids), message, i) for i, r in rows]
                        message = self.inbox.get_nowait()  # (Taken: the next turn is offered below)
                except queue.Empty:
                    pass
                waiting += self.turn.withdraw()  # planned afresh with the rest
                gone = [item for item in waiting if item.job.gone]
                if gone:
                    self.metrics.dropped(len(gone))
                    waiting = [item for item in waiting if not item.job.gone]
                while waiting and lanes.free():
                    oldest = min(waiting, key=lambda item: item.arrival)
                    same_task = [item for item in waiting if item.job.readout is oldest.job.readout]
                    batch = next_batch(same_task, self.max_batch_tokens, self.max_batch_size)
                    taken = {id(item) for item in batch}
                    waiting = [item for item in waiting if id(item) not in taken]
                    away = not lanes.alone_if(waiting=bool(waiting))  # side by side: may run elsewhere
                    work = functools.partial(self.run_batch, batch, oldest.job.readout, away=away)
                    lanes.start(work, waiting=bool(waiting))
                    long_running += gives_way(batch)
                if waiting and not lanes.free() and long_running:  # short rows wait for a long batch's next point
                    waiting = self.offer_turn(waiting)
        finally:
            lanes.close()
            if self.elsewhere is not None:
                self.elsewhere.close()

    def offer_turn(self, waiting: list[Item]) -> list[Item]:
        """Offer the oldest short rows as a turn (with the neighbours by length that make it cheapest, within
        TURN_TOKENS padded tokens); -> the rows still waiting."""
        short = [item for item in waiting if item.length <= TURN_TOKENS]
        if not short:
            return waiting
        oldest = min(short, key=lambda item: item.arrival)
        same_task = [item for item in short if item.job.readout is oldest.job.readout]
        batch = next_batch(same_task, min(TURN_TOKENS, self.max_batch_tokens), self.max_batch_size)
        self.turn.offer(batch, oldest.job.readout)
        taken = {id(item) for item in batch}
        return [item for item in waiting if id(item) not in taken]

    def give_way(self, started: float) -> None:
        """At a point of a lane's forward (numbert.model.turns) that has run give_way_after seconds since `started`:
        the turn on offer, if any, runs here to its end, answers and all."""
        if time.monotonic() - started < self.give_way_after:
            return
        taken = self.turn.take()
        if taken is not None:
            self.inbox.put(TAKEN)  # the model thread offers the next
            self.run_batch(*taken, lane=False)

    def run_batch(self, batch: list[Item], readout: Readout, lane: bool = True, away: bool = False) -> None:
        """A lane's work (or, not `lane`, a turn's at a point of it): one forward over the batch, right-padded to its
        longest row, then each row's answer to its request. A lane's long forward (more than GIVE_WAY_TOKENS padded
        tokens) gives way at its points (`give_way`); a short one running side by side (`away`) runs `elsewhere` if
        it takes it.
        The model thread hears that the lane is free as soon as the forward is done, before the answers go out, so
        that a request sent on an answer finds it free (and a lone one runs alone)."""
        width = max(item.length for item in batch)
        start = time.time_ns()
        long = lane and gives_way(batch)
        taking_turns = turns.giving_way(functools.partial(self.give_way, time.monotonic())) if long else nullcontext()
        answers: list = []  # one per row (none if the batch failed)
        try:
            rows = [item.job.rows[item.position] for item in batch]
            away_answers = self.elsewhere.answers(rows, readout) if away and not long and self.elsewhere else None
            if away_answers is not None:
                answers = away_answers
            else:
                with taking_turns:
                    out = self.forward(rows, readout.task, one_token=readout.one_token, last_layers=readout.last_layers)
                    answers = readout(out)
        except Exception as e:  # a bug, not a bad request (those are refused before they queue): answer 500
            log.exception("the forward pass failed on a batch of %d x %d tokens", len(batch), width)
            with self.answering:
                for item in batch:
                    if not item.job.failed:
                        item.job.failed = True
                        item.job.loop.call_soon_threadsafe(_settle, item.job.future, None, e)
        finally:
            if lane:
                self.inbox.put(Done(long))  # the lane is free
        end = time.time_ns()
        self.metrics.ran_batch(len(batch), len(batch) * width)
        with self.answering:  # a request's rows may be in two batches that end at once
            record_forward(batch, start, end, len(batch) * width)
            for r, item in enumerate(batch):
                job = item.job
                if job.failed:  # its other rows still run, and are dropped here (every row of a failed batch)
                    continue
                job.answers[item.position] = answers[r]
                job.remaining -= 1
                if job.remaining == 0:
                    job.loop.call_soon_threadsafe(_settle, job.future, job.answers, None)


def gives_way(batch: list[Item]) -> bool:
    """Whether a lane's batch takes turns at its points: more than GIVE_WAY_TOKENS padded tokens."""
    return len(batch) * max(item.length for item in batch) > GIVE_WAY_TOKENS


def record_forward(batch: list[Item], start: int, end: int, tokens: int) -> None:
    """The forward's times (time.time_ns()), once in each traced request whose rows it ran."""
    traced = {id(item.job): item.job for item in batch if item.job.forwards is not None}
    for job in traced.values():
        job.forwards.append((start, end, len(batch), tokens))  # type: ignore[union-attr]


def _settle(future: asyncio.Future, result, error: BaseException | None) -> None:
    """Resolve a request's future on its event loop (unless the request has gone)."""
    if future.done():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
