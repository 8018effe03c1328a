"""Sharded output: a long embedding job written as shards that survive a crash, resumed by a rerun.

    DIR/manifest.json       the job (model, options), then each finished shard as it is written
    DIR/part-00000.npy      vectors of input lines 0 .. K-1, float32 (K, dim)
    DIR/part-00001.npy      lines K .. 2K-1, ...

Every file is written to a temporary name, flushed to disk and renamed, so a shard or manifest is
either whole or absent: a job killed at any moment leaves only finished shards behind. Running the
same job again reads the input from the start, skips (without embedding) every shard the manifest
lists whose file is intact and whose input lines are the same as before (SHA-256 of both), and
writes the rest. A rerun with another model, other options or other shard sizes is an error, so one
directory never mixes vectors of two jobs. Each shard's lines are embedded `chunk_lines` at a time,
so memory stays flat however large the corpus or the shards.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from .npy import NpyRows

FORMAT = "numbert-shards/1"
MANIFEST = "manifest.json"
Chunk = tuple[range, list[str]]  # (its input lines, their texts)
Embed = Callable[[Iterable[Chunk]], Iterable[np.ndarray]]  # chunks -> their vectors, in order


class ShardError(ValueError):
    """A shard directory that cannot be resumed by this job."""


def shard_name(index: int) -> str:
    return f"part-{index:05d}.npy"


def write_shards(
    directory: str | os.PathLike,
    lines: Iterable[str],
    embed: Embed,
    job: dict,
    *,
    shard_lines: int,
    chunk_lines: int = 2048,
    progress: Callable[[int], object] | None = None,
) -> dict:
    """Embed `lines` into `directory` as shards of `shard_lines` lines; return the finished manifest.

    embed: turns (lines, texts) chunks into their (len(texts), dim) vectors, in order, e.g.
        `lambda chunks: (model.embed(texts) for _, texts in chunks)` or `numbert.workers.Pool(...).map`.
    job: what makes two runs the same job (model, its fingerprint, embed options); JSON-serialisable.
    progress: called with the number of input lines each finished (or skipped) chunk held.
    """
    for name, value in (("shard_lines", shard_lines), ("chunk_lines", chunk_lines)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ShardError(f"cannot make the shard directory {directory}: {e.strerror}") from None
    with open(directory / ".lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ShardError(f"another job is writing to {directory}") from None
        for leftover in directory.glob(".*.tmp"):  # half-written files of a job that was killed
            leftover.unlink()
        return write_locked(directory, lines, embed, job, shard_lines, chunk_lines, progress)


def write_locked(
    directory: Path,
    lines: Iterable[str],
    embed: Embed,
    job: dict,
    shard_lines: int,
    chunk_lines: int,
    progress: Callable[[int], object] | None,
) -> dict:
    """write_shards, once the directory is ours alone."""
    manifest = open_manifest(directory, job, shard_lines, chunk_lines)
    finished = {entry["index"]: entry for entry in manifest["shards"] if intact(directory, entry)}
    manifest["shards"] = sorted(finished.values(), key=lambda entry: entry["index"])
    report = progress or (lambda lines: None)
    to_write: deque[tuple[int, range, bool]] = deque()  # (shard, lines, ends the shard) per chunk sent to embed
    input_hashes: dict[int, Any] = {}  # shard -> SHA-256 of its input lines so far
    total = 0

    def chunks_to_embed() -> Iterator[Chunk]:
        nonlocal total
        for shard, lines_range, texts, last in shard_chunks(lines, shard_lines, chunk_lines):
            input_hash = input_hashes.setdefault(shard, hashlib.sha256())
            for text in texts:
                input_hash.update(text.encode("utf-8", "surrogatepass") + b"\n")
            total = lines_range.stop
            if shard not in finished:
                to_write.append((shard, lines_range, last))
                yield lines_range, texts
                continue
            if last:
                shard_range = range(shard * shard_lines, lines_range.stop)
                check_same_input(finished[shard], shard_range, input_hashes.pop(shard).hexdigest())
            report(len(lines_range))

    writer = None
    for vectors in embed(chunks_to_embed()):
        shard, lines_range, last = to_write.popleft()
        if writer is None:
            writer = ShardWriter(directory, shard, lines_range.start)
        writer.write(vectors)
        if last:
            entry = writer.finish(lines_range.stop, input_hashes.pop(shard).hexdigest())
            manifest["shards"] = sorted([*manifest["shards"], entry], key=lambda e: e["index"])
            manifest["dim"] = entry["dim"]
            write_json(directory / MANIFEST, manifest)
            writer = None
        report(len(lines_range))
    stale = [entry for entry in manifest["shards"] if entry["lines"][0] >= total]
    if stale:
        raise ShardError(
            f"{directory} holds shards up to line {stale[-1]['lines'][1] - 1} but the input has only "
            f"{total} lines: the input has changed since they were written"
        )
    manifest.update(complete=True, lines=total)
    write_json(directory / MANIFEST, manifest)
    return manifest


def shard_chunks(
    lines: Iterable[str], shard_lines: int, chunk_lines: int
) -> Iterator[tuple[int, range, list[str], bool]]:
    """(shard number, the chunk's line range, its texts, whether it is its shard's last chunk) for each chunk.

    Chunks start afresh at every shard boundary, so a shard's vectors never depend on its neighbours.
    """
    lines = iter(lines)
    held, start = None, 0
    while True:
        shard = start // shard_lines
        texts = list(islice(lines, min(chunk_lines, (shard + 1) * shard_lines - start)))
        if held is not None:
            yield *held, not texts or held[0] != shard
        if not texts:
            return
        held, start = (shard, range(start, start + len(texts)), texts), start + len(texts)


def open_manifest(directory: Path, job: dict, shard_lines: int, chunk_lines: int) -> dict:
    """The directory's manifest if this job wrote it (else a ShardError saying what differs), or a new one."""
    path = directory / MANIFEST
    wanted = {"format": FORMAT, "job": job, "shard_lines": shard_lines, "chunk_lines": chunk_lines}
    if not path.exists():
        if any(directory.glob("part-*.npy")):
            raise ShardError(f"{directory} holds shards but no {MANIFEST}: not a numbert shard directory to resume")
        return {**wanted, "shards": [], "complete": False}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ShardError(f"cannot read {path}: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ShardError(f"{path} is not a numbert shard manifest ({FORMAT})")
    json_job = json.loads(json.dumps(wanted))  # tuples as lists, as they were read back
    for key, value in json_job.items():
        if manifest.get(key) != value:
            raise ShardError(
                f"{directory} was written by another job: its {key} is "
                f"{differences(manifest.get(key), value)}; use a new output directory (or remove "
                f"this one) to start over"
            )
    manifest.update(complete=False)
    manifest.pop("lines", None)
    return manifest


def differences(old, new) -> str:
    """What changed between two values of a manifest field, for an error message."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed = [
            f"{k}={old.get(k)!r} there, {new.get(k)!r} now"
            for k in sorted(old.keys() | new.keys())
            if old.get(k) != new.get(k)
        ]
        return "; ".join(changed)
    return f"{old!r} there, {new!r} now"


def intact(directory: Path, entry: dict) -> bool:
    """Whether a shard the manifest lists is on disk with its recorded checksum (else it is written again)."""
    path = directory / entry["file"]
    if path.is_file() and file_sha256(path) == entry["sha256"]:
        return True
    warnings.warn(
        f"{path} is missing or does not match its checksum in {MANIFEST}: writing it again",
        RuntimeWarning,
        stacklevel=3,
    )
    return False


def check_same_input(entry: dict, lines: range, input_sha256: str) -> None:
    if entry["lines"] != [lines.start, lines.stop] or entry["input_sha256"] != input_sha256:
        raise ShardError(
            f"input lines {lines.start}-{lines.stop - 1} differ from those {entry['file']} was "
            f"computed from: the input has changed; use a new output directory"
        )


class ShardWriter:
    """One shard's rows, streamed into a temporary file that becomes part-NNNNN.npy once whole."""

    def __init__(self, directory: Path, index: int, first_line: int):
        self.path, self.index, self.first_line = directory / shard_name(index), index, first_line
        fd, self.temporary = tempfile.mkstemp(dir=directory, prefix=f".{self.path.name}.", suffix=".tmp")
        self.file = os.fdopen(fd, "w+b")
        self.rows: NpyRows | None = None

    def write(self, vectors: np.ndarray) -> None:
        """Append (n, dim) vectors."""
        if self.rows is None:
            self.rows = NpyRows(self.file, vectors.shape[1])
        self.rows.write(vectors)

    def finish(self, last_line: int, input_sha256: str) -> dict:
        """Make the shard durable under its name; return its manifest entry."""
        assert self.rows is not None
        self.rows.finish()
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.temporary, self.path)
        sync_directory(self.path.parent)
        return {
            "index": self.index,
            "file": self.path.name,
            "lines": [self.first_line, last_line],
            "dim": self.rows.dim,
            "sha256": file_sha256(self.path),
            "input_sha256": input_sha256,
        }


def write_json(path: Path, value: dict) -> None:
    """Write JSON atomically: a temporary file, flushed to disk, renamed over `path`."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    sync_directory(path.parent)


def sync_directory(directory: Path) -> None:
    """Flush a directory entry (a rename) to disk, where the platform allows it."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_shards(directory: str | os.PathLike) -> np.ndarray:
    """The vectors of a finished shard job, (lines, dim) float32 in input order, checksums verified."""
    directory = Path(directory)
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ShardError(f"cannot read {directory / MANIFEST}: {e}") from None
    if manifest.get("format") != FORMAT:
        raise ShardError(f"{directory / MANIFEST} is not a numbert shard manifest ({FORMAT})")
    if not manifest.get("complete"):
        raise ShardError(f"the job in {directory} has not finished: run it again to resume it")
    parts = []
    for entry in manifest["shards"]:
        path = directory / entry["file"]
        if not path.is_file() or file_sha256(path) != entry["sha256"]:
            raise ShardError(f"{path} is missing or does not match its checksum in {MANIFEST}")
        parts.append(np.load(path))
    return np.concatenate(parts) if parts else np.empty((0, manifest.get("dim", 0)), np.float32)
