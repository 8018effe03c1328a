"""Reading checkpoints: safetensors memory-mapped, pytorch_model.bin without torch, names, and every refusal."""

from __future__ import annotations

import collections
import json
import os
import pickle
import zipfile

import numpy as np
import pytest
from helpers import SMALL
from safetensors.numpy import save_file

from numbert.checkpoint.model_config import read_config
from numbert.checkpoint.safetensors_file import read_safetensors
from numbert.checkpoint.torch_zip import read_torch_bin
from numbert.checkpoint.weights import HEAD_PREFIXES, load_weights, normalise_names
from numbert.model.config import BertConfig
from numbert.model.tensors import tensor_shapes
from numbert.testing import random_weights


def write_checkpoint(directory, tensors, config=SMALL):
    """config.json + model.safetensors holding `tensors` under the names given."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config.to_dict()), encoding="utf-8")
    save_file(tensors, str(directory / "model.safetensors"))
    return directory


def write_raw_safetensors(path, tensors):
    """A safetensors file written by hand: {name: (dtype, shape, raw bytes)}, for dtypes NumPy lacks."""
    header, offset = {}, 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header_bytes = json.dumps(header).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    path.write_bytes(
        len(header_bytes).to_bytes(8, "little") + header_bytes + b"".join(data for _, _, data in tensors.values())
    )


def legacy_names(weights):
    """The same weights named as the published bert-base-uncased: `bert.` prefix, gamma/beta, heads, a buffer."""
    renamed = {}
    for name, w in weights.items():
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        renamed["bert." + name] = w
    renamed["bert.embeddings.position_ids"] = np.arange(SMALL.max_position_embeddings, dtype=np.int64)[None]
    renamed["cls.predictions.bias"] = np.zeros(SMALL.vocab_size, np.float32)
    renamed["cls.seq_relationship.weight"] = np.zeros((2, SMALL.hidden_size), np.float32)
    return renamed


def assert_same_weights(loaded, expected):
    assert [name for name in loaded if not name.startswith(HEAD_PREFIXES)] == list(tensor_shapes(SMALL))
    for name, w in expected.items():
        assert loaded[name].dtype == np.float32
        np.testing.assert_array_equal(loaded[name], w, err_msg=name)


# ----------------------------------------------------------------------------------------------
# names and shapes


def test_tensor_shapes_counts_and_linear_layout():
    assert len(tensor_shapes(BertConfig())) == 5 + 16 * 12 + 2 == 199
    shapes = tensor_shapes(SMALL)
    assert len(shapes) == 5 + 16 * 2 + 2
    assert shapes["encoder.layer.1.intermediate.dense.weight"] == (64, 32)  # torch Linear: (out, in)
    assert shapes["encoder.layer.1.output.dense.weight"] == (32, 64)


def test_normalise_names_strips_prefix_renames_legacy_keeps_heads_drops_buffers():
    weights = random_weights(SMALL)
    normalised = normalise_names(legacy_names(weights))
    assert sorted(normalised) == sorted([*weights, "cls.predictions.bias", "cls.seq_relationship.weight"])


def test_normalise_names_keeps_unknown_extras_and_refuses_collisions():
    w = np.zeros(3, np.float32)
    assert normalise_names({"lm_head.bias": w, "pooler.dense.bias": w}) == {"lm_head.bias": w, "pooler.dense.bias": w}
    with pytest.raises(ValueError, match="'pooler.dense.bias'"):
        normalise_names({"bert.pooler.dense.bias": w, "pooler.dense.bias": w})


# ----------------------------------------------------------------------------------------------
# safetensors


def test_safetensors_load_is_read_only_float32_memmap(tmp_path):
    weights = random_weights(SMALL, seed=1)
    loaded = load_weights(write_checkpoint(tmp_path, weights), SMALL)
    assert_same_weights(loaded, weights)
    for name, w in loaded.items():
        assert isinstance(w, np.memmap), name
        assert not w.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            w[...] = 0


def test_bert_base_loads_without_copying(bert_base_dir):
    loaded = load_weights(bert_base_dir, read_config(bert_base_dir / "config.json"))
    assert len(loaded) == 199 + 7  # the encoder's tensors, then the pre-training heads'
    assert all(isinstance(w, np.memmap) for w in loaded.values())
    heads = 768 * 768 + 3 * 768 + 30522 + 2 * 768 + 2  # transform dense, its LayerNorm, bias; NSP
    assert sum(w.nbytes for w in loaded.values()) == 4 * (109_482_240 + heads)  # every parameter, mapped


def test_minilm_real_checkpoint_loads(minilm_dir):
    config = read_config(minilm_dir / "config.json")
    raw = read_safetensors(minilm_dir / "model.safetensors")
    assert "embeddings.position_ids" in raw and raw["embeddings.position_ids"].dtype == np.int64
    loaded = load_weights(minilm_dir, config)
    assert len(loaded) == 5 + 16 * 6 + 2 == 103
    assert loaded["embeddings.word_embeddings.weight"].shape == (30522, 384)


def test_float16_and_bfloat16_widen_exactly(tmp_path):
    rng = np.random.default_rng(0)
    half = rng.standard_normal((4, 5)).astype(np.float16)
    exact_bf16 = (rng.standard_normal((3, 7)).astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
    write_raw_safetensors(
        tmp_path / "m.safetensors",
        {
            "half": ("F16", half.shape, half.tobytes()),
            "brain": ("BF16", exact_bf16.shape, (exact_bf16.view(np.uint32) >> 16).astype("<u2").tobytes()),
        },
    )
    raw = read_safetensors(tmp_path / "m.safetensors")
    assert raw["half"].dtype == raw["brain"].dtype == np.float32
    np.testing.assert_array_equal(raw["half"], half.astype(np.float32))
    np.testing.assert_array_equal(raw["brain"], exact_bf16)
    assert not raw["half"].flags.writeable and not raw["brain"].flags.writeable


@pytest.mark.parity
def test_bfloat16_matches_torch(tmp_path, torch):
    from safetensors.torch import save_file as torch_save_file

    t = torch.randn(6, 10).to(torch.bfloat16)
    torch_save_file({"w": t, "h": t.half()}, str(tmp_path / "m.safetensors"))
    raw = read_safetensors(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(raw["w"], t.float().numpy())
    np.testing.assert_array_equal(raw["h"], t.half().float().numpy())


def test_half_precision_checkpoint_loads_as_float32(tmp_path):
    weights = {k: v.astype(np.float16) for k, v in random_weights(SMALL).items()}
    loaded = load_weights(write_checkpoint(tmp_path, weights), SMALL)
    assert_same_weights(loaded, {k: v.astype(np.float32) for k, v in weights.items()})


def test_float64_is_narrowed_and_integers_refused(tmp_path):
    weights = random_weights(SMALL)
    weights["pooler.dense.bias"] = weights["pooler.dense.bias"].astype(np.float64)
    loaded = load_weights(write_checkpoint(tmp_path / "f64", weights), SMALL)
    assert loaded["pooler.dense.bias"].dtype == np.float32 and not loaded["pooler.dense.bias"].flags.writeable
    weights["pooler.dense.bias"] = np.zeros(32, np.int32)
    with pytest.raises(ValueError, match=r"'pooler.dense.bias' has dtype int32"):
        load_weights(write_checkpoint(tmp_path / "i32", weights), SMALL)


def test_unsupported_safetensors_dtype_is_refused_with_its_name(tmp_path):
    write_raw_safetensors(tmp_path / "m.safetensors", {"fp8.weight": ("F8_E4M3", (4,), bytes(4))})
    with pytest.raises(ValueError, match=r"'fp8.weight' has unsupported dtype 'F8_E4M3'"):
        read_safetensors(tmp_path / "m.safetensors")


def test_truncated_safetensors_names_file_and_first_tensor_past_the_end(tmp_path):
    directory = write_checkpoint(tmp_path, random_weights(SMALL))
    path = directory / "model.safetensors"
    header = json.loads(path.read_bytes()[8 : 8 + int.from_bytes(path.read_bytes()[:8], "little")])
    header.pop("__metadata__", None)
    stored_last = max(header, key=lambda name: header[name]["data_offsets"][1])
    path.write_bytes(path.read_bytes()[:-4])  # 4 bytes short: only the tensor stored last is cut
    with pytest.raises(ValueError, match="truncated") as e:
        load_weights(directory, SMALL)
    assert str(path) in str(e.value) and repr(stored_last) in str(e.value)


@pytest.mark.parametrize(
    "content, words",
    [
        (b"", "too short"),
        (b"\x10\x00\x00\x00\x00\x00\x00\x00{}", "truncated"),  # header claims 16 bytes, holds 2
        ((4).to_bytes(8, "little") + b"nope", "not JSON"),
        ((2).to_bytes(8, "little") + b"[]", "JSON object"),
    ],
)
def test_corrupt_safetensors_is_refused_naming_the_file(tmp_path, content, words):
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=words) as e:
        read_safetensors(path)
    assert str(path) in str(e.value)


def test_header_whose_byte_range_disagrees_with_shape_is_corrupt(tmp_path):
    write_raw_safetensors(tmp_path / "m.safetensors", {"w": ("F32", (3, 3), bytes(4 * 8))})
    with pytest.raises(ValueError, match=r"'w' of shape \(3, 3\) and dtype F32 needs 36 bytes"):
        read_safetensors(tmp_path / "m.safetensors")


# ----------------------------------------------------------------------------------------------
# checking the tensors against config.json


def test_missing_tensor_is_named_with_its_expected_shape(tmp_path):
    weights = random_weights(SMALL)
    del weights["pooler.dense.bias"]
    directory = write_checkpoint(tmp_path, weights)
    with pytest.raises(ValueError) as e:
        load_weights(directory, SMALL)
    assert (
        str(e.value)
        == f"{directory / 'model.safetensors'} is missing tensor 'pooler.dense.bias' (expected shape (32,))"
    )


def test_a_checkpoint_without_the_pooler_loads_without_it(tmp_path):
    """BertForMaskedLM builds BERT without its pooler, so its checkpoints hold none; one of the two is an error."""
    weights = random_weights(SMALL)
    del weights["pooler.dense.weight"], weights["pooler.dense.bias"]
    loaded = load_weights(write_checkpoint(tmp_path, weights), SMALL)
    assert set(loaded) == set(tensor_shapes(SMALL)) - {"pooler.dense.weight", "pooler.dense.bias"}


def test_wrong_shape_names_tensor_found_and_expected_shapes(tmp_path):
    directory = write_checkpoint(tmp_path, random_weights(BertConfig(**{**SMALL.__dict__, "intermediate_size": 60})))
    with pytest.raises(ValueError) as e:
        load_weights(directory, SMALL)
    assert str(e.value) == (
        f"{directory / 'model.safetensors'}: tensor 'encoder.layer.0.intermediate.dense.weight' "
        f"has shape (60, 32), config.json expects (64, 32)"
    )


def test_prefixed_legacy_checkpoint_loads_like_the_bare_one(tmp_path):
    weights = random_weights(SMALL, seed=3)
    bare = load_weights(write_checkpoint(tmp_path / "bare", weights), SMALL)
    legacy = load_weights(write_checkpoint(tmp_path / "legacy", legacy_names(weights)), SMALL)
    assert_same_weights(legacy, bare)


@pytest.mark.parametrize("prefix, hint", [("roberta.", "'roberta'"), ("bert/", "'bert'")])
def test_checkpoint_with_foreign_naming_says_how_it_is_named(tmp_path, prefix, hint):
    weights = {
        prefix + name.replace(".", "/" if "/" in prefix else "."): w for name, w in random_weights(SMALL).items()
    }
    with pytest.raises(ValueError, match="none of the BERT encoder tensors") as e:
        load_weights(write_checkpoint(tmp_path, weights), SMALL)
    assert hint in str(e.value)


def test_checkpoint_without_tensors_says_so(tmp_path):
    write_raw_safetensors(tmp_path / "model.safetensors", {})
    with pytest.raises(ValueError, match="holds no tensors at all"):
        load_weights(tmp_path, SMALL)


def test_directory_without_weights_names_both_files(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        load_weights(tmp_path, SMALL)
    for word in (str(tmp_path), "model.safetensors", "pytorch_model.bin"):
        assert word in str(e.value)


def test_safetensors_is_preferred_over_pytorch_model_bin(tmp_path):
    weights = random_weights(SMALL)
    directory = write_checkpoint(tmp_path, weights)
    (directory / "pytorch_model.bin").write_bytes(b"never read")
    assert_same_weights(load_weights(directory, SMALL), weights)


# ----------------------------------------------------------------------------------------------
# pytorch_model.bin, read without torch


def torch_state_dict(torch, weights):
    return collections.OrderedDict((name, torch.from_numpy(np.array(w))) for name, w in weights.items())


def rewrite_zip(src, dst, compression=zipfile.ZIP_STORED, replace=None):
    """A copy of the zip `src` with its members recompressed and some replaced: {member suffix: bytes}."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w", compression) as new:
        for info in old.infolist():
            data = next((v for k, v in (replace or {}).items() if info.filename.endswith(k)), old.read(info))
            new.writestr(info.filename, data)


@pytest.mark.parity
def test_torch_saved_bert_model_loads_identically_to_safetensors(tmp_path, torch, transformers):
    hf_config = transformers.BertConfig(**SMALL.to_dict())
    torch.manual_seed(0)
    state = transformers.BertModel(hf_config).state_dict()  # an OrderedDict carrying `_metadata`
    weights = {name: t.numpy() for name, t in state.items()}
    torch.save(state, tmp_path / "pytorch_model.bin")
    (tmp_path / "config.json").write_text(json.dumps(SMALL.to_dict()), encoding="utf-8")
    from_bin = load_weights(tmp_path, SMALL)
    from_safetensors = load_weights(write_checkpoint(tmp_path / "st", weights), SMALL)
    assert_same_weights(from_bin, from_safetensors)
    assert all(isinstance(w, np.memmap) and not w.flags.writeable for w in from_bin.values())


@pytest.mark.parity
def test_torch_saved_legacy_names_shared_and_strided_storages(tmp_path, torch):
    weights = random_weights(SMALL, seed=5)
    state = torch_state_dict(torch, legacy_names(weights))
    for n in range(SMALL.num_hidden_layers):  # q, k, v as row slices of one fused storage, at offsets
        names = [f"bert.encoder.layer.{n}.attention.self.{p}.weight" for p in ("query", "key", "value")]
        fused = torch.cat([state[name] for name in names])
        for i, name in enumerate(names):
            state[name] = fused[32 * i : 32 * (i + 1)]
    transposed = "bert.encoder.layer.1.intermediate.dense.weight"  # non-contiguous: a transposed view
    state[transposed] = state[transposed].t().contiguous().t()
    assert not state[transposed].is_contiguous()
    state["bert.pooler.dense.weight"] = torch.nn.Parameter(state["bert.pooler.dense.weight"])
    torch.save(state, tmp_path / "pytorch_model.bin")

    raw = read_torch_bin(tmp_path / "pytorch_model.bin")
    assert raw["bert.embeddings.position_ids"].dtype == np.int64
    np.testing.assert_array_equal(
        raw["bert.encoder.layer.0.attention.self.key.weight"], weights["encoder.layer.0.attention.self.key.weight"]
    )
    assert isinstance(raw["bert.encoder.layer.0.attention.self.key.weight"], np.memmap)
    loaded = load_weights(tmp_path, SMALL)
    assert_same_weights(loaded, load_weights(write_checkpoint(tmp_path / "st", weights), SMALL))
    assert loaded["encoder.layer.1.intermediate.dense.weight"].flags.c_contiguous


@pytest.mark.parity
def test_torch_saved_half_precision_loads_and_a_compressed_zip_is_refused(tmp_path, torch):
    t = torch.randn(5, 3)
    state = {"h": t.half(), "b": t.bfloat16(), "f": t}
    torch.save(state, tmp_path / "a.bin")
    raw = read_torch_bin(tmp_path / "a.bin")
    np.testing.assert_array_equal(raw["h"], t.half().float().numpy())
    np.testing.assert_array_equal(raw["b"], t.bfloat16().float().numpy())
    np.testing.assert_array_equal(raw["f"], t.numpy())
    assert all(w.dtype == np.float32 and not w.flags.writeable for w in raw.values())
    # torch stores every member; a re-zipped copy could inflate to any size, so it is refused by member
    rewrite_zip(tmp_path / "a.bin", tmp_path / "deflated.bin", zipfile.ZIP_DEFLATED)
    with pytest.raises(ValueError, match=r"deflated.bin: member a/data.pkl is compressed; torch.save stores"):
        read_torch_bin(tmp_path / "deflated.bin")


def malicious_bin(path, marker):
    """A zip laid out like pytorch_model.bin whose pickle calls os.system when loaded by a naive unpickler."""

    class Exploit:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(collections.OrderedDict(w=Exploit()), protocol=2))


def test_malicious_pickle_is_refused_without_running(tmp_path):
    marker = tmp_path / "pwned"
    malicious_bin(tmp_path / "pytorch_model.bin", marker)
    with pytest.raises(pickle.UnpicklingError, match=r"refusing to unpickle global '(posix|os)\.system'"):
        load_weights(tmp_path, SMALL)
    assert not marker.exists()


def test_pickle_calling_builtins_is_refused(tmp_path):
    with zipfile.ZipFile(tmp_path / "x.bin", "w") as z:
        z.writestr("x/data.pkl", b"\x80\x02cbuiltins\neval\nX\x04\x00\x00\x001 + 1\x85R.")
    with pytest.raises(pickle.UnpicklingError, match="'builtins.eval'"):
        read_torch_bin(tmp_path / "x.bin")


def test_legacy_non_zip_bin_is_refused(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps({"w": 1}, protocol=2))
    with pytest.raises(ValueError, match="not a zip archive.*legacy"):
        load_weights(tmp_path, SMALL)


@pytest.mark.parity
def test_torch_legacy_serialization_is_refused(tmp_path, torch):
    torch.save({"w": torch.ones(2)}, tmp_path / "old.bin", _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="legacy"):
        read_torch_bin(tmp_path / "old.bin")


@pytest.mark.parity
def test_truncated_or_foreign_zip_and_big_endian_are_refused(tmp_path, torch):
    torch.save({"w": torch.ones(64)}, tmp_path / "a.bin")
    data = (tmp_path / "a.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt zip"):
        read_torch_bin(tmp_path / "cut.bin")
    rewrite_zip(tmp_path / "a.bin", tmp_path / "big.bin", replace={"byteorder": b"big"})
    with pytest.raises(ValueError, match="big-endian"):
        read_torch_bin(tmp_path / "big.bin")
    with zipfile.ZipFile(tmp_path / "other.bin", "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(ValueError, match="not a torch checkpoint"):
        read_torch_bin(tmp_path / "other.bin")
