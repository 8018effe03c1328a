"""A multi-vector index on disk: each text's token vectors, as `numbert encode --multi` writes them and
`numbert search --multi-index` reads them.

    numbert encode --multi --file corpus.txt -o tokens.npz     # a ragged .npz: vectors + offsets
    numbert encode --multi --file corpus.txt -o tokens/        # a directory: one .npy per text

Two layouts, both float32:

- a ragged .npz: `vectors` (all texts' tokens, dim), the texts' vectors one after the other, and `offsets`
  (texts + 1,) int64: text i's vectors are vectors[offsets[i]:offsets[i + 1]]. One file; read whole by search.
- a directory: `000000000.npy`, `000000001.npy`, ... one (tokens, dim) array per text, numbered from 0 in input
  order (9 digits), plus `offsets.npy` as above: search reads only the candidates' files, so the index need not
  fit in memory. The directory must be new or empty: numbert never touches a file it did not create.

--query writes the vectors as the model reads queries (marked and expanded with [MASK]); the default is documents.
The .npz's vectors wait in a temporary file beside it while they are computed, so memory holds one chunk of texts.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .common import Failure

CHUNK_TEXTS = 256  # texts embedded at a time


def check_multi_options(args: argparse.Namespace) -> None:
    """--multi writes a ragged .npz or a directory of .npy; options of sentence vectors are refused."""
    output = args.output
    if output in (None, "-") or not (output.endswith(("/", ".npz")) or Path(output).is_dir()):
        raise Failure("--multi writes -o OUT.npz (a ragged .npz with offsets) or -o DIR/ (one .npy per text)")
    if args.format not in (None, "npz") or (args.format == "npz" and not output.endswith(".npz")):
        raise Failure(f"--multi writes a ragged .npz or a directory of .npy, not --format {args.format}")
    dense = (
        "strategy",
        "layers",
        "combine",
        "pooling",
        "normalize",
        "dimensions",
        "precision",
        "shard_lines",
        "sparse",
        "task",
    )
    for name in (*dense, "workers", "scheduler", "dask", "top_k"):
        if getattr(args, name, None) not in (None, False):
            raise Failure(
                f"--{name.replace('_', '-')} does not apply to --multi (a multi-vector model's token vectors)"
            )
    if args.long != "truncate":
        raise Failure("--multi cuts long inputs to the model's lengths; --long window is not for it")


def write_multi(model, chunks: Iterator[list[str]], args: argparse.Namespace, bar: Any) -> None:
    """Each text's token vectors (embed_multi, as a query with --query) into -o OUT.npz or -o DIR/."""
    vectors = (
        vectors
        for chunk in chunks
        for vectors in advanced(
            bar, model.embed_multi(chunk, is_query=args.query, batch_size=args.batch_size), len(chunk)
        )
    )
    if args.output.endswith(".npz"):
        write_ragged(Path(args.output), vectors)
    else:
        write_directory(Path(args.output), vectors)


def advanced(bar: Any, vectors: list[np.ndarray], texts: int) -> list[np.ndarray]:
    bar.update(texts)
    return vectors


def write_ragged(path: Path, vectors: Iterator[np.ndarray]) -> None:
    """vectors and offsets into the .npz at `path`, written under a temporary name and renamed at the end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    offsets, dim = [0], 0
    with tempfile.TemporaryFile(dir=path.parent) as spool:
        for v in vectors:
            dim = v.shape[1]
            spool.write(np.ascontiguousarray(v, np.float32).tobytes())
            offsets.append(offsets[-1] + len(v))
        spool.flush()
        total = offsets[-1]
        stacked = np.memmap(spool, np.float32, "r", shape=(total, dim)) if total else np.empty((0, dim), np.float32)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(out, vectors=stacked, offsets=np.array(offsets, np.int64))
            os.replace(name, path)
        except BaseException:
            os.unlink(name)
            raise


def write_directory(directory: Path, vectors: Iterator[np.ndarray]) -> None:
    """One NNNNNNNNN.npy per text and offsets.npy into `directory`, which must be new or empty."""
    if directory.exists() and any(directory.iterdir()):
        raise Failure(f"{directory} is not empty: --multi -o DIR/ writes into a new or empty directory")
    directory.mkdir(parents=True, exist_ok=True)
    offsets = [0]
    for i, v in enumerate(vectors):
        np.save(directory / f"{i:09d}.npy", np.ascontiguousarray(v, np.float32))
        offsets.append(offsets[-1] + len(v))
    np.save(directory / "offsets.npy", np.array(offsets, np.int64))


MAX_EXPANSION = 16  # how many times its compressed size a compressed .npz member may claim to hold (zeros: ~1000x)


class MultiIndex:
    """A multi-vector index written by write_ragged or write_directory: each text's (tokens, dim) vectors.

    Checked at open, each malformed file a Failure naming it (and the member): every array's header is read before
    its data and bounded by the file (a compressed .npz member by MAX_EXPANSION times its compressed size), the
    vectors 2-D float32, the offsets integers from 0, never decreasing, ending at the vectors' count; in a
    directory, each text's file a regular .npy (not a link) of its offsets' rows and the index's width."""

    def __init__(self, path: str):
        self.path = Path(path)
        try:
            if self.path.is_dir():
                self.offsets = read_npy(self.path / "offsets.npy", "offsets.npy")
                self.vectors = None
            else:
                with zipfile.ZipFile(self.path) as archive:
                    self.offsets = read_member(archive, "offsets", path)
                    self.vectors = read_member(archive, "vectors", path)
        except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            raise Failure(
                f"cannot read the multi-vector index {path} ({e}): give what `numbert encode --multi -o` wrote"
            ) from None
        self.check_offsets(path)
        self.dim: int | None = None
        if self.vectors is not None:
            self.dim = check_vectors(self.vectors, f"{path}: 'vectors'", int(self.offsets[-1]))

    def check_offsets(self, path: str) -> None:
        """Integers from 0, never decreasing, at least one: else a Failure naming the file."""
        offsets = self.offsets
        if (
            offsets.ndim != 1
            or len(offsets) < 1
            or offsets.dtype.kind not in "iu"
            or offsets[0] != 0
            or np.any(np.diff(offsets.astype(np.int64)) < 0)
        ):
            raise Failure(
                f"{path}: its offsets are not the ragged index numbert encode --multi writes (integers from 0, "
                f"never decreasing, one more than the texts)"
            )
        self.offsets = offsets.astype(np.int64)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        if self.vectors is not None:
            return self.vectors[self.offsets[i] : self.offsets[i + 1]]
        name = f"{i:09d}.npy"
        try:
            vectors = read_npy(self.path / name, name)
        except OSError as e:
            raise Failure(
                f"cannot read {self.path / name} ({e}): give what `numbert encode --multi -o` wrote"
            ) from None
        rows = int(self.offsets[i + 1] - self.offsets[i])
        self.dim = check_vectors(vectors, str(self.path / name), rows, self.dim)
        return vectors


def read_member(archive: zipfile.ZipFile, name: str, path: str) -> np.ndarray:
    """The array `name` of an .npz, its header read and bounded by the member's size before its data."""
    try:
        info = archive.getinfo(f"{name}.npy")
    except KeyError:
        raise Failure(f"{path} has no '{name}': give the .npz `numbert encode --multi -o` wrote") from None
    limit = info.file_size
    if info.compress_type != zipfile.ZIP_STORED:
        limit = min(limit, MAX_EXPANSION * info.compress_size + 4096)
    with archive.open(info) as f:
        return read_array(f, limit, f"{path}: '{name}'")


def read_npy(path: Path, name: str) -> np.ndarray:
    """The array of a regular .npy file (a link is refused), its header bounded by the file's size."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise Failure(f"{path} is not a regular file: a multi-vector index holds the .npy files it wrote ({name})")
    with open(path, "rb") as f:
        return read_array(f, os.fstat(f.fileno()).st_size, str(path))


def read_array(f: Any, size: int, where: str) -> np.ndarray:
    """The .npy array read from `f`, whose header must describe at most `size` bytes (the data read only then)."""
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    try:
        version = np.lib.format.read_magic(f)
        if version not in readers:
            raise ValueError(f"format version {version}, not 1.0 or 2.0")
        shape, fortran, dtype = readers[version](f)
    except ValueError as e:
        raise Failure(f"{where} is not a .npy array ({e})") from None
    if dtype.hasobject or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise Failure(f"{where} holds {dtype} data: a multi-vector index holds numbers")
    count = math.prod(shape)
    if count * dtype.itemsize > size:
        raise Failure(
            f"{where} claims {shape} {dtype} ({count * dtype.itemsize:,} bytes), more than its file holds "
            f"({size:,} bytes)"
        )
    data = f.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise Failure(f"{where} is cut short: {len(data):,} of its {count * dtype.itemsize:,} bytes")
    array = np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")
    return array


def check_vectors(vectors: np.ndarray, where: str, rows: int, dim: int | None = None) -> int:
    """Vectors (rows, dim) of float32 (either byte order), `dim` wide if given: else a Failure naming `where`."""
    if vectors.ndim != 2 or vectors.dtype.kind != "f" or vectors.dtype.itemsize != 4:
        raise Failure(
            f"{where} holds {vectors.dtype} of shape {vectors.shape}: a multi-vector index holds (tokens, dim) float32"
        )
    if len(vectors) != rows or (dim is not None and vectors.shape[1] != dim):
        width = "" if dim is None else f" x {dim}"
        raise Failure(f"{where} holds {vectors.shape[0]} x {vectors.shape[1]} vectors; its offsets say {rows}{width}")
    return vectors.shape[1]
