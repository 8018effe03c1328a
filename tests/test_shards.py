"""numbert.engines.shards: sharded output, atomic shards, a rerun resumes, a changed job is an error, a directory or
manifest that is not this job's is refused untouched, and the vectors are the unsharded job's bit for bit."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import bounded

import numbert
from numbert.engines.shards import (
    TEMPORARY,
    ShardError,
    create_temporary,
    numbered_chunks,
    read_shards,
    shard_name,
    shard_pieces,
    write_shards,
)


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


def unsharded(model, texts: list[str], chunk_lines: int) -> np.ndarray:
    """The vectors of the job unsharded: each chunk of `chunk_lines` lines embedded, as `-o vectors.npy` does."""
    return np.concatenate([model.embed(t, progress=False) for _, t in numbered_chunks(texts, chunk_lines)])


def snapshot(directory) -> dict:
    """Every file under `directory` (hidden ones too) with its bytes and mode."""
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mode) if p.is_file() else None
        for p in sorted(directory.rglob("*"))
    }


def test_chunks_start_at_multiples_of_chunk_lines_whatever_the_shards():
    assert [(lines, len(texts)) for lines, texts in numbered_chunks(map(str, range(23)), 8)] == [
        (range(0, 8), 8),
        (range(8, 16), 8),
        (range(16, 23), 7),
    ]
    assert list(numbered_chunks([], 8)) == []
    assert shard_pieces(range(8, 16), 7) == [(1, range(8, 14)), (2, range(14, 16))]
    assert shard_pieces(range(0, 23), 7) == [
        (0, range(0, 7)),
        (1, range(7, 14)),
        (2, range(14, 21)),
        (3, range(21, 23)),
    ]
    assert shard_pieces(range(20, 30), 100) == [(0, range(20, 30))]


def test_shards_hold_every_line_in_order_with_a_manifest(tmp_path, model):
    texts = corpus(45)
    manifest = write_shards(
        tmp_path / "out", texts, embedder(model), {"model": "minilm"}, shard_lines=20, chunk_lines=8
    )
    assert [e["file"] for e in manifest["shards"]] == ["part-00000.npy", "part-00001.npy", "part-00002.npy"]
    assert [e["lines"] for e in manifest["shards"]] == [[0, 20], [20, 40], [40, 45]]
    assert manifest["complete"] and manifest["lines"] == 45 and manifest["dim"] == 384
    on_disk = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert on_disk == manifest
    assert np.array_equal(read_shards(tmp_path / "out"), unsharded(model, texts, 8))  # chunk 16-24 straddles
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        ".lock",
        "manifest.json",
        *map(shard_name, range(3)),
    ]


def test_the_vectors_are_the_unsharded_jobs_bit_for_bit_however_it_is_cut(tmp_path, model):
    texts = corpus(30)
    expected = unsharded(model, texts, 8)
    for shard_lines in (1, 7, 100):
        calls: list = []
        write_shards(
            tmp_path / str(shard_lines), texts, embedder(model, calls), {}, shard_lines=shard_lines, chunk_lines=8
        )
        assert calls == [range(0, 8), range(8, 16), range(16, 24), range(24, 30)]  # each chunk embedded once
        assert np.array_equal(read_shards(tmp_path / str(shard_lines)), expected), shard_lines


def test_a_rerun_after_a_crash_embeds_only_the_chunks_of_unfinished_shards(tmp_path, model):
    texts, job = corpus(60), {"model": "minilm", "options": {"pooling": None}}
    with pytest.raises(KeyboardInterrupt):  # dies after chunk 20-30, which finished shard 0 and began shard 1
        write_shards(tmp_path, texts, embedder(model, [], fail_after=3), job, shard_lines=25, chunk_lines=10)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [e["lines"] for e in manifest["shards"]] == [[0, 25]] and not manifest["complete"]
    assert len(list(tmp_path.glob(".part-00001.npy.*.tmp"))) == 1  # shard 1, half written
    calls: list = []
    done: list = []
    skipped: list = []
    resumed = write_shards(
        tmp_path,
        texts,
        embedder(model, calls),
        job,
        shard_lines=25,
        chunk_lines=10,
        progress=done.append,
        skipped=skipped.append,
    )
    assert calls == [range(20, 30), range(30, 40), range(40, 50), range(50, 60)]  # 20-30 whole; 20-25 not written
    assert sum(done) == 60 and [e["index"] for e in skipped] == [0]
    assert resumed["shards"][0] == manifest["shards"][0] and [e["lines"] for e in resumed["shards"]][1:] == [
        [25, 50],
        [50, 60],
    ]
    assert np.array_equal(read_shards(tmp_path), unsharded(model, texts, 10))
    assert not list(tmp_path.glob(".*.tmp"))
    calls.clear()  # a finished job run again embeds nothing
    skipped.clear()
    write_shards(tmp_path, texts, embedder(model, calls), job, shard_lines=25, chunk_lines=10, skipped=skipped.append)
    assert calls == [] and [e["index"] for e in skipped] == [0, 1, 2]


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
    assert calls == [range(0, 40)]  # the one chunk, embedded whole; only shard 1 written
    assert np.array_equal(read_shards(tmp_path), expected)


def test_unfinished_or_foreign_directories_are_refused(tmp_path, model):
    with pytest.raises(ShardError, match="cannot read"):
        read_shards(tmp_path)
    (tmp_path / "part-00000.npy").write_bytes(b"")
    with pytest.raises(ShardError, match="not a numbert shard directory \\(it holds 'part-00000.npy' but no manifest"):
        write_shards(tmp_path, ["a"], embedder(model), {}, shard_lines=5)
    assert [p.name for p in tmp_path.iterdir()] == ["part-00000.npy"]
    with pytest.raises(ValueError, match="shard_lines must be a positive integer"):
        write_shards(tmp_path / "new", ["a"], embedder(model), {}, shard_lines=0)


USERS_FILES = {".draft.tmp": b"my draft", ".report.docx.tmp": b"PK\x03\x04", "notes.txt": b"notes"}


@pytest.mark.parametrize(
    "manifest, message",
    [
        (None, "not a numbert shard directory \\(it holds '.draft.tmp' but no manifest.json\\)"),
        (b'{"name": "my web app"}', "manifest.json is not a numbert shard manifest"),
        (b"not json", "cannot read .*manifest.json"),
        (
            json.dumps({"format": "numbert-shards/1", "job": {"model": "bert"}, "shard_lines": 5, "shards": []}),
            "was written by another job: its job is model='bert' there, 'minilm' now",
        ),
    ],
)
def test_a_directory_that_is_not_this_jobs_is_left_byte_for_byte_as_it_was(tmp_path, model, manifest, message):
    """It once deleted every .*.tmp file in the directory, then refused it, leaving a .lock behind."""
    for name, data in USERS_FILES.items():
        (tmp_path / name).write_bytes(data)
    if manifest is not None:
        (tmp_path / "manifest.json").write_bytes(manifest if isinstance(manifest, bytes) else manifest.encode())
    before = snapshot(tmp_path)
    calls: list = []
    with pytest.raises(ShardError, match=message):
        write_shards(tmp_path, corpus(10), embedder(model, calls), {"model": "minilm"}, shard_lines=5)
    assert snapshot(tmp_path) == before and calls == []


def test_a_rerun_deletes_its_own_temporaries_and_nothing_else(tmp_path, model):
    """Only what numbert can prove it wrote: the shard temporary its manifest names (`writing`, recorded before
    the file is created) and manifest temporaries holding this job's manifest. A name alone proves nothing:
    a user's `.part-00000.npy.deadbeef.tmp` in an otherwise empty directory was deleted (issue 35)."""
    job = {"model": "minilm"}
    (tmp_path / ".part-00000.npy.deadbeef.tmp").write_bytes(b"a user's file")  # no manifest: nothing proves it ours
    with bounded(seconds=60, memory=20e6):
        write_shards(tmp_path, corpus(10), embedder(model), job, shard_lines=5)
    assert (tmp_path / ".part-00000.npy.deadbeef.tmp").read_bytes() == b"a user's file"
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert "writing" not in manifest
    ours = {
        ".part-00001.npy.89abcdef.tmp": b"half a shard",  # named in the manifest as being written
        ".manifest.json.00ff00ff.tmp": json.dumps({**manifest, "complete": False}).encode(),  # this job's manifest
    }
    theirs = {
        **USERS_FILES,
        ".part-00002.npy.0123abcd.tmp": b"named as numbert names them, not in the manifest",
        ".manifest.json.0badcafe.tmp": b"{half a manif",  # not provably ours
        ".manifest.json.feedf00d.tmp": json.dumps({**manifest, "job": {"model": "other"}}).encode(),
        ".part-00001.npy.tmp": b"...",
        "x.0123abcd.tmp": b"...",
    }
    for name, data in {**ours, **theirs}.items():
        (tmp_path / name).write_bytes(data)
    os.symlink(tmp_path / "notes.txt", tmp_path / ".part-00003.npy.12345678.tmp")  # a link: never deleted
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "writing": ".part-00001.npy.89abcdef.tmp"}))
    before = snapshot(tmp_path)
    write_shards(tmp_path, corpus(10), embedder(model), job, shard_lines=5)
    after = snapshot(tmp_path)
    assert sorted(after) == sorted(set(before) - set(ours))
    assert all(after[name] == before[name] for name in [*theirs, ".part-00000.npy.deadbeef.tmp"])
    assert os.readlink(tmp_path / ".part-00003.npy.12345678.tmp") == str(tmp_path / "notes.txt")
    assert all(TEMPORARY.fullmatch(name) for name in ours)


def test_a_job_killed_in_its_first_manifest_write_is_cleaned_up_by_the_rerun(tmp_path, model):
    """No manifest.json yet, but its temporary whole: it holds this job's manifest (JSON: tuples as lists), so it
    is numbert's and goes; one of another job stays."""
    job = {"model": "minilm", "layers": (-1, -2)}
    first = {"format": "numbert-shards/1", "job": job, "shard_lines": 5, "chunk_lines": 2048, "shards": []}
    (tmp_path / ".lock").write_bytes(b"")
    (tmp_path / ".manifest.json.0a0b0c0d.tmp").write_text(json.dumps(first))
    (tmp_path / ".manifest.json.0e0f0a0b.tmp").write_text(json.dumps({**first, "job": {"model": "other"}}))
    write_shards(tmp_path, corpus(6), embedder(model), job, shard_lines=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".lock",
        ".manifest.json.0e0f0a0b.tmp",
        "manifest.json",
        "part-00000.npy",
        "part-00001.npy",
    ]


def test_a_planted_lock_link_is_refused_and_its_target_never_made(tmp_path, model):
    """Issue 35: `encode -o DIR/ --shard-lines 2` with DIR/.lock a symbolic link created the file it points to,
    outside DIR. The lock is opened with O_NOFOLLOW: a link there (or a FIFO) is a ShardError, nothing made."""
    directory, target = tmp_path / "out", tmp_path / "outside"
    directory.mkdir()
    os.symlink(target, directory / ".lock")
    with bounded(seconds=10, memory=5e6), pytest.raises(ShardError, match="is a symbolic link; numbert follows no"):
        write_shards(directory, corpus(4), embedder(model), {}, shard_lines=2)
    assert not target.exists() and sorted(p.name for p in directory.iterdir()) == [".lock"]
    os.unlink(directory / ".lock")
    os.mkfifo(directory / ".lock")
    with bounded(seconds=10, memory=5e6), pytest.raises(ShardError, match="is not a regular file"):
        write_shards(directory, corpus(4), embedder(model), {}, shard_lines=2)
    os.unlink(directory / ".lock")
    os.symlink(target, directory / ".manifest.json.00000000.tmp")  # a planted temporary name: never written through
    write_shards(directory, corpus(4), embedder(model), {}, shard_lines=2)
    assert not target.exists() and read_shards(directory).shape == (4, 384)


def test_temporaries_are_named_as_recognised_and_every_file_follows_the_umask(tmp_path, model):
    fd, temporary = create_temporary(tmp_path / "part-00007.npy")
    os.close(fd)
    assert TEMPORARY.fullmatch(temporary.name) and temporary.parent == tmp_path
    previous = os.umask(0o027)
    try:
        write_shards(tmp_path / "out", corpus(12), embedder(model), {}, shard_lines=5)
    finally:
        os.umask(previous)
    files = sorted((tmp_path / "out").glob("[!.]*"))
    assert [p.name for p in files] == ["manifest.json", "part-00000.npy", "part-00001.npy", "part-00002.npy"]
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o640}  # as `-o vectors.npy`; mkstemp made 0600


@pytest.fixture(scope="module")
def finished_job(tmp_path_factory, model) -> tuple:
    """A finished job of 20 lines in shards of 7 (the last one 6 lines), and its texts."""
    texts, directory = corpus(20), tmp_path_factory.mktemp("finished")
    write_shards(directory, texts, embedder(model), {"model": "minilm"}, shard_lines=7, dim=384)
    return directory, texts


def entry_field(key, value):
    def damage(manifest):
        manifest["shards"][1][key] = value

    return damage


def without(key):
    def damage(manifest):
        del manifest["shards"][1][key]

    return damage


def set_manifest(key, value):
    def damage(manifest):
        manifest[key] = value

    return damage


def far_shard(manifest):
    """Shard 1 listed as shard 1,000,000, every field consistent with that: shard 2 is then short but not last."""
    manifest["shards"][1].update(index=10**6, file="part-1000000.npy", lines=[7 * 10**6, 7 * 10**6 + 7])


def duplicate(manifest):
    manifest["shards"][1] = dict(manifest["shards"][0])


HOSTILE = {
    "negative index": (entry_field("index", -1), r"shards\[1\]\.index is -1, expected a shard number >= 0"),
    "index 10^6": (entry_field("index", 10**6), r"shards\[1\]\.file is 'part-00001.npy', expected 'part-1000000.npy'"),
    "index 10^6, consistent": (far_shard, r"shard 2 holds lines \[14, 20\], fewer than shard_lines \(7\), but it"),
    "duplicate": (duplicate, r"shards\[1\]: shard 0 \(part-00000.npy\) is listed twice"),
    "another shard's file": (entry_field("file", "part-00002.npy"), r"shards\[1\]\.file is 'part-00002.npy'"),
    "a path": (entry_field("file", "../../secret.npy"), r"shards\[1\]\.file is '../../secret.npy', expected"),
    "lines": (entry_field("lines", [8, 14]), r"shards\[1\]\.lines is \[8, 14\], expected \[7, N\], 7 < N <= 14"),
    "lines too many": (entry_field("lines", [7, 15]), r"shards\[1\]\.lines is \[7, 15\]"),
    "lines of text": (entry_field("lines", ["7", 14]), r"shards\[1\]\.lines is \['7', 14\]"),
    "lines short": (entry_field("lines", [7, 13]), r"shard 1 holds lines \[7, 13\], fewer than shard_lines"),
    "dim": (entry_field("dim", 5), r"shards\[1\]\.dim is 5, expected the width of the job's vectors, 384"),
    "sha256": (entry_field("sha256", "not hex"), r"shards\[1\]\.sha256 is 'not hex', expected a SHA-256"),
    "input_sha256": (entry_field("input_sha256", "AB" * 32), r"shards\[1\]\.input_sha256 is 'ABAB"),
    "missing key": (without("sha256"), r"shards\[1\] has no 'sha256'"),
    "index of text": (entry_field("index", "1"), r"shards\[1\]\.index is '1', expected an integer"),
    "index true": (entry_field("index", True), r"shards\[1\]\.index is True, expected an integer"),
    "lines a string": (entry_field("lines", "7-14"), r"shards\[1\]\.lines is '7-14', expected a list"),
    "entry a number": (lambda m: m["shards"].__setitem__(1, 42), r"shards\[1\] is 42, expected an object"),
    "shards an object": (set_manifest("shards", {}), r"manifest.json: shards is \{\}, expected a list"),
    "no shards": (lambda m: m.pop("shards"), r"manifest.json: shards is None, expected a list"),
    "dim of text": (set_manifest("dim", "384"), r"manifest.json: dim is '384', expected an integer >= 1"),
}


@pytest.mark.parametrize("damage, message", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_manifest_is_refused_naming_the_file_and_field(tmp_path, model, finished_job, damage, message):
    directory, texts = finished_job
    job = shutil.copytree(directory, tmp_path / "job")
    manifest = json.loads((job / "manifest.json").read_text())
    damage(manifest)
    (job / "manifest.json").write_text(json.dumps(manifest))
    shutil.copyfile(job / "part-00001.npy", job / "part-1000000.npy")  # for the far shard: intact, if it is believed
    with pytest.raises(ShardError, match=message):
        read_shards(job)
    before, calls = snapshot(job), []
    with pytest.raises(ShardError, match=message):
        write_shards(job, texts, embedder(model, calls), {"model": "minilm"}, shard_lines=7, dim=384)
    assert snapshot(job) == before and calls == []


def test_a_manifest_that_does_not_cover_the_lines_is_not_read_as_finished(tmp_path, finished_job):
    job = shutil.copytree(finished_job[0], tmp_path / "job")
    manifest = json.loads((job / "manifest.json").read_text())
    manifest["shards"].pop(1)
    (job / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShardError, match=r"shard 1 holds \[14, 20\], expected \[7, 14\]"):
        read_shards(job)
    manifest["lines"] = 21
    manifest["shards"].insert(1, json.loads((finished_job[0] / "manifest.json").read_text())["shards"][1])
    (job / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShardError, match=r"shard 2 holds \[14, 20\], expected \[14, 21\]"):
        read_shards(job)


def test_empty_input_gives_an_empty_finished_job(tmp_path, model):
    manifest = write_shards(tmp_path, [], embedder(model), {}, shard_lines=5)
    assert manifest["complete"] and manifest["lines"] == 0 and manifest["shards"] == []
    assert read_shards(tmp_path).shape[0] == 0


JOB_SCRIPT = """
import sys, numbert
from numbert.engines.shards import write_shards
from numbert.engines.workers import Pool
model_dir, source, out, workers = sys.argv[1:]
model = numbert.load(model_dir)
lines = open(source, encoding="utf-8").read().splitlines()
with Pool(model_dir, int(workers)) as pool:
    embed = lambda chunks: (model.embed(texts, workers=pool, progress=False) for _, texts in chunks)
    write_shards(out, lines, embed, {"model": "minilm"}, shard_lines=60, chunk_lines=20)
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
