"""A model.safetensors file: 8 bytes of little-endian header length, a JSON header giving each tensor's dtype,
shape and byte range, then the raw little-endian data. The header is parsed here and the data memory-mapped, so
loading copies nothing: pages are read when a forward pass touches them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from .tensor_bytes import DTYPES, WIDENED, check_disjoint, check_ndim, is_index, widen


def read_safetensors(path: str | Path, skip: Collection[str] = ()) -> dict[str, np.ndarray]:
    """Every tensor in a .safetensors file by its stored name, memory-mapped read-only; those named in `skip` left
    unread (a causal LM's lm_head, of which a reranker reads two rows: `read_rows`).

    F32 tensors are views of one np.memmap of the file (no copy); F16 and BF16 are widened to
    float32 copies. Byte ranges are checked against the file size first, so a truncated download
    fails here, naming the first tensor that lies past the end; so does a tensor sharing bytes with another.
    """
    path = Path(path)
    header, data_start = _safetensors_header(path)
    ranges = {name: _byte_range(path, name, entry) for name, entry in header.items()}
    file_size = path.stat().st_size
    for name, (begin, end) in sorted(ranges.items(), key=lambda item: item[1]):
        if data_start + end > file_size:
            raise ValueError(
                f"{path} is truncated: tensor {name!r} needs bytes {data_start + begin}.."
                f"{data_start + end} but the file has only {file_size} bytes"
            )
    check_disjoint(path, ranges, "data bytes")  # safetensors refuses shared bytes too
    file = np.memmap(path, dtype=np.uint8, mode="r")
    tensors = {}
    with open(path, "rb") as stream:
        for name, entry in header.items():
            if name in skip:
                continue
            begin, end = ranges[name]
            if entry["dtype"] in WIDENED:  # read into a temporary of its own, not the map: its pages never stay
                stream.seek(data_start + begin)  # resident beside the float32 copy (a bf16 checkpoint's peak RSS)
                data = np.frombuffer(stream.read(end - begin), DTYPES[entry["dtype"]])
            else:
                data = file[data_start + begin : data_start + end].view(DTYPES[entry["dtype"]])
            tensors[name] = widen(data.reshape(entry["shape"]), entry["dtype"])
    return tensors


def read_rows(path: str | Path, name: str, rows: Sequence[int]) -> np.ndarray | None:
    """Rows of the 2-D tensor `name` of a .safetensors file, float32, reading those rows' bytes alone (a bfloat16
    lm_head of 151,669 rows is never widened whole); None when the file has no such tensor. (len(rows), columns)"""
    path = Path(path)
    header, data_start = _safetensors_header(path)
    if name not in header:
        return None
    entry = header[name]
    begin, end = _byte_range(path, name, entry)
    if len(entry["shape"]) != 2:
        raise ValueError(f"{path}: tensor {name!r} has shape {tuple(entry['shape'])}, expected (rows, columns)")
    count, columns = entry["shape"]
    if data_start + end > path.stat().st_size:
        raise ValueError(f"{path} is truncated: tensor {name!r} lies past the end of the file")
    dtype = np.dtype(DTYPES[entry["dtype"]])
    taken = []
    with open(path, "rb") as stream:
        for row in rows:
            if not 0 <= row < count:
                raise ValueError(f"{path}: row {row} of tensor {name!r} is out of range (it has {count} rows)")
            stream.seek(data_start + begin + row * columns * dtype.itemsize)
            taken.append(np.frombuffer(stream.read(columns * dtype.itemsize), dtype))
    return np.asarray(widen(np.stack(taken), entry["dtype"]), np.float32)


def _safetensors_header(path: Path) -> tuple[dict, int]:
    """The JSON header (without `__metadata__`) and the file offset where tensor data starts."""
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path} is too short to be a safetensors file ({len(prefix)} bytes)")
        header_size = int.from_bytes(prefix, "little")
        header_bytes = f.read(header_size) if header_size <= path.stat().st_size else b""
    if len(header_bytes) < header_size:
        raise ValueError(
            f"{path} is truncated or not a safetensors file: its header claims "
            f"{header_size} bytes, the file has {path.stat().st_size}"
        )
    try:
        header = json.loads(header_bytes)
    except (ValueError, RecursionError) as e:  # bad JSON or UTF-8, a number of 4300 digits, nesting too deep
        raise ValueError(f"{path} is corrupt or not a safetensors file: its header is not JSON we read ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path} is corrupt: its header is not a JSON object")
    header.pop("__metadata__", None)
    return header, 8 + header_size


def _byte_range(path: Path, name: str, entry) -> tuple[int, int]:
    """Where tensor `name` lies in the data section, after checking its header entry is coherent."""
    if not isinstance(entry, dict) or not isinstance(entry.get("dtype"), str) or entry["dtype"] not in DTYPES:
        dtype = entry.get("dtype") if isinstance(entry, dict) else entry
        raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {dtype!r}; numbert reads {', '.join(DTYPES)}")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not (
        isinstance(shape, list)
        and all(map(is_index, shape))
        and isinstance(offsets, list)
        and len(offsets) == 2
        and all(map(is_index, offsets))
        and offsets[0] <= offsets[1]
    ):
        raise ValueError(f"{path} is corrupt: bad header entry for tensor {name!r}: {str(entry)[:200]}")
    check_ndim(path, name, shape)
    begin, end = offsets
    nbytes = math.prod(shape) * np.dtype(DTYPES[entry["dtype"]]).itemsize  # Python ints: no overflow
    if nbytes >= 2**63:
        raise ValueError(
            f"{path} is corrupt: tensor {name!r} has shape {tuple(shape)}, whose element count "
            f"{math.prod(shape)} overflows"
        )
    if end - begin != nbytes:
        raise ValueError(
            f"{path} is corrupt: tensor {name!r} of shape {tuple(shape)} and dtype "
            f"{entry['dtype']} needs {nbytes} bytes, its header gives {end - begin}"
        )
    return begin, end
