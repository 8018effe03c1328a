"""A pytorch_model.bin (torch >= 1.6), read without torch: an uncompressed zip holding a pickle
(`<name>/data.pkl`) that describes the tensors, and one raw file per storage (`<name>/data/<key>`). A pickle can
call any importable function, so it is unpickled through a gate that lets through only what a state dict needs.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import pickle
import pickletools
import struct
import zipfile
from pathlib import Path

import numpy as np

from ..model.config import clipped
from .tensor_bytes import DTYPES, check_disjoint, check_ndim, is_index, read_only, widen

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
            and is_index(pid[4])
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
        check_disjoint(path, tensors, f"elements of storage {key!r}")
    return views


def _check_view(path: Path, name: str, view: _TensorView) -> None:
    """A tensor's storage, offset, size and strides are integers that place it inside its storage, its
    elements in row-major order up to a permutation of its dims (as a transposed tensor's are)."""
    storage, offset, size, stride = view.storage, view.offset, view.size, view.stride
    if not (
        isinstance(storage, _Storage)
        and is_index(offset)
        and isinstance(size, tuple)
        and isinstance(stride, tuple)
        and len(size) == len(stride)
        and all(map(is_index, size + stride))
    ):
        raise ValueError(
            f"{path}: tensor {name!r} has storage {clipped(storage)}, size {clipped(size)}, stride {clipped(stride)}, "
            f"offset {clipped(offset)}: "
            f"expected a storage, tuples of as many integers >= 0, and an integer >= 0"
        )
    check_ndim(path, name, size)
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
    check_disjoint(path, ranges, "file bytes of their storages")
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
        return widen(flat[view.offset : view.offset + math.prod(size)].reshape(size), view.storage.dtype)
    strided = np.lib.stride_tricks.as_strided(
        flat[view.offset :], shape=size, strides=[s * flat.itemsize for s in stride], writeable=False
    )
    return widen(read_only(np.ascontiguousarray(strided)), view.storage.dtype)


def _member_data_offset(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """Where a stored zip member's bytes start: after its 30-byte local header, name and extra field."""
    assert archive.fp is not None  # the archive is open
    archive.fp.seek(info.header_offset)
    local_header = archive.fp.read(30)
    if len(local_header) < 30 or local_header[:4] != b"PK\x03\x04":
        raise ValueError(f"{archive.filename} is corrupt: member {info.filename} has no local header where it should")
    name_length, extra_length = struct.unpack("<HH", local_header[26:30])
    return info.header_offset + 30 + name_length + extra_length
