"""A model directory's other files (tokenizer, sentence-transformers), damaged: each error names the file
(and the field), raised at load as a ValueError, so the numbert command shows it as one line."""

from __future__ import annotations

import json
import re
import shutil

import pytest

import numbert
from numbert import Tokenizer


@pytest.fixture
def model_copy(tmp_path, minilm_dir):
    """A copy of all-MiniLM-L6-v2's directory (weights linked, not copied) to damage."""
    directory = tmp_path / "model"
    shutil.copytree(minilm_dir, directory, ignore=shutil.ignore_patterns("model.safetensors"))
    (directory / "model.safetensors").symlink_to(minilm_dir / "model.safetensors")
    return directory


@pytest.mark.parametrize("name", ["tokenizer_config.json", "special_tokens_map.json"])
@pytest.mark.parametrize(
    "content, words",
    [
        ('{"do_lower_case": true,', ": not valid JSON"),
        ('["do_lower_case"]', "expected a JSON object"),
        ('{"do_lower_case": "yes"}', "do_lower_case must be true or false"),
        ('{"unk_token": 100}', "unk_token must be a non-empty string"),
        ('{"cls_token": {"lstrip": false}}', "cls_token must be a non-empty string"),
        ('{"sep_token": ""}', "sep_token must be a non-empty string"),
        ('{"mask_token": {"content": ""}}', "mask_token must be a non-empty string"),
        ('{"additional_special_tokens": "[X]"}', "additional_special_tokens must be a list of strings"),
        ('{"model_max_length": "512"}', "model_max_length must be an integer"),
    ],
)
def test_a_malformed_tokenizer_json_names_the_file_and_field(model_copy, name, content, words):
    (model_copy / name).write_text(content, encoding="utf-8")
    for load in (Tokenizer.from_pretrained, numbert.load):
        with pytest.raises(ValueError) as e:
            load(model_copy)
        assert str(model_copy / name) in str(e.value) and words in str(e.value), str(e.value)


def test_a_non_utf8_tokenizer_json_names_the_file(model_copy):
    (model_copy / "tokenizer_config.json").write_bytes(b'{"unk_token": "caf\xe9"}')
    with pytest.raises(
        ValueError,
        match=f"{model_copy / 'tokenizer_config.json'}.*not valid UTF-8|"
        f"{model_copy / 'tokenizer_config.json'}.*not valid JSON",
    ):
        Tokenizer.from_pretrained(model_copy)


def test_a_non_utf8_vocab_names_the_file_and_line(model_copy):
    vocab = model_copy / "vocab.txt"
    lines = vocab.read_bytes().split(b"\n")
    lines[2000] = b"caf\xe9"
    vocab.write_bytes(b"\n".join(lines))
    for load in (Tokenizer.from_pretrained, numbert.load):
        with pytest.raises(ValueError, match=rf"{vocab}: line 2001 is not valid UTF-8 \(byte 0xe9 at column 4\)"):
            load(model_copy)


def test_the_sound_files_still_load(model_copy):
    assert Tokenizer.from_pretrained(model_copy).encode("hello").ids == [101, 7592, 102]


@pytest.mark.parametrize(
    "name, content, words",
    [
        ("sentence_bert_config.json", "[256]", "expected a JSON object, got a list"),
        ("1_Pooling/config.json", '"mean"', "expected a JSON object, got a str"),
        ("1_Pooling/config.json", '{"pooling_mode": 3}', "pooling_mode must be a string or a list of strings"),
        ("1_Pooling/config.json", '{"pooling_mode": [{"mean": true}]}', "pooling_mode must be a string or a list"),
        ("modules.json", '[{"path": 1, "type": "sentence_transformers.models.Pooling"}]', "'path' must be a string"),
        ("1_Pooling/config.json", '{"pooling_mode_mean_tokens": "yes"}', "pooling_mode_mean_tokens must be true or"),
        ("1_Pooling/config.json", '{"pooling_mode_cls_token": 1}', "pooling_mode_cls_token must be true or false"),
        ("1_Pooling/config.json", '{"include_prompt": "no"}', "include_prompt must be true or false, got 'no'"),
        ("sentence_bert_config.json", '{"do_lower_case": "yes"}', "do_lower_case must be true or false"),
        ("config_sentence_transformers.json", '["query: "]', "expected a JSON object, got a list"),
    ],
)
def test_a_malformed_sentence_transformers_file_names_the_file(model_copy, name, content, words):
    (model_copy / name).write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as e:
        numbert.load(model_copy)
    assert str(model_copy / name) in str(e.value) and words in str(e.value), str(e.value)


# --- the vocabulary against the checkpoint: checked at load, naming the vocabulary file ---------------------


def rewrite_vocab(directory, change):
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(change(vocab.read_text(encoding="utf-8").splitlines())) + "\n", encoding="utf-8")
    return vocab


@pytest.mark.parametrize("token", ["[CLS]", "[SEP]", "[UNK]", "[PAD]"])
def test_a_vocab_without_a_framing_token_is_refused(model_copy, token):
    """A vocab.txt shorter than the embedding table and lacking [SEP]: transformers' made-up id for [SEP] (the
    next free one) is a row of the table, another token's; numbert refuses instead of reading it."""
    vocab = rewrite_vocab(model_copy, lambda lines: [t.replace(token, "[gone]") for t in lines[:30000]])
    with pytest.raises(ValueError, match=f"^{vocab} has no {re.escape(repr(token))} \\(the .*_token, which inputs"):
        numbert.load(model_copy)
    assert Tokenizer.from_pretrained(model_copy).vocab[token] == 30000  # the tokenizer alone is transformers'


def test_a_vocab_longer_than_the_embedding_table_is_refused(model_copy):
    vocab = rewrite_vocab(model_copy, lambda lines: [*lines, "extra"])
    with pytest.raises(ValueError, match=rf"^{vocab}: token 'extra' has id 30522, but the word embeddings of .* have "):
        numbert.load(model_copy)


def test_a_tokenizer_json_with_ids_beyond_the_embedding_table_is_refused(model_copy):
    (model_copy / "vocab.txt").unlink()
    spec = json.loads((model_copy / "tokenizer.json").read_text(encoding="utf-8"))
    spec["model"]["vocab"]["zebra-crossing"] = 40000
    (model_copy / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(ValueError, match=r"tokenizer.json: token 'zebra-crossing' has id 40000, .* 30522 rows"):
        numbert.load(model_copy)
