"""Rows of a .npy file, streamed: written (float32, or a quantized dtype) for outputs too large to hold in memory
(NpyRows), and read a block at a time for an index searched without loading it (NpyIndex)."""

from __future__ import annotations

import os
import struct
import tokenize
from typing import IO

import numpy as np
from numpy.typing import DTypeLike


class NpyRows:
    """Rows of `dtype` (default float32) streamed into a .npy file whose header, holding the row count, is
    written last.

    The header is padded to a fixed 128 bytes, so the final one (written over the placeholder)
    has the same length whatever the count.
    """

    HEADER_BYTES = 128

    def __init__(self, f: IO[bytes], dim: int, dtype: DTypeLike = np.float32):
        self.f, self.dim, self.rows = f, dim, 0
        self.dtype = np.dtype(dtype).newbyteorder("<")
        f.write(self.header())

    def header(self) -> bytes:
        text = f"{{'descr': '{self.dtype.str}', 'fortran_order': False, 'shape': ({self.rows}, {self.dim}), }}"
        text = text.ljust(self.HEADER_BYTES - 10 - 1) + "\n"  # magic 6 + version 2 + length 2, then text
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")

    def write(self, rows: np.ndarray) -> None:
        """Append rows: (n, dim)."""
        self.f.write(np.ascontiguousarray(rows, dtype=self.dtype).tobytes())
        self.rows += len(rows)

    def finish(self) -> None:
        """Write the final header (the row count); the file position is left at the end."""
        self.f.seek(0)
        self.f.write(self.header())
        self.f.seek(0, os.SEEK_END)


class NpyIndex:
    """A (rows, dim) float32 .npy (either byte order) read a block of rows at a time, checked at open: its header
    (a one-line ValueError naming the file for any header numpy would not read, a negative or lying shape) and
    its size, which must be what the header says. Slicing reads rows (as native float32), so it passes for the
    corpus of numbert.semantic_search.

    The rows are read with pread, not memory-mapped: a file truncated while it is read is a ValueError (a
    memory map would kill the process with SIGBUS), and `check_unchanged` tells whether the file was written
    to since it was opened. Replace an index by renaming a new file over it: the open file is then read to
    its end as it was; one rewritten in place is read part old, part new."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self.file = open(path, "rb")  # an OSError for a missing or unreadable file
        try:
            self.shape, self.dtype, self.offset = read_header(self.file, self.path)
            self.stat = os.fstat(self.file.fileno())
        except BaseException:
            self.file.close()
            raise
        rows, dim = self.shape
        expected = self.offset + rows * dim * self.dtype.itemsize
        if self.stat.st_size != expected:
            raise ValueError(
                f"{self.path} is {self.stat.st_size:,} bytes but its header says ({rows}, {dim}) {self.dtype} "
                f"after {self.offset} bytes of header, {expected:,} bytes: the file is "
                f"{'truncated' if self.stat.st_size < expected else 'longer than its header says'}"
            )

    ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: slice) -> np.ndarray:
        """Rows start:stop (step 1) as a (n, dim) native float32 array, read from the file."""
        start, stop, step = rows.indices(self.shape[0])
        if step != 1:
            raise IndexError("an NpyIndex reads contiguous rows only")
        block = np.empty((max(0, stop - start), self.shape[1]), self.dtype)
        view, done = block.data.cast("B"), 0
        position = self.offset + start * self.shape[1] * self.dtype.itemsize
        while done < len(view):
            got = os.preadv(self.file.fileno(), [view[done:]], position + done)
            if got == 0:
                raise ValueError(
                    f"{self.path} ended at byte {position + done:,} while it was read: it was truncated since it "
                    f"was opened; replace an index by renaming a new file over it, never rewrite it in place"
                )
            done += got
        return block.astype(np.float32, copy=False)

    def check_unchanged(self) -> None:
        """A ValueError if the file was written to (its size or modification time changed) since it was opened."""
        now = os.fstat(self.file.fileno())
        if (now.st_size, now.st_mtime_ns) != (self.stat.st_size, self.stat.st_mtime_ns):
            raise ValueError(
                f"{self.path} was written to while it was read, so its rows may mix two versions: replace an "
                f"index by renaming a new file over it, never rewrite it in place, and search again"
            )

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> NpyIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_header(f: IO[bytes], path: str) -> tuple[tuple[int, int], np.dtype, int]:
    """The (rows, dim) shape, the float32 dtype and the data's offset of the .npy open in `f`; a ValueError
    naming `path` for a header that is not one (numpy's reason), a shape that is not two sizes >= 0, data
    that is not float32 or is stored column-major."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"version {version[0]}.{version[1]} is not read here (1.0 and 2.0 are)")
    except (ValueError, SyntaxError, EOFError, RecursionError, tokenize.TokenError) as e:  # numpy's, as they come
        raise ValueError(f"{path} is not a .npy file numbert reads: {e}") from None
    if any(n < 0 for n in shape):
        raise ValueError(f"{path} is damaged: its header gives the shape {shape}, a negative size")
    if len(shape) != 2 or dtype.kind != "f" or dtype.itemsize != 4:
        raise ValueError(
            f"{path} holds {dtype} of shape {shape}; an index is (rows, dim) float32 vectors, as "
            f"`numbert encode -o {path}` writes them without --precision"
        )
    if fortran_order and min(shape) > 1:
        raise ValueError(
            f"{path} is stored column by column (fortran_order), so a row is not read in one piece: save it "
            f"row by row, np.save(path, np.ascontiguousarray(vectors))"
        )
    return shape, dtype, f.tell()
