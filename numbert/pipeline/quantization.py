"""Quantized sentence vectors: fewer bytes a vector for an index, as sentence-transformers' quantize_embeddings.

    precision   dtype   width        each value
    float32     float32 dim          the vector as it is
    uint8       uint8   dim          q = clip(floor((x - lo) / step), 0, 255),  step = (hi - lo) / 255
    int8        int8    dim          q - 128
    ubinary     uint8   ceil(dim/8)  the bits x > 0, eight to a byte, first value in the high bit (np.packbits)
    binary      int8    ceil(dim/8)  the ubinary byte - 128

lo and hi are each dimension's calibration range, a (2, dim) array: ranges[0] the minimum and ranges[1] the
maximum. Given, they are used as they are; else they are the min and max of the vectors being quantized
(so one call's vectors share one scale: numbert's embed quantizes the whole call's vectors at once, as
SentenceTransformer.encode(precision=...) does). A dimension whose range is empty (hi == lo) has step 1.
Everything is computed in float32, as sentence-transformers computes it, so equal inputs give equal bytes.
"""

from __future__ import annotations

import numpy as np

f32 = np.float32

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
DTYPES = {"float32": np.float32, "int8": np.int8, "uint8": np.uint8, "binary": np.int8, "ubinary": np.uint8}
CALIBRATED = ("int8", "uint8")  # the precisions that need ranges


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")


def width(dim: int, precision: str) -> int:
    """Values a quantized vector holds: dim, or ceil(dim / 8) bytes of bits for binary and ubinary."""
    return -(-dim // 8) if precision.endswith("binary") else dim


def calibration_ranges(vectors: np.ndarray) -> np.ndarray:
    """Each dimension's minimum and maximum over some vectors. (rows, dim) -> (2, dim) float32"""
    vectors = np.asarray(vectors, dtype=f32)
    if vectors.ndim != 2 or len(vectors) < 2:
        raise ValueError(
            "int8 and uint8 ranges cannot be computed from a single vector: pass ranges= (a (2, dim) array of "
            "each dimension's minimum and maximum) or calibration_embeddings= (representative vectors)"
        )
    return np.stack([vectors.min(axis=0), vectors.max(axis=0)])


def check_ranges(ranges: np.ndarray, precision: str, dim: int) -> np.ndarray:
    """`ranges` as float32 (2, dim), or a ValueError naming what is wrong."""
    if precision not in CALIBRATED:
        raise ValueError(f"ranges apply to precision int8 and uint8, not {precision!r}")
    ranges = np.asarray(ranges, dtype=f32)
    if ranges.shape != (2, dim):
        raise ValueError(f"ranges must have shape (2, {dim}) (minimum and maximum per dimension), got {ranges.shape}")
    return ranges


def quantize(vectors: np.ndarray, precision: str, ranges: np.ndarray | None = None) -> np.ndarray:
    """Vectors at `precision` (see the module's table); int8/uint8 scaled by `ranges`, else by the vectors' own.
    ([rows,] dim) float32 -> ([rows,] width(dim, precision)) of DTYPES[precision]"""
    check_precision(precision)
    vectors = np.asarray(vectors, dtype=f32)
    if precision == "float32":
        return vectors
    if precision.endswith("binary"):
        packed = np.packbits(vectors > 0, axis=-1)
        return packed if precision == "ubinary" else (packed.astype(np.int16) - 128).astype(np.int8)
    if not np.isfinite(vectors).all():
        raise ValueError(f"the vectors hold NaN or infinity: they cannot be scaled to {precision}")
    if ranges is None:
        ranges = calibration_ranges(vectors) if len(vectors) else np.zeros((2, vectors.shape[-1]), f32)
    lo, hi = np.asarray(ranges, dtype=f32)
    step = (hi - lo) / f32(255)
    step = np.where(step == 0, f32(1), step)
    q = np.clip(np.floor((vectors - lo) / step), 0, 255)
    return q.astype(np.uint8) if precision == "uint8" else (q - 128).astype(np.int8)
