"""numbert.workers: worker processes give the single-process vectors bit for bit, survive a killed worker."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from test_sentence_modules import random_bert, st  # noqa: F401 - its fixtures, used below

import numbert
from numbert.workers import BLAS_THREADS, Pool, WorkerDied, describe, embed_batches


def corpus(n: int) -> list[str]:
    """n lines of very different lengths (so length sorting really reorders), a few empty or unicode."""
    rng = np.random.default_rng(1)
    words = "the bank river money vault café naïve 東京 data vector model sentence".split()
    return [
        " ".join([f"line{i}", *rng.choice(words, int(rng.choice([0, 2, 9, 30])))]) if i % 41 else "" for i in range(n)
    ]


def chunked(texts: list[str], size: int) -> list[tuple[range, list[str]]]:
    return [(range(i, min(i + size, len(texts))), texts[i : i + size]) for i in range(0, len(texts), size)]


def test_two_workers_give_the_single_process_vectors_bit_for_bit(minilm_dir, model):
    chunks = chunked(corpus(230), 37)  # uneven chunks, the last one short
    with Pool(minilm_dir, workers=2, batch_size=8) as pool:
        assert pool.dim == 384
        got = list(pool.map(chunks))
    assert len(got) == len(chunks)
    for (_, texts), vectors in zip(chunks, got):
        expected = model.embed(texts, batch_size=8, progress=False)
        assert vectors.dtype == np.float32 and np.array_equal(vectors, expected)


def test_map_yields_every_chunk_when_the_read_ahead_fills_with_finished_chunks(minilm_dir):
    """A slow first chunk while the other worker finishes every chunk the read-ahead (2 x workers) allows:
    when the slow one is done, every worker is idle and nothing more may be read ahead until chunks are
    yielded. map must yield them and go on (it once returned there, leaving the rest of the chunks)."""
    slow = ["a long line of words " * 20] * 256  # seconds of work, against milliseconds for the others
    chunks = [(range(0, 256), slow)] + [(range(256 + i, 257 + i), [f"short {i}"]) for i in range(8)]
    with Pool(minilm_dir, workers=2) as pool:
        got = list(pool.map(chunks))
    assert [len(v) for v in got] == [256] + [1] * 8


def test_options_reach_the_workers(minilm_dir, model):
    chunks = chunked(corpus(20), 10)
    options = dict(pooling="cls", layers=-2, normalize=False)
    with Pool(minilm_dir, workers=1, **options) as pool:
        got = np.concatenate(list(pool.map(chunks)))
    assert np.array_equal(got, np.concatenate([model.embed(t, **options) for _, t in chunks]))


def test_workers_run_one_blas_thread_and_the_caller_keeps_its_own(minilm_dir):
    before = {name: os.environ.get(name) for name in BLAS_THREADS}
    with Pool(minilm_dir, workers=2, threads=1) as pool:
        for worker in pool.workers:
            with open(f"/proc/{worker.pid}/environ", "rb") as f:
                environ = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
            assert all(environ[name.encode()] == b"1" for name in BLAS_THREADS)
        memory = pool.memory()
    assert {name: os.environ.get(name) for name in BLAS_THREADS} == before
    assert len(memory) == 2 and all(0 < m["pss"] <= m["rss"] for m in memory)


def test_a_killed_worker_is_reported_with_its_lines_and_its_chunk_runs_again(minilm_dir, model):
    texts = corpus(600)
    chunks = chunked(texts, 150)
    with Pool(minilm_dir, workers=2) as pool:
        results = pool.map(chunks)
        got = [next(results)]  # both workers now hold a chunk: kill one
        os.kill(next(w.pid for w in pool.workers if w.chunk is not None), signal.SIGKILL)
        with pytest.warns(RuntimeWarning, match=r"died \(killed by SIGKILL\) while embedding lines \d+-\d+"):
            got += list(results)
        assert len(pool.workers) == 2
    assert np.array_equal(np.concatenate(got), np.concatenate([model.embed(t, progress=False) for _, t in chunks]))


def test_a_chunk_that_kills_every_worker_is_an_error_naming_its_lines(minilm_dir):
    chunks = chunked(corpus(400), 200)
    with Pool(minilm_dir, workers=1, retries=0) as pool:
        results = pool.map(chunks)
        next(results)
        os.kill(pool.workers[0].pid, signal.SIGKILL)  # it holds lines 200-399
        with pytest.raises(WorkerDied, match="while embedding lines 200-399") as error:
            next(results)
    assert error.value.lines == range(200, 400)


def test_bad_options_and_models_fail_when_the_pool_starts(minilm_dir, tmp_path):
    with pytest.raises(ValueError, match="pooling"):
        Pool(minilm_dir, workers=1, pooling="nonsense")
    with pytest.raises((OSError, ValueError), match="nowhere"):
        Pool(tmp_path / "nowhere", workers=1)
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        Pool(minilm_dir, workers=0)


def test_an_error_in_a_chunk_is_raised_in_the_caller(minilm_dir):
    with Pool(minilm_dir, workers=1) as pool:
        with pytest.raises(TypeError, match=r"texts\[1\] is a int"):
            list(pool.map([(range(2), ["fine", 3])]))
        assert not pool.workers  # the pool closed itself


def test_describe():
    assert describe(range(4096, 6144)) == "lines 4096-6143"
    assert describe([3, 17, 2, 9, 40]) == "inputs 3, 17, 2, 9, ... (5 texts)"


def test_embed_batches_gives_embed_of_the_whole_list_bit_for_bit(minilm_dir, model):
    texts = corpus(150)
    lengths = [len(model.tokenizer.encode(t)) for t in texts]  # all shorter than MiniLM's 256 tokens
    order = sorted(range(len(texts)), key=lambda i: -lengths[i])
    batches = [order[i : i + 8] for i in range(0, len(order), 8)]  # batches of 8 by token count
    done = []
    got = embed_batches(minilm_dir, texts, batches, 384, 2, progress=done.append, batch_size=8)
    assert sum(done) == 150
    # each batch as given: the same vectors as embed of that batch alone
    expected = [model.embed([texts[i] for i in batch], batch_size=8, progress=False) for batch in batches]
    assert np.array_equal(got[[i for batch in batches for i in batch]], np.concatenate(expected))


def test_embed_with_workers_is_embed_bit_for_bit(model):
    texts = corpus(120)
    assert np.array_equal(model.embed(texts, workers=2, batch_size=16), model.embed(texts, batch_size=16))
    # more texts than one look-ahead block (LOOK_AHEAD x batch_size): the blocks' batches, bit for bit
    assert np.array_equal(model.embed(texts, workers=2, batch_size=4), model.embed(texts, batch_size=4))
    options = dict(pooling="cls", layers=-2, normalize=False)
    assert np.array_equal(model.embed(texts, workers=2, **options), model.embed(texts, **options))
    assert model.embed("one text", workers=1).shape == (384,)
    assert model.embed([], workers=2).shape == (0, 384)


def test_embed_with_workers_runs_long_texts_as_windows_too(model):
    texts = [*corpus(40), " ".join(["river bank"] * 40), "short", " ".join(["money"] * 50)]
    options = dict(max_length=24, long="window", stride=4, batch_size=8)
    assert np.array_equal(model.embed(texts, workers=2, **options), model.embed(texts, **options))


def test_embed_with_workers_needs_a_loaded_model_and_a_count(model):
    with pytest.raises(ValueError, match="workers must be a positive integer, got 0"):
        model.embed(["a"], workers=0)
    in_memory = numbert.Bert(model.encoder, model.tokenizer, model.sentence_config)
    with pytest.raises(ValueError, match="workers= needs a model loaded by numbert.load"):
        in_memory.embed(["a"], workers=2)


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
    assert np.array_equal(ours.embed(TEXTS, workers=2), ours.embed(TEXTS))  # default prompt, Dense, Normalize
    assert np.array_equal(
        ours.embed(TEXTS, workers=2, prompt="x: ", pooling="mean"), ours.embed(TEXTS, prompt="x: ", pooling="mean")
    )
