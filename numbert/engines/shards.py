"""Sharded output: a long embedding job written as shards that survive a crash, resumed by a rerun.

    DIR/manifest.json       the job (model, options), then each finished shard as it is written
    DIR/part-00000.npy      vectors of input lines 0 .. K-1, float32 (K, dim)
    DIR/part-00001.npy      lines K .. 2K-1, ...

Every file is written to a temporary name (`.NAME.XXXXXXXX.tmp`, TEMPORARY), flushed to disk and
renamed, so a shard or manifest is either whole or absent: a job killed at any moment leaves only
finished shards behind, and the next run deletes its temporaries, nothing else. A name alone proves
nothing (a user's file may look like one): the manifest names the shard temporary before it is created
(`writing`), and a manifest temporary is numbert's when it holds this job's manifest. Nothing is written
through a symbolic link: temporaries are created new (O_EXCL), renamed over their targets, and the `.lock`
is opened with O_NOFOLLOW (a planted link is refused). Running the same job
again reads the input from the start, skips (without embedding) every shard the manifest lists whose
file is intact and whose input lines are the same as before (SHA-256 of both), and writes the rest.
A rerun with another model, other options or other shard sizes is an error, so one directory never
mixes vectors of two jobs; a directory that is neither new, empty nor this job's is refused before
anything in it is touched, and a manifest is checked entry by entry before it is believed.

The lines are embedded `chunk_lines` at a time, in chunks that start at multiples of `chunk_lines`
whatever the shard size: the chunks `numbert encode -o vectors.npy` embeds. A vector depends (in the
last bits) on the texts batched with it, so these are the vectors of the unsharded job, bit for bit,
however the job is cut. A chunk that straddles two shards is embedded once and its rows split between
them; on a resume, a chunk that is partly finished is embedded whole and only the unfinished shards'
rows are written. Rows stream into the shard files, so memory stays flat however large the corpus or
the shards.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice, zip_longest
from pathlib import Path
from typing import IO, Any

import numpy as np

from .npy import NpyRows

FORMAT = "numbert-shards/1"
MANIFEST = "manifest.json"
LOCK = ".lock"  # held (flock) by the job writing the directory
MANIFEST_BYTES = 64 << 20  # a manifest temporary larger than this is not read to prove it numbert's
TEMPORARY = re.compile(r"\.(?P<name>part-\d{5,}\.npy|manifest\.json)\.(?P<tag>[0-9a-f]{8})\.tmp")  # being written
SHA256 = re.compile(r"[0-9a-f]{64}")
ENTRY_FIELDS = {"index": int, "file": str, "lines": list, "dim": int, "sha256": str, "input_sha256": str}
TYPE_NAMES = {int: "an integer", str: "a string", list: "a list"}
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
    dim: int | None = None,
    progress: Callable[[int], object] | None = None,
    skipped: Callable[[dict], object] | None = None,
) -> dict:
    """Embed `lines` into `directory` as shards of `shard_lines` lines; return the finished manifest.

    embed: turns (lines, texts) chunks into their (len(texts), dim) vectors, in order, e.g.
        `lambda chunks: (model.embed(texts) for _, texts in chunks)` or `numbert.engines.workers.Pool(...).map`.
    job: what makes two runs the same job (model, its fingerprint, embed options); JSON-serialisable.
    dim: the width of the vectors, when known: a manifest that says otherwise is refused.
    progress: called with the number of input lines each finished (or skipped) chunk held.
    skipped: called with the manifest entry of each finished shard skipped (its input checked).

    The directory must be new, empty, or this job's (its manifest.json says so): anything else is a
    ShardError, and the directory is left as it was.
    """
    for name, value in (("shard_lines", shard_lines), ("chunk_lines", chunk_lines)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    directory = Path(directory)
    open_manifest(directory, job, shard_lines, chunk_lines, dim)  # a directory not ours fails here, untouched
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ShardError(f"cannot make the shard directory {directory}: {e.strerror}") from None
    with open_lock(directory) as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ShardError(f"another job is writing to {directory}") from None
        manifest = open_manifest(directory, job, shard_lines, chunk_lines, dim)  # again: ours alone now
        remove_temporaries(directory, manifest)
        return write_locked(directory, lines, embed, manifest, progress or ignore, skipped or ignore)


def open_lock(directory: Path) -> IO[bytes]:
    """DIR/.lock, created if absent, opened without following a symbolic link (a link planted there would
    have numbert create or open the file it points to): a ShardError for a link or anything but a file."""
    path = directory / LOCK
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO does not hang
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ShardError(
                f"{path} is a symbolic link; numbert follows no link it did not make: remove it, or use "
                f"another output directory"
            ) from None
        raise ShardError(f"cannot open {path}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ShardError(f"{path} is not a regular file: remove it, or use another output directory")
    return os.fdopen(fd, "r+b")


def ignore(_: object) -> None:
    """A callback that does nothing."""


def write_locked(
    directory: Path,
    lines: Iterable[str],
    embed: Embed,
    manifest: dict,
    progress: Callable[[int], object],
    skipped: Callable[[dict], object],
) -> dict:
    """write_shards, once the directory is ours alone and its manifest checked."""
    if not (directory / MANIFEST).exists():
        write_json(directory / MANIFEST, manifest)  # marks the directory as this job's
    shard_lines, width = manifest["shard_lines"], manifest.get("dim")
    finished = {entry["index"]: entry for entry in manifest["shards"] if intact(directory, entry)}
    manifest["shards"] = list(finished.values())
    input_hashes: dict[int, Any] = {}  # shard -> SHA-256 of its input lines so far
    sent: deque[range] = deque()  # the lines of each chunk handed to embed, whose vectors are awaited
    total = 0

    def close_finished(shard: int, stop: int) -> None:
        """A finished shard's input lines have all been read: they must be those it was computed from."""
        check_same_input(finished[shard], range(shard * shard_lines, stop), input_hashes.pop(shard).hexdigest())
        skipped(finished[shard])

    def chunks_to_embed() -> Iterator[Chunk]:
        nonlocal total
        for lines_range, texts in numbered_chunks(lines, manifest["chunk_lines"]):
            total = lines_range.stop
            pieces = shard_pieces(lines_range, shard_lines)
            for shard, piece in pieces:
                hash_lines(input_hashes.setdefault(shard, hashlib.sha256()), texts, piece, lines_range)
                if shard in finished and piece.stop == (shard + 1) * shard_lines:
                    close_finished(shard, piece.stop)
            if all(shard in finished for shard, _ in pieces):
                progress(len(lines_range))
                continue
            sent.append(lines_range)
            yield lines_range, texts
        last = (total - 1) // shard_lines
        if total % shard_lines and last in finished:  # the input ends inside the last shard
            close_finished(last, total)

    def finish(writer: ShardWriter, stop: int) -> None:
        entry = writer.finish(stop, input_hashes.pop(writer.index).hexdigest())
        manifest.pop("writing", None)  # renamed: no temporary left
        manifest["shards"] = sorted([*manifest["shards"], entry], key=lambda e: e["index"])
        manifest["dim"] = entry["dim"]
        write_json(directory / MANIFEST, manifest)

    def writing(temporary: Path) -> None:
        """Record a shard's temporary in the manifest before it is created: what proves it numbert's."""
        manifest["writing"] = temporary.name
        write_json(directory / MANIFEST, manifest)

    writer = None
    for vectors in embed(chunks_to_embed()):
        lines_range = sent.popleft()
        width = check_vectors(vectors, lines_range, width)
        for shard, piece in shard_pieces(lines_range, shard_lines):
            if shard in finished:
                continue
            writer = writer or ShardWriter(directory, shard, piece.start, writing)
            writer.write(vectors[piece.start - lines_range.start : piece.stop - lines_range.start])
            if piece.stop == (shard + 1) * shard_lines:
                finish(writer, piece.stop)
                writer = None
        progress(len(lines_range))
    if writer is not None:  # the last shard, shorter than shard_lines
        finish(writer, total)
    stale = [entry for entry in manifest["shards"] if entry["lines"][0] >= total]
    if stale:
        raise ShardError(
            f"{directory} holds shards up to line {stale[-1]['lines'][1] - 1} but the input has only "
            f"{total} lines: the input has changed since they were written"
        )
    manifest.update(complete=True, lines=total)
    write_json(directory / MANIFEST, manifest)
    return manifest


def numbered_chunks(lines: Iterable[str], chunk_lines: int) -> Iterator[Chunk]:
    """The input as chunks of `chunk_lines` lines (the last one shorter), with the line numbers each holds."""
    lines, start = iter(lines), 0
    while texts := list(islice(lines, chunk_lines)):
        yield range(start, start + len(texts)), texts
        start += len(texts)


def shard_pieces(lines: range, shard_lines: int) -> list[tuple[int, range]]:
    """(shard number, its lines among `lines`) for each shard the lines belong to, in order."""
    first, last = lines.start // shard_lines, (lines.stop - 1) // shard_lines
    return [
        (shard, range(max(lines.start, shard * shard_lines), min(lines.stop, (shard + 1) * shard_lines)))
        for shard in range(first, last + 1)
    ]


def hash_lines(digest: Any, texts: list[str], piece: range, chunk: range) -> None:
    """Add the texts of lines `piece` (within `chunk`, whose texts are `texts`) to a shard's input SHA-256."""
    for text in texts[piece.start - chunk.start : piece.stop - chunk.start]:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\n")


def check_vectors(vectors: np.ndarray, lines: range, width: int | None) -> int:
    """The width of a chunk's vectors, once they are one row per line and as wide as the job's others."""
    if vectors.ndim != 2 or len(vectors) != len(lines) or width not in (None, vectors.shape[1]):
        raise ShardError(
            f"embed gave vectors of shape {vectors.shape} for input lines {lines.start}-{lines.stop - 1}; "
            f"expected ({len(lines)}, {width or 'dim'})"
        )
    return vectors.shape[1]


def open_manifest(directory: Path, job: dict, shard_lines: int, chunk_lines: int, dim: int | None) -> dict:
    """The directory's manifest if this job wrote it, a new one if the directory is new or empty (but for
    numbert's lock and temporaries); else a ShardError saying why the directory is not this job's."""
    path = directory / MANIFEST
    wanted = {"format": FORMAT, "job": job, "shard_lines": shard_lines, "chunk_lines": chunk_lines}
    if not path.exists():
        names = sorted(os.listdir(directory)) if directory.is_dir() else []
        others = [name for name in names if name != LOCK and not TEMPORARY.fullmatch(name)]
        if others:
            raise ShardError(
                f"{directory} is not a numbert shard directory (it holds {others[0]!r} but no {MANIFEST}): "
                f"give a new or empty directory"
            )
        return {**wanted, "shards": [], "complete": False, **({"dim": dim} if dim else {})}
    manifest = read_manifest(path)
    json_job = json.loads(json.dumps(wanted))  # tuples as lists, as they were read back
    for key, value in json_job.items():
        if manifest.get(key) != value:
            raise ShardError(
                f"{directory} was written by another job: its {key} is "
                f"{differences(manifest.get(key), value)}; use a new output directory (or remove "
                f"this one) to start over"
            )
    recorded = int_field(path, manifest, "dim", 1) if "dim" in manifest else None
    if dim is not None and recorded not in (None, dim):
        raise ShardError(f"{path}: dim is {recorded}, but this job's vectors have {dim} values")
    manifest["shards"] = check_entries(path, manifest.get("shards"), shard_lines, dim or recorded)
    if manifest["shards"]:
        manifest["dim"] = manifest["shards"][0]["dim"]
    elif dim:
        manifest["dim"] = dim
    manifest.update(complete=False)
    manifest.pop("lines", None)
    return manifest


def read_manifest(path: Path) -> dict:
    """A numbert shard manifest as read from `path`, its entries not yet checked."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ShardError(f"cannot read {path}: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ShardError(f"{path} is not a numbert shard manifest ({FORMAT})")
    return manifest


def int_field(path: Path, manifest: dict, key: str, minimum: int) -> int:
    """manifest[key], an integer >= minimum, else a ShardError naming the file and the field."""
    value = manifest.get(key)
    if type(value) is not int or value < minimum:
        raise ShardError(f"{path}: {key} is {value!r}, expected an integer >= {minimum}")
    return value


def check_entries(path: Path, shards: object, shard_lines: int, dim: int | None) -> list[dict]:
    """A manifest's finished shards in index order, each checked against the job (and all as wide as the
    first, when `dim` is not known): a ShardError naming the entry and its field otherwise, so a damaged
    or edited manifest never passes for finished work."""
    if not isinstance(shards, list):
        raise ShardError(f"{path}: shards is {shards!r}, expected a list of finished shards")
    by_index: dict[int, dict] = {}
    for number, entry in enumerate(shards):
        where = f"{path}: shards[{number}]"
        check_entry(where, entry, shard_lines, dim)
        if entry["index"] in by_index:
            raise ShardError(f"{where}: shard {entry['index']} ({entry['file']}) is listed twice")
        by_index[entry["index"]] = entry
        dim = entry["dim"]
    ordered = [by_index[index] for index in sorted(by_index)]
    for entry in ordered[:-1]:
        if entry["lines"][1] - entry["lines"][0] != shard_lines:
            raise ShardError(
                f"{path}: shard {entry['index']} holds lines {entry['lines']}, fewer than shard_lines "
                f"({shard_lines}), but it is not the last shard"
            )
    return ordered


def check_entry(where: str, entry: object, shard_lines: int, dim: int | None) -> None:
    """One manifest entry: every field present, of its type, and what shard `index` of this job must hold."""
    if not isinstance(entry, dict):
        raise ShardError(f"{where} is {entry!r}, expected an object")
    for key, kind in ENTRY_FIELDS.items():
        if key not in entry:
            raise ShardError(f"{where} has no {key!r}")
        if not isinstance(entry[key], kind) or isinstance(entry[key], bool):
            raise ShardError(f"{where}.{key} is {entry[key]!r}, expected {TYPE_NAMES[kind]}")

    def wrong(key: str, expected: str) -> ShardError:
        return ShardError(f"{where}.{key} is {entry[key]!r}, expected {expected}")

    index, lines = entry["index"], entry["lines"]
    if index < 0:
        raise wrong("index", "a shard number >= 0")
    if entry["file"] != shard_name(index):
        raise wrong("file", f"{shard_name(index)!r} (shard {index})")
    first = index * shard_lines
    if not (
        len(lines) == 2 and all(type(n) is int for n in lines) and lines[0] == first < lines[1] <= first + shard_lines
    ):
        raise wrong(
            "lines", f"[{first}, N], {first} < N <= {first + shard_lines} (shard {index} of {shard_lines} lines)"
        )
    if entry["dim"] < 1 or dim not in (None, entry["dim"]):
        raise wrong("dim", f"the width of the job's vectors, {dim}" if dim else "a positive width")
    for key in ("sha256", "input_sha256"):
        if not SHA256.fullmatch(entry[key]):
            raise wrong(key, "a SHA-256 in 64 lowercase hex digits")


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
    """One shard's rows, streamed into a temporary file that becomes part-NNNNN.npy once whole; `record` is
    given the temporary's name before the file is created."""

    def __init__(self, directory: Path, index: int, first_line: int, record: Callable[[Path], object] = ignore):
        self.path, self.index, self.first_line = directory / shard_name(index), index, first_line
        fd, self.temporary = create_temporary(self.path, record)
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
    fd, temporary = create_temporary(path)
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


def create_temporary(path: Path, record: Callable[[Path], object] = ignore) -> tuple[int, Path]:
    """A new empty file for what becomes `path`, next to it and named as TEMPORARY says, open for reading
    and writing (O_EXCL: never an existing file, nor through a link); its permissions are what the umask
    gives any new file, as `path` will keep them. `record(name)` is called before the file is created."""
    while True:
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        record(temporary)
        try:
            return os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666), temporary
        except FileExistsError:  # the name of another file being written: draw again
            continue


def remove_temporaries(directory: Path, manifest: dict) -> None:
    """Delete the half-written files a killed job left behind that are provably numbert's, and nothing else:
    the shard temporary the manifest names (`writing`), and manifest temporaries holding this job's
    manifest. A file that only looks like one (TEMPORARY's name) is left as it is."""
    writing = manifest.pop("writing", None)
    for name in os.listdir(directory):
        found = TEMPORARY.fullmatch(name)
        path = directory / name
        if not found or not is_plain_file(path):
            continue
        if name == writing or (found["name"] == MANIFEST and holds_manifest(path, manifest)):
            path.unlink(missing_ok=True)


def is_plain_file(path: Path) -> bool:
    """A regular file, not a link to one."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def holds_manifest(path: Path, manifest: dict) -> bool:
    """Whether the file at `path` (not a link) is a whole manifest of this job: a temporary numbert wrote."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        if os.fstat(fd).st_size > MANIFEST_BYTES:
            return False
        try:
            written = json.loads(f.read())
        except ValueError:  # half written: not provably ours
            return False
    keys = ("format", "job", "shard_lines", "chunk_lines")
    ours = json.loads(json.dumps({key: manifest.get(key) for key in keys}))  # tuples as lists, as they were read
    return isinstance(written, dict) and all(written.get(key) == ours[key] for key in keys)


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
    """The vectors of a finished shard job, (lines, dim) float32 in input order, manifest and checksums verified."""
    path = Path(directory) / MANIFEST
    manifest = read_manifest(path)
    if manifest.get("complete") is not True:
        raise ShardError(f"the job in {path.parent} has not finished: run it again to resume it")
    shard_lines, lines = int_field(path, manifest, "shard_lines", 1), int_field(path, manifest, "lines", 0)
    dim = int_field(path, manifest, "dim", 1) if lines or "dim" in manifest else 0
    shards = check_entries(path, manifest.get("shards"), shard_lines, dim or None)
    expected = [[start, min(start + shard_lines, lines)] for start in range(0, lines, shard_lines)]
    held = [shard["lines"] for shard in shards]
    for index, (want, have) in enumerate(zip_longest(expected, held)):
        if want != have:
            raise ShardError(
                f"{path}: the shards do not hold lines 0-{lines - 1} in order, once each: shard {index} holds "
                f"{have or 'nothing'}, expected {want or 'no shard'} (shards of {shard_lines} lines)"
            )
    parts = []
    for entry in shards:
        part = path.parent / entry["file"]
        if not part.is_file() or file_sha256(part) != entry["sha256"]:
            raise ShardError(f"{part} is missing or does not match its checksum in {MANIFEST}")
        parts.append(np.load(part))
    return np.concatenate(parts) if parts else np.empty((0, dim), np.float32)
