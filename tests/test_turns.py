"""Turns: a long forward gives way at its points to the short work waiting for the model (numbert.model.turns, the
Batcher's `Turn`), and nothing's numbers change. No timed assertion: events and the order of what ran prove the
schedule; a deadline only ends a broken run."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import numbert
from numbert.model import turns
from numbert.pipeline import batcher as batcher_module
from numbert.pipeline.batcher import Batcher

MODERN = Path(__file__).parent / "fixtures" / "modern" / "modernbert-ForMaskedLM"
SHORT = "A man is eating food."
LONG = "The quick brown fox jumps over the lazy dog. " * 40  # about 400 tokens
TURN_TOKENS = 64  # the test's short rows: up to 64 tokens (LONG is not one)
GIVE_WAY_TOKENS = 128  # the test's long batches: past 128 padded tokens (LONG, cut to 256)
DEADLINE = 20  # seconds: only a broken schedule gets there


class Counters:
    def queued(self, inputs: int) -> None: ...

    def dropped(self, inputs: int) -> None: ...

    def ran_batch(self, inputs: int, padded_tokens: int) -> None: ...


def test_a_forward_gives_way_at_its_points_and_its_numbers_stay():
    """A hook run at every point of a long ModernBERT forward (its band and products) runs a whole short forward
    there: both are bit for bit what they are alone, and the short one's own points take no turns."""
    model = numbert.load(MODERN)
    rng = np.random.default_rng(0)
    long_ids = rng.integers(5, 60, 600).astype(np.int32)  # past 4 windows: its local layers run as a band
    short_ids = rng.integers(5, 60, 12).astype(np.int32)
    alone_long, alone_short = model.encoder.forward(long_ids), model.encoder.forward(short_ids)
    nested: list[np.ndarray] = []
    depth = 0

    def hook() -> None:
        nonlocal depth
        depth += 1
        assert depth == 1, "the work a hook runs took a turn of its own"
        nested.append(model.encoder.forward(short_ids).hidden_states)
        depth -= 1

    with turns.giving_way(hook):
        long_out = model.encoder.forward(long_ids)
    assert len(nested) > model.encoder.config.num_hidden_layers  # several points a layer
    assert np.array_equal(long_out.hidden_states, alone_long.hidden_states)
    assert all(np.array_equal(states, alone_short.hidden_states) for states in nested)
    turns.point()  # outside giving_way: nothing runs
    assert len(nested) > 0 and depth == 0


def batcher_with_a_long_forward(model, lanes: int, give_way_after: float, order: list):
    """A Batcher over the model's real forward, whose long batch (rows past TURN_TOKENS) stops at its points until
    a short batch has run (or DEADLINE passes); `order` gets what ran, and on which thread."""
    short_done = threading.Event()
    long_started = threading.Event()

    def forward(rows, task=None, *, one_token=None, last_layers=None):
        if len(rows[0].ids) > TURN_TOKENS:
            order.append(("long starts", threading.get_ident()))
            long_started.set()
            deadline = time.monotonic() + DEADLINE
            while not short_done.is_set() and time.monotonic() < deadline:
                turns.point()  # between two steps of the long forward
                time.sleep(0.002)
            out = model.forward_rows(rows, task, one_token=one_token, last_layers=last_layers)
            order.append(("long ends", threading.get_ident()))
            return out
        order.append(("short", threading.get_ident()))
        short_done.set()
        return model.forward_rows(rows, task, one_token=one_token, last_layers=last_layers)

    b = Batcher(forward, 16384, 256, Counters(), lanes=lanes, give_way_after=give_way_after)
    return b, long_started, short_done


@pytest.mark.parametrize("lanes", [1, 2])
def test_a_short_request_runs_between_the_steps_of_a_long_one(minilm, monkeypatch, lanes):
    """A short request sent while a long one runs (alone on two lanes, or on the one lane) is run at a point of the
    long forward, on its lane, before the long one ends; both answers equal embed's within 1e-6."""
    monkeypatch.setattr(batcher_module, "TURN_TOKENS", TURN_TOKENS)
    monkeypatch.setattr(batcher_module, "GIVE_WAY_TOKENS", GIVE_WAY_TOKENS)
    recipe = minilm.recipe()
    readout = minilm.sentence_vectors(recipe)
    order: list = []
    b, long_started, _ = batcher_with_a_long_forward(minilm, lanes, 0.0, order)
    b.start(lambda: None)

    async def clients():
        long_answer = b.submit(minilm.rows([LONG], recipe, truncate=True), readout)
        assert await asyncio.get_running_loop().run_in_executor(None, long_started.wait, DEADLINE)
        short_answer = await b.submit(minilm.rows([SHORT], recipe, truncate=True), readout)
        return await long_answer, short_answer

    try:
        long_vectors, short_vectors = asyncio.run(clients())
    finally:
        b.stop()
    assert [what for what, _ in order] == ["long starts", "short", "long ends"]
    assert order[1][1] == order[0][1]  # on the long batch's lane, at one of its points
    served = recipe.finish(np.stack([long_vectors[0], short_vectors[0]]))  # as the server finishes its answers
    np.testing.assert_allclose(served, minilm.embed([LONG, SHORT]), atol=1e-6, rtol=0)


def test_a_turn_no_batch_takes_runs_when_a_lane_frees(minilm, monkeypatch):
    """A long batch that never gives way (give_way_after past the run): the short rows offered as a turn are
    withdrawn when its lane frees, and run there: nothing on offer is lost."""
    monkeypatch.setattr(batcher_module, "TURN_TOKENS", TURN_TOKENS)
    monkeypatch.setattr(batcher_module, "GIVE_WAY_TOKENS", GIVE_WAY_TOKENS)
    monkeypatch.setattr(batcher_module.Turn, "offer", counted_offer(offers := []))
    recipe = minilm.recipe()
    readout = minilm.sentence_vectors(recipe)
    order: list = []
    b, long_started, short_done = batcher_with_a_long_forward(minilm, 1, float("inf"), order)
    b.start(lambda: None)

    async def clients():
        long_answer = b.submit(minilm.rows([LONG], recipe, truncate=True), readout)
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, long_started.wait, DEADLINE)
        short_answer = b.submit(minilm.rows([SHORT], recipe, truncate=True), readout)
        deadline = time.monotonic() + DEADLINE
        while not offers and time.monotonic() < deadline:  # the short rows are on offer
            await asyncio.sleep(0.005)
        short_done.set()  # let the long forward end without a turn
        return await long_answer, await short_answer

    try:
        long_vectors, short_vectors = asyncio.run(clients())
    finally:
        b.stop()
    assert offers and [what for what, _ in order] == ["long starts", "long ends", "short"]
    np.testing.assert_allclose(recipe.finish(np.stack(short_vectors)), minilm.embed([SHORT]), atol=1e-6, rtol=0)


def counted_offer(offers: list):
    offer = batcher_module.Turn.offer

    def counting(self, batch, readout):
        offers.append(len(batch))
        offer(self, batch, readout)

    return counting
