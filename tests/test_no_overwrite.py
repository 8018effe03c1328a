"""Nothing of the user's is ever overwritten: tools write only into a directory they created or an empty one."""

from __future__ import annotations

import json

import pytest
from test_cli import run

from numbert.config import BertConfig
from numbert.testing import write_random_bert

TINY = BertConfig(vocab_size=30522, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                  max_position_embeddings=8)


def test_write_random_bert_refuses_a_directory_that_is_not_empty(tmp_path, vocab_path):
    model = tmp_path / "my-model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"the user's real weights")
    with pytest.raises(FileExistsError, match=f"refusing .* into {model}: the directory is not empty"):
        write_random_bert(model, vocab_path, TINY)
    assert [p.name for p in model.iterdir()] == ["model.safetensors"]
    assert (model / "model.safetensors").read_bytes() == b"the user's real weights"


def test_write_random_bert_writes_into_a_new_or_empty_directory(tmp_path, vocab_path):
    write_random_bert(tmp_path / "new" / "model", vocab_path, TINY)
    (tmp_path / "empty").mkdir()
    write_random_bert(tmp_path / "empty", vocab_path, TINY)
    for directory in (tmp_path / "new" / "model", tmp_path / "empty"):
        assert json.loads((directory / "config.json").read_text())["hidden_size"] == 8


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
