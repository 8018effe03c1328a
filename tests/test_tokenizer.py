"""The tokenizer without transformers: BERT tutorial facts, each stage on hand-made vocabularies,
character classes, offsets, truncation, batches, bad input, and the committed fixture of Rust
tokenizer outputs (tests/fixtures/tokenizer_expected.json, see tests/test_tokenizer_parity.py)."""

from __future__ import annotations

import doctest
import gc
import json
import os
from pathlib import Path

import numpy as np
import pytest
from helpers import fast_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

from numbert.tokenizer import (
    Batch,
    Encoding,
    Tokenizer,
    basic,
    is_chinese_char,
    is_control,
    is_punctuation,
    is_whitespace,
    load_vocab,
    pre_tokenize,
    truncated_lengths,
    truncation,
    windows,
    wordpiece,
)
from numbert.tokenizer.fast import FastTokenizer
from numbert.tokenizer.tokenizer import PAUSE_COLLECTOR_FROM

FIXTURE = Path(__file__).parent / "fixtures" / "tokenizer_expected.json"
TOY_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]


@pytest.fixture(scope="module")
def bert(vocab_path) -> Tokenizer:
    return Tokenizer.from_vocab(vocab_path)


def write_vocab(directory: Path, tokens: list[str]) -> Path:
    path = directory / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def toy(tmp_path) -> Tokenizer:
    return Tokenizer.from_vocab(write_vocab(tmp_path, TOY_VOCAB))


# --- what the BERT tutorials say ---------------------------------------------------------------------


def test_hello_world(bert):
    enc = bert.encode("hello, world!")
    assert enc.ids == [101, 7592, 1010, 2088, 999, 102]
    assert enc.tokens == ["[CLS]", "hello", ",", "world", "!", "[SEP]"]


def test_single_words(bert):
    assert bert.convert_tokens_to_ids("dog") == 3899
    assert bert.encode("dog").ids == [101, 3899, 102]
    assert bert.tokenize("embeddings") == ["em", "##bed", "##ding", "##s"]


def test_bank_sentence(bert):
    text = "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank."
    expected = [
        ("[CLS]", 101),
        ("after", 2044),
        ("stealing", 11065),
        ("money", 2769),
        ("from", 2013),
        ("the", 1996),
        ("bank", 2924),
        ("vault", 11632),
        (",", 1010),
        ("the", 1996),
        ("bank", 2924),
        ("robber", 27307),
        ("was", 2001),
        ("seen", 2464),
        ("fishing", 5645),
        ("on", 2006),
        ("the", 1996),
        ("mississippi", 5900),
        ("river", 2314),
        ("bank", 2924),
        (".", 1012),
        ("[SEP]", 102),
    ]
    enc = bert.encode(text)
    assert list(zip(enc.tokens, enc.ids)) == expected
    assert bert.vocab_size == 30522
    assert (bert.pad_token_id, bert.unk_token_id, bert.cls_token_id, bert.sep_token_id, bert.mask_token_id) == (
        0,
        100,
        101,
        102,
        103,
    )


# --- stage 2: WordPiece ------------------------------------------------------------------------------


def test_wordpiece_greedy_longest_match():
    vocab = set(TOY_VOCAB)
    assert [p for p, _, _ in wordpiece("unwanted", vocab)] == ["un", "##want", "##ed"]
    assert [p for p, _, _ in wordpiece("running", vocab)] == ["runn", "##ing"]
    assert wordpiece("unwanted", vocab) == [("un", 0, 2), ("##want", 2, 6), ("##ed", 6, 8)]
    assert wordpiece("want", vocab) == [("want", 0, 4)]  # the longest match, not "wa"
    assert wordpiece("wa", vocab) == [("wa", 0, 2)]
    assert wordpiece("unwantedx", vocab) == [("[UNK]", 0, 9)]  # one piece missing: the whole word is [UNK]
    assert wordpiece("", vocab) == []
    assert wordpiece("unwanted", vocab, longest_piece=4) == wordpiece("unwanted", vocab)


def test_wordpiece_word_length_limit():
    vocab = {"a", "##a"}
    assert [p for p, _, _ in wordpiece("a" * 100, vocab)] == ["a"] + ["##a"] * 99
    assert wordpiece("a" * 101, vocab) == [("[UNK]", 0, 101)]
    assert wordpiece("aaa", vocab, max_input_chars_per_word=2, unk_token="<unk>") == [("<unk>", 0, 3)]


def test_toy_tokenizer(toy):
    assert toy.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert toy.tokenize("UNwantéd,running") == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert toy.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    enc = toy.encode("unwanted running")
    assert enc.ids == [1, 7, 4, 5, 8, 9, 2]
    assert enc.word_ids == [None, 0, 0, 0, 1, 1, None]
    assert enc.offsets == [(0, 0), (0, 2), (2, 6), (6, 8), (9, 13), (13, 16), (0, 0)]


def test_special_tokens_missing_from_the_vocabulary_get_new_ids(toy):
    assert (toy.pad_token_id, toy.mask_token_id) == (11, 12)  # as transformers adds them
    assert toy.vocab_size == 13
    assert toy.encode("[MASK] want").ids == [1, 12, 3, 2]


# --- stage 1: character classes, normalization, pre-tokenization -------------------------------------


def test_whitespace_class():
    for ch in [" ", "\t", "\n", "\r", "\u00a0", "\u2002", "\u3000", "\u2028", "\u1680"]:
        assert is_whitespace(ch), repr(ch)
    for ch in ["A", "-", "\x00", "\x1c", "\x1f", "\u200b"]:
        assert not is_whitespace(ch), repr(ch)


def test_control_class():
    for ch in ["\x00", "\x05", "\x0b", "\x0c", "\x7f", "\x85", "\u200b", "\u200d", "\ufeff", "\u00ad", "\ue000"]:
        assert is_control(ch), repr(ch)
    for ch in ["A", " ", "\t", "\n", "\r", "\u0378", "\u0890"]:  # U+0378 unassigned, U+0890 newer than Rust's tables
        assert not is_control(ch), repr(ch)


def test_punctuation_class():
    for ch in "-$`.+^~!\"#%&'()*,/:;<=>?@[\\]_{|}¿¡«»—…、。「":
        assert is_punctuation(ch), ch
    for ch in "A z 5 é 中 € ∑ \u2e43".split() + [" "]:  # € and ∑ are symbols, U+2E43 newer than Rust's tables
        assert not is_punctuation(ch), ch


def test_chinese_class():
    for ch in ["中", "豈", "\U00020000", "\U0002b920", "\U0002f800"]:
        assert is_chinese_char(ch), repr(ch)
    for ch in ["한", "あ", "ア", "a", "\U0002b820"]:  # U+2B820..2B91F: not in the Rust tables
        assert not is_chinese_char(ch), repr(ch)


def test_normalize_tracks_original_characters(bert):
    assert bert.normalize("HeLLo") == ("hello", range(5))
    text, origin = bert.normalize("a\x00bÉ\u200b中İ")
    assert text == "abe 中 i"
    assert list(origin) == [0, 2, 3, 5, 5, 5, 6]


def test_lowercase_and_accent_options(vocab_path):
    def basic(**options):
        return Tokenizer.from_vocab(vocab_path, **options).normalize("Héllo ΟΔΟΣ İ")[0]

    assert basic() == "hello οδοσ i"  # uncased: strip accents, lowercase per character (no final sigma)
    assert basic(strip_accents=False) == "héllo οδοσ i\u0307"
    assert basic(do_lower_case=False) == "Héllo ΟΔΟΣ İ"
    assert basic(do_lower_case=False, strip_accents=True) == "Hello ΟΔΟΣ I"
    assert Tokenizer.from_vocab(vocab_path, tokenize_chinese_chars=False).normalize("日本")[0] == "日本"


def test_pre_tokenize():
    spans = lambda text: [text[s:e] for s, e in pre_tokenize(text)]  # noqa: E731
    assert spans("don't stop") == ["don", "'", "t", "stop"]
    assert spans("$5+3^2=`x`") == ["$", "5", "+", "3", "^", "2", "=", "`", "x", "`"]
    assert spans("a  b") == ["a", "b"]
    assert spans("naïve—«x»") == ["naïve", "—", "«", "x", "»"]
    assert spans("") == []


# --- offsets and word ids ------------------------------------------------------------------------------


def test_offsets_point_into_the_original_text(bert):
    text = "Héllo\x00 wörld!! İstanbul 東京\u200b"
    enc = bert.encode(text)
    pieces = [text[s:e] for s, e in enc.offsets[1:-1]]
    assert enc.tokens[1:-1] == ["hello", "world", "!", "!", "istanbul", "東", "京"]
    assert pieces == ["Héllo", "wörld", "!", "!", "İstanbul", "東", "京"]
    assert enc.word_ids == [None, 0, 1, 2, 3, 4, 5, 6, None]


ASCII_EXAMPLES = [
    "hello, world!",
    "  leading,\ttabs\nand\r\nnewlines  ",
    "a" * 100 + " " + "b" * 101 + " c",
    "embeddings don't $5+^`~|_",
    "UPPER lower MiXeD",
    "x\x0bdeleted\x7fcontrols",
    "",
    " \n ",
]
# Characters that take each branch of the fast path: ASCII whitespace and controls, deleted and
# zero-width characters, accents (NFD), marks that canonical reordering moves and keeps (U+1D165),
# 'İ' (two characters lowercased), CJK, new Unicode, unassigned code points.
TRICKY = list(
    "aZ09 .,!?'-_$^`\t\n\r\x00\x0b\x1c\x85\xa0\u3000\u200b\u00ad\ufeff\ufffd\u0301\u0308\u0316\u064e"
    "éÅİıΣßﬁ日本豈한あア\U0001d165\U0001d16d\U0001d160\u1734\u0f73\u2e43\u0890\U0002b820\U0001fa77"
)
WORDS = ["the", "bank", "##s", "un", "x" * 101, "é" * 101, " ", "  ", "\n", ",", "'", "Café", "naïve"]
# A letter and combining marks in any order: NFD reorders them by combining class, and accent
# stripping drops all but U+1D165 / U+1D16D (classes 216 and 226, not Mn).
MARKED = st.builds(
    str.__add__,
    st.sampled_from("aEİ中 "),
    st.lists(st.sampled_from("\u0301\u0316\u0308\u064e\u05b8\U0001d165\U0001d16d\U0001d160"), max_size=4).map("".join),
)
FAST_OPTIONS = [{}, {"lower": False, "strip": False}, {"lower": False}, {"strip": False}, {"split_chinese": False}]


@pytest.fixture(scope="module")
def fast_tokenizers(vocab_path) -> list[tuple[FastTokenizer, dict]]:
    """One FastTokenizer per option set, kept across examples so that their memos fill up."""
    vocab = load_vocab(vocab_path)
    return [(fast_tokenizer(vocab, options), options) for options in FAST_OPTIONS]


@settings(max_examples=int(os.environ.get("NUMBERT_TOKENIZER_EXAMPLES", "1000")), deadline=None)
@given(
    text=st.one_of(
        st.sampled_from(ASCII_EXAMPLES),
        st.text(st.characters(max_codepoint=127), max_size=60),
        st.text(max_size=60),
        st.text(st.characters(codec="utf-8"), max_size=60),
        st.lists(st.one_of(st.sampled_from(TRICKY + WORDS), st.characters(max_codepoint=127), MARKED), max_size=40).map(
            "".join
        ),
    ),
    which=st.integers(0, len(FAST_OPTIONS) - 1),
)
def test_fast_path_is_the_basic_stages(fast_tokenizers, text, which):
    """fast.py (memos, the ASCII path) gives exactly the ids, offsets and word ids of basic.tokenize,
    the stages written plainly; on a second call too, when every memo is filled."""
    fast, options = fast_tokenizers[which]
    expected = basic.tokenize(text, fast.vocab, **options)
    for _ in range(2):
        got = fast.segment(text)
        assert got.tokens == [piece for piece, _, _ in expected]
        assert got.ids == [fast.vocab[piece] for piece, _, _ in expected]
        assert got.offsets == [span for _, span, _ in expected]
        assert got.words == [word for _, _, word in expected]
    normalized, origin = fast.normalize(text)
    assert (normalized, list(origin)) == basic.normalize(text, **options)


@pytest.fixture(scope="module")
def stage_tokenizers(vocab_path) -> list[tuple[Tokenizer, Tokenizer]]:
    """(fast, stages) pairs of tokenizers, one per option set: BERT's stages as siblings (BertNormalizer,
    BertPreTokenizer, WordPiece) one after another, and fast.py."""
    options = [{}, {"do_lower_case": False}, {"strip_accents": False}, {"tokenize_chinese_chars": False}]
    return [(Tokenizer.from_vocab(vocab_path, **o), Tokenizer.from_vocab(vocab_path, **o, fast=False)) for o in options]


@settings(max_examples=int(os.environ.get("NUMBERT_TOKENIZER_EXAMPLES", "1000")) // 4, deadline=None)
@given(
    text=st.one_of(
        st.sampled_from(ASCII_EXAMPLES),
        st.text(max_size=60),
        st.lists(
            st.one_of(st.sampled_from(TRICKY + WORDS), MARKED, st.sampled_from(["[MASK]", "[SEP]"])), max_size=30
        ).map("".join),
    ),
    which=st.integers(0, 3),
)
def test_the_stages_one_after_another_are_the_fast_path(stage_tokenizers, text, which):
    """The sibling stages composed by the Tokenizer give the fast path's ids, tokens, offsets and word ids, special
    tokens cut out of the text included; and the same normalized text."""
    fast, stages = stage_tokenizers[which]
    got, expected = stages.encode(text, "pair " + text), fast.encode(text, "pair " + text)
    assert (got.ids, got.tokens, got.offsets, got.word_ids) == (
        expected.ids,
        expected.tokens,
        expected.offsets,
        expected.word_ids,
    )
    assert (stages.normalize(text)[0], list(stages.normalize(text)[1])) == (
        fast.normalize(text)[0],
        list(fast.normalize(text)[1]),
    )


def test_the_docstring_examples_hold():
    """The examples in the docstrings of the stages and of truncation."""
    for module in (basic, truncation):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_special_tokens_in_the_text_stay_whole(bert):
    enc = bert.encode("the [MASK] sat[SEP]on [mask]")
    assert enc.tokens == ["[CLS]", "the", "[MASK]", "sat", "[SEP]", "on", "[", "mask", "]", "[SEP]"]
    assert enc.offsets[2] == (4, 10) and enc.word_ids[2] == 1
    assert enc.special_tokens_mask == [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]  # only the template's own tokens


def test_never_split(tmp_path):
    tok = Tokenizer.from_vocab(write_vocab(tmp_path, TOY_VOCAB + ["<ent>"]), never_split=["<ent>"])
    assert tok.tokenize("want<ent>running") == ["want", "<ent>", "runn", "##ing"]


def test_pair_encoding(bert):
    enc = bert.encode("hello world", "how are you?")
    assert enc.tokens == ["[CLS]", "hello", "world", "[SEP]", "how", "are", "you", "?", "[SEP]"]
    assert enc.type_ids == [0, 0, 0, 0, 1, 1, 1, 1, 1]
    assert enc.sequence_ids == [None, 0, 0, None, 1, 1, 1, 1, None]
    assert enc.word_ids == [None, 0, 1, None, 0, 1, 2, 3, None]
    assert enc.offsets == [(0, 0), (0, 5), (6, 11), (0, 0), (0, 3), (4, 7), (8, 11), (11, 12), (0, 0)]
    assert enc.special_tokens_mask == [1, 0, 0, 1, 0, 0, 0, 0, 1]
    assert enc.attention_mask == [1] * 9 and len(enc) == 9
    plain = bert.encode("hello world", "how are you?", add_special_tokens=False)
    assert plain.tokens == ["hello", "world", "how", "are", "you", "?"] and plain.type_ids == [0, 0, 1, 1, 1, 1]


# --- truncation ------------------------------------------------------------------------------------------

WORDS = "one two three four five six seven eight nine ten"


def test_truncation_single(bert):
    enc = bert.encode(WORDS, max_length=6, return_overflowing_tokens=True)
    assert enc.tokens == ["[CLS]", "one", "two", "three", "four", "[SEP]"]
    assert [e.tokens[1:-1] for e in enc.overflowing] == [["five", "six", "seven", "eight"], ["nine", "ten"]]
    strided = bert.encode(WORDS, max_length=6, stride=2, return_overflowing_tokens=True)
    assert [e.word_ids[1:-1] for e in [strided, *strided.overflowing]] == [
        [0, 1, 2, 3],
        [2, 3, 4, 5],
        [4, 5, 6, 7],
        [6, 7, 8, 9],
    ]
    assert bert.encode(WORDS, max_length=6, truncation=False).tokens == bert.encode(WORDS).tokens
    assert len(bert.encode(WORDS, max_length=None)) == 12  # no max_length, no truncation


def test_truncation_pairs(bert):
    b = "alpha beta gamma delta"
    assert bert.encode(WORDS, b, max_length=8).tokens == [
        "[CLS]",
        "one",
        "two",
        "three",
        "[SEP]",
        "alpha",
        "beta",
        "[SEP]",
    ]  # longest first: 3 + 2 of 5
    assert bert.encode(WORDS, b, max_length=10, truncation="only_first").tokens[1:4] == ["one", "two", "three"]
    assert bert.encode(b, WORDS, max_length=10, truncation="only_second").tokens[-4:] == [
        "one",
        "two",
        "three",
        "[SEP]",
    ]
    windows_ = bert.encode(WORDS, b, max_length=12, truncation="only_first", stride=2, return_overflowing_tokens=True)
    assert [e.word_ids[1:6] for e in [windows_, *windows_.overflowing]] == [
        [0, 1, 2, 3, 4],
        [3, 4, 5, 6, 7],
        [6, 7, 8, 9, None],
    ]


def test_truncation_arithmetic():
    assert truncated_lengths(10, None, 5, "longest_first") == (5, None)
    assert truncated_lengths(10, 4, 5, "longest_first") == (3, 2)
    assert truncated_lengths(10, 2, 5, "longest_first") == (3, 2)
    assert truncated_lengths(3, 3, 10, "only_first") == (3, 3)
    with pytest.raises(ValueError, match="only_second"):
        truncated_lengths(10, 4, 8, "only_second")
    with pytest.raises(ValueError, match="second sequence"):
        truncated_lengths(10, None, 8, "only_second")
    assert windows(10, 4, 1) == [(0, 4), (3, 7), (6, 10)]
    assert windows(3, 4, 1) == [(0, 3)]
    assert windows(5, 0, 0) == [(0, 0), (0, 5)]  # as Rust: an empty window, then everything
    with pytest.raises(ValueError, match="stride"):
        windows(10, 2, 2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_length": 8, "truncation": "shortest_first"}, "unknown truncation"),
        ({"max_length": 1}, "no room"),
        ({"max_length": 8, "stride": 7}, "stride"),
        ({"max_length": 8, "stride": -1}, "stride"),
        ({"max_length": 8, "truncation": "only_second"}, "second sequence"),
    ],
)
def test_bad_truncation_arguments(bert, kwargs, match):
    with pytest.raises(ValueError, match=match):
        bert.encode(WORDS, **kwargs)


# --- batches ---------------------------------------------------------------------------------------------


def test_encode_batch_pads(bert):
    batch = bert.encode_batch(["hello world", "a much longer sentence than the first", ""])
    assert isinstance(batch, Batch) and all(isinstance(e, Encoding) for e in batch.encodings)
    assert batch.input_ids.shape == batch.token_type_ids.shape == batch.attention_mask.shape == (3, 9)
    assert batch.input_ids.dtype == np.int64
    assert batch.input_ids[0].tolist() == [101, 7592, 2088, 102, 0, 0, 0, 0, 0]
    assert batch.attention_mask.sum(axis=1).tolist() == [4, 9, 2]
    assert [len(e) for e in batch.encodings] == [4, 9, 2]
    fixed = bert.encode_batch(["hello world", "hi"], padding="max_length", max_length=6)
    assert fixed.input_ids.shape == (2, 6)
    pairs = bert.encode_batch(["what", "why"], ["answer one", "answer"])
    assert pairs.token_type_ids.tolist() == [[0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0]]
    same = bert.encode_batch(["one two", "three four"], padding=False)
    assert same.input_ids.shape == (2, 4)
    assert bert.encode_batch([]).input_ids.shape == (0, 0)


def test_a_large_batch_leaves_the_garbage_collector_as_it_was(bert):
    texts = [f"text number {i}" for i in range(PAUSE_COLLECTOR_FROM)]
    assert gc.isenabled()
    batch = bert.encode_batch(texts)
    assert gc.isenabled() and batch.encodings == [bert.encode(t) for t in texts]
    gc.disable()
    try:
        bert.encode_batch(texts)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_encode_batch_bad_arguments(bert):
    with pytest.raises(TypeError, match="str"):
        bert.encode_batch("a single string")
    with pytest.raises(TypeError, match="int"):
        bert.encode_batch(42)
    with pytest.raises(TypeError, match="bytes"):
        bert.encode_batch(["fine", b"bytes"])
    with pytest.raises(ValueError, match="pairs"):
        bert.encode_batch(["a", "b"], ["only one"])
    with pytest.raises(ValueError, match="padding"):
        bert.encode_batch(["a"], padding="left")
    with pytest.raises(ValueError, match="max_length"):
        bert.encode_batch(["a"], padding="max_length")
    with pytest.raises(ValueError, match="one length"):
        bert.encode_batch(["a", "a b c"], padding=False)
    with pytest.raises(ValueError, match="truncation"):
        bert.encode_batch(["a b c d e f"], padding="max_length", max_length=4, truncation=False)


# --- ids back to text ------------------------------------------------------------------------------------


def test_decode(bert):
    ids = bert.encode("Hello, world! Embeddings aren't [MASK] magic.").ids
    assert bert.decode(ids) == "hello, world! embeddings aren ' t magic."
    assert bert.decode(ids, skip_special_tokens=False) == "[CLS] hello, world! embeddings aren ' t [MASK] magic. [SEP]"
    assert bert.decode(np.array(ids)) == bert.decode(ids)
    assert bert.decode([]) == ""


def test_convert_tokens_and_ids(bert):
    assert bert.convert_tokens_to_ids("hello") == 7592
    assert bert.convert_tokens_to_ids(["hello", "no-such-token"]) == [7592, 100]
    assert bert.convert_ids_to_tokens(7592) == "hello"
    assert bert.convert_ids_to_tokens(np.int64(101)) == "[CLS]"
    assert bert.convert_ids_to_tokens([101, 102, 10**9]) == ["[CLS]", "[SEP]", "[UNK]"]
    assert bert.vocab["hello"] == 7592


# --- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, 42, b"bytes", ["a list"]])
def test_non_str_text_raises_type_error(bert, bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        bert.encode(bad)
    with pytest.raises(TypeError, match=type(bad).__name__):
        bert.tokenize(bad)
    if bad is not None:  # a None pair is no pair
        with pytest.raises(TypeError, match=f"pair must be a str, not {type(bad).__name__}"):
            bert.encode("fine", bad)


@pytest.mark.parametrize("text", ["", " ", "\t\n  \u3000", "\x00\u200b", "\u0301"])
def test_empty_text(bert, text):
    assert bert.tokenize(text) == []
    enc = bert.encode(text)
    assert enc.tokens == ["[CLS]", "[SEP]"] and enc.offsets == [(0, 0), (0, 0)] and enc.word_ids == [None, None]
    assert bert.encode(text, add_special_tokens=False).ids == []


def test_unknown_tokens_never_raise(bert):
    assert bert.tokenize("🤖 \U0010ffff \ue000x") == ["[UNK]", "[UNK]", "x"]
    assert bert.encode("x" * 1000).tokens == ["[CLS]", "[UNK]", "[SEP]"]


def test_missing_or_empty_vocab(tmp_path):
    missing = tmp_path / "nope" / "vocab.txt"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        Tokenizer.from_vocab(missing)
    empty = tmp_path / "vocab.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match=str(empty)):
        Tokenizer.from_vocab(empty)


@pytest.mark.parity
def test_crlf_line_ends_in_the_vocab_are_read_as_transformers_reads_them(tmp_path, transformers):
    """Both of transformers' tokenizers end a line at "\\r\\n": the token has no "\\r"."""
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    path = tmp_path / "vocab.txt"
    path.write_bytes("\r\n".join([*TOY_VOCAB, "[PAD]", "[MASK]"]).encode() + b"\r\n")
    ours = Tokenizer.from_vocab(path)
    assert ours.vocab == {token: i for i, token in enumerate([*TOY_VOCAB, "[PAD]", "[MASK]"])}
    for theirs in (transformers.BertTokenizer(str(path)), BertTokenizerLegacy(str(path))):
        assert ours.encode("unwanted running, [MASK]").ids == theirs("unwanted running, [MASK]")["input_ids"]


@pytest.mark.parametrize("ending", [b"hello\rworld\n", b"hello\r"])
def test_a_carriage_return_inside_a_vocab_line_is_refused_naming_the_line(tmp_path, ending):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\r\n[UNK]\n" + ending)
    with pytest.raises(ValueError, match=rf"{path}: line 3 holds a carriage return \(\\r\) that does not end the line"):
        Tokenizer.from_vocab(path)


@pytest.mark.parametrize("option", ["unk_token", "sep_token", "pad_token", "cls_token", "mask_token", "never_split"])
def test_an_empty_special_token_is_refused(toy, option):
    value = [""] if option == "never_split" else ""
    with pytest.raises(ValueError, match=f"^{option} must be a non-empty string, got ''$"):
        Tokenizer.from_vocab(toy.vocab, **{option: value})


# --- loading a model directory ---------------------------------------------------------------------------


def test_from_pretrained_reads_the_configs(minilm_dir):
    tok = Tokenizer.from_pretrained(minilm_dir)
    assert tok.do_lower_case and tok.model_max_length == 512 and tok.vocab_size == 30522
    assert tok.encode("hello, world!").ids == [101, 7592, 1010, 2088, 999, 102]


def test_from_pretrained_options(tmp_path, vocab_path):
    (tmp_path / "vocab.txt").write_bytes(vocab_path.read_bytes() + b"Hello\n")
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "do_lower_case": False,
                "model_max_length": 1000000000000000019884624838656,
                "strip_accents": None,
                "mask_token": {"content": "[MASK]", "lstrip": False},
                "additional_special_tokens": ["[unused0]"],
            }
        )
    )
    (tmp_path / "special_tokens_map.json").write_text(json.dumps({"unk_token": "[UNK]"}))
    tok = Tokenizer.from_pretrained(tmp_path)
    assert not tok.do_lower_case and tok.model_max_length is None
    assert tok.tokenize("Hello hello Héllo[unused0]") == ["Hello", "hello", "[UNK]", "[unused0]"]


def test_from_pretrained_without_vocab(tmp_path):
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        Tokenizer.from_pretrained(tmp_path)


# --- the committed fixture of Rust tokenizer outputs -----------------------------------------------------


def test_fixture_of_rust_outputs(vocab_path):
    """Ids, tokens, type ids, offsets and word ids of every window, as transformers' Rust tokenizer
    gave them (regenerate with `python scripts/make_tokenizer_fixture.py`)."""
    cases = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert len(cases) > 80
    tokenizers = {}
    for case in cases:
        options = case.get("options", {})
        key = json.dumps(options, sort_keys=True)
        tok = tokenizers.setdefault(key, Tokenizer.from_vocab(vocab_path, **options))
        kwargs = {k: case[k] for k in ("max_length", "truncation", "stride") if k in case}
        enc = tok.encode(case["text"], case.get("pair"), **kwargs, return_overflowing_tokens=True)
        got = [
            {
                "ids": e.ids,
                "tokens": e.tokens,
                "type_ids": e.type_ids,
                "offsets": [list(o) for o in e.offsets],
                "word_ids": e.word_ids,
            }
            for e in [enc, *enc.overflowing]
        ]
        assert got == case["expected"], case["text"][:80]
