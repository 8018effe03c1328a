"""numbert.shards: sharded output, atomic shards, a rerun resumes, a changed job is an error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import numbert
from numbert.shards import ShardError, read_shards, shard_chunks, write_shards


def corpus(n: int) -> list[str]:
    rng = np.random.default_rng(2)
    words = "the bank river money vault café naïve 東京 data vector model sentence".split()
    return [" ".join([f"line{i}", *rng.choice(words, int(rng.choice([0, 2, 5, 9])))]) for i in range(n)]


def embedder(model, calls: list | None = None, fail_after: int | None = None):
    """A single-process embed for write_shards, recording the chunks it ran and failing after some."""

    def embed(chunks):
        for lines, texts in chunks:
            if fail_after is not None and calls is not None and len(calls) == fail_after:
                raise KeyboardInterrupt("simulated crash")
            if calls is not None:
                calls.append(lines)
            yield model.embed(texts, progress=False)

    return embed


def test_shard_chunks_restart_at_every_shard():
    got = [(shard, lines, len(texts), last) for shard, lines, texts, last in shard_chunks(map(str, range(23)), 10, 4)]
    assert got == [
        (0, range(0, 4), 4, False),
        (0, range(4, 8), 4, False),
        (0, range(8, 10), 2, True),
        (1, range(10, 14), 4, False),
        (1, range(14, 18), 4, False),
        (1, range(18, 20), 2, True),
        (2, range(20, 23), 3, True),
    ]
    assert list(shard_chunks([], 10, 4)) == []


def test_shards_hold_every_line_in_order_with_a_manifest(tmp_path, model):
    texts = corpus(95)
    manifest = write_shards(
        tmp_path / "out", texts, embedder(model), {"model": "minilm"}, shard_lines=40, chunk_lines=16
    )
    assert [e["file"] for e in manifest["shards"]] == ["part-00000.npy", "part-00001.npy", "part-00002.npy"]
    assert [e["lines"] for e in manifest["shards"]] == [[0, 40], [40, 80], [80, 95]]
    assert manifest["complete"] and manifest["lines"] == 95 and manifest["dim"] == 384
    on_disk = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert on_disk == manifest
    expected = np.concatenate([model.embed(t, progress=False) for _, _, t, _ in shard_chunks(texts, 40, 16)])
    assert np.array_equal(read_shards(tmp_path / "out"), expected)
    assert not list((tmp_path / "out").glob(".*.tmp"))


def test_a_rerun_after_a_crash_embeds_only_the_missing_shards(tmp_path, model):
    texts, job = corpus(100), {"model": "minilm", "options": {"pooling": None}}
    whole = write_shards(tmp_path / "whole", texts, embedder(model), job, shard_lines=30, chunk_lines=10)
    with pytest.raises(KeyboardInterrupt):  # dies in the middle of the third shard
        write_shards(tmp_path / "job", texts, embedder(model, [], fail_after=7), job, shard_lines=30, chunk_lines=10)
    manifest = json.loads((tmp_path / "job" / "manifest.json").read_text())
    assert [e["lines"] for e in manifest["shards"]] == [[0, 30], [30, 60]] and not manifest["complete"]
    calls: list = []
    done = []
    resumed = write_shards(
        tmp_path / "job", texts, embedder(model, calls), job, shard_lines=30, chunk_lines=10, progress=done.append
    )
    assert calls == [range(60, 70), range(70, 80), range(80, 90), range(90, 100)]
    assert sum(done) == 100
    assert [e["sha256"] for e in resumed["shards"]] == [e["sha256"] for e in whole["shards"]]
    assert np.array_equal(read_shards(tmp_path / "job"), read_shards(tmp_path / "whole"))
    calls.clear()  # a finished job run again embeds nothing
    write_shards(tmp_path / "job", texts, embedder(model, calls), job, shard_lines=30, chunk_lines=10)
    assert calls == []


def test_another_model_options_shard_size_or_input_is_an_error(tmp_path, model):
    texts, job = corpus(50), {"model": "minilm", "options": {"pooling": "mean"}}
    write_shards(tmp_path, texts, embedder(model), job, shard_lines=20)
    with pytest.raises(ShardError, match=r"its job is options=\{'pooling': 'mean'\} there, \{'pooling': 'cls'\} now"):
        write_shards(tmp_path, texts, embedder(model), {**job, "options": {"pooling": "cls"}}, shard_lines=20)
    with pytest.raises(ShardError, match="its shard_lines is 20 there, 25 now"):
        write_shards(tmp_path, texts, embedder(model), job, shard_lines=25)
    with pytest.raises(ShardError, match="input lines 20-39 differ from those part-00001.npy was computed from"):
        write_shards(tmp_path, [*texts[:25], "changed", *texts[26:]], embedder(model), job, shard_lines=20)
    with pytest.raises(ShardError, match="holds shards up to line 49 but the input has only 40 lines"):
        write_shards(tmp_path, texts[:40], embedder(model), job, shard_lines=20)
    with pytest.raises(ShardError, match="input lines 40-50 differ"):
        write_shards(tmp_path, [*texts, "one more line"], embedder(model), job, shard_lines=20)


def test_a_damaged_shard_is_written_again(tmp_path, model):
    texts, job = corpus(40), {"model": "minilm"}
    write_shards(tmp_path, texts, embedder(model), job, shard_lines=20)
    expected = read_shards(tmp_path)
    (tmp_path / "part-00001.npy").write_bytes(b"garbage")
    calls: list = []
    with pytest.warns(RuntimeWarning, match="part-00001.npy is missing or does not match its checksum"):
        write_shards(tmp_path, texts, embedder(model, calls), job, shard_lines=20)
    assert calls == [range(20, 40)]
    assert np.array_equal(read_shards(tmp_path), expected)


def test_unfinished_or_foreign_directories_are_refused(tmp_path, model):
    with pytest.raises(ShardError, match="cannot read"):
        read_shards(tmp_path)
    (tmp_path / "part-00000.npy").write_bytes(b"")
    with pytest.raises(ShardError, match="holds shards but no manifest.json"):
        write_shards(tmp_path, ["a"], embedder(model), {}, shard_lines=5)
    with pytest.raises(ValueError, match="shard_lines must be a positive integer"):
        write_shards(tmp_path / "new", ["a"], embedder(model), {}, shard_lines=0)


def test_empty_input_gives_an_empty_finished_job(tmp_path, model):
    manifest = write_shards(tmp_path, [], embedder(model), {}, shard_lines=5)
    assert manifest["complete"] and manifest["lines"] == 0 and manifest["shards"] == []
    assert read_shards(tmp_path).shape[0] == 0


JOB_SCRIPT = """
import sys, numbert
from numbert.shards import write_shards
from numbert.workers import Pool
model_dir, source, out, workers = sys.argv[1:]
lines = open(source, encoding="utf-8").read().splitlines()
with Pool(model_dir, int(workers)) as pool:
    write_shards(out, lines, pool.map, {"model": "minilm"}, shard_lines=60, chunk_lines=20)
"""


def test_sigkill_mid_job_then_rerun_gives_the_uninterrupted_result(tmp_path, minilm_dir):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(corpus(600)) + "\n", encoding="utf-8")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(numbert.__path__[0] + "/.."), os.environ.get("PYTHONPATH")])),
    )
    command = [sys.executable, "-c", JOB_SCRIPT, str(minilm_dir), str(source)]
    subprocess.run([*command, str(tmp_path / "whole"), "2"], env=env, check=True, timeout=300)
    job = subprocess.Popen([*command, str(tmp_path / "job"), "2"], env=env, start_new_session=True)
    manifest, deadline = tmp_path / "job" / "manifest.json", time.monotonic() + 240
    while not (manifest.exists() and json.loads(manifest.read_text())["shards"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)  # the job and its workers, in the middle of shard 1 or 2
    job.wait()
    finished = json.loads(manifest.read_text())
    assert not finished["complete"] and 1 <= len(finished["shards"]) < 10
    subprocess.run([*command, str(tmp_path / "job"), "1"], env=env, check=True, timeout=300)
    assert np.array_equal(read_shards(tmp_path / "job"), read_shards(tmp_path / "whole"))
    assert not list((tmp_path / "job").glob(".*.tmp"))
