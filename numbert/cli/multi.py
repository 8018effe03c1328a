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
import os
import tempfile
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


class MultiIndex:
    """A multi-vector index written by write_ragged or write_directory: each text's (tokens, dim) vectors."""

    def __init__(self, path: str):
        self.path = Path(path)
        try:
            if self.path.is_dir():
                self.offsets = np.load(self.path / "offsets.npy")
                self.vectors = None
            else:
                with np.load(self.path) as npz:
                    self.offsets, self.vectors = npz["offsets"], npz["vectors"]
        except (OSError, ValueError, KeyError) as e:
            raise Failure(
                f"cannot read the multi-vector index {path} ({e}): give what `numbert encode --multi -o` wrote"
            ) from None
        if self.offsets.ndim != 1 or len(self.offsets) < 1 or np.any(np.diff(self.offsets) < 0):
            raise Failure(f"{path}: its offsets are not the ragged index numbert encode --multi writes")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        if self.vectors is not None:
            return self.vectors[self.offsets[i] : self.offsets[i + 1]]
        return np.load(self.path / f"{i:09d}.npy")
