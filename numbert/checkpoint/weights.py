"""Read BERT weights from a checkpoint into NumPy arrays named as a bare transformers `BertModel`.

Three file formats, none needs torch or TensorFlow:

- model.safetensors: 8 bytes of little-endian header length, a JSON header giving each tensor's
  dtype, shape and byte range, then the raw little-endian data. We parse the header ourselves and
  memory-map the data, so loading copies nothing: pages are read when a forward pass touches them.
- pytorch_model.bin (torch >= 1.6): an uncompressed zip holding a pickle (`<name>/data.pkl`) that
  describes the tensors, and one raw file per storage (`<name>/data/<key>`). A pickle can call any
  importable function, so we unpickle with a gate that lets through only what a state dict needs.

- Google's TensorFlow checkpoints (`bert_model.ckpt.index` + `.data-*` shards), read by `tf_bundle`;
  their variable names (`bert/encoder/layer_0/attention/self/query/kernel`) are mapped onto
  transformers' (`bert.encoder.layer.0.attention.self.query.weight`), kernels transposed.

Large checkpoints may be split into shards listed by `model.safetensors.index.json` or
`pytorch_model.bin.index.json` (a `weight_map` from tensor name to shard file).

`Checkpoint.find(path)` is the one place that tells these formats apart: it records which format a
directory (or TensorFlow prefix) holds and every file holding its weights, an index with each of
its shards; `read()` returns the tensors, `fingerprint()` the SHA-256 of each file (a long job
compares it to know it still runs the same weights).

Names are then normalised (`bert.` prefix, legacy LayerNorm `gamma`/`beta`, buffers) and every
tensor the config needs is checked for presence, shape and dtype before anything runs. The task heads'
tensors come along (numbert.model.heads checks them when a task first uses them).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import math
import os
import pickle
import pickletools
import re
import struct
import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..model.config import CONFIG_FILES, BertConfig, clipped
from ..model.tensors import MAX_DIMS, POOLER, POOLER_NAME, bert_name, tensor_shapes
from . import tf_bundle

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # the files numbert reads weights from, in this order

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
# torch's typed storage classes, as torch.save names them in the pickle, -> safetensors dtype names.
TORCH_STORAGES = {
    "DoubleStorage": "F64",
    "FloatStorage": "F32",
    "HalfStorage": "F16",
    "BFloat16Storage": "BF16",
    "LongStorage": "I64",
    "IntStorage": "I32",
    "ShortStorage": "I16",
    "CharStorage": "I8",
    "ByteStorage": "U8",
    "BoolStorage": "BOOL",
}
# pre-training heads (cls.*, a relative's masked-LM head renamed so) and fine-tuning heads (DistilBERT's pre_classifier)
HEAD_PREFIXES = (
    "cls.",
    "classifier.",
    "qa_outputs.",
    "pre_classifier.",
    "head.",
)  # head.: ModernBERT's prediction head
BUFFER_SUFFIXES = ("position_ids", "token_type_ids")  # index buffers some checkpoints save
SHARD_INDEXES = tuple(f"{name}.index.json" for name in WEIGHT_FILES)  # weight_map -> shards, for large checkpoints
FORMATS = {  # the file a checkpoint is found by -> its format
    "model.safetensors": "safetensors",
    "pytorch_model.bin": "pytorch",
    "model.safetensors.index.json": "sharded safetensors",
    "pytorch_model.bin.index.json": "sharded pytorch",
}
TENSORFLOW = "tensorflow"  # the format of a checkpoint found by its `.index` (Google's, read by tf_bundle)


# ---------------------------------------------------------------------------------------------
# The entry point


def load_weights(
    path: str | Path | Checkpoint, config: BertConfig, *, verify_crc: bool = True, check_finite: bool = False
) -> dict[str, np.ndarray]:
    """Weights of the BERT encoder at `path`, by bare `BertModel` name, float32, read-only.

    `path` is a Checkpoint, or where `Checkpoint.find` finds one: a model directory or a TensorFlow
    checkpoint prefix (`.../bert_model.ckpt`). A directory is read from model.safetensors, else
    pytorch_model.bin, else their sharded forms, else a TensorFlow checkpoint (the one its
    `checkpoint` file names). The keys are those of `tensor_shapes(config)`, less the pooler's if
    the checkpoint has neither of them, then the heads'
    (names starting with HEAD_PREFIXES); each encoder tensor is checked for presence and shape first,
    so a checkpoint that disagrees with its config fails here, naming the tensor, rather than
    mid-forward. A TensorFlow checkpoint's per-tensor CRC-32C is checked unless verify_crc=False
    (about 1.5 s for bert-base with numbert's NumPy CRC-32C, 0.15 s with google-crc32c:
    `pip install google-crc32c`); sizes and bounds are always checked. With `check_finite`, a tensor
    holding NaN or infinity is refused too, by name (this reads every page of the file).
    """
    source, raw = read_checkpoint(path, verify_crc=verify_crc)
    weights = _check_weights(normalise_names(raw, config), config, source, raw_names=list(raw))
    if check_finite:
        for name, tensor in weights.items():
            _check_finite(source, name, tensor)
    return weights


def read_checkpoint(path: str | Path | Checkpoint, *, verify_crc: bool = True) -> tuple[Path, dict[str, np.ndarray]]:
    """(the file to name in errors, every tensor by its transformers name) of the checkpoint at `path`."""
    checkpoint = path if isinstance(path, Checkpoint) else Checkpoint.find(path)
    return checkpoint.path, checkpoint.read(verify_crc=verify_crc)


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A checkpoint on disk, as `Checkpoint.find` finds it: its format and every file holding its weights.

    format: a value of FORMATS, or TENSORFLOW.
    files: every file holding weights, the one to name in errors first: the weight file; or a shard
        index, then each shard its weight_map lists; or a TensorFlow `.index`, then each `.data-*` shard.
    config_file: config.json, else Google's bert_config.json, beside the weights; None if neither is there.
    """

    format: str
    files: tuple[Path, ...]
    config_file: Path | None

    @classmethod
    def find(cls, path: str | os.PathLike) -> Checkpoint:
        """The checkpoint at `path`: a model directory, or a TensorFlow checkpoint prefix
        (`.../bert_model.ckpt`, as `--init_checkpoint` names it) or its `.index` file.

        A directory's is model.safetensors, else pytorch_model.bin, else the index of their shards,
        else the TensorFlow checkpoint its `checkpoint` file names (or its only one). A shard that an
        index lists and the directory lacks is an error naming it.
        """
        prefix = tf_bundle.prefix_of(path)
        found = weight_file(path) if prefix is None else tf_bundle.index_path(prefix)
        config = next((found.parent / name for name in CONFIG_FILES if (found.parent / name).is_file()), None)
        if found.name in SHARD_INDEXES:
            return cls(FORMATS[found.name], (found, *shard_paths(found, read_weight_map(found))), config)
        if found.name in FORMATS:
            return cls(FORMATS[found.name], (found,), config)
        prefix = found.with_name(found.name.removesuffix(".index"))  # a TensorFlow checkpoint's `.index`
        num_shards, _ = tf_bundle.read_index(prefix)
        return cls(TENSORFLOW, (found, *tf_bundle.data_shards(prefix, num_shards)), config)

    @property
    def path(self) -> Path:
        """The file to name in errors: the weight file, the shard index, or the TensorFlow `.index`."""
        return self.files[0]

    @property
    def directory(self) -> Path:
        """The model directory the checkpoint is in."""
        return self.path.parent

    @property
    def location(self) -> Path:
        """The path that finds this checkpoint again: a TensorFlow checkpoint's prefix (its directory
        may hold others), else the directory."""
        if self.format == TENSORFLOW:
            return self.path.with_name(self.path.name.removesuffix(".index"))
        return self.directory

    def read(self, *, verify_crc: bool = True) -> dict[str, np.ndarray]:
        """Every tensor, by its transformers name; `verify_crc` is for TensorFlow checkpoints (see load_weights)."""
        if self.format == TENSORFLOW:
            return read_tf_checkpoint(self.location, verify_crc=verify_crc)
        if self.path.name in SHARD_INDEXES:
            return read_sharded(self.path)
        return read_weight_file(self.path)

    def fingerprint(self) -> dict[str, str]:
        """{name relative to the directory: SHA-256} of each of its files and of its config file."""
        config = [self.config_file] if self.config_file else []
        return sha256_by_name(self.directory, [*self.files, *config])


def weight_file(directory: str | os.PathLike) -> Path:
    """The weight file numbert reads in `directory`: model.safetensors, else pytorch_model.bin, else the
    index of their shards, else the `.index` of a TensorFlow checkpoint."""
    directory = Path(directory)
    for name in (*WEIGHT_FILES, *SHARD_INDEXES):
        if (directory / name).is_file():
            return directory / name
    prefix = tf_bundle.latest_checkpoint(directory) if directory.is_dir() else None
    if prefix is not None:
        return tf_bundle.index_path(prefix)
    raise FileNotFoundError(
        f"{directory} has no weight file: neither {', '.join(WEIGHT_FILES + SHARD_INDEXES)} "
        f"nor a TensorFlow checkpoint (*.index)"
    )


def read_weight_file(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of one weight file (or shard) by its stored name: a .safetensors file, else a torch .bin."""
    return read_safetensors(path) if path.name.endswith(".safetensors") else read_torch_bin(path)


def sha256_by_name(directory: Path, files: Iterable[Path]) -> dict[str, str]:
    """{name relative to `directory`, with `/`: SHA-256} of each of `files`, JSON-serialisable."""
    fingerprint = {}
    for path in files:
        with open(path, "rb") as f:
            fingerprint[path.relative_to(directory).as_posix()] = hashlib.file_digest(f, "sha256").hexdigest()
    return fingerprint


def normalise_names(weights: dict, config: BertConfig = BertConfig()) -> dict:
    """The same tensors under bare `BertModel` names, buffers dropped; a relative's (config.model_type) renamed
    to BERT's (tensors.bert_name).

    `bert.embeddings.LayerNorm.gamma` (the published bert-base-uncased) and
    `embeddings.LayerNorm.weight` (sentence-transformers) both become the latter, and so do the heads'
    LayerNorms (`cls.predictions.transform.LayerNorm.gamma`). Other extra tensors are kept;
    `load_weights` only picks the ones the encoder and its heads need.
    """
    normalised = {}
    for raw_name, tensor in weights.items():
        name = bert_name(raw_name, config)
        if name.endswith(BUFFER_SUFFIXES):
            continue
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
        if name in normalised:
            raise ValueError(
                f"two tensors in the checkpoint are both named {name!r} once normalised (one of them is {raw_name!r})"
            )
        normalised[name] = tensor
    return normalised


def _check_weights(
    weights: dict[str, np.ndarray], config: BertConfig, path: Path, raw_names: list[str]
) -> dict[str, np.ndarray]:
    """The tensors `config` needs, checked for presence, shape and dtype, then the heads', as float32.

    The checkpoint's layer count, read off its tensors' names, is checked against the config's first:
    the expected names are built from num_hidden_layers, which a config.json could set to a million.
    """
    if not any(name.startswith(("embeddings.", "encoder.layer.")) for name in weights):
        raise ValueError(
            f"{path} holds none of the BERT encoder tensors numbert expects "
            f"(such as 'embeddings.word_embeddings.weight'); {_naming_of(raw_names)}"
        )
    _check_layer_count(weights, config, path)
    expected = tensor_shapes(config)
    if not any(name in weights for name in POOLER):  # the pooler's tensors, and its task adapters (jina)
        expected = {name: shape for name, shape in expected.items() if not name.startswith(POOLER_NAME + ".")}
    missing = [name for name in expected if name not in weights]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ValueError(f"{path} is missing tensor {missing[0]!r} (expected shape {expected[missing[0]]}){more}")
    checked = {}
    for name, shape in expected.items():
        if weights[name].shape != shape:
            own = next((raw for raw in raw_names if raw != name and bert_name(raw, config) == name), None)
            named = f"{name!r}" if own is None else f"{name!r} ({own!r} in the file)"  # a relative's own name
            raise ValueError(f"{path}: tensor {named} has shape {weights[name].shape}, config.json expects {shape}")
    for name in [*expected, *(name for name in weights if name.startswith(HEAD_PREFIXES))]:
        tensor = weights[name]
        if not np.issubdtype(tensor.dtype, np.floating):
            raise ValueError(f"{path}: tensor {name!r} has dtype {tensor.dtype}; BERT weights must be floating point")
        checked[name] = tensor if tensor.dtype == np.float32 else _read_only(tensor.astype(np.float32))
    return checked


def _check_layer_count(weights: dict[str, np.ndarray], config: BertConfig, path: Path) -> None:
    """The checkpoint holds tensors of encoder layers 0 to num_hidden_layers - 1, each, and of no other:
    so num_hidden_layers is at most its number of tensors, and the names it expects cost no more."""
    layers = sorted({int(m[1]) for m in map(re.compile(r"encoder\.layer\.(\d{1,9})\.").match, weights) if m})
    count = 1 + max(layers, default=-1)
    if count != config.num_hidden_layers:
        raise ValueError(
            f"{path} holds {count} encoder layers but config.json's num_hidden_layers is "
            f"{config.num_hidden_layers}: the config does not describe this checkpoint"
        )
    gap = next((i for i, layer in enumerate(layers) if layer != i), None)
    if gap is not None:
        raise ValueError(f"{path} holds no tensor of encoder layer {gap}, though it holds layers up to {count - 1}")


def _check_finite(path: Path, name: str, tensor: np.ndarray) -> None:
    """Refuse a tensor holding NaN or +-inf. Either makes the float32 sum non-finite, so only then is
    each element looked at (a sum of huge finite values can overflow too)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(tensor.sum(dtype=np.float32)) or np.isfinite(tensor).all():
            return
    where = tuple(int(i) for i in np.argwhere(~np.isfinite(tensor))[0])
    raise ValueError(
        f"{path}: tensor {name!r} holds NaN or infinite values (the first, {tensor[where]}, "
        f"at index {where}); the checkpoint is damaged or was saved after training diverged"
    )


def _naming_of(names: list[str]) -> str:
    """How a checkpoint names its tensors, to explain why none of them is a BERT encoder tensor."""
    if not names:
        return "it holds no tensors at all"
    prefixes = sorted({re.split(r"[./]", name)[0] for name in names})
    shown = ", ".join(repr(p) for p in prefixes[:8]) + (", ..." if len(prefixes) > 8 else "")
    return (
        f"its tensors are named like {sorted(names)[0]!r} (top-level prefixes: {shown}); "
        f"is it a BERT checkpoint in transformers naming?"
    )


def _check_ndim(path: Path, name: str, shape: list | tuple) -> None:
    """A tensor has no more dims than a NumPy array can have."""
    if len(shape) > MAX_DIMS:
        raise ValueError(f"{path}: tensor {name!r} has {len(shape)} dims; NumPy arrays have at most {MAX_DIMS}")


def _check_disjoint(path: Path, ranges: dict[str, tuple[int, int]], unit: str) -> None:
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


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


WIDENED = ("F16", "BF16")  # the stored dtypes read as float32 copies (`_widen`)


def _widen(array: np.ndarray, dtype: str) -> np.ndarray:
    """float16 / bfloat16 as float32 (numbert computes in float32); other dtypes as they are.

    bfloat16 is the top half of a float32, so shifting its bits left by 16 is exact.
    """
    if dtype == "F16":
        return _read_only(array.astype(np.float32))
    if dtype == "BF16":
        wide = array.astype(np.uint32)
        wide <<= 16  # in place: no second temporary of the tensor's float32 size
        return _read_only(wide.view(np.float32))
    return array


# ---------------------------------------------------------------------------------------------
# safetensors


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor in a .safetensors file by its stored name, memory-mapped read-only.

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
    _check_disjoint(path, ranges, "data bytes")  # safetensors refuses shared bytes too
    file = np.memmap(path, dtype=np.uint8, mode="r")
    tensors = {}
    with open(path, "rb") as stream:
        for name, entry in header.items():
            begin, end = ranges[name]
            if entry["dtype"] in WIDENED:  # read into a temporary of its own, not the map: its pages never stay
                stream.seek(data_start + begin)  # resident beside the float32 copy (a bf16 checkpoint's peak RSS)
                data = np.frombuffer(stream.read(end - begin), DTYPES[entry["dtype"]])
            else:
                data = file[data_start + begin : data_start + end].view(DTYPES[entry["dtype"]])
            tensors[name] = _widen(data.reshape(entry["shape"]), entry["dtype"])
    return tensors


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
        and all(map(_is_index, shape))
        and isinstance(offsets, list)
        and len(offsets) == 2
        and all(map(_is_index, offsets))
        and offsets[0] <= offsets[1]
    ):
        raise ValueError(f"{path} is corrupt: bad header entry for tensor {name!r}: {str(entry)[:200]}")
    _check_ndim(path, name, shape)
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


# ---------------------------------------------------------------------------------------------
# pytorch_model.bin, without torch


def read_torch_bin(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor in a torch.save'd state dict by its stored name, without importing torch.

    The pickle is read first, into a description of each tensor (`_TensorView`: which storage, where
    in it, which size and strides); each is checked under its name before any storage is read. Storages
    are memory-mapped (torch stores them uncompressed; a compressed member is refused): a tensor that is
    a contiguous slice of its storage stays a view of the map, a transposed one is copied. Tensors saved
    under two names (tied weights) are read once; two other tensors sharing storage elements, or two
    storages sharing file bytes, are refused: no byte of the file is copied twice, so the copies (a
    transposed tensor, float16 widened to float32) take at most twice the file's size.
    """
    path = Path(path)
    archive = _open_torch_zip(path)
    with archive:
        root = _archive_root(path, archive)
        byteorder = root + "byteorder"
        if byteorder in archive.namelist() and archive.read(byteorder).strip() != b"little":
            raise ValueError(f"{path} was saved big-endian; numbert reads little-endian checkpoints")
        views = _tensor_views(path, _unpickle(path, archive, root))
        storages = _read_storages(path, archive, root, views)
    arrays = {view: _tensor_array(view, storages[view.storage.key]) for view in dict.fromkeys(views.values())}
    return {name: arrays[view] for name, view in views.items()}


def _open_torch_zip(path: Path) -> zipfile.ZipFile:
    """The zip archive torch >= 1.6 writes, every member stored uncompressed as torch stores them;
    legacy (pickle-only), compressed and broken files are refused clearly."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        raise ValueError(
            f"{path} is not a zip archive: it is a legacy (torch < 1.6) checkpoint or not a "
            f"torch file at all; re-save it with a recent torch or convert it to model.safetensors"
        )
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as e:
        raise ValueError(f"{path} is a truncated or corrupt zip archive ({e})") from None
    for info in archive.infolist():
        if info.compress_type != zipfile.ZIP_STORED:  # inflating it could cost any amount of memory
            archive.close()
            raise ValueError(
                f"{path}: member {info.filename} is compressed; torch.save stores every member "
                f"uncompressed, and numbert reads only such archives (re-save it with torch.save)"
            )
    return archive


def _archive_root(path: Path, archive: zipfile.ZipFile) -> str:
    """The folder inside the zip that holds data.pkl (torch names it after the saved file)."""
    pickles = [name for name in archive.namelist() if name.endswith("/data.pkl") and name.count("/") == 1]
    if len(pickles) != 1:
        raise ValueError(f"{path} is a zip archive but not a torch checkpoint (no <name>/data.pkl in it)")
    return pickles[0].removesuffix("data.pkl")


def _unpickle(path: Path, archive: zipfile.ZipFile, root: str) -> object:
    """What data.pkl holds, through the gate; tensors come out as `_TensorView`s, nothing read yet."""
    check_pickle_lengths(path, archive, root + "data.pkl")
    try:
        with archive.open(root + "data.pkl") as pickled:
            return _GatedUnpickler(pickled).load()
    except EOFError:
        raise BadPickle(f"{path} is truncated or corrupt: its data.pkl ends early") from None
    except pickle.UnpicklingError as e:  # a refused global, or the pickle machine's own complaint
        ends_early = "truncated" in str(e)  # pickle's "pickle data was truncated"
        raise BadPickle(
            f"{path} is truncated or corrupt: its data.pkl ends early" if ends_early else f"{path}: {e}"
        ) from None
    except zipfile.BadZipFile as e:  # e.g. "Bad CRC-32 for file 'archive/data.pkl'"
        raise BadPickle(f"{path} is corrupt ({e})") from None
    except (ValueError, TypeError, AttributeError, IndexError, KeyError, OverflowError, RecursionError) as e:
        raise BadPickle(
            f"{path} is corrupt: its data.pkl does not describe tensors ({type(e).__name__}: {e})"
        ) from None


def check_pickle_lengths(path: Path, archive: zipfile.ZipFile, member: str) -> None:
    """Walk a pickle's opcodes without running them, each counted argument read only as far as the member holds it:
    CPython's unpickler allocates the bytes a BINBYTES8 or BYTEARRAY8 claims (2^40 of them, say) before it reads
    them, so a claim past what is left is refused here first, naming the file."""
    try:
        with archive.open(member) as pickled:
            for _opcode, _argument, _position in pickletools.genops(pickled):
                pass
    except ValueError as e:  # "expected N bytes in a bytes8, but only M remain", an unknown opcode, ...
        raise BadPickle(f"{path} is truncated or corrupt: in its {member}, {str(e)[:200]}") from None
    except zipfile.BadZipFile as e:  # e.g. "Bad CRC-32 for file 'archive/data.pkl'"
        raise BadPickle(f"{path} is corrupt ({e})") from None


class BadPickle(pickle.UnpicklingError, ValueError):
    """A pytorch_model.bin whose pickle is refused or unreadable; a ValueError like every other load error."""


def _refuse_build(self, state) -> None:
    """A pickle's BUILD on a stand-in (setting its dtype to "EVIL", its class to another): a state dict has none."""
    raise pickle.UnpicklingError(
        f"data.pkl sets the attributes of a {type(self).__name__.strip('_')} (BUILD {clipped(state)}); "
        f"a state dict of tensors never does"
    )


@dataclasses.dataclass(frozen=True)
class _Storage:
    """A storage as the pickle names it (its persistent id): its key in the archive, dtype and length."""

    key: str
    dtype: str  # a name of DTYPES
    numel: int

    __setstate__ = _refuse_build


@dataclasses.dataclass(frozen=True)
class _TensorView:
    """torch._utils._rebuild_tensor_v2's arguments: the tensor of `size` whose elements lie `stride`
    apart from element `offset` of `storage`. The pickle may put anything here: `_check_view` checks
    the types are these, under the tensor's name, before anything else uses them."""

    storage: _Storage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]

    __setstate__ = _refuse_build


class _StorageType:
    """Stands in for torch.FloatStorage & co. in the pickle: only its dtype matters."""

    def __init__(self, dtype: str):
        self.dtype = dtype

    __setstate__ = _refuse_build


class _GatedUnpickler(pickle.Unpickler):
    """Unpickles a torch state dict into `_TensorView`s, refusing every global a state dict does not need.

    A pickle names the functions to call when it is loaded (os.system as easily as OrderedDict);
    find_class is the one place such a name is resolved, so refusing there means nothing else runs.
    """

    def find_class(self, module: str, name: str):
        allowed = {
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
            ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
        }
        if (module, name) in allowed:
            return allowed[module, name]
        if module == "torch" and name in TORCH_STORAGES:
            return _StorageType(TORCH_STORAGES[name])
        raise pickle.UnpicklingError(
            f"refusing to unpickle global '{module}.{name}': "
            f"a checkpoint of tensors needs none, and it could run any code"
        )

    def persistent_load(self, pid):
        """A storage reference: ("storage", storage type, key, location, number of elements)."""
        if not (
            isinstance(pid, tuple)
            and len(pid) == 5
            and pid[0] == "storage"
            and isinstance(pid[1], _StorageType)
            and isinstance(pid[1].dtype, str)
            and pid[1].dtype in DTYPES
            and isinstance(pid[2], (str, int))
            and _is_index(pid[4])
        ):
            raise pickle.UnpicklingError(f"unsupported storage reference in the pickle: {clipped(pid)}")
        _, storage_type, key, _location, numel = pid
        return _Storage(str(key), storage_type.dtype, numel)


def _rebuild_tensor(storage, offset, size, stride, *_) -> _TensorView:
    """torch._utils._rebuild_tensor_v2, as a description: `_check_view` checks it once it has a name."""
    return _TensorView(storage, offset, size, stride)


def _rebuild_parameter(data, requires_grad, backward_hooks, state=None):
    """torch._utils._rebuild_parameter(_with_state): an nn.Parameter is just its data here. The state is
    the Parameter's Python attributes, e.g. transformers 5's `_is_hf_initialized` (state_dict(keep_vars=True))."""
    return data


def _tensor_views(path: Path, state: object) -> dict[str, _TensorView]:
    """The unpickled state dict's tensors by name, each checked to be a dense block of its storage, no
    two distinct ones sharing a storage element. Equal tensors compare equal (a dim of size 1 gets
    stride 0: any stride steps over it the same)."""
    if not isinstance(state, dict):
        raise ValueError(f"{path} holds a pickled {type(state).__name__}, not a state dict of tensors")
    views: dict[str, _TensorView] = {}
    blocks: dict[str, dict[str, tuple[int, int]]] = collections.defaultdict(dict)  # storage key -> tensor -> block
    for name, view in state.items():
        if not isinstance(name, str):
            raise ValueError(f"{path}: the state dict has a key {name!r}; tensor names are strings")
        if not isinstance(view, _TensorView):
            raise ValueError(f"{path}: entry {name!r} is a {type(view).__name__}, not a tensor")
        _check_view(path, name, view)
        views[name] = dataclasses.replace(
            view, stride=tuple(0 if n == 1 else s for n, s in zip(view.size, view.stride))
        )
    for view, name in {view: name for name, view in reversed(views.items())}.items():  # tied weights: once
        blocks[view.storage.key][name] = (view.offset, view.offset + math.prod(view.size))
    for key, tensors in blocks.items():
        _check_disjoint(path, tensors, f"elements of storage {key!r}")
    return views


def _check_view(path: Path, name: str, view: _TensorView) -> None:
    """A tensor's storage, offset, size and strides are integers that place it inside its storage, its
    elements in row-major order up to a permutation of its dims (as a transposed tensor's are)."""
    storage, offset, size, stride = view.storage, view.offset, view.size, view.stride
    if not (
        isinstance(storage, _Storage)
        and _is_index(offset)
        and isinstance(size, tuple)
        and isinstance(stride, tuple)
        and len(size) == len(stride)
        and all(map(_is_index, size + stride))
    ):
        raise ValueError(
            f"{path}: tensor {name!r} has storage {clipped(storage)}, size {clipped(size)}, stride {clipped(stride)}, "
            f"offset {clipped(offset)}: "
            f"expected a storage, tuples of as many integers >= 0, and an integer >= 0"
        )
    _check_ndim(path, name, size)
    if not _is_dense(size, stride):
        raise ValueError(
            f"{path}: tensor {name!r} of size {size} has strides {stride}, which overlap or leave gaps: "
            f"a saved tensor's elements are consecutive in its storage (in some order of its dims)"
        )
    if offset + math.prod(size) > storage.numel:  # Python ints: a huge size cannot wrap around
        raise ValueError(
            f"{path}: tensor {name!r} of size {size} at offset {offset} lies outside its storage "
            f"{storage.key!r} of {storage.numel} elements"
        )


def _is_index(n) -> bool:
    """An integer >= 0 (a size, stride, offset or element count), not a bool."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def _is_dense(size: tuple, stride: tuple) -> bool:
    """Whether a tensor's elements fill `prod(size)` consecutive storage elements, each once: taken by
    increasing stride, each dim steps over all the dims before it (a dim of size 1 has any stride)."""
    if 0 in size:  # an empty tensor holds no element anywhere
        return True
    step = 1
    for n, s in sorted(((n, s) for n, s in zip(size, stride) if n != 1), key=lambda dim: dim[1]):
        if s != step:
            return False
        step *= n
    return True


def _is_contiguous(size: tuple, stride: tuple) -> bool:
    """Whether a tensor's elements are consecutive in row-major order (a dim of size 1 has any stride)."""
    step = 1
    for n, s in zip(reversed(size), reversed(stride)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def _read_storages(
    path: Path, archive: zipfile.ZipFile, root: str, views: dict[str, _TensorView]
) -> dict[str, np.ndarray]:
    """Each storage the tensors read, by key: its elements, a view of the memory-mapped archive. Each is
    checked to be read as one dtype and length, and its member to hold its bytes; no two storages may
    share bytes of the file (a zip's directory can point two members at the same bytes)."""
    file = np.memmap(path, dtype=np.uint8, mode="r")
    storages: dict[str, _Storage] = {}
    ranges: dict[str, tuple[int, int]] = {}  # the first tensor reading each storage -> its bytes in the file
    for name, view in views.items():
        storage = view.storage
        if storage.key not in storages:
            storages[storage.key] = storage
            ranges[name] = _storage_bytes(path, archive, f"{root}data/{storage.key}", name, storage)
        elif storages[storage.key] != storage:
            first = storages[storage.key]
            raise ValueError(
                f"{path}: tensor {name!r} reads storage {storage.key!r} as {storage.numel} "
                f"{storage.dtype} elements, another tensor as {first.numel} {first.dtype}"
            )
    _check_disjoint(path, ranges, "file bytes of their storages")
    return {
        key: file[begin:end].view(DTYPES[storage.dtype])
        for (key, storage), (begin, end) in zip(storages.items(), ranges.values())
    }


def _storage_bytes(path: Path, archive: zipfile.ZipFile, member: str, name: str, storage: _Storage) -> tuple[int, int]:
    """Where in the file a storage's bytes lie, after checking its member (stored) holds them all."""
    try:
        info = archive.getinfo(member)
    except KeyError:
        raise ValueError(f"{path}: storage {member} of tensor {name!r} is missing from the archive") from None
    nbytes = storage.numel * np.dtype(DTYPES[storage.dtype]).itemsize
    start = _member_data_offset(archive, info)
    past_the_end = start + nbytes > path.stat().st_size
    if info.compress_size < nbytes or past_the_end:
        raise ValueError(
            f"{path}: storage {member} of tensor {name!r} holds {info.compress_size} bytes"
            f"{' (past the end of the file)' if past_the_end else ''}, "
            f"its {storage.numel} {storage.dtype} elements need {nbytes}"
        )
    return start, start + nbytes


def _tensor_array(view: _TensorView, flat: np.ndarray) -> np.ndarray:
    """The tensor `view` describes (checked by `_check_view`) in its storage's elements `flat`, float16 /
    bfloat16 widened to float32: a view when it is contiguous, else a copy."""
    size, stride = view.size, view.stride
    if _is_contiguous(size, stride):
        return _widen(flat[view.offset : view.offset + math.prod(size)].reshape(size), view.storage.dtype)
    strided = np.lib.stride_tricks.as_strided(
        flat[view.offset :], shape=size, strides=[s * flat.itemsize for s in stride], writeable=False
    )
    return _widen(_read_only(np.ascontiguousarray(strided)), view.storage.dtype)


def _member_data_offset(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """Where a stored zip member's bytes start: after its 30-byte local header, name and extra field."""
    assert archive.fp is not None  # the archive is open
    archive.fp.seek(info.header_offset)
    local_header = archive.fp.read(30)
    if len(local_header) < 30 or local_header[:4] != b"PK\x03\x04":
        raise ValueError(f"{archive.filename} is corrupt: member {info.filename} has no local header where it should")
    name_length, extra_length = struct.unpack("<HH", local_header[26:30])
    return info.header_offset + 30 + name_length + extra_length


# ---------------------------------------------------------------------------------------------
# Sharded checkpoints


def read_sharded(index: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of a checkpoint split into shards, by name, as `index` (its weight_map) lists them."""
    index = Path(index)
    weight_map = read_weight_map(index)
    tensors = {}
    for path in shard_paths(index, weight_map):
        for name, tensor in read_weight_file(path).items():
            if name in tensors:
                raise ValueError(f"{index}: tensor {name!r} is in two shards (one of them {path.name!r})")
            tensors[name] = tensor
    for name, shard in weight_map.items():
        if name not in tensors:
            raise ValueError(f"{index} maps tensor {name!r} to shard {shard!r}, which does not hold it")
    return tensors


def read_weight_map(index: Path) -> dict[str, str]:
    """The weight_map of a shard index: each tensor's name -> the file name of the shard holding it."""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (ValueError, RecursionError, KeyError, TypeError) as e:  # JSON, UTF-8, nesting, 4300-digit numbers
        raise ValueError(f"{index} is not a checkpoint shard index (a JSON object with a weight_map): {e!r}") from None
    if not (isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values())):
        raise ValueError(f"{index}: weight_map must map each tensor name to a shard file name")
    for shard in sorted(set(weight_map.values())):
        if Path(shard).name != shard:
            raise ValueError(f"{index}: shard {shard!r} is not a file name in the checkpoint's directory")
    return weight_map


def shard_paths(index: Path, weight_map: dict[str, str]) -> list[Path]:
    """The shards `weight_map` lists, in `index`'s directory, by name; a missing one is an error naming it."""
    paths = []
    for shard in sorted(set(weight_map.values())):
        path = index.parent / shard
        if not path.is_file():
            example = next(name for name, s in weight_map.items() if s == shard)
            raise FileNotFoundError(
                f"{index} lists shard {shard!r} (holding {example!r}, among others), but {path} is missing"
            )
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------
# Google's TensorFlow checkpoints

GOOGLE_LEAVES = {  # last part of a Google variable name -> transformers' parameter name
    "kernel": "weight",
    "gamma": "weight",
    "beta": "bias",
    "bias": "bias",
    "output_weights": "weight",
    "output_bias": "bias",
}
OPTIMIZER_STATE = ("adam_m", "adam_v", "global_step")  # AdamWeightDecayOptimizer's slots and the step counter


def transformers_name(google_name: str) -> str | None:
    """The transformers name of a variable in Google's BERT checkpoints; None for optimizer state.

    bert/embeddings/word_embeddings                  -> bert.embeddings.word_embeddings.weight
    bert/encoder/layer_3/output/LayerNorm/gamma      -> bert.encoder.layer.3.output.LayerNorm.weight
    bert/pooler/dense/kernel                         -> bert.pooler.dense.weight (transpose it)
    cls/predictions/output_bias                      -> cls.predictions.bias
    cls/seq_relationship/output_weights (2, hidden)  -> cls.seq_relationship.weight (as it is)
    cls/squad/output_weights, output_weights         -> qa_outputs.weight, classifier.weight
    """
    *scope, leaf = google_name.split("/")
    if leaf in OPTIMIZER_STATE or any(part.startswith("AdamWeightDecayOptimizer") for part in scope):
        return None
    if leaf.endswith("_embeddings"):
        scope, leaf = [*scope, leaf], "weight"
    else:
        leaf = GOOGLE_LEAVES.get(leaf, leaf)
    if scope[:2] == ["cls", "squad"]:  # run_squad.py's head
        scope = ["qa_outputs", *scope[2:]]
    elif not scope:  # run_classifier.py's head: output_weights (labels, hidden), output_bias
        scope = ["classifier"]
    return ".".join([re.sub(r"^layer_(\d+)$", r"layer.\1", part) for part in scope] + [leaf])


def read_tf_checkpoint(prefix: str | Path, *, verify_crc: bool = True) -> dict[str, np.ndarray]:
    """Every model variable of the TensorFlow checkpoint at `prefix`, by transformers name, widened to float32.

    Kernels, stored (in, out), are returned transposed, (out, in) as torch stores them (a view, not a copy).
    """
    tensors = tf_bundle.read_bundle(
        prefix, select=lambda name: transformers_name(name) is not None, verify_crc=verify_crc
    )
    renamed = {}
    for google_name, (tensor, dtype) in tensors.items():
        tensor = _widen(tensor, dtype)
        renamed[str(transformers_name(google_name))] = tensor.T if google_name.endswith("/kernel") else tensor
    return renamed
