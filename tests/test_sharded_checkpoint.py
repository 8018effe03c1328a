"""Sharded checkpoints (an index's weight_map to shards) and float16 / bfloat16 weights, against transformers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import assert_matches_reference, fake_hub

import numbert
from numbert.checkpoint.model_config import read_config
from numbert.checkpoint.shards import read_sharded
from numbert.checkpoint.weights import Checkpoint, load_weights

TEXTS = ["Here is the sentence I want embeddings for.", "hello, world!"]


def small_config(transformers):
    return transformers.BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )


def saved_model(transformers, torch, directory, vocab_path, dtype=None, **save):
    """A random BertModel saved by transformers into `directory` (with the bert-base-uncased vocab)."""
    torch.manual_seed(0)
    model = transformers.BertModel(small_config(transformers)).eval()
    with torch.no_grad():  # LayerNorm and biases away from their 1 / 0 init, so a mix-up would show
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(directory, **save)
    (directory / "vocab.txt").write_bytes(vocab_path.read_bytes())
    return directory


def assert_matches_transformers(transformers, torch, directory, atol=6e-6):
    ours = numbert.load(directory)(TEXTS)
    reference = transformers.BertModel.from_pretrained(
        directory, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    assert ours.hidden_states.dtype == np.float32
    assert_matches_reference(torch, reference, ours, atol)


@pytest.mark.parity
def test_safetensors_shards_saved_by_transformers(tmp_path, transformers, torch, vocab_path):
    d = saved_model(transformers, torch, tmp_path / "sharded", vocab_path, max_shard_size="20KB")
    assert len(list(d.glob("model-*-of-*.safetensors"))) > 2 and (d / "model.safetensors.index.json").is_file()
    assert_matches_transformers(transformers, torch, d)


def torch_bin_shards(torch, state: dict, directory, per_shard: int) -> None:
    """pytorch_model-0000k-of-0000n.bin shards and their index, as transformers 4 wrote them."""
    names = list(state)
    groups = [names[i : i + per_shard] for i in range(0, len(names), per_shard)]
    weight_map = {}
    for k, group in enumerate(groups, 1):
        shard = f"pytorch_model-{k:05d}-of-{len(groups):05d}.bin"
        torch.save({name: state[name] for name in group}, directory / shard)
        weight_map |= {name: shard for name in group}
    index = {
        "metadata": {"total_size": sum(t.numel() * t.element_size() for t in state.values())},
        "weight_map": weight_map,
    }
    (directory / "pytorch_model.bin.index.json").write_text(json.dumps(index), encoding="utf-8")


@pytest.mark.parity
def test_pytorch_bin_shards(tmp_path, transformers, torch, vocab_path):
    d = saved_model(transformers, torch, tmp_path / "bin", vocab_path)
    from safetensors.torch import load_file

    state = load_file(d / "model.safetensors")
    (d / "model.safetensors").unlink()
    torch_bin_shards(torch, state, d, per_shard=10)
    assert len(list(d.glob("pytorch_model-*.bin"))) == 4
    assert_matches_transformers(transformers, torch, d)


@pytest.mark.parity
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_weights_compute_in_float32(tmp_path, transformers, torch, vocab_path, dtype):
    """Saved in half precision (config dtype says so); numbert widens exactly and computes in float32,
    as transformers does when asked for float32."""
    d = saved_model(
        transformers, torch, tmp_path / dtype, vocab_path, dtype=getattr(torch, dtype), max_shard_size="20KB"
    )
    assert json.loads((d / "config.json").read_text())["dtype"] == dtype
    weights = load_weights(d, read_config(d / "config.json"))
    assert all(w.dtype == np.float32 for w in weights.values())
    assert_matches_transformers(transformers, torch, d)


@pytest.mark.parametrize("layout", ["safetensors", "pytorch"])
def test_checkpoint_lists_and_fingerprints_every_shard(tmp_path, transformers, torch, vocab_path, layout):
    d = saved_model(transformers, torch, tmp_path / layout, vocab_path, max_shard_size="20KB")
    if layout == "pytorch":
        from safetensors.torch import load_file

        state = {}
        for shard in d.glob("model-*-of-*.safetensors"):
            state |= load_file(shard)
            shard.unlink()
        (d / "model.safetensors.index.json").unlink()
        torch_bin_shards(torch, state, d, per_shard=10)
    index = d / f"{'model.safetensors' if layout == 'safetensors' else 'pytorch_model.bin'}.index.json"
    shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    checkpoint = Checkpoint.find(d)
    assert checkpoint.format == f"sharded {layout}" and len(shards) > 2
    assert [p.name for p in checkpoint.files] == [index.name, *shards]
    fingerprint = checkpoint.fingerprint()
    assert set(fingerprint) == {index.name, *shards, "config.json"}
    raw = bytearray((d / shards[1]).read_bytes())
    raw[-100] ^= 0x01
    (d / shards[1]).write_bytes(bytes(raw))
    changed = Checkpoint.find(d).fingerprint()
    assert [name for name in fingerprint if changed[name] != fingerprint[name]] == [shards[1]]


def test_missing_shard_is_named(tmp_path, transformers, torch, vocab_path):
    d = saved_model(transformers, torch, tmp_path / "sharded", vocab_path, max_shard_size="20KB")
    sorted(d.glob("model-*-of-*.safetensors"))[1].unlink()
    with pytest.raises(
        FileNotFoundError,
        match=r"model.safetensors.index.json lists shard 'model-00002-of-\d+"
        r".safetensors' \(holding '[^']+', among others\), but .* is missing",
    ):
        numbert.load(d)


def test_index_naming_a_tensor_its_shard_lacks(tmp_path):
    from safetensors.numpy import save_file

    save_file({"a": np.zeros(2, np.float32)}, str(tmp_path / "s1.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}})
    )
    with pytest.raises(ValueError, match="maps tensor 'b' to shard 's1.safetensors', which does not hold it"):
        read_sharded(tmp_path / "model.safetensors.index.json")


@pytest.mark.parametrize(
    "content, words",
    [
        ("not json", ": not valid JSON"),
        ('{"metadata": {}}', ": weight_map must be an object mapping each tensor name to a shard file name"),
        ('{"weight_map": {"a": 3}}', "mapping each tensor name to a shard file name"),
        ('{"weight_map": {"a": "../elsewhere.safetensors"}}', "is not a file name in the checkpoint's directory"),
        ("[" * 100_000 + "]" * 100_000, ": not valid JSON"),  # was a RecursionError
        ('{"weight_map": {}, "n": ' + "9" * 5000 + "}", ": not valid JSON"),  # Python's digit limit
    ],
)
def test_bad_index_is_refused_naming_it(tmp_path, content, words):
    (tmp_path / "model.safetensors.index.json").write_text(content)
    with pytest.raises(ValueError, match=f"model.safetensors.index.json.*{words}"):
        read_sharded(tmp_path / "model.safetensors.index.json")


def test_hub_download_fetches_one_sharded_format_only(tmp_path, monkeypatch):
    """A repo with sharded safetensors and sharded .bin: the safetensors index and its shards, nothing else."""
    from numbert.checkpoint.hub import model_dir

    st_index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    bin_index = {"weight_map": {"a": "pytorch_model-00001-of-00001.bin"}}
    repo = {
        "config.json": b"{}",
        "model.safetensors.index.json": json.dumps(st_index).encode(),
        "model-00001-of-00002.safetensors": b"",
        "model-00002-of-00002.safetensors": b"",
        "pytorch_model.bin.index.json": json.dumps(bin_index).encode(),
        "pytorch_model-00001-of-00001.bin": b"",
    }
    requested = fake_hub(monkeypatch, repo, tmp_path)
    assert model_dir("org/big-model") == tmp_path
    weight_files = {f for f in requested if "model" in f and f.endswith((".safetensors", ".bin", ".json"))}
    assert weight_files == {
        "model.safetensors",
        "pytorch_model.bin",
        "model.safetensors.index.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    }
    del repo["model-00002-of-00002.safetensors"]
    with pytest.raises(
        FileNotFoundError, match="lists shard 'model-00002-of-00002.safetensors', which the repository lacks"
    ):
        model_dir("org/big-model")
