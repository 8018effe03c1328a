"""A model's fingerprint (every file its vectors depend on), and `numbert encode --shard-lines` jobs that
record it: they run on any checkpoint layout and refuse to resume once one weight shard has changed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import SMALL
from safetensors.numpy import save_file

import numbert
from numbert.checkpoint.fingerprint import model_fingerprint
from numbert.checkpoint.weights import Checkpoint
from numbert.cli import main
from numbert.engines.shards import read_shards
from numbert.testing import random_weights

TF_DIR = Path(__file__).parent / "fixtures" / "tf_bert"
VOCAB = "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "bank", "river", "money", "##s"]) + "\n"
LINES = ["the bank", "the river banks", "money", "", "river river money", "the", "bank money the river"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sharded_model(directory: Path, shards: int = 3) -> Path:
    """A small random BERT whose weights are split over `shards` safetensors files and their index."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(SMALL.to_dict()), encoding="utf-8")
    (directory / "vocab.txt").write_text(VOCAB, encoding="utf-8")
    weights = random_weights(SMALL)
    weight_map = {}
    for k, names in enumerate(np.array_split(list(weights), shards), 1):
        shard = f"model-{k:05d}-of-{shards:05d}.safetensors"
        save_file({name: weights[name] for name in names}, str(directory / shard))
        weight_map |= dict.fromkeys(names, shard)
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}), encoding="utf-8")
    return directory


def flip_last_byte(path: Path) -> None:
    """Change one byte of a weight file: the last of its last tensor, so it still loads."""
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01
    path.write_bytes(bytes(raw))


def encode(*args) -> int:
    return main(["encode", *map(str, args)])


def test_checkpoint_of_a_sharded_model_reads_and_fingerprints_every_shard(tmp_path):
    d = sharded_model(tmp_path / "model")
    shards = sorted(d.glob("model-*.safetensors"))
    checkpoint = Checkpoint.find(d)
    assert checkpoint.format == "sharded safetensors" and checkpoint.config_file == d / "config.json"
    assert checkpoint.files == (d / "model.safetensors.index.json", *shards)
    assert checkpoint.path == d / "model.safetensors.index.json" and checkpoint.location == d
    for name, weight in random_weights(SMALL).items():
        np.testing.assert_array_equal(checkpoint.read()[name], weight, err_msg=name)
    fingerprint = checkpoint.fingerprint()
    assert fingerprint == {path.name: sha256(path) for path in [*checkpoint.files, d / "config.json"]}
    assert json.loads(json.dumps(fingerprint)) == fingerprint


def test_model_fingerprint_adds_tokenizer_files_and_sentence_modules_with_dense_weights(tmp_path):
    d = sharded_model(tmp_path / "st")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ]
    (d / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    for module in ("1_Pooling", "2_Dense"):
        (d / module).mkdir()
        (d / module / "config.json").write_text("{}", encoding="utf-8")
    save_file({"linear.weight": np.ones((4, SMALL.hidden_size), np.float32)}, str(d / "2_Dense" / "model.safetensors"))
    fingerprint = model_fingerprint(d)
    assert set(fingerprint) == {
        *Checkpoint.find(d).fingerprint(),
        "vocab.txt",
        "modules.json",
        "1_Pooling/config.json",
        "2_Dense/config.json",
        "2_Dense/model.safetensors",
    }
    assert fingerprint["2_Dense/model.safetensors"] == sha256(d / "2_Dense" / "model.safetensors")


def test_model_fingerprint_of_a_tensorflow_checkpoint_by_directory_or_prefix():
    expected = {
        name: sha256(TF_DIR / name)
        for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001", "bert_config.json", "vocab.txt")
    }
    assert model_fingerprint(TF_DIR) == model_fingerprint(TF_DIR / "bert_model.ckpt") == expected


def test_changing_one_byte_of_one_shard_changes_its_fingerprint_only(tmp_path):
    d = sharded_model(tmp_path / "model")
    before = model_fingerprint(d)
    flip_last_byte(d / "model-00002-of-00003.safetensors")
    after = model_fingerprint(d)
    assert [name for name in before if before[name] != after[name]] == ["model-00002-of-00003.safetensors"]


def test_a_missing_shard_is_an_error_naming_it(tmp_path):
    d = sharded_model(tmp_path / "model")
    (d / "model-00003-of-00003.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="lists shard 'model-00003-of-00003.safetensors'.* is missing"):
        Checkpoint.find(d)


def test_shard_job_on_a_tensorflow_checkpoint_directory(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert encode("--file", source, "--model", TF_DIR, "-o", f"{tmp_path / 'job'}/", "--shard-lines", 3) == 0
    assert sorted(p.name for p in (tmp_path / "job").glob("part-*.npy")) == [f"part-0000{i}.npy" for i in range(3)]
    manifest = json.loads((tmp_path / "job" / "manifest.json").read_text(encoding="utf-8"))
    data = TF_DIR / "bert_model.ckpt.data-00000-of-00001"
    assert manifest["job"][data.name] == sha256(data) and manifest["job"]["bert_config.json"]
    np.testing.assert_allclose(read_shards(tmp_path / "job"), numbert.load(TF_DIR).embed(LINES), atol=1e-6)


def test_resuming_after_a_weight_shard_changed_is_refused_naming_the_shard(tmp_path, capsys):
    d, source, out = sharded_model(tmp_path / "model"), tmp_path / "in.txt", f"{tmp_path / 'job'}/"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert encode("--file", source, "--model", d, "-o", out, "--shard-lines", 3) == 0
    assert encode("--file", source, "--model", d, "-o", out, "--shard-lines", 3) == 0  # the same job: resumed
    flip_last_byte(d / "model-00002-of-00003.safetensors")
    capsys.readouterr()
    assert encode("--file", source, "--model", d, "-o", out, "--shard-lines", 3) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "was written by another job: its job is " in error
    assert "model-00002-of-00003.safetensors=" in error and "model-00001-of-00003" not in error
