"""Counting and cutting a long text, by the tokenizer, for every model: `encode(text, max_length=N)` gives the whole
text's encoding truncated, on either side, reading only about N tokens' worth of the text (numbert/tokenizer/cuts.py
says where a text may be cut; Tokenizer._read reads from there).

For BERT's WordPiece, RoBERTa's byte-level BPE and the two SentencePiece Unigram fixtures of
tests/test_tokenizer_family.py: a 4 MB text cut right and left equals a short version of it cut the same way,
within a few hundred kB and a few thousand characters read; on random texts read from parts a few characters
long (so that every text is cut), every field equals the whole text's encoding truncated (pairs and strategies
included; the word ids of a text cut on the left count from the first word kept). And BERT's tokenizer reads a
run of whitespace in time linear in its length.
"""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tokenizer_limits import peak_bytes

from numbert.tokenizer import Tokenizer
from numbert.tokenizer import tokenizer as nt_tokenizer

FIXTURES = Path(__file__).parent / "fixtures"
FAMILY = ("roberta_bpe", "unigram", "xlmr_spm")
NAMES = ("bert", *FAMILY)
LINE = "The quick brown fox, café \x00 日本 naïve résumé; it's 12.5% off! <s> [MASK] "
FIELDS = ("ids", "tokens", "type_ids", "offsets", "special_tokens_mask", "sequence_ids")


def make(name: str, vocab_path: Path) -> Tokenizer:
    if name == "bert":
        return Tokenizer.from_vocab(vocab_path)
    return Tokenizer.from_tokenizer_json(FIXTURES / f"{name}.json")


class Counting:
    """A tokenizer's words (stages.Words) counting the characters they read."""

    def __init__(self, words):
        self.words, self.chars = words, 0

    @property
    def max_chars(self):
        return self.words.max_chars

    def normalize(self, text):
        return self.words.normalize(text)

    def __call__(self, text, start):
        self.chars += len(text)
        return self.words(text, start)


def fields(encoding) -> dict:
    return {name: getattr(encoding, name) for name in FIELDS}


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", NAMES)
def test_a_long_text_cut_reads_only_what_it_keeps(vocab_path, name, side):
    """A 4 MB line cut to 512 tokens at its end or at its start: the encoding of a 20,000-character line cut so
    (offsets moved to where they are in the long line), reading at most a few thousand characters, peaking at a
    few hundred kB of Python allocations."""
    tok = make(name, vocab_path)
    text = LINE * (4_000_000 // len(LINE))
    tok.encode(text[:5000], max_length=512)  # warm up: memos and patterns
    tok.words = Counting(tok.words)  # type: ignore[assignment]
    peak, long = peak_bytes(lambda: tok.encode(text, max_length=512, truncation_side=side))
    assert tok.words.chars < 20_000, tok.words.chars  # type: ignore[attr-defined]
    assert peak < 2_000_000, peak
    short_text = text[:20_000] if side == "right" else text[-20_000:]
    short = tok.encode(short_text, max_length=512, truncation_side=side)
    moved = 0 if side == "right" else len(text) - len(short_text)
    short.offsets = [(s + moved, e + moved) if (s, e) != (0, 0) else (s, e) for s, e in short.offsets]
    assert len(long) == 512 and fields(long) == fields(short)
    words = [w for w in short.word_ids if w is not None]
    first = words[0] if side == "left" else 0  # cut on the left: counted from the first word kept
    assert long.word_ids == [None if w is None else w - first for w in short.word_ids]


@pytest.mark.parametrize("name", NAMES)
def test_one_token_more_tells_a_long_text(vocab_path, name):
    """A caller learns that a text has more than N tokens by asking for N + 1, from either end, at the cost of
    N + 1 tokens."""
    tok = make(name, vocab_path)
    text = LINE * 100_000
    for side in ("right", "left"):
        assert len(tok.encode(text, max_length=129, truncation_side=side)) == 129
        n = len(tok.encode(LINE * 3))
        assert len(tok.encode(LINE * 3, max_length=n + 1, truncation_side=side)) == n


def variants(tmp_path: Path) -> dict[str, Path]:
    """tokenizer.json files of other stages: a prefix space and added tokens that take whitespace (RoBERTa's
    real settings), Metaspace's prepend schemes, Strip before Metaspace, a whitespace Replace, NFC and
    Lowercase before ByteLevel, whitespace Splits of each behavior."""
    out = {}

    def write(name: str, spec: dict) -> None:
        out[name] = tmp_path / f"{name}.json"
        out[name].write_text(json.dumps(spec), encoding="utf-8")

    roberta, unigram, xlmr = (json.loads((FIXTURES / f"{n}.json").read_text(encoding="utf-8")) for n in FAMILY)
    spec = copy.deepcopy(roberta)
    for token in spec["added_tokens"]:
        token["lstrip"], token["rstrip"] = token["content"] == "<mask>", token["content"] == "</s>"
    spec["pre_tokenizer"]["add_prefix_space"] = spec["post_processor"]["add_prefix_space"] = True
    write("roberta_prefix_space", spec)
    for scheme in ("first", "never"):
        spec = copy.deepcopy(xlmr)
        spec["pre_tokenizer"]["prepend_scheme"] = scheme
        write(f"xlmr_{scheme}", spec)
    spec = copy.deepcopy(unigram)
    spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    write("strip_then_metaspace", spec)
    spec = copy.deepcopy(xlmr)
    spec["normalizer"]["normalizers"].append({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})
    write("replace_spaces", spec)
    spec = copy.deepcopy(roberta)
    spec["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}
    write("nfc_lowercase", spec)
    for behavior in ("Removed", "Isolated", "MergedWithNext", "MergedWithPrevious", "Contiguous"):
        spec = copy.deepcopy(roberta)
        split = {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": behavior, "invert": False}
        byte_level = {"type": "ByteLevel", "add_prefix_space": True, "use_regex": False}
        spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, byte_level]}
        write(f"split_{behavior}", spec)
    return out


@pytest.fixture(scope="module")
def tokenizers(vocab_path, tmp_path_factory) -> dict[str, Tokenizer]:
    files = variants(tmp_path_factory.mktemp("variants"))
    return {
        **{name: make(name, vocab_path) for name in NAMES},
        **{name: Tokenizer.from_tokenizer_json(path) for name, path in files.items()},
    }


PIECES = [
    *" \t\n\r\x00\x0b\x85\xa0\u3000\u200b\u200d\u00ad\ufeff\u0301\u0308éÅﬁ①½日本한,.!'-$",
    *["<s>", "</s>", "<mask>", "[CLS]", "[MASK]", " <pad> ", "\r\n", "e\u0301", "ab", "The", "12", "  ", "▁"],
    *["İ", "\u1100\u1161", " \u0301", "word ", "a b c ", "x"],
]
texts = st.lists(st.sampled_from(PIECES) | st.characters(codec="utf-8"), min_size=1, max_size=40).map("".join)


@settings(
    max_examples=int(os.environ.get("NUMBERT_TOKENIZER_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    text=texts,
    pair=st.none() | texts,
    n=st.integers(1, 12),
    side=st.sampled_from(["right", "left"]),
    strategy=st.sampled_from(["longest_first", "longest_first", "only_first", "only_second"]),
)
def test_a_text_read_in_part_is_the_whole_text_cut(tokenizers, monkeypatch, text, pair, n, side, strategy):
    """Read from parts of a character a token (so that every text is cut where it can be), each tokenizer gives the
    whole text's encoding truncated, or refuses what it refuses."""
    monkeypatch.setattr(nt_tokenizer, "READ_CHARS_PER_TOKEN", 1)
    monkeypatch.setattr(nt_tokenizer, "READ_MARGIN", 0)
    monkeypatch.setattr(nt_tokenizer, "READ_GROWTH", 2)
    options = {"max_length": n + 4, "truncation": strategy, "truncation_side": side}
    for name, tok in tokenizers.items():
        try:
            whole = tok.encode(text, pair, **options, return_overflowing_tokens=True)  # every text read whole
        except ValueError as e:
            with pytest.raises(ValueError, match="^" + str(e)[:40].replace("(", r"\(").replace(")", r"\)")):
                tok.encode(text, pair, **options)
            continue
        cut = tok.encode(text, pair, **options)
        assert fields(cut) == fields(whole), (name, text, pair)
        if side == "right":
            assert cut.word_ids == whole.word_ids, (name, text, pair)
        else:  # counted from the first word kept, of each text
            for sequence in (0, 1):
                a = [w for w, s in zip(cut.word_ids, cut.sequence_ids) if s == sequence]
                b = [w for w, s in zip(whole.word_ids, whole.sequence_ids) if s == sequence]
                assert a == b or a == [w - b[0] for w in b], (name, text, pair)


def test_where_the_stages_let_a_text_be_cut(tokenizers):
    """A break is a space (for BERT also punctuation, CJK) after a character other than whitespace, where no stage
    reaches across: not inside a special token, not where a Split merges whitespace with the word before, not
    where a Replace of an unknown pattern may reach."""
    bert, bpe = tokenizers["bert"], tokenizers["roberta_bpe"]
    text = "a [MASK] b,c  d"
    assert [at for at in range(1, len(text)) if bert.cuts.after(text, at) == at] == [1, 8, 10, 12]
    assert [at for at in range(1, len(text)) if bpe.cuts.after(text, at) == at] == [1, 8, 12]
    assert tokenizers["split_MergedWithPrevious"].cuts.after(text, 1) is None
    assert bert.cuts.before(text, 9) == 8 and bpe.cuts.before(text, 7) == 1 and bpe.cuts.before(text, 0) is None


def test_sentencepieces_lag_at_a_texts_start_is_carried(tokenizers):
    """XLM-R's map deletes a control character at a text's start (or after an added token, where a new text between
    added tokens starts) without a trace, so Rust's offsets of everything after lag behind by one: a text cut on
    the left keeps that lag."""
    tok, words = tokenizers["xlmr_spm"], "The quick brown fox jumps over the lazy dog, naïve café. " * 200
    for text in ("\x0b" + words, "\x0b\x0b" + words, words + "</s>\x0b" + words, "\x0b" + words + "</s>" + words):
        whole = tok.encode(text, max_length=40, truncation_side="left", return_overflowing_tokens=True)
        assert tok.encode(text, max_length=40, truncation_side="left").offsets == whole.offsets, text[:8]
    lagging = tok.encode("\x0b" + words, max_length=40, truncation_side="left").offsets
    assert lagging == tok.encode(words, max_length=40, truncation_side="left").offsets  # one behind where they are


@pytest.mark.parametrize("run", [" ", "\t\n", "\u3000", "\r\n "])
def test_a_run_of_whitespace_is_read_in_linear_time(vocab_path, run):
    """BERT's tokenizer on 400,000 whitespace characters, alone and between two words, whole and cut (it took time
    quadratic in a run's length: 8,000 spaces 1 s, so these would take minutes): well under a second (a bound
    of 10 s, never reached by a linear reading), offsets exact."""
    bert = Tokenizer.from_vocab(vocab_path)
    spaces = run * (400_000 // len(run))
    start = time.process_time()
    assert bert.encode(spaces).tokens == ["[CLS]", "[SEP]"]
    enc = bert.encode("a" + spaces + "b")
    assert bert.encode("a" + spaces + "b", max_length=3).tokens == ["[CLS]", "a", "[SEP]"]
    assert bert.encode("a" + spaces + "b", max_length=3, truncation_side="left").tokens == ["[CLS]", "b", "[SEP]"]
    assert time.process_time() - start < 10  # linear: about 0.1 s
    assert enc.tokens == ["[CLS]", "a", "b", "[SEP]"] and enc.offsets[1:3] == [
        (0, 1),
        (len(spaces) + 1, len(spaces) + 2),
    ]
