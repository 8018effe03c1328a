"""numbert.engines.workers: worker processes give the single-process vectors bit for bit, survive a killed worker."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import bounded, run_limited
from test_cli import one_error_line
from test_sentence_modules import random_bert, st  # noqa: F401 - its fixtures, used below
from threadpoolctl import threadpool_limits

import numbert
from numbert.engines import workers
from numbert.engines.workers import Pool, WorkerDied, describe
from numbert.pipeline.planner import Row, row_of, run
from numbert.runtime.blas import THREAD_TIMEOUT, THREAD_VARIABLES


def corpus(n: int) -> list[str]:
    """n lines of very different lengths (so length sorting really reorders), a few empty or unicode."""
    rng = np.random.default_rng(1)
    words = "the bank river money vault café naïve 東京 data vector model sentence".split()
    return [
        " ".join([f"line{i}", *rng.choice(words, int(rng.choice([0, 2, 9, 30])))]) if i % 41 else "" for i in range(n)
    ]


def planned(model, texts: list[str], batch_size: int = 8, **choices):
    """The recipe and the planned batches (positions, rows) embed would run for `texts`."""
    recipe = model.recipe(**choices)
    return recipe, [
        (positions, [row_of(e) for e in encodings])
        for positions, encodings in model.inputs.plan(texts, None, recipe, batch_size)
    ]


def in_process(model, recipe, batches, window_batch: int) -> list[np.ndarray]:
    """Each batch's pooled vectors as this process runs them."""
    return [
        recipe.sentence_vectors(run(model.encoder, rows, recipe.max_length, recipe.stride, window_batch))
        for _, rows in batches
    ]


@pytest.fixture
def one_thread():
    """This process's BLAS on one thread, as each worker's: a BLAS kernel may sum in another order on two."""
    with threadpool_limits(1):
        yield


def test_two_workers_give_the_single_process_vectors_bit_for_bit(minilm_dir, model, one_thread):
    recipe, batches = planned(model, corpus(230))
    with Pool(minilm_dir, workers=2) as pool:
        got = list(pool.map(recipe, batches, 8))
    assert [positions for positions, _ in got] == [positions for positions, _ in batches]
    for (_, vectors), expected in zip(got, in_process(model, recipe, batches, 8)):
        assert vectors.dtype == np.float32 and np.array_equal(vectors, expected)


def test_map_yields_every_batch_when_the_read_ahead_fills_with_finished_batches(minilm_dir, model):
    """A slow first batch while the other worker finishes every batch the read-ahead (2 x workers) allows:
    when the slow one is done, every worker is idle and nothing more may be read ahead until batches are
    yielded. map must yield them and go on (it once returned there, leaving the rest)."""
    recipe = model.recipe()
    slow = [row_of(model.tokenizer.encode("a long line of words " * 12))] * 256  # seconds, against milliseconds
    batches = [(range(0, 256), slow)] + [([256 + i], [row_of(model.tokenizer.encode(f"short {i}"))]) for i in range(8)]
    with Pool(minilm_dir, workers=2) as pool:
        got = list(pool.map(recipe, batches))
    assert [len(v) for _, v in got] == [256] + [1] * 8


def test_the_recipe_reaches_the_workers(minilm_dir, model, one_thread):
    texts = corpus(20)
    choices = dict(pooling="cls", layers=-2, normalize=False)
    with Pool(minilm_dir, workers=1) as pool:
        assert np.array_equal(model.embed(texts, workers=pool, **choices), model.embed(texts, **choices))
        assert np.array_equal(model.embed(texts, workers=pool), model.embed(texts))  # another recipe, same pool


def test_workers_run_one_blas_thread_and_the_caller_keeps_its_own(minilm_dir, model):
    before = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    with Pool(minilm_dir, workers=2, threads=1) as pool:
        list(pool.map(*planned(model, corpus(20), batch_size=10)))  # two batches: both workers start
        for worker in pool.workers:
            with open(f"/proc/{worker.pid}/environ", "rb") as f:
                environ = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
            assert all(environ[name.encode()] == b"1" for name in THREAD_VARIABLES)
            timeout = os.environ.get("OPENBLAS_THREAD_TIMEOUT", THREAD_TIMEOUT)
            assert environ[b"OPENBLAS_THREAD_TIMEOUT"] == timeout.encode()
        memory = pool.memory()
    assert {name: os.environ.get(name) for name in THREAD_VARIABLES} == before
    assert len(memory) == 2 and all(0 < m["pss"] <= m["rss"] for m in memory)


def test_a_killed_worker_is_reported_with_its_inputs_and_its_batch_runs_again(minilm_dir, model, one_thread):
    recipe, batches = planned(model, corpus(600), batch_size=150)
    (positions, rows), *rest = batches  # a batch of one row, done at once, then a long one, still running
    batches = [(positions[:1], rows[:1]), (positions[1:], rows[1:]), *rest]
    with Pool(minilm_dir, workers=2) as pool:
        results = pool.map(recipe, batches, 150)
        got = [next(results)]  # both workers now hold a batch: kill one
        os.kill(next(w.pid for w in pool.workers if w.batch is not None), signal.SIGKILL)
        with pytest.warns(RuntimeWarning, match=r"died \(killed by SIGKILL\) while embedding inputs \d+"):
            got += list(results)
        assert len(pool.workers) == 2
    assert [positions for positions, _ in got] == [positions for positions, _ in batches]
    assert all(np.array_equal(v, w) for (_, v), w in zip(got, in_process(model, recipe, batches, 150)))


def test_a_batch_that_kills_every_worker_is_an_error_naming_its_inputs(minilm_dir, model):
    recipe, batches = planned(model, corpus(400), batch_size=200)
    with Pool(minilm_dir, workers=1, retries=0) as pool:
        results = pool.map(recipe, batches, 200)
        next(results)
        os.kill(pool.workers[0].pid, signal.SIGKILL)  # it holds the second batch
        with pytest.raises(
            WorkerDied, match=r"while embedding inputs \d+, \d+, \d+, \d+, \.\.\. \(200 texts\)"
        ) as error:
            next(results)
    assert list(error.value.lines) == batches[1][0]


def test_bad_models_fail_when_the_pool_starts(minilm_dir, tmp_path):
    with pytest.raises((OSError, ValueError), match="nowhere"):
        Pool(tmp_path / "nowhere", workers=1)
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        Pool(minilm_dir, workers=0)


def test_a_worker_stopped_while_it_loads_is_killed_not_waited_for(minilm_dir):
    """An interrupt while the pool starts (Ctrl-C during loading) closes workers that read no message until
    their model is loaded: they are killed at once instead of being waited for."""
    worker = workers.Worker(str(minilm_dir), {}, threads=1)
    worker.close()
    assert worker.process.returncode == -signal.SIGKILL


def test_an_error_in_a_batch_is_raised_in_the_caller(minilm_dir, model):
    recipe = model.recipe()
    with Pool(minilm_dir, workers=1) as pool:
        with pytest.raises(ValueError, match="input_ids"):
            list(pool.map(recipe, [([0], [Row(np.array([101, 10**6, 102], np.int32))])]))  # an id past the vocabulary
        assert not pool.workers  # the pool closed itself


def test_describe():
    assert describe(range(4096, 6144)) == "lines 4096-6143"
    assert describe([3, 17, 2, 9, 40]) == "inputs 3, 17, 2, 9, ... (5 texts)"


def test_embed_with_workers_is_embed_bit_for_bit(model, one_thread):
    texts = corpus(120)
    assert np.array_equal(workers.embed(model, texts, 2, batch_size=16), model.embed(texts, batch_size=16))
    # more texts than one look-ahead block (LOOK_AHEAD x batch_size): the blocks' batches, bit for bit
    assert np.array_equal(workers.embed(model, texts, 2, batch_size=4), model.embed(texts, batch_size=4))
    options = dict(pooling="cls", layers=-2, normalize=False)
    assert np.array_equal(workers.embed(model, texts, 2, **options), model.embed(texts, **options))
    assert workers.embed(model, "one text", 1).shape == (384,)
    assert workers.embed(model, [], 2).shape == (0, 384)


def test_embed_with_workers_runs_long_texts_as_windows_too(model, one_thread):
    texts = [*corpus(40), " ".join(["river bank"] * 40), "short", " ".join(["money"] * 50)]
    options = dict(max_length=24, long="window", stride=4, batch_size=8)
    assert np.array_equal(workers.embed(model, texts, 2, **options), model.embed(texts, **options))


def test_embed_with_workers_needs_a_loaded_model_and_a_pool(model):
    with pytest.raises(ValueError, match="workers must be a positive integer, got 0"):
        workers.embed(model, ["a"], 0)
    with pytest.raises(TypeError, match=r"workers takes a numbert.engines.workers.Pool"):
        model.embed(["a"], workers=2)
    in_memory = numbert.Bert(model.encoder, model.tokenizer, model.sentence_config)
    with pytest.raises(ValueError, match="workers need a model loaded by numbert.load"):
        workers.embed(in_memory, ["a"], 2)


def test_embed_with_workers_keeps_the_models_prompt_and_dense_layers(tmp_path, st, torch, random_bert):  # noqa: F811
    from test_sentence_modules import TEXTS, save_st

    save_st(
        st,
        torch,
        random_bert,
        tmp_path / "st",
        "cls",
        dense=16,
        prompts={"query": "query: "},
        default_prompt_name="query",
    )
    ours = numbert.load(tmp_path / "st")
    with threadpool_limits(1):
        assert np.array_equal(workers.embed(ours, TEXTS, 2), ours.embed(TEXTS))  # default prompt, Dense, Normalize
        assert np.array_equal(
            workers.embed(ours, TEXTS, 2, prompt="x: ", pooling="mean"), ours.embed(TEXTS, prompt="x: ", pooling="mean")
        )


PARENT = """
import sys, numbert
from numbert.engines.workers import Pool
model = numbert.load(sys.argv[1])
with Pool(sys.argv[1], workers=1) as pool:
    print(pool.workers[0].pid, flush=True)
    model.embed(["bank " * 400] * 128, workers=pool, batch_size=128)  # one batch of seconds of work
"""


def test_workers_end_with_their_parent_even_in_the_middle_of_a_batch(minilm_dir):
    """A parent killed by SIGKILL cannot stop its workers; each notices by itself within a fraction of a
    second, though its batch would take many seconds more (its pipe says so only between batches)."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(minilm_dir)], stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        worker = int(parent.stdout.readline())
        cpu_seconds = lambda: sum(map(int, Path(f"/proc/{worker}/stat").read_text().split()[13:15])) / 100
        started = cpu_seconds()
        while cpu_seconds() < started + 1:  # the worker loaded the model and is well into the batch
            time.sleep(0.05)
        parent.kill()
        parent.wait()
        killed = time.monotonic()
        while Path(f"/proc/{worker}").exists() and Path(f"/proc/{worker}/stat").read_text().split()[2] != "Z":
            assert time.monotonic() - killed < 2, "the worker outlived its parent by 2 s"
            time.sleep(0.02)
    finally:
        parent.kill()
        if worker is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)


def test_workers_are_capped_and_started_only_as_batches_need_them(minilm_dir, model):
    """Issue 35: 24 workers for one line took 9.2 s and 1 GB, `--workers 10000` ran past 120 s. A pool starts
    at most most_workers() (WORKERS_PER_CORE per core; a ValueError beyond, before any process starts), one
    worker at first, and no more than the batches it is handed at once."""
    with pytest.raises(
        ValueError, match=rf"workers is {workers.most_workers() + 1}, more than {workers.most_workers()}"
    ):
        Pool(minilm_dir, workers=workers.most_workers() + 1)
    with bounded(seconds=60, memory=50e6), Pool(minilm_dir, workers=workers.most_workers()) as pool:
        assert len(pool.workers) == 1
        one = model.embed(["one line"], workers=pool)
        assert len(pool.workers) == 1 and one.shape == (1, 384)
        model.embed(corpus(30), workers=pool, batch_size=10)  # three batches: three workers
        assert len(pool.workers) == min(3, workers.most_workers())


@pytest.mark.parametrize("command", [["encode", "one line"], ["serve"]])
def test_too_many_workers_is_one_line_at_once(minilm_dir, command):
    done = run_limited(*command, "--workers", 10000, model=minilm_dir, seconds=30)
    line = one_error_line(done)
    assert f"--workers is 10000, more than {workers.most_workers()} ({workers.WORKERS_PER_CORE} per core" in line


def test_many_workers_for_one_line_start_one(minilm_dir, tmp_path):
    """`encode --workers N` of one line: one worker process, not N."""
    n = workers.most_workers()
    done = run_limited("encode", "one line", "--workers", n, "-o", tmp_path / "v.npy", model=minilm_dir, seconds=60)
    assert done.returncode == 0, done.stderr.decode()
    assert np.load(tmp_path / "v.npy").shape == (1, 384)
