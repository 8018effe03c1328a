"""Nothing of the user's is ever overwritten: tools write only into a directory they created or an empty one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import run

from numbert.cli import main
from numbert.model.config import BertConfig
from numbert.testing import write_random_bert

ROOT = Path(__file__).resolve().parent.parent
TINY = BertConfig(
    vocab_size=30522,
    hidden_size=8,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=16,
    max_position_embeddings=8,
)


def test_write_random_bert_refuses_a_directory_that_is_not_empty(tmp_path, vocab_path):
    model = tmp_path / "my-model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"the user's real weights")
    with pytest.raises(FileExistsError, match=f"refusing .* into {model}: the directory is not empty"):
        write_random_bert(model, vocab_path, TINY)
    assert [p.name for p in model.iterdir()] == ["model.safetensors"]
    assert (model / "model.safetensors").read_bytes() == b"the user's real weights"


def test_write_google_bert_refuses_a_directory_that_is_not_empty(tmp_path, vocab_path):
    from numbert.testing import write_google_bert

    (tmp_path / "bert_model.ckpt.index").write_bytes(b"the user's checkpoint")
    with pytest.raises(FileExistsError, match=f"refusing .* into {tmp_path}: the directory is not empty"):
        write_google_bert(tmp_path, vocab_path, TINY)
    assert [p.name for p in tmp_path.iterdir()] == ["bert_model.ckpt.index"]


def test_write_random_bert_writes_into_a_new_or_empty_directory(tmp_path, vocab_path):
    write_random_bert(tmp_path / "new" / "model", vocab_path, TINY)
    (tmp_path / "empty").mkdir()
    write_random_bert(tmp_path / "empty", vocab_path, TINY)
    for directory in (tmp_path / "new" / "model", tmp_path / "empty"):
        assert json.loads((directory / "config.json").read_text())["hidden_size"] == 8


@pytest.mark.parametrize(
    "manifest, message",
    [
        (None, "is not a numbert shard directory (it holds '.draft.tmp' but no manifest.json)"),
        ('{"app": "mine"}', "manifest.json is not a numbert shard manifest"),
    ],
)
def test_encode_shards_leave_a_directory_that_is_not_theirs_as_it_was(tmp_path, minilm_dir, capsys, manifest, message):
    """`encode -o DIR/ --shard-lines K` once deleted every .*.tmp file in DIR before checking it was its own."""
    users = {
        ".draft.tmp": b"draft",
        ".report.docx.tmp": b"report",
        **({"manifest.json": manifest.encode()} if manifest else {}),
    }
    for name, data in users.items():
        (tmp_path / name).write_bytes(data)
    assert main(["encode", "a", "b", "--model", str(minilm_dir), "-o", f"{tmp_path}/", "--shard-lines", "1"]) == 1
    assert message in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == users  # nothing deleted, no .lock


def test_plot_output_is_written_whole_or_not_at_all(tmp_path, minilm_dir):
    pytest.importorskip("matplotlib")
    directory = tmp_path / "a-directory.png"
    directory.mkdir()
    result = run("plot", "pca", "a", "b", "c", "-o", directory, "--model", minilm_dir)
    assert result.returncode == 1 and f"cannot write {directory}: it is a directory" in result.stderr.decode()
    out = tmp_path / "pca.png"
    out.write_bytes(b"previous picture")
    result = run("plot", "attention", "a short text", "--layer", "9", "-o", out, "--model", minilm_dir)
    assert result.returncode == 1 and out.read_bytes() == b"previous picture"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-directory.png", "pca.png"]  # no temporary file left


# --- scripts/bench: --model-dir ----------------------------------------------------------------------


def bench(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench"), *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT)),
        cwd=cwd,
        timeout=600,
    )


def test_bench_refuses_a_model_dir_it_did_not_write(tmp_path):
    model = tmp_path / "bert-base-uncased"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"the user's real weights")
    (tmp_path / "bert-base-uncased.tmp").mkdir()  # a sibling the old bench deleted
    (tmp_path / "bert-base-uncased.tmp" / "notes.txt").write_text("mine")
    result = bench("--model-dir", str(model), "--quick", "--no-ort", cwd=tmp_path)
    assert result.returncode != 0
    assert f"refusing to write a random checkpoint to {model}: it exists and is not the bench's own" in result.stderr
    assert (model / "model.safetensors").read_bytes() == b"the user's real weights"
    assert sorted(p.name for p in model.iterdir()) == ["config.json", "model.safetensors"]
    assert (tmp_path / "bert-base-uncased.tmp" / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bert-base-uncased", "bert-base-uncased.tmp"]


def test_bench_writes_into_a_new_or_empty_directory_and_reuses_its_own(tmp_path, vocab_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from bench import systems

    written = []
    import numbert.testing

    real = numbert.testing.write_random_bert
    monkeypatch.setattr(
        numbert.testing,
        "write_random_bert",
        lambda d, vocab, config, seed: written.append(d) or real(d, vocab, TINY, seed),
    )
    for directory in (tmp_path / "new" / "model", tmp_path / "empty"):
        if directory.name == "empty":
            directory.mkdir()
        assert systems.ensure_checkpoint(directory, vocab_path) == directory
        assert sorted(p.name for p in directory.iterdir()) == [
            "bench-seed.txt",
            "config.json",
            "model.safetensors",
            "vocab.txt",
        ]
    assert len(written) == 2
    systems.ensure_checkpoint(tmp_path / "empty", vocab_path)  # its own, same seed: reused as it is
    assert len(written) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "new"]  # no temporary directory left
