"""Hostile model directories, round five (issue 43): configs asking for huge or non-finite numbers, crafted pickles,
ColBERT and sentence-transformers directories that disagree with their weights. Each is refused at load in one line
naming the file and the field or tensor at fault, within a bound of time and memory."""

from __future__ import annotations

import json
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import bounded, run_limited, run_with_memory_limit
from test_checkpoint_errors import Call, Storage, opcodes, tensor, write_bin

import numbert
from numbert.checkpoint.model_config import read_config

FIXTURES = Path(__file__).parent / "fixtures"
GIGABYTE = 1 << 30
SMALL_MODERN = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 3}


def config_json(directory: Path, **fields) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.json"
    path.write_text(json.dumps(fields), encoding="utf-8")
    return path


def refusal(path: Path, memory: int = 64 << 20) -> str:
    """read_config's error on `path`, in at most 10 s and `memory` bytes of Python allocations."""
    with bounded(10, memory), pytest.raises(ValueError) as e:
        read_config(path)
    message = str(e.value)
    assert str(path) in message and "\n" not in message and len(message) < 400, message
    return message


# --- config.json: sizes, layer kinds, rope parameters, adapters ----------------------------------------------


def test_a_billion_layers_is_refused_before_naming_them(tmp_path):
    """Was: 30.6 s and 2.7 GB building a billion layer kinds, then MemoryError. Now refused first, capped at 1 GB."""
    path = config_json(tmp_path, model_type="modernbert", **(SMALL_MODERN | {"num_hidden_layers": 10**9}))
    line = run_with_memory_limit(
        f"from numbert.checkpoint.model_config import read_config; read_config({str(path)!r})", GIGABYTE
    )
    assert line == f"ValueError: {path}: num_hidden_layers is 1000000000; numbert allows at most 1,024"


@pytest.mark.parametrize(
    "field, value",
    [
        ("vocab_size", 1 << 40),
        ("hidden_size", 1 << 30),
        ("intermediate_size", 1 << 40),
        ("max_position_embeddings", 1 << 40),
        ("local_attention", 1 << 40),
    ],
)
def test_sizes_past_their_limits_are_refused_naming_the_field(tmp_path, field, value):
    message = refusal(config_json(tmp_path, model_type="modernbert", **(SMALL_MODERN | {field: value})))
    assert f"{field} is {value}; numbert allows at most" in message


def test_a_million_layer_kinds_give_a_short_error_line(tmp_path):
    """Was: an 18 MB error line quoting every entry."""
    path = config_json(tmp_path, model_type="modernbert", **SMALL_MODERN, layer_types=["full_attention"] * 10**6)
    message = refusal(path, 256 << 20)  # the 18 MB file, as JSON reads it
    assert "layer_types must name each of the 3 layers' kind, got a list of 1000000" in message


YARN = {"rope_type": "yarn", "factor": 2.0}
ROPES = {
    "yarn original 0": (YARN | {"original_max_position_embeddings": 0}, "'original_max_position_embeddings'"),
    "yarn original -16": ({"rope_type": "yarn", "original_max_position_embeddings": -16}, "at least 1, got -16"),
    "yarn attention NaN": (YARN | {"attention_factor": float("nan")}, "'attention_factor'"),
    "yarn beta 0": (YARN | {"beta_fast": 0}, "'beta_fast'"),
    "yarn truncate string": (YARN | {"truncate": "yes"}, "'truncate' must be true or false"),
    "linear factor 0": ({"rope_type": "linear", "factor": 0}, "'factor' (the scaling factor) must be above 0"),
    "linear factor NaN": ({"rope_type": "linear", "factor": float("nan")}, "'factor'"),
    "linear factor inf": ({"rope_type": "linear", "factor": float("inf")}, "'factor'"),
    "llama3 factor 0": (
        {"rope_type": "llama3", "factor": 0, "low_freq_factor": 1, "high_freq_factor": 4},
        "'factor'",
    ),
    "llama3 equal factors": (
        {"rope_type": "llama3", "factor": 8, "low_freq_factor": 2, "high_freq_factor": 2},
        "must differ",
    ),
}


@pytest.mark.parametrize("case", list(ROPES))
def test_rope_parameters_out_of_range_are_refused_naming_the_field(tmp_path, case):
    """Was: ZeroDivisionError (yarn, original 0), "math domain error" (-16), NaN vectors (factor 0 or NaN)."""
    rope, words = ROPES[case]
    message = refusal(config_json(tmp_path, model_type="gte", **SMALL_MODERN, rope_parameters=rope))
    assert "rope_parameters" in message and words in message, message


def test_modernbert_rope_parameters_are_read_as_transformers_5_reads_them(tmp_path, transformers):
    """Per layer kind; a kind left out takes its default theta; what ModernBertConfig refuses is refused, naming
    the key (was: one unknown key silently replaced both thetas by the defaults)."""
    nested = {"full_attention": {"rope_type": "default", "rope_theta": 500.0}}
    config = read_config(config_json(tmp_path, model_type="modernbert", **SMALL_MODERN, rope_parameters=nested))
    theirs = transformers.ModernBertConfig(**SMALL_MODERN, rope_parameters=json.loads(json.dumps(nested)))
    assert config.rope is not None and config.local_rope is not None
    assert config.rope.theta == theirs.rope_parameters["full_attention"]["rope_theta"] == 500.0
    assert config.local_rope.theta == theirs.rope_parameters["sliding_attention"]["rope_theta"] == 10000.0
    for rope, words in [
        (nested | {"foo": 1}, "rope_parameters has key 'foo'"),
        ({"rope_type": "default", "rope_theta": 500.0}, "rope_parameters has key 'rope_type'"),
        ({"full_attention": 5}, "rope_parameters.full_attention must be an object, got 5"),
    ]:
        with pytest.raises(Exception, match="rope_parameters"):  # transformers refuses each too (a strict dataclass)
            transformers.ModernBertConfig(**SMALL_MODERN, rope_parameters=rope)
        path = config_json(tmp_path / "refused", model_type="modernbert", **SMALL_MODERN, rope_parameters=rope)
        assert words in refusal(path)


@pytest.mark.parametrize("alpha", [1e308, float("nan"), 0.0])
def test_a_lora_alpha_whose_scale_is_not_finite_in_float32_is_refused(tmp_path, alpha):
    fields = SMALL_MODERN | {"lora_adaptations": ["retrieval"], "lora_alpha": alpha}
    assert "lora_alpha" in refusal(config_json(tmp_path, model_type="jina_embeddings_v3", **fields))


# --- the gated unpickler ------------------------------------------------------------------------------------


def crafted_bin(path: Path, prefix: bytes) -> Path:
    """A torch archive whose data.pkl runs `prefix` (then pops it) before a well-formed one-tensor state dict."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x05" + prefix + b"0" + opcodes({"w": tensor("0", (2, 3))}) + b".")
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/data/0", np.zeros(6, np.float32).tobytes())
    return path


@pytest.mark.parametrize("opcode", [b"\x8e", b"\x96"], ids=["BINBYTES8", "BYTEARRAY8"])
@pytest.mark.parametrize("name", ["pytorch_model.bin", "colbert_linear.pt"])
def test_a_pickle_claiming_a_terabyte_is_refused_before_it_is_allocated(tmp_path, opcode, name):
    """Was: MemoryError (CPython allocates a BINBYTES8's bytes before reading them). Capped at 1 GB."""
    path = crafted_bin(tmp_path / name, opcode + struct.pack("<Q", 1 << 40) + b"abc")
    line = run_with_memory_limit(
        f"from numbert.checkpoint.torch_zip import read_torch_bin; read_torch_bin({str(path)!r})", GIGABYTE
    )
    assert line.startswith(f"numbert.checkpoint.torch_zip.BadPickle: {path} is truncated or corrupt: in its ")
    assert "expected 1099511627776 bytes" in line


def test_a_build_on_a_storage_type_is_refused_naming_the_file(tmp_path):
    """Was: KeyError: 'EVIL' (a BUILD set the storage stand-in's dtype)."""
    evil = b"ctorch\nFloatStorage\n}X\x05\x00\x00\x00dtypeX\x04\x00\x00\x00EVILsb"
    storage = b"(X\x07\x00\x00\x00storage" + evil + b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x06tQ"
    rebuilt = b"ctorch._utils\n_rebuild_tensor_v2\n(" + storage + b"K\x00(K\x02K\x03t(K\x03K\x01t\x89N" + b"tR"
    path = tmp_path / "pytorch_model.bin"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}(X\x01\x00\x00\x00w" + rebuilt + b"u.")
        z.writestr("archive/data/0", np.zeros(6, np.float32).tobytes())
    from numbert.checkpoint.torch_zip import read_torch_bin

    with bounded(10, 64 << 20), pytest.raises(ValueError, match=r"sets the attributes of a StorageType") as e:
        read_torch_bin(path)
    assert str(e.value).startswith(f"{path}: ")


# --- ColBERT and sentence-transformers directories ----------------------------------------------------------


def colbert_copy(tmp_path: Path, **settings) -> Path:
    directory = tmp_path / "colbert"
    shutil.copytree(FIXTURES / "colbert_pylate", directory)
    path = directory / "config_sentence_transformers.json"
    path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8")) | settings), encoding="utf-8")
    return directory


def load_refusal(directory: Path) -> str:
    with bounded(10, 256 << 20), pytest.raises(ValueError) as e:
        numbert.load(directory)
    message = str(e.value)
    assert "\n" not in message and len(message) < 400, message
    return message


def test_a_query_length_past_the_positions_is_refused_at_load(tmp_path):
    """Was: `encode --multi --query` allocated 3.73 GiB and died."""
    directory = colbert_copy(tmp_path, query_length=10**9)
    assert load_refusal(directory) == (
        f"{directory / 'config_sentence_transformers.json'}: query_length is 1000000000; queries are padded to it, "
        f"and the model takes at most 64 tokens (its positions)"
    )


@pytest.mark.parametrize("value", ["no", 0, "false"])
def test_query_expansion_must_be_a_json_boolean(tmp_path, value):
    """Was: "no" read as true."""
    directory = colbert_copy(tmp_path, do_query_expansion=value)
    assert "do_query_expansion must be true or false" in load_refusal(directory)


def write_dense(directory: Path, weight: np.ndarray, **config) -> None:
    from safetensors.numpy import save_file

    dense = directory / "1_Dense"
    fields = json.loads((dense / "config.json").read_text(encoding="utf-8")) | config
    (dense / "config.json").write_text(json.dumps(fields), encoding="utf-8")
    save_file({"linear.weight": weight}, str(dense / "model.safetensors"))


@pytest.mark.parametrize(
    "weight, config, words",
    [
        (np.zeros((0, 32), np.float32), {"out_features": 0}, "out_features must be an integer from 1 to"),
        (np.ones((16, 16), np.float32), {"in_features": 16}, "Dense module 1 reads 16 features (in_features)"),
        (np.ones((16, 32), np.int8), {}, "tensor 'linear.weight' has dtype int8"),
        (np.full((16, 32), np.nan, np.float32), {}, "tensor 'linear.weight' holds NaN"),
    ],
    ids=["out 0", "in mismatch", "int8", "NaN"],
)
def test_a_dense_head_that_cannot_run_is_refused_at_load(tmp_path, weight, config, words):
    """Was: 0-wide vectors, a raw NumPy matmul error at the first encode, int8 silently widened."""
    directory = colbert_copy(tmp_path)
    write_dense(directory, weight, **config)
    message = load_refusal(directory)
    assert str(directory) in message and words in message, message


@pytest.mark.parametrize("path", ["../../../../etc", "/etc", "escape"])
def test_a_module_path_leaving_the_directory_is_refused(tmp_path, path):
    directory = colbert_copy(tmp_path)
    (directory / "escape").symlink_to(tmp_path.parent, target_is_directory=True)
    modules = json.loads((directory / "modules.json").read_text(encoding="utf-8"))
    modules[1]["path"] = path
    (directory / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    assert load_refusal(directory) == (
        f"{directory / 'modules.json'}: module path {path!r} leaves the model directory; a module's path must be a "
        f"folder inside it (symlinks included)"
    )


def test_int8_bge_m3_heads_are_refused_naming_the_tensor(tmp_path):
    directory = tmp_path / "bge_m3"
    shutil.copytree(FIXTURES / "bge_m3", directory)
    hidden = read_config(directory / "config.json").hidden_size
    weight = Call(
        "torch._utils", "_rebuild_tensor_v2", Storage("0", hidden, "CharStorage"), 0, (1, hidden), (hidden, 1), False
    )
    bias = Call("torch._utils", "_rebuild_tensor_v2", Storage("1", 1, "CharStorage"), 0, (1,), (1,), False)
    storages = {"0": np.ones(hidden, np.int8).tobytes(), "1": np.ones(1, np.int8).tobytes()}
    write_bin(directory / "sparse_linear.pt", {"weight": weight, "bias": bias}, storages)
    message = load_refusal(directory)
    assert f"{directory / 'sparse_linear.pt'}: tensor 'weight' has dtype int8" in message


# --- non-finite weights: outputs checked, once --------------------------------------------------------------


def test_a_nan_weight_is_said_once_naming_the_model(tmp_path, minilm_dir, vocab_path):
    """A full scan of the weights at load costs more than the load (memory-mapped): the last layer of each forward
    is checked instead, and a NaN there is said in one line, once per model (here by the command line, rc 0)."""
    from safetensors.numpy import save_file

    from numbert.checkpoint.safetensors_file import read_safetensors

    directory = tmp_path / "model"
    shutil.copytree(minilm_dir, directory, ignore=shutil.ignore_patterns("model.safetensors"))
    weights = {name: np.array(w) for name, w in read_safetensors(minilm_dir / "model.safetensors").items()}
    weights["encoder.layer.3.attention.self.key.bias"][7] = np.nan
    save_file(weights, str(directory / "model.safetensors"))
    done = run_limited("encode", "-o", tmp_path / "v.npy", "--batch-size", "1", model=directory, stdin=b"a\nb\nc\n")
    said = [line for line in done.stderr.decode().splitlines() if "NaN" in line]
    assert said == [
        f"numbert: model {str(directory)!r} computed NaN or infinite hidden states: its weights or config hold "
        f"non-finite numbers; load it with check_finite=True to name the tensor"
    ], done.stderr.decode()
