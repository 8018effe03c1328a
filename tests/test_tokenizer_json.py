"""Directories with a tokenizer.json and no vocab.txt: BERT's WordPiece read from the Rust pipeline's file.

Parity: transformers saves a BertTokenizer (tokenizer.json + tokenizer_config.json; vocab.txt removed),
then numbert's tokenizer of that directory gives the ids, type ids and offsets that transformers'
tokenizer of the same directory gives, for each normalizer setting.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from helpers import TOKENIZER_CONFIGS, fake_hub

import numbert
from numbert.tokenizer.wordpiece_json import wordpiece_settings

TEXTS = [
    "Here is the sentence I want embeddings for.",
    "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank.",
    "Café Zürich, São Paulo: naïve résumé — ÉCOLE façade!",
    "中文字符 and 日本語 mixed with English; UPPERCASE Words",
    "  tabs\tand\nnewlines \u00a0 and zero\u200bwidth, [MASK] in the middle, [unused1]",
    "unaffable antidisestablishmentarianism 1234567 $3.50 e-mail",
]
PAIR = ("How old are you?", "I am six years old.")


@pytest.fixture(scope="module")
def saved(tmp_path_factory, transformers, vocab_path):
    """{config name: a directory transformers saved a BertTokenizer into, without vocab.txt}."""
    from transformers.models.bert.tokenization_bert import load_vocab

    transformers.logging.set_verbosity_error()
    directories = {}
    for name, options in TOKENIZER_CONFIGS.items():
        d = tmp_path_factory.mktemp(f"tokenizer-json-{name}")
        transformers.BertTokenizer(vocab=load_vocab(str(vocab_path)), **options).save_pretrained(d)
        (d / "vocab.txt").unlink(missing_ok=True)
        assert (d / "tokenizer.json").is_file()
        directories[name] = d
    return directories


@pytest.mark.parity
@pytest.mark.parametrize("name", list(TOKENIZER_CONFIGS))
def test_ids_types_and_offsets_match_transformers(saved, transformers, name):
    d = saved[name]
    ours = numbert.Tokenizer.from_pretrained(d)
    theirs = transformers.AutoTokenizer.from_pretrained(d)
    for text in TEXTS:
        expected = theirs(text, return_offsets_mapping=True)
        got = ours.encode(text)
        assert list(got.ids) == expected["input_ids"], text
        assert [tuple(o) for o in got.offsets] == [tuple(o) for o in expected["offset_mapping"]], text
    expected = theirs(*PAIR, return_offsets_mapping=True)
    got = ours.encode(*PAIR)
    assert list(got.ids) == expected["input_ids"]
    assert list(got.type_ids) == expected["token_type_ids"]


@pytest.mark.parity
def test_model_directory_with_only_tokenizer_json_runs_text(tmp_path, saved, minilm_dir, transformers):
    """A MiniLM directory whose vocab.txt is replaced by tokenizer.json gives the same vectors."""
    d = shutil.copytree(minilm_dir, tmp_path / "minilm")
    (d / "vocab.txt").unlink()
    assert (d / "tokenizer.json").is_file()
    ours = numbert.load(d)
    reference = numbert.load(minilm_dir)
    np.testing.assert_array_equal(ours(TEXTS).hidden_states, reference(TEXTS).hidden_states)


def write_spec(tmp_path, saved, change):
    spec = json.loads((saved["uncased"] / "tokenizer.json").read_text())
    change(spec)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec))
    return path


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda s: s["model"].update(type="BPE"), 'model.type is "BPE", not "WordPiece"'),
        (lambda s: s.update(normalizer={"type": "NFC"}), "normalizer is .* not a BertNormalizer"),
        (lambda s: s["normalizer"].update(clean_text=False), "normalizer is .* not a BertNormalizer with clean_text"),
        (lambda s: s.update(pre_tokenizer={"type": "Whitespace"}), "pre_tokenizer is .* not a BertPreTokenizer"),
        (lambda s: s.update(post_processor=None), "post_processor is null, not BERT's template"),
        (lambda s: s["post_processor"].update(pair=s["post_processor"]["single"]), "post_processor is .* not BERT's"),
        (lambda s: s["model"].update(continuing_subword_prefix="@@"), 'model.continuing_subword_prefix is "@@"'),
        (lambda s: s["model"].update(vocab=[]), "model.vocab must map each token to its integer id"),
        (
            lambda s: s["added_tokens"].append({"id": 5, "content": "hello", "special": False}),
            "added token 'hello' is not a special token",
        ),
        (
            lambda s: s["added_tokens"].append({"id": 5, "content": "[SEP]", "special": True}),
            "added token '\\[SEP\\]' has id 5, the vocabulary gives it 102",
        ),
    ],
)
def test_a_tokenizer_json_that_is_not_berts_wordpiece_is_refused(tmp_path, saved, change, words):
    path = write_spec(tmp_path, saved, change)
    with pytest.raises(ValueError, match=f"tokenizer.json: {words}"):
        wordpiece_settings(path)


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda s: s.update(model=[]), "model is \\[\\], not an object"),
        (lambda s: s.update(normalizer=["BertNormalizer"]), 'normalizer is \\["BertNormalizer"\\], not an object'),
        (lambda s: s.update(decoder="WordPiece"), 'decoder is "WordPiece", not an object'),
        (lambda s: s["post_processor"].update(single=5), "post_processor is .*, not BERT's template"),
        (lambda s: s["post_processor"].update(single=[5]), "post_processor is .*, not BERT's template"),
        (lambda s: s["post_processor"].update(single=[{"SpecialToken": 5}]), "post_processor is .*, not BERT's"),
        (lambda s: s.update(post_processor={"type": "BertProcessing", "cls": 5}), "post_processor is .*, not BERT's"),
        (lambda s: s["model"].update(max_input_chars_per_word="100"), 'model.max_input_chars_per_word is "100"'),
        (lambda s: s["model"].update(max_input_chars_per_word=0), "model.max_input_chars_per_word is 0"),
        (lambda s: s["model"].update(unk_token=None), "model.unk_token is null, not a non-empty string"),
        (lambda s: s["normalizer"].update(lowercase="yes"), 'normalizer.lowercase is "yes", not true or false'),
        (lambda s: s["normalizer"].update(strip_accents=1), "normalizer.strip_accents is 1, not true, false or null"),
        (lambda s: s.update(padding={"pad_token": 0}), "padding.pad_token is 0, not a non-empty string"),
        (lambda s: s.update(added_tokens={"[X]": 5}), "added_tokens is .*, not a list of"),
        (lambda s: s["added_tokens"].append("[X]"), 'added_tokens\\[5\\] is "\\[X\\]", not a list of'),
        (lambda s: s["added_tokens"].append({"id": 9, "content": "", "special": True}), "added_tokens\\[5\\] is"),
        (lambda s: s["model"]["vocab"].update({"[UNK]": "100"}), r'model.vocab\["\[UNK\]"\] is "100", not an id'),
    ],
)
def test_a_wrongly_typed_field_is_named_not_a_raw_error(tmp_path, saved, change, words):
    path = write_spec(tmp_path, saved, change)
    with pytest.raises(ValueError, match=f"tokenizer.json: {words}"):
        numbert.Tokenizer.from_tokenizer_json(path)


def test_unreadable_tokenizer_json_names_the_file(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError, match="tokenizer.json: not valid JSON"):
        wordpiece_settings(tmp_path / "tokenizer.json")


def test_settings_come_from_the_pipeline(saved):
    vocab, options = wordpiece_settings(saved["cased_strip"] / "tokenizer.json")
    assert len(vocab) == 30522 and vocab["[CLS]"] == 101
    assert options["do_lower_case"] is False and options["strip_accents"] is True
    assert (options["cls_token"], options["sep_token"], options["unk_token"]) == ("[CLS]", "[SEP]", "[UNK]")


def test_hub_fetches_tokenizer_json_only_without_vocab_txt(tmp_path, monkeypatch, saved):
    from numbert.checkpoint.hub import model_dir

    repo = {"config.json": b"{}", "tokenizer.json": (saved["uncased"] / "tokenizer.json").read_bytes()}
    requested = fake_hub(monkeypatch, repo, tmp_path)
    model_dir("org/tokenizer-json-only", weights=False)
    assert "tokenizer.json" in requested
    assert numbert.Tokenizer.from_pretrained(tmp_path).encode("hello world").ids == [101, 7592, 2088, 102]
    repo["vocab.txt"] = b"[PAD]\n"
    (tmp_path / "vocab.txt").write_bytes(b"[PAD]\n")
    requested.clear()
    model_dir("org/with-vocab", weights=False)
    assert "tokenizer.json" not in requested
