"""Stored tensors' bytes as NumPy arrays, for every weight format: the dtypes numbert reads, float16 and
bfloat16 widened to float32, and the checks a file's shapes and byte ranges pass before any is read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..model.tensors import MAX_DIMS

# safetensors dtype names -> how the bytes are read. BF16 has no NumPy dtype: read as uint16, widen later.
DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}


def check_ndim(path: Path, name: str, shape: list | tuple) -> None:
    """A tensor has no more dims than a NumPy array can have."""
    if len(shape) > MAX_DIMS:
        raise ValueError(f"{path}: tensor {name!r} has {len(shape)} dims; NumPy arrays have at most {MAX_DIMS}")


def check_disjoint(path: Path, ranges: dict[str, tuple[int, int]], unit: str) -> None:
    """No two tensors' [begin, end) ranges (of bytes or elements, named by `unit`) share one."""
    previous, previous_end = "", 0
    for name, (begin, end) in sorted(ranges.items(), key=lambda item: item[1]):
        if begin < previous_end and end > begin:
            raise ValueError(
                f"{path} is corrupt: tensors {previous!r} and {name!r} overlap ({unit} "
                f"{ranges[previous][0]}..{previous_end} and {begin}..{end})"
            )
        if end > previous_end:
            previous, previous_end = name, end


def read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def widen(array: np.ndarray, dtype: str) -> np.ndarray:
    """float16 / bfloat16 as float32 (numbert computes in float32); other dtypes as they are.

    bfloat16 is the top half of a float32, so shifting its bits left by 16 is exact.
    """
    if dtype == "F16":
        return read_only(array.astype(np.float32))
    if dtype == "BF16":
        wide = array.astype(np.uint32)
        wide <<= 16  # in place: no second temporary of the tensor's float32 size
        return read_only(wide.view(np.float32))
    return array


WIDENED = ("F16", "BF16")  # the stored dtypes read as float32 copies (`widen`)


def is_index(n) -> bool:
    """An integer >= 0 (a size, stride, offset or element count), not a bool."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0
