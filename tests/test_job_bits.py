"""One job, the same bits however it is run: `Bert.embed`, `numbert encode -o vectors.npy`, in shards, in worker
processes; and the one exception, the server, measured.

A vector depends in its last bits on the texts batched with it, so every way must embed the same chunks of
lines. The chunk size is made small here (CHUNK_LINES, in this process) so that chunks straddle shards.
This process runs one BLAS thread, as each worker does: the OpenBLAS NumPy ships (0.3.31) can give other
last bits with two threads than with one, which is not what these tests are about.
"""

from __future__ import annotations

import stat

import numpy as np
import pytest

import numbert
from numbert.cli import encode, main
from numbert.engines.shards import read_shards


@pytest.fixture(autouse=True)
def one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        yield


@pytest.fixture
def source(tmp_path, monkeypatch):
    """60 lines of very different lengths (so each chunk's batches really reorder), a few empty, in 4 chunks."""
    monkeypatch.setitem(encode.CHUNK_LINES, "npy", 16)
    rng = np.random.default_rng(7)
    words = "the bank river money vault café naïve 東京 data vector model sentence".split()
    lines = [
        " ".join([f"line{i}", *rng.choice(words, int(rng.choice([0, 3, 11, 40])))]) if i % 17 else "" for i in range(60)
    ]
    path = tmp_path / "in.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def encoded(source, minilm_dir, *args) -> None:
    assert main(["encode", "--file", str(source), "--model", str(minilm_dir), *map(str, args)]) == 0


def test_sharded_and_parallel_jobs_give_the_bits_of_one_file(tmp_path, source, minilm_dir, capsys):
    encoded(source, minilm_dir, "-o", tmp_path / "one.npy")
    encoded(source, minilm_dir, "--shard-lines", 7, "-o", f"{tmp_path / 'shards'}/")
    encoded(source, minilm_dir, "--workers", 2, "-o", tmp_path / "workers.npy")
    encoded(source, minilm_dir, "--shard-lines", 7, "--workers", 2, "-o", f"{tmp_path / 'both'}/")
    one = np.load(tmp_path / "one.npy")
    assert one.shape == (60, 384)
    for vectors in (
        read_shards(tmp_path / "shards"),
        np.load(tmp_path / "workers.npy"),
        read_shards(tmp_path / "both"),
    ):
        assert np.array_equal(vectors, one)
    assert "resuming" not in capsys.readouterr().err
    model = numbert.load(minilm_dir)
    texts = source.read_text(encoding="utf-8").splitlines()
    chunks = [model.embed(texts[i : i + 16], progress=False) for i in range(0, 60, 16)]  # the CLI's chunks
    assert np.array_equal(np.concatenate(chunks), one)
    modes = {stat.S_IMODE(path.stat().st_mode) for path in [tmp_path / "one.npy", *(tmp_path / "shards").glob("*.*")]}
    assert len(modes) == 1  # shards and manifest as `-o vectors.npy`: what the umask gives


def test_the_server_plans_its_own_batches_so_its_vectors_differ_from_embed_by_a_few_1e_7_at_most(source, minilm_dir):
    """The exception docs/house.md names: the server batches a live queue by token budget
    (planner.next_batch), not a corpus by length, so its rows share forwards with other neighbours and may
    differ from `embed`'s in the last bits. Measured here: at most a few 1e-7 (0 where the batches agree)."""
    import httpx
    from helpers import ServerProcess

    texts = source.read_text(encoding="utf-8").splitlines()
    want = numbert.load(minilm_dir).embed(texts, progress=False)
    server = ServerProcess(minilm_dir)
    try:
        answers = [httpx.post(server.url + "/v1/embeddings", json={"input": texts[i : i + 5]}) for i in range(0, 60, 5)]
    finally:
        assert server.stop() == 0, "".join(server.lines)
    got = np.array([row["embedding"] for a in answers for row in a.json()["data"]], np.float32)
    difference = float(np.abs(got - want).max())
    print(f"server vs embed: max |difference| {difference:.1e}")
    assert difference < 1e-6


def test_a_rerun_says_how_many_shards_it_skipped(tmp_path, source, minilm_dir, capsys):
    out = f"{tmp_path / 'shards'}/"
    encoded(source, minilm_dir, "--shard-lines", 7, "-o", out)
    (tmp_path / "shards" / "part-00004.npy").unlink()
    capsys.readouterr()
    with pytest.warns(RuntimeWarning, match="part-00004.npy is missing"):
        encoded(source, minilm_dir, "--shard-lines", 7, "-o", out)
    assert capsys.readouterr().err == "numbert encode: resuming: 8 of 9 shards already done, skipped\n"
    encoded(source, minilm_dir, "--shard-lines", 7, "-o", out)
    assert capsys.readouterr().err == "numbert encode: resuming: 9 of 9 shards already done, skipped\n"
