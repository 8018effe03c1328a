"""Rows (float32, or a quantized dtype) streamed into a .npy file, for outputs too large to hold in memory."""

from __future__ import annotations

import os
import struct
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
