"""The tokenizer on long and hostile input: bounded memory (tracemalloc peaks on unit-sized stand-ins
for 50 MB lines), the block-by-block path equal to the stages written plainly, truncation that stops
tokenizing at the budget, and transformers' argument conventions (truncation=True at
model_max_length, an empty text_pair, text_pair's older name)."""

from __future__ import annotations

import os
import tracemalloc

import pytest
from helpers import fast_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

from numbert.tokenizer import Tokenizer, basic, load_vocab
from numbert.tokenizer.blocks import SEPARATOR, deleted_characters
from numbert.tokenizer.fast import BLOCK_SIZE, FastTokenizer
from numbert.tokenizer.memo import Memo

N = 500_000  # characters: 8 blocks; the cases were 5M and 50M (memory stays flat past a block)


@pytest.fixture(scope="module")
def bert(vocab_path) -> Tokenizer:
    return Tokenizer.from_vocab(vocab_path)


def peak_bytes(fn) -> tuple[int, object]:
    """Peak of Python allocations while fn() runs, and its result."""
    tracemalloc.start()
    try:
        result = fn()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


HOSTILE = {
    "a line of NULs": "\x00" * N,
    "two words joined by a deleted control character": "x" * (N // 2) + "\x01" + "x" * (N // 2),
    "one letter under a flood of accents": "a\u0301" * (N // 2),
    "control characters and letters in turn": "x\x00" * (N // 2),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_lines_in_bounded_memory(bert, name):
    """A 500,000-character line with no space: the tokenizer's Python allocations peak at a few MB (it was
    130-170 MB here, 6.65 GB on the issue's 50 MB line of NULs), truncated or not."""
    text = HOSTILE[name]
    bert.encode("warm up: the memos and tables " + text[:300])
    for kwargs in ({"max_length": 128}, {}):
        peak, enc = peak_bytes(lambda kwargs=kwargs: bert.encode(text, **kwargs))
        assert peak < 12e6, (name, kwargs, peak)
    expected = {"a line of NULs": [], "control characters and letters in turn": ["[UNK]"]}.get(name, ["[UNK]"])
    assert enc.tokens[1:-1] == expected
    if expected:
        assert enc.offsets[1] == (0, N - 1 if name != "two words joined by a deleted control character" else N + 1)


def test_a_long_line_of_words_is_tokenized_only_up_to_the_budget(bert):
    """A 500,000-character line of ordinary words truncated to 128 tokens: only its first block is
    tokenized (2.42 GB on the issue's 50 MB line, with 24,766 windows built and thrown away)."""
    line = ("the quick brown fox jumps over the lazy dog, " * (N // 45 + 1))[:N]
    bert.encode(line[:1000])
    peak, enc = peak_bytes(lambda: bert.encode(line, max_length=128))
    assert peak < 4e6, peak
    assert enc.ids == bert.encode(line[:2000], max_length=128).ids and enc.overflowing == []
    windows = bert.encode(line[:20_000], max_length=128, return_overflowing_tokens=True)
    assert len(windows.overflowing) > 10  # windows only when asked for


def test_a_cut_text_keeps_the_first_tokens(vocab_path, monkeypatch):
    """Read from parts a few characters long, a text cut at its end keeps the first tokens of the whole: ids,
    offsets and word ids."""
    from numbert.tokenizer import tokenizer as nt_tokenizer

    monkeypatch.setattr(nt_tokenizer, "READ_CHARS_PER_TOKEN", 1)
    monkeypatch.setattr(nt_tokenizer, "READ_MARGIN", 0)
    bert = Tokenizer.from_vocab(vocab_path)
    text = "Héllo, wörld! " * 200
    full = bert.encode(text, add_special_tokens=False)
    for limit in (1, 10, 100, 1000):
        part = bert.encode(text, add_special_tokens=False, max_length=limit)
        assert len(part.ids) == min(limit, len(full.ids))
        assert part.ids == full.ids[:limit] and part.offsets == full.offsets[:limit]
        assert part.word_ids == full.word_ids[:limit]


# --- blocks: exact, checked against the plain stages on random text ------------------------------

PIECES = [
    "the",
    "bank",
    "x" * 30,
    "é" * 40,
    " ",
    "\n",
    ",",
    "'",
    "Café",
    "中文",
    "\x00",
    "\x01\x02",
    "\u200b",
    "\u0301",
    "\u0316\U0001d165",
    "\u1acc\u0347",
    "İ",
    "«",
    "\u3000",
    "日本語",
    "a" * 101,
    "##s",
]
BLOCK_OPTIONS = [{}, {"lower": False, "strip": False}, {"strip": False}, {"split_chinese": False}]


@pytest.fixture(scope="module")
def block_tokenizers(vocab_path) -> list[tuple[FastTokenizer, dict]]:
    """Tokenizers whose blocks are a few characters long, so that every text takes the block path."""
    vocab = load_vocab(vocab_path)
    return [(fast_tokenizer(vocab, options, block_size=size), options) for options in BLOCK_OPTIONS for size in (3, 16)]


@settings(max_examples=int(os.environ.get("NUMBERT_TOKENIZER_EXAMPLES", "1000")), deadline=None)
@given(
    parts=st.lists(st.one_of(st.sampled_from(PIECES), st.characters(), st.text(max_size=5)), max_size=60),
    which=st.integers(0, 2 * len(BLOCK_OPTIONS) - 1),
)
def test_blocks_are_the_basic_stages(block_tokenizers, parts, which):
    """Block by block (and run by run) gives exactly the tokens, offsets and word ids of
    basic.tokenize on the whole text."""
    fast, options = block_tokenizers[which]
    text = "".join(parts)
    expected = basic.tokenize(text, fast.vocab, **options)
    got = fast.segment(text, 3)
    assert got.tokens == [piece for piece, _, _ in expected]
    assert got.offsets == [(start + 3, end + 3) for _, (start, end), _ in expected]
    assert got.words == [word for _, _, word in expected]


def test_the_block_size_is_large_enough_for_ordinary_text():
    assert BLOCK_SIZE >= 1 << 16


def test_separators_and_kept_characters():
    assert SEPARATOR.fullmatch(" ") and SEPARATOR.fullmatch("\u3000") and SEPARATOR.fullmatch(",")
    assert not SEPARATOR.fullmatch("\x00") and not SEPARATOR.fullmatch("\x1c") and not SEPARATOR.fullmatch("a")
    pattern, table = deleted_characters()
    assert [m.span() for m in pattern.finditer("ab\x00\u200bc\ufffd")] == [(2, 4), (5, 6)]
    assert all(table[cp] == (basic.clean_char(chr(cp)) == "") for cp in range(0x110000))


# --- transformers' conventions ----------------------------------------------------------------------


def test_truncation_true_uses_model_max_length(minilm_dir):
    tok = Tokenizer.from_pretrained(minilm_dir)
    text = "word " * 600
    assert len(tok.encode(text)) == 602  # no truncation unless asked
    assert len(tok.encode(text, truncation=True)) == tok.model_max_length == 512
    assert len(tok.encode(text, max_length=20)) == 20  # max_length alone truncates
    assert len(tok.encode(text, max_length=20, truncation=False)) == 602


def test_an_empty_pair_is_dropped_by_encode_and_kept_by_encode_batch(bert):
    assert bert.encode("a", "").tokens == bert.encode("a").tokens == ["[CLS]", "a", "[SEP]"]
    assert bert.encode_batch(["a"], [""]).encodings[0].tokens == ["[CLS]", "a", "[SEP]", "[SEP]"]


def test_text_pair_and_its_older_name(bert):
    assert bert.encode("a", pair="b").ids == bert.encode("a", text_pair="b").ids == bert.encode("a", "b").ids
    with pytest.raises(TypeError, match="text_pair"):
        bert.encode("a", "b", pair="c")


def test_a_budget_of_zero_empties_both_segments(bert):
    """max_length == the special tokens: [CLS] [SEP] [SEP], whatever the strategy (as Rust); below it,
    an error (Rust's unsigned arithmetic wraps around and returns the whole text)."""
    for strategy in ("longest_first", "only_first", "only_second"):
        enc = bert.encode("hello world", "foo bar", max_length=3, truncation=strategy, return_overflowing_tokens=True)
        assert enc.tokens == ["[CLS]", "[SEP]", "[SEP]"] and len(enc.overflowing) == 3
    assert bert.encode("hello world", max_length=2, truncation="only_first").tokens == ["[CLS]", "[SEP]"]
    with pytest.raises(ValueError, match="max_length=2 leaves no room for the 3 special tokens"):
        bert.encode("hello world", "foo bar", max_length=2)


def test_the_word_memo_is_bounded_and_keeps_the_words_in_use():
    calls = []
    memo = Memo(lambda word: calls.append(word) or word.upper(), size=4)
    for i in range(1000):  # a stream of new words, with "the" in use throughout
        assert memo[f"w{i}"] == f"W{i}" and memo["the"] == "THE"
    assert len(memo) + len(memo.previous) <= 2 * 4
    assert calls.count("the") == 1  # carried from generation to generation, never computed again
