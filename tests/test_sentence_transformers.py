"""sentence-transformers model directories: reading modules.json & co, and parity with
SentenceTransformer(dir).encode on all-MiniLM-L6-v2 (cosine >= 0.99999 per sentence, order kept)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import numbert
from numbert.checkpoint.sentence_config import SentenceConfig, read_sentence_config

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "hi",
    "",
    "   leading and trailing spaces   ",
    "?!",
    "Café, naïve, résumé, Übermensch and Ærøskøbing.",
    "東京は日本の首都です。",
    "Москва — столица России.",
    "Emoji 😀🎉 and symbols ∑∫√ ≠ ≤.",
    "Zürich's Straße isn't SHOUTING, or is it?",
    "Numbers: 3.14159, 2,718, 1e-9 and -42.",
    "URLs like https://example.com/a?b=c&d=e#frag are tokenized too.",
    "e-mail: someone@example.org; tel. +1 (555) 010-9999",
    "The quick brown fox jumps over the lazy dog. " * 40,  # ~400 tokens: cut at max_seq_length 256
    " ".join(f"token{i}" for i in range(300)),  # > 256 tokens of word pieces
    "unbelievably antidisestablishmentarianism hyperparameterization",
    "BERT stands for Bidirectional Encoder Representations from Transformers.",
    "Sentence embeddings map text to dense vectors.",
    "The bank of the river was muddy.",
    "She deposited the cheque at the bank.",
    "The plane banked sharply to the left.",
    "Paris is the capital of France.",
    "What is the capital of France?",
    "I love programming in Python.",
    "NumPy arrays are fast.",
    "tabs\tand\nnewlines\rinside",
    "A" * 150,
    "x " * 10,
    "[CLS] literal special tokens [SEP] in the text [MASK]",
    "Il fait beau aujourd'hui à Montréal.",
    "¿Dónde está la biblioteca?",
    "Γειά σου Κόσμε",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "The cat sat on the mat.",
    "The dog sat on the log.",
    "Deep learning models need data.",
    "Quantum computing uses qubits.",
    'He said: "don\'t go!" — and left.',
    "a b c d e f g h i j k l m n o p",
    "Last sentence of the test set.",
]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def write_st_dir(
    tmp_path: Path,
    minilm_dir: Path,
    pooling: dict,
    *,
    normalize: bool,
    max_seq_length: int = 256,
    extra_modules: list | None = None,
) -> Path:
    """A sentence-transformers directory sharing MiniLM's weights, with its own Pooling config."""
    d = tmp_path / "st"
    d.mkdir()
    for name in (
        "config.json",
        "model.safetensors",
        "vocab.txt",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ):
        os.symlink(minilm_dir / name, d / name)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    modules += extra_modules or []
    (d / "modules.json").write_text(json.dumps(modules))
    (d / "1_Pooling").mkdir()
    (d / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 384, **pooling}))
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}))
    return d


# --- reading the directory ---------------------------------------------------------------------------


def test_minilm_directory(minilm_dir, minilm):
    assert read_sentence_config(minilm_dir) == SentenceConfig(
        pooling=("mean",), normalize=True, max_seq_length=256, do_lower_case=False
    )
    assert minilm.sentence_config.max_seq_length == 256


def test_plain_bert_directory_has_none(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert read_sentence_config(tmp_path) is None


@pytest.mark.parametrize(
    "pooling, expected",
    [
        (
            {"pooling_mode_cls_token": True, "pooling_mode_max_tokens": True, "pooling_mode_mean_tokens": True},
            ("cls", "max", "mean"),
        ),  # flags: sentence-transformers' concatenation order
        ({"pooling_mode_mean_sqrt_len_tokens": True}, ("mean_sqrt_len",)),
        ({"pooling_mode_mean_tokens": False}, ("mean",)),  # no flag set: sentence-transformers' default
        ({"pooling_mode": "lasttoken"}, ("sep",)),
        ({"pooling_mode": ["weightedmean", "cls"]}, ("weighted_mean", "cls")),
    ],
)
def test_pooling_config_forms(tmp_path, minilm_dir, pooling, expected):
    config = read_sentence_config(write_st_dir(tmp_path, minilm_dir, pooling, normalize=False))
    assert config.pooling == expected and config.normalize is False


def test_bad_and_unsupported_configs(tmp_path, minilm_dir):
    d = write_st_dir(tmp_path, minilm_dir, {"pooling_mode": "median"}, normalize=True)
    with pytest.raises(ValueError, match="unknown pooling mode 'median'"):
        read_sentence_config(d)
    (d / "1_Pooling" / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"1_Pooling/config.json: not valid JSON"):
        read_sentence_config(d)
    (d / "1_Pooling" / "config.json").write_text("{}")
    (d / "sentence_bert_config.json").write_text('{"max_seq_length": "long"}')
    with pytest.raises(ValueError, match="max_seq_length must be an integer"):
        read_sentence_config(d)


def test_max_seq_length_is_read_in_sentence_transformers_6_order(tmp_path, minilm_dir):
    """The Transformer's processor_kwargs (formerly tokenizer_args) model_max_length, else max_seq_length, else
    tokenizer_config.json's model_max_length (where sentence-transformers 6 saves max_seq_length); the recipe
    caps it at the model's positions."""
    d = write_st_dir(tmp_path, minilm_dir, {}, normalize=True)
    tokenizer_config = json.loads((d / "tokenizer_config.json").read_text())
    (d / "tokenizer_config.json").unlink()  # a link to MiniLM's
    (d / "tokenizer_config.json").write_text(json.dumps({**tokenizer_config, "model_max_length": 100}))

    def read(**settings) -> int | None:
        (d / "sentence_bert_config.json").write_text(json.dumps(settings))
        return read_sentence_config(d).max_seq_length

    assert read() == 100 and numbert.load(d).recipe().max_length == 100
    assert read(max_seq_length=64) == 64
    assert read(max_seq_length=64, tokenizer_args={"model_max_length": 32}) == 32
    assert read(max_seq_length=64, processor_kwargs={"model_max_length": 48}) == 48
    assert read(max_seq_length=4096) == 4096 and numbert.load(d).recipe().max_length == 512
    with pytest.raises(ValueError, match=r"sentence_bert_config.json: processor_kwargs.model_max_length must be"):
        read(processor_kwargs={"model_max_length": "long"})


def test_a_module_numbert_does_not_run_is_refused_only_for_the_default(tmp_path, minilm_dir):
    norm = {"idx": 3, "name": "3", "path": "3_LayerNorm", "type": "sentence_transformers.models.LayerNorm"}
    d = write_st_dir(tmp_path, minilm_dir, {"pooling_mode": "mean"}, normalize=False, extra_modules=[norm])
    model = numbert.load(d)
    assert model.sentence_config.unsupported == ("3_LayerNorm (LayerNorm)",)
    with pytest.raises(ValueError, match=r"modules numbert does not run \(3_LayerNorm \(LayerNorm\)\)"):
        model.embed(["hello"])
    assert model.embed(["hello"], pooling="mean").shape == (1, 384)


# --- parity with sentence-transformers ----------------------------------------------------------------


@pytest.fixture(scope="module")
def SentenceTransformer(torch):
    return pytest.importorskip("sentence_transformers").SentenceTransformer


@pytest.mark.parity
def test_minilm_matches_sentence_transformers(minilm_dir, minilm, SentenceTransformer):
    want = SentenceTransformer(str(minilm_dir), device="cpu").encode(SENTENCES, batch_size=16)
    got = minilm.embed(SENTENCES, batch_size=16)
    assert got.shape == want.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    c = cosines(got, want)
    assert c.min() >= 0.99999, [(SENTENCES[i][:40], c[i]) for i in np.argsort(c)[:3]]
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, rtol=1e-5)  # the Normalize module
    # order kept: each sentence is closest to its own reference vector
    assert (np.argmax(got @ want.T, axis=1) == np.arange(len(SENTENCES))).all()


@pytest.mark.parity
@pytest.mark.parametrize(
    "pooling, normalize",
    [
        (
            {
                "pooling_mode_cls_token": True,
                "pooling_mode_max_tokens": True,
                "pooling_mode_mean_sqrt_len_tokens": True,
            },
            False,
        ),
        ({"pooling_mode": ["weightedmean", "lasttoken"]}, True),
    ],
)
def test_other_pooling_modes_match_sentence_transformers(tmp_path, minilm_dir, SentenceTransformer, pooling, normalize):
    d = write_st_dir(tmp_path, minilm_dir, pooling, normalize=normalize, max_seq_length=64)
    texts = SENTENCES[::3]
    want = SentenceTransformer(str(d), device="cpu").encode(texts)
    got = numbert.load(d).embed(texts)
    assert got.shape == want.shape
    assert cosines(got, want).min() >= 0.99999
    np.testing.assert_allclose(got, want, atol=5e-4, rtol=1e-3)
