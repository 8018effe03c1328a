"""Damaged, hostile or inconsistent checkpoints: each refused at load with one message naming the file."""

from __future__ import annotations

import collections
import dataclasses
import json
import pickle
import zipfile

import numpy as np
import pytest
from helpers import SMALL, run_with_memory_limit

from numbert.checkpoint.safetensors_file import read_safetensors
from numbert.checkpoint.torch_zip import read_torch_bin
from numbert.checkpoint.weights import load_weights
from numbert.testing import random_weights


def write_config(directory, config=SMALL, **changes):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config.to_dict() | changes), encoding="utf-8")
    return directory


# --- pytorch_model.bin written by hand: a pickle naming storages, and the storages ---------------------


class Global:
    """module.name, referenced by the pickle (it need not exist here)."""

    def __init__(self, module, name):
        self.module, self.name = module, name


class Call(Global):
    """A call of module.name(*args) in the pickle."""

    def __init__(self, module, name, *args):
        super().__init__(module, name)
        self.args = args


class PersistentId:
    """A persistent id, as torch.save writes for each storage."""

    def __init__(self, pid):
        self.pid = pid


def Storage(key, numel, dtype="FloatStorage"):
    return PersistentId(("storage", Global("torch", dtype), key, "cpu", numel))


def opcodes(obj) -> bytes:
    """Protocol-2 pickle opcodes that rebuild `obj` (no memo, so any structure can be written)."""
    if isinstance(obj, Call):
        return opcodes(Global(obj.module, obj.name)) + opcodes(tuple(obj.args)) + b"R"
    if isinstance(obj, Global):
        return f"c{obj.module}\n{obj.name}\n".encode()
    if isinstance(obj, PersistentId):
        return opcodes(obj.pid) + b"Q"
    if isinstance(obj, tuple):
        return b"(" + b"".join(map(opcodes, obj)) + b"t"
    if isinstance(obj, list):
        return b"(" + b"".join(map(opcodes, obj)) + b"l"
    if isinstance(obj, dict):
        return b"}(" + b"".join(opcodes(k) + opcodes(v) for k, v in obj.items()) + b"u"
    return pickle.dumps(obj, protocol=2)[2:-1]  # str, int, bool, None: as pickle writes them


def pickle_bytes(state) -> bytes:
    return b"\x80\x02" + opcodes(state) + b"."


def tensor(key, shape, offset=0, stride=None, numel=None):
    """torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)."""
    shape = tuple(shape)
    if stride is None:
        stride = tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
    numel = int(np.prod(shape)) if numel is None else numel
    return Call(
        "torch._utils",
        "_rebuild_tensor_v2",
        Storage(key, numel),
        offset,
        shape,
        stride,
        False,
        Call("collections", "OrderedDict"),
    )


def write_bin(path, state, storages: dict[str, bytes], compression=zipfile.ZIP_STORED):
    """A torch archive holding `state`'s pickle and `storages` (stored as torch stores them, unless told)."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle_bytes(state))
        z.writestr("archive/byteorder", "little")
        for key, data in storages.items():
            z.writestr(f"archive/data/{key}", data, compression)
    return path


def test_hand_written_bin_loads(tmp_path):
    """The writer above is faithful: a well-formed file reads back."""
    data = np.arange(6, dtype=np.float32)
    path = write_bin(tmp_path / "w.bin", {"w": tensor("0", (2, 3))}, {"0": data.tobytes()})
    np.testing.assert_array_equal(read_torch_bin(path)["w"], data.reshape(2, 3))


BAD_STORAGE_ARGUMENTS = {
    "numel not an integer": tensor("0", (2, 3), numel="six"),
    "negative numel": tensor("0", (2, 3), numel=-6),
    "size not a tuple": Call("torch._utils", "_rebuild_tensor_v2", Storage("0", 6), 0, 6, (1,), False, None),
    "offset not an integer": tensor("0", (2, 3), offset="0"),
    "stride of another rank": tensor("0", (2, 3), stride=(1,)),
    "key not a string": tensor(["0"], (2, 3)),
    "unknown storage type": Call(
        "torch._utils", "_rebuild_tensor_v2", Storage("0", 6, "EvilStorage"), 0, (2, 3), (3, 1), False, None
    ),
    "too few arguments": Call("torch._utils", "_rebuild_tensor_v2", Storage("0", 6)),
    "a persistent id of another kind": Call(
        "torch._utils", "_rebuild_tensor_v2", PersistentId(("module", "x")), 0, (2, 3), (3, 1), False, None
    ),
}


@pytest.mark.parametrize("case", list(BAD_STORAGE_ARGUMENTS))
def test_bad_storage_arguments_name_the_file(tmp_path, case):
    path = write_bin(
        tmp_path / "pytorch_model.bin", {"w": BAD_STORAGE_ARGUMENTS[case]}, {"0": np.zeros(6, np.float32).tobytes()}
    )
    with pytest.raises(ValueError, match=str(path)):
        read_torch_bin(path)


def test_a_compressed_storage_is_refused_before_it_is_inflated(tmp_path):
    """A deflated member inflates to any size (2 MB of zip held a 2 GiB storage: 4.1 GB of memory);
    torch stores every member, so a compressed one is refused by name, unread."""
    numel = 1 << 20
    path = write_bin(
        tmp_path / "pytorch_model.bin", {"w": tensor("0", (numel,))}, {"0": bytes(4 * numel)}, zipfile.ZIP_DEFLATED
    )
    assert path.stat().st_size < 10_000
    with pytest.raises(ValueError, match=f"{path}: member archive/data/0 is compressed; torch.save stores every"):
        read_torch_bin(path)


@pytest.mark.parametrize("stored", [23, 0])
def test_a_storage_holding_fewer_bytes_than_its_elements_is_named(tmp_path, stored):
    path = write_bin(tmp_path / "pytorch_model.bin", {"w": tensor("0", (2, 3))}, {"0": bytes(stored)})
    with pytest.raises(
        ValueError,
        match=rf"{path}: storage archive/data/0 of tensor 'w' holds {stored} bytes, its 6 F32 elements need 24",
    ):
        read_torch_bin(path)


def test_a_stride_0_tensor_is_refused_without_allocating_it(tmp_path):
    """A 506-byte file whose one-element storage is viewed as 40000 x 40000 (stride 0) cost a 6 GB copy,
    then a raw MemoryError; in a process capped at 1.5 GB the refusal now comes first, naming the tensor."""
    path = write_bin(
        tmp_path / "pytorch_model.bin", {"w": tensor("0", (40000, 40000), stride=(0, 0), numel=1)}, {"0": bytes(4)}
    )
    last_line = run_with_memory_limit(
        f"from numbert.checkpoint.torch_zip import read_torch_bin; read_torch_bin({str(path)!r})"
    )
    assert last_line == (
        f"ValueError: {path}: tensor 'w' of size (40000, 40000) has strides (0, 0), which overlap or leave gaps: "
        f"a saved tensor's elements are consecutive in its storage (in some order of its dims)"
    )


BAD_VIEWS = {  # a storage of 12 float32 elements, viewed as...
    "overlapping strides": (tensor("0", (3, 4), stride=(1, 1), numel=12), "has strides \\(1, 1\\), which overlap"),
    "gaps between elements": (
        tensor("0", (2, 3), stride=(6, 2), numel=12),
        "has strides \\(6, 2\\), which overlap or leave gaps",
    ),
    "past the storage's end": (
        tensor("0", (3, 4), offset=1, numel=12),
        "of size \\(3, 4\\) at offset 1 lies outside its storage '0' of 12",
    ),
    "more dims than NumPy has": (tensor("0", (1,) * 65, numel=12), "has 65 dims; NumPy arrays have at most 64"),
    "a bool as a size": (tensor("0", (True, 12), numel=12), "size \\(True, 12\\)"),
}


@pytest.mark.parametrize("case", list(BAD_VIEWS))
def test_a_tensor_that_is_not_a_block_of_its_storage_is_named(tmp_path, case):
    view, message = BAD_VIEWS[case]
    path = write_bin(tmp_path / "pytorch_model.bin", {"w": view}, {"0": bytes(48)})
    with pytest.raises(ValueError, match=f"{path}: tensor 'w' .*{message}"):
        read_torch_bin(path)


def test_tensors_sharing_storage_elements_are_refused_unless_they_are_the_same_tensor(tmp_path):
    """Tied weights (the same tensor under two names) are read once; two other tensors overlapping in a
    storage are refused: 10,000 float16 views of one storage would otherwise each be widened, a copy apiece."""
    data = np.arange(12, dtype=np.float16)
    half = Storage("0", 12, "HalfStorage")
    tied = {name: Call("torch._utils", "_rebuild_tensor_v2", half, 0, (3, 4), (4, 1), False, None) for name in "ab"}
    read = read_torch_bin(write_bin(tmp_path / "tied.bin", tied, {"0": data.tobytes()}))
    assert read["a"] is read["b"] and read["a"].dtype == np.float32
    np.testing.assert_array_equal(read["a"], data.reshape(3, 4))
    overlapping = {
        f"w{i}": Call("torch._utils", "_rebuild_tensor_v2", half, i, (8,), (1,), False, None) for i in range(4)
    }
    path = write_bin(tmp_path / "overlapping.bin", overlapping, {"0": data.tobytes()})
    with pytest.raises(
        ValueError, match=rf"{path} is corrupt: tensors 'w0' and 'w1' overlap \(elements of storage '0' 0..8 and 1..9\)"
    ):
        read_torch_bin(path)


def test_storages_sharing_bytes_of_the_file_are_refused(tmp_path):
    """A zip's directory can point many members at the same bytes: each storage would be widened apart."""
    half = np.arange(8, dtype=np.float16).tobytes()
    state = {
        name: Call("torch._utils", "_rebuild_tensor_v2", Storage(key, 8, "HalfStorage"), 0, (8,), (1,), False, None)
        for name, key in [("a", "0"), ("b", "1")]
    }
    path = write_bin(tmp_path / "pytorch_model.bin", state, {"0": half, "1": half})
    with zipfile.ZipFile(path) as z:
        first = z.getinfo("archive/data/0").header_offset
    raw = bytearray(path.read_bytes())
    entry = raw.rindex(b"archive/data/1") - 46  # member 1's central directory entry: 46 bytes, then its name
    raw[entry + 42 : entry + 46] = first.to_bytes(4, "little")  # its local header is now member 0's
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=rf"{path} is corrupt: tensors 'a' and 'b' overlap \(file bytes of their"):
        read_torch_bin(path)


def test_a_transposed_tensor_is_a_block_of_its_storage(tmp_path):
    data = np.arange(6, dtype=np.float32)
    path = write_bin(tmp_path / "w.bin", {"w": tensor("0", (3, 2), stride=(1, 3))}, {"0": data.tobytes()})
    np.testing.assert_array_equal(read_torch_bin(path)["w"], data.reshape(2, 3).T)


def real_bin(tmp_path):
    weights = random_weights(SMALL)
    state = collections.OrderedDict((name, tensor(str(i), w.shape)) for i, (name, w) in enumerate(weights.items()))
    write_config(tmp_path)
    return write_bin(
        tmp_path / "pytorch_model.bin", state, {str(i): w.tobytes() for i, w in enumerate(weights.values())}
    ), weights


def rewritten(path, change):
    """`path` with data.pkl replaced by change(data.pkl's bytes), every other member as it was."""
    members = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            members[name] = z.read(name)
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, change(data) if name.endswith("data.pkl") else data)
    return path


@pytest.mark.parametrize("cut", [1, 2, 3, 10])
def test_truncated_data_pkl_names_the_file(tmp_path, cut):
    path, _ = real_bin(tmp_path)
    rewritten(path, lambda data: data[: len(data) * cut // 11])
    with pytest.raises(ValueError, match=f"{path}.*(truncated|corrupt)"):
        load_weights(tmp_path, SMALL)


def test_bad_crc_names_the_file(tmp_path):
    path, _ = real_bin(tmp_path)
    raw = bytearray(path.read_bytes())
    where = raw.index(b"OrderedDict")  # inside data.pkl's stored bytes: the CRC no longer matches
    raw[where] ^= 0x20
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=f"{path}.*CRC"):
        load_weights(tmp_path, SMALL)


def test_refused_global_is_a_value_error_naming_the_file(tmp_path):
    path = write_bin(tmp_path / "pytorch_model.bin", {"w": Call("os", "system", "true")}, {})
    with pytest.raises(ValueError, match=f"{path}: refusing to unpickle global 'os.system'") as caught:
        read_torch_bin(path)
    assert isinstance(caught.value, pickle.UnpicklingError)  # still what a pickle refusal has always been


@pytest.mark.parity
def test_transformers_5_keep_vars_state_dict_loads(tmp_path, torch, transformers):
    """transformers 5 marks loaded parameters `_is_hf_initialized`; torch.save then pickles them with
    torch._utils._rebuild_parameter_with_state."""
    hf_config = transformers.BertConfig(**SMALL.to_dict())
    transformers.BertModel(hf_config).save_pretrained(tmp_path / "saved")
    model = transformers.BertModel.from_pretrained(tmp_path / "saved")
    state = model.state_dict(keep_vars=True)
    assert getattr(state["pooler.dense.weight"], "_is_hf_initialized", False)
    torch.save(state, write_config(tmp_path / "kv") / "pytorch_model.bin")
    loaded = load_weights(tmp_path / "kv", SMALL)
    for name, value in loaded.items():
        np.testing.assert_array_equal(value, state[name].detach().numpy(), err_msg=name)


# --- safetensors --------------------------------------------------------------------------------------


def write_safetensors(path, header: dict, data: bytes):
    header_bytes = json.dumps(header).encode()
    path.write_bytes(len(header_bytes).to_bytes(8, "little") + header_bytes + data)
    return path


def test_overlapping_safetensors_ranges_are_refused(tmp_path):
    header = {
        "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
        "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},
    }
    path = write_safetensors(tmp_path / "model.safetensors", header, bytes(24))
    with pytest.raises(ValueError, match=f"{path} is corrupt: tensors 'a' and 'b' overlap"):
        read_safetensors(path)
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    with pytest.raises(SafetensorError, match="invalid offset"):  # safetensors itself refuses the file
        load_file(path)


BAD_SAFETENSORS_ENTRIES = {  # a header entry for tensor 'w' -> what the error says
    "a bool in the shape": (
        {"dtype": "F32", "shape": [True, 4], "data_offsets": [0, 16]},
        "bad header entry for tensor 'w'",
    ),
    "a bool as an offset": (
        {"dtype": "F32", "shape": [1], "data_offsets": [False, True]},
        "bad header entry for tensor 'w'",
    ),
    "a dtype that is a list": (
        {"dtype": ["F32"], "shape": [4], "data_offsets": [0, 16]},
        "tensor 'w' has unsupported dtype",
    ),
    "more dims than NumPy has": ({"dtype": "F32", "shape": [1] * 65, "data_offsets": [0, 4]}, "tensor 'w' has 65 dims"),
}


@pytest.mark.parametrize("case", list(BAD_SAFETENSORS_ENTRIES))
def test_a_bad_safetensors_entry_names_file_and_tensor(tmp_path, case):
    entry, message = BAD_SAFETENSORS_ENTRIES[case]
    path = write_safetensors(tmp_path / "model.safetensors", {"w": entry}, bytes(16))
    with pytest.raises(ValueError, match=f"{path}.*{message}"):
        read_safetensors(path)


@pytest.mark.parametrize("header", [b"[" * 100_000 + b"]" * 100_000, b'{"w": ' + b"1" * 5000 + b"}"])
def test_a_safetensors_header_too_deep_or_too_long_a_number_names_the_file(tmp_path, header):
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header)
    with pytest.raises(ValueError, match=f"{path} is corrupt or not a safetensors file: its header is not JSON"):
        read_safetensors(path)


@pytest.mark.parametrize("shape", [[2**62 + 1, 4], [2**32, 2**32, 16], [2**64]])  # int64 products: 4, 0, overflow
def test_a_shape_whose_element_count_overflows_is_reported(tmp_path, shape):
    path = write_safetensors(
        tmp_path / "model.safetensors", {"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 16]}}, bytes(16)
    )
    with pytest.raises(ValueError, match=rf"{path} is corrupt: tensor 'w' has shape \({shape[0]},.*overflows"):
        read_safetensors(path)


def test_overflowing_torch_size_is_reported(tmp_path):
    path = write_bin(tmp_path / "pytorch_model.bin", {"w": tensor("0", (2**62, 2**62), numel=6)}, {"0": bytes(24)})
    with pytest.raises(ValueError, match=rf"{path}.*size \({2**62}, {2**62}\)"):
        read_torch_bin(path)


# --- the config against the checkpoint ----------------------------------------------------------------


def write_small(directory, config=SMALL, weights_config=SMALL, **changes):
    from safetensors.numpy import save_file

    write_config(directory, config, **changes)
    save_file(random_weights(weights_config), str(directory / "model.safetensors"))
    return directory


def test_config_with_fewer_layers_than_the_checkpoint_is_an_error(tmp_path):
    import dataclasses

    directory = write_small(tmp_path, weights_config=dataclasses.replace(SMALL, num_hidden_layers=4))
    with pytest.raises(ValueError, match=r"model.safetensors holds 4 encoder layers .*num_hidden_layers is 2"):
        load_weights(directory, SMALL)


def test_a_million_layers_in_config_json_is_refused_before_naming_them(tmp_path):
    """The expected tensor names were built first: 16 million of them, 2.5 GB and 17 s before the error.
    Capped at 1.5 GB, the refusal now comes first: the config's limit, then the checkpoint's layer count."""
    directory = write_small(tmp_path, num_hidden_layers=1_000_000)
    code = (
        "from numbert.checkpoint.weights import load_weights; from numbert.checkpoint.model_config import read_config; "
        f"load_weights({str(directory)!r}, read_config({str(directory / 'config.json')!r}))"
    )
    assert run_with_memory_limit(code) == (
        f"ValueError: {directory / 'config.json'}: num_hidden_layers is 1000000; numbert allows at most 1,024"
    )
    directory = write_small(tmp_path / "at_the_limit", num_hidden_layers=1024)
    assert run_with_memory_limit(code.replace(str(tmp_path), str(tmp_path / "at_the_limit"))) == (
        f"ValueError: {directory / 'model.safetensors'} holds 2 encoder layers but config.json's "
        f"num_hidden_layers is 1024: the config does not describe this checkpoint"
    )


def test_a_checkpoint_missing_a_whole_layer_names_it(tmp_path):
    """One tensor of the last layer is not enough: the layers before it must be there too."""
    from safetensors.numpy import save_file

    weights = random_weights(SMALL)
    weights["encoder.layer.999.output.dense.bias"] = weights.pop("encoder.layer.1.output.dense.bias")
    save_file(weights, str(write_config(tmp_path, num_hidden_layers=1000) / "model.safetensors"))
    with pytest.raises(
        ValueError, match=r"model.safetensors holds no tensor of encoder layer 2, though it holds layers up to 999"
    ):
        load_weights(tmp_path, dataclasses.replace(SMALL, num_hidden_layers=1000))


@pytest.mark.parametrize("pad", [50, 1000, -1])
def test_pad_token_id_outside_the_vocabulary_is_an_error_at_load(tmp_path, pad):
    import numbert

    directory = write_small(tmp_path, pad_token_id=pad)
    with pytest.raises(ValueError, match=rf"config.json: pad_token_id {pad} is not an id of the vocabulary"):
        numbert.load(directory)


# --- NaN and inf in the weights -----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_finite_names_the_tensor(tmp_path, bad):
    from safetensors.numpy import save_file

    weights = random_weights(SMALL)
    weights["encoder.layer.1.output.dense.weight"][3, 5] = bad
    write_config(tmp_path)
    save_file(weights, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"tensor 'encoder.layer.1.output.dense.weight' holds NaN or infinite"):
        load_weights(tmp_path, SMALL, check_finite=True)
    unchecked = load_weights(tmp_path, SMALL, check_finite=False)["encoder.layer.1.output.dense.weight"]
    assert not np.isfinite(unchecked[3, 5])


def test_check_finite_passes_huge_but_finite_weights(tmp_path):
    """Values near float32's maximum overflow a float32 sum; the check must not call them infinite."""
    from safetensors.numpy import save_file

    weights = random_weights(SMALL)
    weights["embeddings.word_embeddings.weight"][:] = np.float32(3e38)
    write_config(tmp_path)
    save_file(weights, str(tmp_path / "model.safetensors"))
    load_weights(tmp_path, SMALL, check_finite=True)


def test_load_check_finite_names_the_tensor(tmp_path, minilm_dir, caplog):
    import shutil

    import numbert
    from numbert.checkpoint.safetensors_file import read_safetensors

    directory = tmp_path / "model"
    shutil.copytree(minilm_dir, directory, ignore=shutil.ignore_patterns("model.safetensors"))
    from safetensors.numpy import save_file

    weights = {name: np.array(w) for name, w in read_safetensors(minilm_dir / "model.safetensors").items()}
    weights["encoder.layer.3.attention.self.key.bias"][7] = np.nan
    save_file(weights, str(directory / "model.safetensors"))
    with pytest.raises(ValueError, match=r"tensor 'encoder.layer.3.attention.self.key.bias' holds NaN .* index \(7,\)"):
        numbert.load(directory, check_finite=True)
    for door in (numbert.SentenceTransformer, numbert.CrossEncoder):  # the sentence-transformers doors say it too
        with pytest.raises(ValueError, match=r"tensor 'encoder.layer.3.attention.self.key.bias' holds NaN"):
            door(str(directory), check_finite=True)
    assert np.isnan(numbert.load(directory).embed("hello")).all()  # unchecked, the NaN reaches every output
    assert "computed NaN or infinite hidden states" in caplog.text  # and it is said
