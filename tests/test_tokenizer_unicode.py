"""Unicode's normalization forms as the Rust `tokenizers` library runs them (numbert/tokenizer/unicode_forms.py):
for NFC, NFD, NFKC and NFKD, the normalized text and the original span of each of its characters, checked live
on the cases of issue 35 and a seeded fuzz of marked Latin, Hangul (precomposed and decomposed) and the characters
the Rust crate's older tables do not know; the ids and offsets of a Unigram tokenizer with each form as its
normalizer, live; and the same spans from a committed fixture without the library
(tests/fixtures/unicode_expected.json, written by scripts/make_unicode_fixture.py).

The text equals `unicodedata.normalize` wherever the two Unicode versions agree (runs of combining marks of any
length, composition exclusions, canonical order), and a text cut at whitespace normalizes as the whole text does
(truncation reads a long text in parts: cuts.py).
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from pathlib import Path

import pytest
from helpers import bounded

from numbert.tokenizer import Tokenizer, unicode_forms, unicode_tables
from numbert.tokenizer.normalizers import ANY_SPACE, Normalized, UnicodeForm
from numbert.tokenizer.unicode_forms import FORMS

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = FIXTURES / "unicode_expected.json"
NEWER = sorted(
    unicode_tables.NEW_COMBINING_MARKS
    | unicode_tables.NEW_DECOMPOSITIONS
    | unicode_tables.NEW_COMPATIBILITY_DECOMPOSITIONS
)
ISSUE_CASES = [
    "y\u0328\u0309",  # NFC: ỷ + ogonek (the hook composes past the ogonek, of a lower class)
    "a\u0301\u0316\u0301\u0316",  # NFD: canonical order
    unicodedata.normalize("NFD", "각é"),
    unicodedata.normalize("NFD", "한국어 텍스트입니다"),
    "\u00e1\u0323",  # a precomposed letter whose mark moves behind another one
    "a" + "\u0316\u0301" * 70,  # a run of more than 64 marks
    "\u0958\u2126\u212b\u0344\u0f73\u0f75\u0f81 \ufb01\u2460\u00bd\u3000\u00a0x",  # exclusions, singletons
    "\U00011935\U00011930 \U00011938 a\u08ca\u0301",  # newer than the Rust crate's tables
]


def generated_texts(seed: int, n: int) -> list[str]:
    """Marked Latin words, Hangul (precomposed and decomposed), the Rust crate's newer characters, whitespace."""
    rng = random.Random(seed)
    marks = [chr(c) for c in range(0x300, 0x370)] + list("\u0f71\u0f72\u0f74\u0f80\u05b0\u0345\u1dce\u093c")
    bases = list("aeiouyAEOUnczsgkw éạǕ\u0344가한\u1100\u1161\u11a8ﬁ①½\u3000\u00a0Ω\u212bक\u0b47\u0b3e\u0f73")
    bases += NEWER[:: len(NEWER) // 12]
    texts = []
    for _ in range(n):
        text = "".join(
            rng.choice(marks) if rng.random() < 0.45 else rng.choice(bases) for _ in range(rng.randint(1, 12))
        )
        texts.append(unicodedata.normalize(rng.choice(["NFD", "NFC"]), text) if rng.random() < 0.3 else text)
    return texts


TEXTS = ISSUE_CASES + generated_texts(seed=35, n=120)


def ours(text: str, form: str) -> dict:
    normalized = UnicodeForm(form)(Normalized.of(text))  # type: ignore[arg-type]
    return {"text": normalized.text, "spans": [list(span) for span in normalized.spans]}


def rust(tokenizers, text: str, form: str) -> dict:
    """The Rust normalizer's text and each character's original span (a WordLevel model over a one-character
    split gives every normalized character as a token, offsets and all)."""
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.normalizer = getattr(tokenizers.normalizers, form)()
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("."), "isolated")
    return {"text": tok.normalizer.normalize_str(text), "spans": [list(o) for o in tok.encode(text).offsets]}


@pytest.fixture(scope="module")
def tokenizers():
    return pytest.importorskip("tokenizers")


@pytest.mark.parametrize("form", FORMS)
def test_spans_are_rusts(tokenizers, form):
    """The issue's cases and 120 generated texts: the text and every character's span, as Rust gives them."""
    for text in TEXTS:
        assert ours(text, form) == rust(tokenizers, text, form), (form, [hex(ord(c)) for c in text])


def test_committed_spans():
    """The same, against the Rust outputs committed in the fixture (no library needed)."""
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))["forms"]
    assert len(expected) == len(TEXTS) * len(FORMS)
    for case in expected:
        assert ours(case["input"], case["form"]) == {"text": case["text"], "spans": case["spans"]}, case


@pytest.mark.parametrize("form", FORMS)
def test_text_is_unicodedatas_where_the_tables_agree(form):
    """Without the Rust crate's newer characters, the text is exactly `unicodedata.normalize`'s: the issue's cases,
    runs of marks of any length, and the generated texts."""
    newer = set(NEWER)
    texts = [t for t in TEXTS if not newer & set(t)]
    texts += ["a" + "\u0316\u0301" * n for n in (1, 63, 64, 65, 300)] + ["\u0301" * 100 + "e" + "\u0301" * 100]
    for text in texts:
        assert unicode_forms.normalize(form, text) == unicodedata.normalize(form, text), [hex(ord(c)) for c in text]
        assert UnicodeForm(form)(Normalized.of(text)).text == unicodedata.normalize(form, text)  # type: ignore[arg-type]


def test_the_rust_crates_older_tables(tokenizers):
    """Where Python's tables (Unicode 14) know more than the Rust crate's (Unicode 9), numbert gives Rust's answer:
    the newer marks are starters (no reordering), the newer decompositions stay whole."""
    for c in NEWER:
        text = "a\u0301" + c + "\u0316"
        for form in FORMS:
            assert unicode_forms.normalize(form, text) == rust(tokenizers, text, form)["text"], (form, hex(ord(c)))


def test_a_flood_of_marks_is_linear():
    """100,000 combining marks after one letter: normalized in bounded time and memory, in canonical order
    (CPython's own unicodedata.normalize sorts such a run in quadratic time, so it is not the oracle here)."""
    text = "a" + "\u0301\u0316" * 50_000
    with bounded(seconds=20, memory=60e6):
        nfc = UnicodeForm("NFC")(Normalized.of(text))
    assert nfc.text == "\u00e1" + "\u0316" * 50_000 + "\u0301" * 49_999
    assert unicode_forms.normalize("NFD", text) == "a" + "\u0316" * 50_000 + "\u0301" * 50_000
    assert list(nfc.spans[:3]) == [(0, 1), (2, 3), (3, 4)]  # positional: the first ́ composed, the marks moved


@pytest.mark.parametrize("form", FORMS)
def test_a_text_normalizes_apart_at_whitespace(form):
    """What cuts.py relies on (UnicodeForm.at_break): at every whitespace character after one that is not
    whitespace, the text on either side normalizes apart to the whole text's normalization, spans included; and
    the break's character becomes what at_break says."""
    normalizer = UnicodeForm(form)  # type: ignore[arg-type]
    rng = random.Random(7)
    spaces = [c for c in map(chr, range(0x3001)) if normalizer.at_break(None, 0, c)]
    assert set(spaces) == {c for c in map(chr, range(0x3001)) if re.fullmatch(f"[{ANY_SPACE}]", c)}
    for text in TEXTS:
        text = "".join(c if rng.random() < 0.8 else rng.choice(spaces) + c for c in text)
        whole = normalizer(Normalized.of(text))
        for at in range(1, len(text)):
            if text[at] in spaces and text[at - 1] not in spaces:
                left, right = normalizer(Normalized.of(text[:at])), normalizer(Normalized.of(text[at:], at))
                assert left.text + right.text == whole.text, (form, text, at)
                assert [*left.spans, *right.spans] == list(whole.spans), (form, text, at)
                assert right.text[:1] in normalizer.at_break(text, at, text[at])


def unigram_with(form: str, tmp_path: Path) -> Path:
    spec = json.loads((FIXTURES / "unigram.json").read_text(encoding="utf-8"))
    spec["normalizer"] = {"type": form}
    path = tmp_path / f"unigram_{form}.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


@pytest.mark.parametrize("form", FORMS)
def test_ids_and_offsets_of_a_tokenizer_are_rusts(tokenizers, tmp_path, form):
    """A Unigram tokenizer with the form as its normalizer: ids and offsets of decomposed Korean (as macOS writes
    file names), "각é" decomposed (é spans (3, 4)), and 600 generated marked words, as Rust gives them."""
    path = unigram_with(form, tmp_path)
    mine, theirs = Tokenizer.from_tokenizer_json(path), tokenizers.Tokenizer.from_file(str(path))
    texts = [unicodedata.normalize("NFD", "한국어 텍스트입니다"), unicodedata.normalize("NFD", "각é")]
    texts += generated_texts(seed=4, n=600)
    with bounded(seconds=20, memory=40e6):
        for text in texts:
            a, b = mine.encode(text), theirs.encode(text)
            assert (a.ids, a.offsets) == (b.ids, b.offsets), (form, text)
    if form in ("NFC", "NFKC"):
        assert mine.encode(texts[1]).offsets[2:4] == [(0, 1), (3, 4)]
