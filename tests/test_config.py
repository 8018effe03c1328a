"""BertConfig: bert-base defaults, real config.json files, and the configs numbert refuses to run."""

from __future__ import annotations

import json

import pytest

from numbert.checkpoint.model_config import read_config, read_model_config
from numbert.model.config import BertConfig


def write_config(tmp_path, **overrides):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BertConfig().to_dict() | overrides), encoding="utf-8")
    return path


def test_defaults_are_bert_base_uncased():
    c = BertConfig()
    assert (c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads) == (30522, 768, 12, 12)
    assert (c.intermediate_size, c.max_position_embeddings, c.type_vocab_size) == (3072, 512, 2)
    assert (c.layer_norm_eps, c.hidden_act, c.pad_token_id, c.position_embedding_type) == (1e-12, "gelu", 0, "absolute")
    assert c.head_size == 64


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        BertConfig().hidden_size = 1024


def test_from_json_reads_minilm(minilm_dir):
    c = read_config(minilm_dir / "config.json")
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size) == (384, 6, 12, 1536)
    assert c.head_size == 32 and c.vocab_size == 30522


def test_to_dict_round_trips_and_transformers_reads_it(transformers):
    c = BertConfig(
        vocab_size=99,
        hidden_size=48,
        num_hidden_layers=3,
        num_attention_heads=6,
        intermediate_size=96,
        hidden_act="gelu_new",
        layer_norm_eps=1e-7,
    )
    assert BertConfig.from_dict(c.to_dict()) == c
    hf = transformers.BertConfig.from_dict(c.to_dict())
    assert (hf.hidden_size, hf.num_hidden_layers, hf.hidden_act, hf.layer_norm_eps) == (48, 3, "gelu_new", 1e-7)


def test_unknown_keys_and_null_pad_token_are_ignored():
    c = BertConfig.from_dict({"hidden_dropout_prob": 0.1, "pad_token_id": None, "architectures": ["BertForMaskedLM"]})
    assert c == BertConfig()


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"position_embedding_type": "relative_key"}, ["position_embedding_type", "relative_key"]),
        ({"position_embedding_type": "relative_key_query"}, ["position_embedding_type", "relative_key_query"]),
        ({"hidden_act": "swish"}, ["hidden_act", "swish"]),
        ({"model_type": "gpt2"}, ["model_type", "gpt2", "bert, roberta, xlm-roberta, distilbert, electra, mpnet"]),
        ({"hidden_size": 100, "num_attention_heads": 12}, ["hidden_size 100", "num_attention_heads 12"]),
        ({"num_hidden_layers": 0}, ["num_hidden_layers", "at least 1"]),
        ({"vocab_size": 30522.0}, ["vocab_size", "integer"]),
        ({"layer_norm_eps": "1e-12"}, ["layer_norm_eps", "number"]),
        ({"layer_norm_eps": 0}, ["layer_norm_eps", "positive"]),
        ({"layer_norm_eps": 1e308}, ["layer_norm_eps", "finite in float32", "1e+308"]),  # inf in float32
        ({"layer_norm_eps": float("inf")}, ["layer_norm_eps", "finite in float32", "inf"]),  # JSON's Infinity
        ({"layer_norm_eps": float("nan")}, ["layer_norm_eps", "nan"]),
        ({"layer_norm_eps": 1e-50}, ["layer_norm_eps", "1e-50"]),  # 0 in float32
        ({"hidden_act": ["gelu"]}, ["hidden_act", "must be a string"]),
        ({"position_embedding_type": 5}, ["position_embedding_type", "must be a string"]),
        ({"num_attention_heads": True}, ["num_attention_heads", "integer"]),
        ({"is_decoder": True}, ["is_decoder"]),
        ({"add_cross_attention": True}, ["add_cross_attention"]),
    ],
)
def test_configs_numbert_cannot_run_are_refused_naming_the_file(tmp_path, overrides, words):
    path = write_config(tmp_path, **overrides)
    with pytest.raises(ValueError) as e:
        read_config(path)
    for word in [str(path), *words]:
        assert word in str(e.value)


def test_invalid_json_names_the_path(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 768,', encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON") as e:
        read_config(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"hidden_size": ' + "7" * 5000 + "}"])
def test_json_nested_too_deep_or_with_too_long_a_number_names_the_path(tmp_path, text):
    """json.loads raised RecursionError (a traceback) and Python's int digits limit, neither naming the file."""
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"{path}: not valid JSON"):
        read_config(path)


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"architectures": 5}, "architectures must be a list of names"),
        ({"tie_word_embeddings": "no"}, "tie_word_embeddings must be true or false"),  # bool("no") was True
    ],
)
def test_head_fields_of_the_wrong_type_name_the_path(tmp_path, fields, words):

    path = write_config(tmp_path, **fields)
    with pytest.raises(ValueError, match=f"{path}: {words}"):
        read_model_config(path)


def test_json_that_is_not_an_object_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="JSON object"):
        read_config(path)


def test_missing_config_json(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        read_config(tmp_path / "config.json")
