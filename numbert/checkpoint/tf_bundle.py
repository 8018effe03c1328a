"""Read a TensorFlow checkpoint (a "tensor bundle") without TensorFlow.

A checkpoint saved by `tf.compat.v1.train.Saver` under the prefix `bert_model.ckpt` is

- `bert_model.ckpt.index`: a LevelDB-format table mapping each variable name to a `BundleEntryProto`
  (dtype, shape, shard id, offset, size, masked CRC-32C). Its layout, from the end of the file:
  a 48-byte footer (block handles of the metaindex and index blocks, then a magic number); the
  index block, mapping the last key of each data block to that block's handle; the data blocks.
  A block is entries, then a restart array; an entry is (shared key length, unshared key length,
  value length) as varints, the unshared key bytes and the value: keys are prefix-compressed
  against the previous key. Each block is followed by a compression byte and a masked CRC-32C.
  The empty key holds the `BundleHeaderProto` (number of shards, endianness, version).
- `bert_model.ckpt.data-00000-of-00001` (and further shards): the tensors' raw little-endian
  bytes in C order, `size` bytes at `offset` of shard `shard_id`.

Protobuf messages are decoded from their wire format here (no protobuf package): each field is a
varint tag (field number << 3 | wire type) then a varint, 8 or 4 fixed bytes, or a length and
that many bytes. Tensors are memory-mapped; each is checked to lie inside its shard, to have the
size its dtype and shape imply, and (unless told not to) against its CRC-32C (numbert's NumPy CRC-32C, or
google-crc32c's hardware one when installed: `pip install google-crc32c`; docs/performance.md).

A hostile index costs no more than its size: a table's keys must come in increasing order (a key listed
twice is refused, not read twice with the last one winning), the index block must list data blocks in
the order they lie in the file, each once, and the keys a block's prefix compression rebuilds may not
total more than KEY_BYTES_PER_BLOCK_BYTE times the block's size.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from ..model.tensors import MAX_DIMS
from . import crc32c as crc

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48  # two block handles padded to 40 bytes, then the 8-byte magic
BLOCK_TRAILER_SIZE = 5  # compression type (1 byte) + masked crc32c (4 bytes)
# The keys of a block may total this many bytes per byte of the block. TensorFlow's run to a few: each
# entry stores its value (a dozen bytes or more) and the part of its key it does not share; a hostile
# block where each key is the last plus one byte would rebuild gigabytes of keys from a megabyte.
KEY_BYTES_PER_BLOCK_BYTE = 64
# TensorFlow's DataType enum -> (safetensors-style name, NumPy dtype of the stored bytes). BF16 is read as uint16.
DTYPES = {
    1: ("F32", "<f4"),
    2: ("F64", "<f8"),
    3: ("I32", "<i4"),
    4: ("U8", "u1"),
    5: ("I16", "<i2"),
    6: ("I8", "i1"),
    9: ("I64", "<i8"),
    10: ("BOOL", "?"),
    14: ("BF16", "<u2"),
    17: ("U16", "<u2"),
    19: ("F16", "<f2"),
    22: ("U32", "<u4"),
    23: ("U64", "<u8"),
}


class CheckpointError(ValueError):
    """A TensorFlow checkpoint that cannot be read: corrupt, truncated, or using an unsupported feature."""


@dataclasses.dataclass(frozen=True)
class BundleEntry:
    """Where one tensor lives: BundleEntryProto, decoded."""

    dtype: int  # TensorFlow DataType enum value
    shape: tuple[int, ...]
    shard_id: int
    offset: int
    size: int  # bytes
    crc32c: int  # masked
    sliced: bool  # saved as slices (partitioned variables), which numbert does not read


def index_path(prefix: str | Path) -> Path:
    return Path(f"{prefix}.index")


def shard_path(prefix: str | Path, shard_id: int, num_shards: int) -> Path:
    return Path(f"{prefix}.data-{shard_id:05d}-of-{num_shards:05d}")


def data_shards(prefix: str | Path, num_shards: int) -> list[Path]:
    """The data shards of the checkpoint at `prefix` (its index's header counts them); a missing one is
    an error naming it."""
    paths = [shard_path(prefix, shard_id, num_shards) for shard_id in range(num_shards)]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"TensorFlow checkpoint data shard {path} is missing")
    return paths


def read_bundle(
    prefix: str | Path, select: Callable[[str], bool] = lambda name: True, verify_crc: bool = True
) -> dict[str, tuple[np.ndarray, str]]:
    """The tensors of the checkpoint at `prefix` whose names `select` accepts: {variable name: (array, dtype)}.

    Arrays are read-only views of the memory-mapped data shards, in their stored dtype, named as
    safetensors names them ("F32", "BF16", ...): bfloat16, which NumPy lacks, comes as its uint16
    bits. Each entry's size and bounds are checked, and each selected tensor's CRC-32C unless
    verify_crc is False (the check reads every byte).
    """
    num_shards, entries = read_index(prefix)
    shards = [_map_shard(path) for path in data_shards(prefix, num_shards)]
    tensors = {}
    for name, entry in entries.items():
        path, data = shards[entry.shard_id]
        if entry.dtype in DTYPES:  # others (strings, resources: never a BERT weight) are only read if asked for
            check_entry(path, data.size, name, entry)
        if select(name):
            tensors[name] = read_tensor(path, data, name, entry, verify_crc), DTYPES[entry.dtype][0]
    return tensors


def read_index(prefix: str | Path) -> tuple[int, dict[str, BundleEntry]]:
    """(number of data shards, {variable name: entry}) from `<prefix>.index`."""
    path = index_path(prefix)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"no TensorFlow checkpoint index at {path}") from None
    header, entries = None, {}
    for key, value in _table_entries(path, data):
        try:
            if key == b"":
                header = _decode_header(value)
            else:
                entries[key.decode("utf-8")] = _decode_entry(value)
        except (CheckpointError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{path} is corrupt: bad entry for tensor {_shown(key)}: {e}") from None
    if header is None:
        raise CheckpointError(f"{path} is corrupt: it has no bundle header (the entry under the empty key)")
    num_shards, big_endian = header
    if big_endian:
        raise CheckpointError(f"{path} was written big-endian; numbert reads little-endian checkpoints")
    for name, entry in entries.items():
        if not 0 <= entry.shard_id < num_shards:
            raise CheckpointError(
                f"{path} is corrupt: tensor {name!r} is in shard {entry.shard_id}, "
                f"the header says there are {num_shards}"
            )
    return num_shards, entries


def check_entry(path: Path, file_size: int, name: str, entry: BundleEntry) -> None:
    """An entry's size agrees with its dtype and shape, and its bytes lie inside its shard."""
    if entry.sliced:
        raise CheckpointError(
            f"{path}: tensor {name!r} is saved as slices (a partitioned variable); numbert reads whole tensors only"
        )
    if entry.dtype not in DTYPES:
        raise CheckpointError(
            f"{path}: tensor {name!r} has unsupported TensorFlow dtype {entry.dtype} "
            f"(DataType enum); numbert reads {', '.join(n for n, _ in DTYPES.values())}"
        )
    if len(entry.shape) > MAX_DIMS:
        raise CheckpointError(
            f"{path}: tensor {name!r} has {len(entry.shape)} dims; NumPy arrays have at most {MAX_DIMS}"
        )
    nbytes = math.prod(entry.shape) * np.dtype(DTYPES[entry.dtype][1]).itemsize
    if entry.size != nbytes:
        raise CheckpointError(
            f"{path}: tensor {name!r} of shape {entry.shape} and dtype "
            f"{DTYPES[entry.dtype][0]} needs {nbytes} bytes, the index gives {entry.size}"
        )
    if entry.offset + entry.size > file_size:
        raise CheckpointError(
            f"{path} is truncated: tensor {name!r} needs bytes {entry.offset}.."
            f"{entry.offset + entry.size} but the file has only {file_size} bytes"
        )


def read_tensor(path: Path, data: np.ndarray, name: str, entry: BundleEntry, verify_crc: bool) -> np.ndarray:
    """One tensor as a read-only view of its memory-mapped shard `data`, after checking it (and its crc)."""
    check_entry(path, data.size, name, entry)
    raw = data[entry.offset : entry.offset + entry.size]
    if verify_crc and crc.masked(crc.crc32c(raw)) != entry.crc32c:
        raise CheckpointError(
            f"{path} is corrupt: tensor {name!r} fails its CRC-32C check "
            f"(bytes {entry.offset}..{entry.offset + entry.size})"
        )
    return raw.view(DTYPES[entry.dtype][1]).reshape(entry.shape)


def _map_shard(path: Path) -> tuple[Path, np.ndarray]:
    """A data shard memory-mapped read-only (an empty file as an empty array: mmap refuses those)."""
    if path.stat().st_size == 0:
        return path, np.zeros(0, np.uint8)
    return path, np.memmap(path, dtype=np.uint8, mode="r")


# ---------------------------------------------------------------------------------------------
# The LevelDB table


def _table_entries(path: Path, data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of the table, in key order: the index block leads to each data block, in the
    order they lie in the file, each once; each key comes after the one before it."""
    if len(data) < FOOTER_SIZE or int.from_bytes(data[-8:], "little") != TABLE_MAGIC:
        raise CheckpointError(
            f"{path} is not a TensorFlow checkpoint index (no table magic number at its end; "
            f"truncated or another kind of file)"
        )
    footer = data[-FOOTER_SIZE:]
    _, pos = _block_handle(footer, 0, path)  # the metaindex block: empty in a tensor bundle
    index_handle, _ = _block_handle(footer, pos, path)
    previous_key, previous_end = None, 0
    for _, handle in _block_entries(path, _block(path, data, index_handle)):
        (offset, size), end = _block_handle(handle, 0, path)
        if end != len(handle):
            raise CheckpointError(f"{path} is corrupt: bad block handle in the index block")
        if offset < previous_end:
            raise CheckpointError(
                f"{path} is corrupt: its index block lists the data block at bytes {offset}..{offset + size} "
                f"after one ending at byte {previous_end} (data blocks are listed once each, in file order)"
            )
        previous_end = offset + size + BLOCK_TRAILER_SIZE
        for key, value in _block_entries(path, _block(path, data, (offset, size))):
            if previous_key is not None and key <= previous_key:
                order = "is listed twice" if key == previous_key else f"comes after {_shown(previous_key)}"
                raise CheckpointError(
                    f"{path} is corrupt: the entry for tensor {_shown(key)} {order} "
                    f"(a table's keys are sorted and unique)"
                )
            previous_key = key
            yield key, value


def _shown(key: bytes) -> str:
    """A key as an error names it: decoded, and cut short if a corrupt table made it long."""
    name = key.decode("utf-8", "replace")
    return repr(name if len(name) <= 200 else name[:200] + "...")


def _block_handle(data: bytes, pos: int, path: Path | None) -> tuple[tuple[int, int], int]:
    """((offset, size), position after it): a block handle is two varints."""
    offset, pos = _varint(data, pos, path)
    size, pos = _varint(data, pos, path)
    return (offset, size), pos


def _block(path: Path, data: bytes, handle: tuple[int, int]) -> bytes:
    """A block's contents, after checking it lies in the file, is uncompressed and matches its crc."""
    offset, size = handle
    if offset + size + BLOCK_TRAILER_SIZE > len(data) - FOOTER_SIZE:
        raise CheckpointError(
            f"{path} is corrupt or truncated: a block at bytes {offset}..{offset + size} "
            f"lies past the end of the table ({len(data)} bytes)"
        )
    contents = data[offset : offset + size]
    compression, stored_crc = data[offset + size], int.from_bytes(data[offset + size + 1 : offset + size + 5], "little")
    if crc.masked(crc.crc32c(data[offset : offset + size + 1])) != stored_crc:
        raise CheckpointError(
            f"{path} is corrupt: the block at bytes {offset}..{offset + size} fails its CRC-32C check"
        )
    if compression != 0:
        raise CheckpointError(
            f"{path}: a block is compressed (type {compression}); TensorFlow writes "
            f"checkpoint indexes uncompressed and numbert reads only those"
        )
    return contents


def _block_entries(path: Path | None, block: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The (key, value) pairs of one block; keys share a prefix with the key before them."""
    if len(block) < 4:
        raise CheckpointError(f"{path} is corrupt: a block of {len(block)} bytes has no restart count")
    num_restarts = int.from_bytes(block[-4:], "little")
    entries_end = len(block) - 4 - 4 * num_restarts
    if entries_end < 0:
        raise CheckpointError(
            f"{path} is corrupt: a block claims {num_restarts} restart points, more than its {len(block)} bytes hold"
        )
    restarts = np.frombuffer(block, "<u4", num_restarts, entries_end)
    if num_restarts and (restarts[0] != 0 or restarts.max() >= max(entries_end, 1)):
        raise CheckpointError(f"{path} is corrupt: a block's restart points lie outside its entries")
    pos, key, key_bytes = 0, b"", 0
    while pos < entries_end:
        shared, pos = _varint(block, pos, path)
        unshared, pos = _varint(block, pos, path)
        value_size, pos = _varint(block, pos, path)
        if shared > len(key) or pos + unshared + value_size > entries_end:
            raise CheckpointError(f"{path} is corrupt: a block entry after key {_shown(key)} runs past its block")
        key_bytes += shared + unshared
        if key_bytes > KEY_BYTES_PER_BLOCK_BYTE * len(block):
            raise CheckpointError(
                f"{path} is corrupt: the keys of a block of {len(block)} bytes would total more than "
                f"{KEY_BYTES_PER_BLOCK_BYTE} times that, after key {_shown(key)}: its prefix compression is corrupt"
            )
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        yield key, block[pos : pos + value_size]
        pos += value_size


def _varint(data: bytes, pos: int, path: Path | None = None) -> tuple[int, int]:
    """(value, position after it): 7 bits per byte, least significant first, high bit = more follow."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise CheckpointError(
                f"{path} is corrupt: a varint runs past its data" if path else "a varint runs past its data"
            )
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


# ---------------------------------------------------------------------------------------------
# Protobuf wire format: BundleHeaderProto, BundleEntryProto, TensorShapeProto


def _fields(message: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field: an int for varint / fixed fields, bytes for length-delimited."""
    pos = 0
    value: int | bytes
    while pos < len(message):
        tag, pos = _varint(message, pos)
        field, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, pos = _varint(message, pos)
        elif wire_type in (1, 5):
            width = 8 if wire_type == 1 else 4
            if pos + width > len(message):
                raise CheckpointError("a fixed-width field runs past its message")
            value, pos = int.from_bytes(message[pos : pos + width], "little"), pos + width
        elif wire_type == 2:
            length, pos = _varint(message, pos)
            if pos + length > len(message):
                raise CheckpointError("a length-delimited field runs past its message")
            value, pos = message[pos : pos + length], pos + length
        else:
            raise CheckpointError(f"unsupported protobuf wire type {wire_type} (field {field})")
        yield field, value


def _number(value: int | bytes) -> int:
    if isinstance(value, bytes):
        raise CheckpointError("a numeric field holds bytes")
    return value


def _message(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise CheckpointError("a message field holds a number")
    return value


def _decode_header(message: bytes) -> tuple[int, bool]:
    """BundleHeaderProto: (1 num_shards, 2 endianness == BIG); 3 version is not needed."""
    fields = dict(_fields(message))
    return _number(fields.get(1, 0)), _number(fields.get(2, 0)) == 1


def _decode_entry(message: bytes) -> BundleEntry:
    """BundleEntryProto: 1 dtype, 2 shape, 3 shard_id, 4 offset, 5 size, 6 crc32c (fixed32), 7 slices."""
    values: dict[int, int | bytes] = {}
    shape: tuple[int, ...] = ()
    sliced = False
    for field, value in _fields(message):
        if field == 2:
            shape = _decode_shape(_message(value))
        elif field == 7:
            sliced = True
        else:
            values[field] = value
    number = {f: _number(values.get(f, 0)) for f in (1, 3, 4, 5, 6)}
    return BundleEntry(
        dtype=number[1],
        shape=shape,
        shard_id=number[3],
        offset=number[4],
        size=number[5],
        crc32c=number[6],
        sliced=sliced,
    )


def _decode_shape(message: bytes) -> tuple[int, ...]:
    """TensorShapeProto: repeated 2 dim (a message whose field 1 is its size); 3 unknown_rank."""
    dims = []
    for field, value in _fields(message):
        if field == 2:
            size = _number(dict(_fields(_message(value))).get(1, 0))
            if size >= 1 << 63:  # a negative int64: an unknown dimension, which a saved tensor cannot have
                raise CheckpointError("the shape has an unknown dimension")
            dims.append(size)
        elif field == 3 and value:
            raise CheckpointError("the shape has unknown rank")
    return tuple(dims)


# ---------------------------------------------------------------------------------------------
# Which checkpoint a path names


def prefix_of(path: str | os.PathLike) -> Path | None:
    """The checkpoint prefix `path` names, as `--init_checkpoint` does (`.../bert_model.ckpt`, whose
    `.index` file exists) or as its `.index` file; None for anything else (a directory, a hub id)."""
    path = Path(path).expanduser()
    if path.name.endswith(".index") and path.is_file():
        return path.with_name(path.name.removesuffix(".index"))
    if index_path(path).is_file() and not path.is_dir():
        return path
    return None


def latest_checkpoint(directory: str | Path) -> Path | None:
    """The checkpoint in `directory`, as tf.train.latest_checkpoint finds it: the one its `checkpoint`
    file names (`model_checkpoint_path: "..."`), else the only `*.index` there; None if it has none."""
    directory = Path(directory)
    state = directory / "checkpoint"
    if state.is_file():
        for line in state.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model_checkpoint_path":
                name = value.strip().strip('"')
                for prefix in (directory / Path(name).name, directory / name):  # this folder's own, first:
                    if index_path(prefix).is_file():  # an absolute path may point where the folder was copied from
                        return prefix
                raise FileNotFoundError(
                    f"{state} names checkpoint {name!r}, but {index_path(directory / name)} does not exist"
                )
    indexes = sorted(directory.glob("*.index"))
    if len(indexes) > 1:
        names = ", ".join(p.name.removesuffix(".index") for p in indexes)
        raise ValueError(
            f"{directory} holds several TensorFlow checkpoints ({names}) and no `checkpoint` file "
            f"saying which is the latest; name one by its prefix, e.g. {indexes[-1].with_suffix('')}"
        )
    return indexes[0].with_suffix("") if indexes else None
