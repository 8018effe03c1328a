"""numbert.pipeline.planner, .recipe and .readouts: rows, padding, the two planners, the frozen recipe, and the
server's queue of (rows, readout) that drops a request whose client has gone."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
import threading
from collections.abc import Callable

import numpy as np
import pytest

from numbert.model.encoder import Output
from numbert.pipeline import planner, readouts
from numbert.pipeline.batcher import Batcher
from numbert.pipeline.planner import row_of
from numbert.serve.metrics import Metrics
from numbert.tokenizer.encoding import pad


@dataclasses.dataclass(eq=False)
class Watched:
    """A readout (numbert.pipeline.batcher.Readout) that calls `read` on each forward's Output: no task adapters."""

    read: Callable[[Output], list]
    task = None  # no task adapters
    one_token = None  # every token read
    last_layers = None  # every layer kept

    def __call__(self, out: Output) -> list:
        return self.read(out)


def test_rows_of_a_pair_keep_their_token_type_ids_and_pad_in_one_place(model):
    pair = row_of(model.tokenizer.encode("a question", "its answer here"))
    single = row_of(model.tokenizer.encode("one text"))
    assert single.type_ids is None and pair.type_ids is not None and pair.type_ids[-1] == 1
    batch = pad([single, pair], pad_id=0)
    assert batch.input_ids.shape == (2, len(pair.ids)) and batch.input_ids.dtype == np.int64
    assert list(batch.attention_mask.sum(axis=1)) == [len(single.ids), len(pair.ids)]
    assert list(batch.token_type_ids[1, : len(pair.ids)]) == list(pair.type_ids)
    assert not batch.token_type_ids[0].any() and not batch.input_ids[0, len(single.ids) :].any()
    out = model(["a question"], ["its answer here"])
    np.testing.assert_array_equal(planner.forward(model.encoder, [pair]).hidden_states, out.hidden_states)


def test_by_length_plans_longest_first_then_long_inputs_alone():
    assert planner.by_length([3, 9, 5, 9, 30, 1], limit=10, batch_size=2) == [[1, 3], [2, 0], [5], [4]]


def test_a_row_over_the_limit_runs_as_windows_as_windowed_does(model):
    text = " ".join(["river bank"] * 60)
    row = row_of(model.tokenizer.encode(text, max_length=None, truncation=False))
    out = planner.run(model.encoder, [row], limit=24, stride=4, window_batch=3)
    want = model.windowed(text, max_length=24, stride=4, batch_size=3)
    np.testing.assert_array_equal(out.hidden_states, want.hidden_states)
    assert not out.batched and out.input_ids.shape == (len(row.ids),)


def test_windows_stitch_only_the_layers_the_recipe_reads(model, monkeypatch):
    """A long text's windows keep the last hidden states the recipe reads (its vectors unchanged), so the stitched
    states grow with the text by those layers alone (issue 43 item 8: 100,000 tokens held every layer); a text whose
    stitched states would pass the limit is refused before anything runs, naming it."""
    text = " ".join(["river bank"] * 60)
    row = row_of(model.tokenizer.encode(text, max_length=None, truncation=False))
    whole = planner.run(model.encoder, [row], limit=24, stride=4, window_batch=3)
    last_two = planner.run(model.encoder, [row], limit=24, stride=4, window_batch=3, last_layers=2)
    assert last_two.hidden_states.shape[0] == 2
    np.testing.assert_array_equal(last_two.hidden_states, whole.hidden_states[-2:])
    recipe = model.recipe(layers=-2, long="window", max_length=24, stride=4)
    assert recipe.last_layers == 2 and model.recipe(layers="sum_all").last_layers is None
    np.testing.assert_array_equal(recipe.sentence_vectors(last_two), recipe.sentence_vectors(whole))
    monkeypatch.setattr(planner, "STITCHED_BYTES", 2 * len(row.ids) * 768 * 4)  # two layers of this text
    planner.run(model.encoder, [row], limit=24, stride=4, window_batch=3, last_layers=2)
    with pytest.raises(ValueError, match=r"a text of 122 tokens run as windows would hold .* numbert's limit is"):
        planner.run(model.encoder, [row], limit=24, stride=4, window_batch=3)


def test_the_recipe_is_frozen_checked_once_and_pickles(model):
    recipe = model.recipe(pooling="cls", layers=[-1, -2], combine="concat", dimensions=100, normalize=True)
    assert (recipe.width, recipe.dim, recipe.layers) == (768, 100, (-1, -2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.normalize = False  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(recipe)) == recipe
    vectors = model.embed(["a", "b c"], recipe=recipe)
    assert vectors.shape == (2, 100) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-6)
    full = model.embed(["a", "b c"], recipe=recipe.with_output(dimensions=768, normalize=False))
    np.testing.assert_allclose(vectors, full[:, :100] / np.linalg.norm(full[:, :100], axis=1, keepdims=True), atol=1e-6)
    for wrong, message in (
        (dict(dimensions=385), "dimensions must be an integer between 1 and the vectors' width 384"),
        (dict(long="cut"), "long must be 'truncate' or 'window'"),
        (dict(long="window", stride=300), "stride"),
        (dict(max_length=2), "max_length must be an integer between 3"),
    ):
        with pytest.raises(ValueError, match=message):
            model.recipe(**wrong)
    with pytest.raises(TypeError, match="pass recipe= or its choices"):
        model.embed(["a"], recipe=recipe, pooling="mean")
    assert recipe.describe()["layers"] == [-1, -2] and recipe.describe()["dimensions"] == 100


def test_the_queue_drops_a_request_whose_client_has_gone_before_its_forward(model):
    """Rows of one readout share a forward; a cancelled request's rows never run (the readout sees 1 row, not 4)."""
    seen: list[int] = []

    def read(out):
        seen.append(len(out.input_ids))
        return readouts.SentenceVectors(model.recipe())(out)

    readout = Watched(read)

    row = row_of(model.tokenizer.encode("a text"))
    gate = threading.Event()

    async def serve() -> list:
        batcher = Batcher(model.forward_rows, 16384, 32, Metrics())
        batcher.start(gate.wait)  # the model thread waits here while the requests queue
        gone = batcher.submit([row, row, row], readout)
        kept = batcher.submit([row], readout)
        gone.cancel()  # its client disconnected (app.until_disconnected cancels it so)
        gate.set()
        answers = await kept
        await asyncio.to_thread(batcher.stop)
        return answers

    answers = asyncio.run(serve())
    assert seen == [1] and len(answers) == 1 and answers[0].shape == (384,)


def test_the_queue_runs_one_readout_per_forward_and_pairs_with_their_type_ids(model):
    calls: list[tuple[str, int]] = []

    def named(name):
        def read(out):
            calls.append((name, len(out.input_ids)))
            return list(out.pooler_output)

        return Watched(read)

    a, b = named("a"), named("b")
    pair = row_of(model.tokenizer.encode("a question", "an answer"))
    gate = threading.Event()

    async def serve():
        batcher = Batcher(model.forward_rows, 16384, 32, Metrics())
        batcher.start(gate.wait)
        first = batcher.submit([pair, pair], a)
        second = batcher.submit([pair], b)
        gate.set()
        got = await asyncio.gather(first, second)
        await asyncio.to_thread(batcher.stop)
        return got

    (first, second) = asyncio.run(serve())
    assert calls == [("a", 2), ("b", 1)]
    want = model(["a question"], ["an answer"]).pooler_output[0]
    np.testing.assert_allclose(second[0], want, atol=1e-6)


def test_two_lanes_run_batches_side_by_side_and_a_lone_batch_alone(model):
    """With two lanes the queue runs two batches at once while more than one is in hand, each with one BLAS thread
    and one row thread (the two meet at a barrier, which one lane alone would never pass), and a batch with
    nothing beside it or behind it alone, with the process's threads; every answer is the one-batch-at-a-time
    answer within 1e-6 (the batches, their BLAS threads and their batch-mates differ)."""
    from threadpoolctl import threadpool_info

    from numbert.runtime import row_threads

    def blas_threads() -> int:
        return min(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas")

    process_blas, process_rows = blas_threads(), row_threads.count()
    meet = threading.Barrier(2, timeout=60)
    seen: list[tuple[int, int, int]] = []  # (rows, BLAS threads, row threads) of each forward

    def forward(rows, task=None, *, one_token=None, last_layers=None):
        seen.append((len(rows), blas_threads(), row_threads.count()))
        if len(seen) <= 2:
            meet.wait()  # the first two batches run at once, or this times out
        return model.forward_rows(rows, task, one_token=one_token, last_layers=last_layers)

    texts = [f"sentence number {i} " + "word " * (i % 13) for i in range(70)]
    rows = [row_of(model.tokenizer.encode(text)) for text in texts]
    recipe = model.recipe()
    readout = readouts.SentenceVectors(recipe)
    gate = threading.Event()

    async def serve() -> tuple[list, list]:
        batcher = Batcher(forward, 16384, 32, Metrics(), lanes=2)
        batcher.start(gate.wait)
        futures = [batcher.submit(rows[i : i + 10], readout) for i in range(0, 70, 10)]
        gate.set()
        answers = [a for got in await asyncio.gather(*futures) for a in got]
        lone = await batcher.submit(rows[:1], readout)  # everything else done: alone
        await asyncio.to_thread(batcher.stop)
        return answers, lone

    answers, lone = asyncio.run(serve())
    assert sum(rows for rows, _, _ in seen[:-1]) == 70 and seen[-1][0] == 1, seen
    assert all(tuple(threads) == (1, 1) for _, *threads in seen[:2]), seen  # later ones: alone if the other is done
    assert tuple(seen[-1][1:]) == (process_blas, process_rows), seen
    assert (blas_threads(), row_threads.count()) == (process_blas, process_rows)  # given back
    want = model.embed(texts, recipe=recipe, batch_size=8)
    np.testing.assert_allclose(recipe.finish(np.stack(answers)), want, atol=1e-6)
    np.testing.assert_allclose(recipe.finish(np.stack(lone)), want[:1], atol=1e-6)
