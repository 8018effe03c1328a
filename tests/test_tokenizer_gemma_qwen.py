"""The decoder-shaped embedders' tokenizers, token for token the Rust `tokenizers` library's: ids, tokens, type ids,
offsets, word ids, pairs, truncation windows and decode, on the project's real-text corpus and on fuzzed strings.

- Gemma's (EmbeddingGemma, Gemma 3, mmBERT): the normalizer turns spaces into "▁", so the BPE model reads the whole
  text between added tokens as one word; characters outside the vocabulary become their UTF-8 bytes' <0xNN> pieces
  (byte fallback), decoded back by the decoder Sequence Replace "▁" -> " ", ByteFallback, Fuse.
- Qwen's (Qwen2, Qwen3, Qwen3-Embedding): NFC, Qwen2's split pattern in Oniguruma's dialect, byte-level BPE;
  Qwen3-Embedding's template appends <|endoftext|>.

The two tokenizer.json files are trained here (scripts/make_gemma_qwen_tokenizers.py) in each model's exact pipeline
as transformers 5's converters build it, and committed in tests/fixtures with what the Rust library gives on a sample
of cases (gemma_qwen_expected.json), checked without it. The variants other releases of the models ship (Gemma 3's
<bos> only, older Gemma files without a pre-tokenizer, Qwen2's ByteLevel post-processor) are edits of those files.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from helpers import fixture_tokenizers, rust_fixture_tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tokenizer_family import our_windows, rust_windows
from test_tokenizer_parity import CORPUS, generated_lines

from numbert.tokenizer import Tokenizer
from numbert.tokenizer.decoders import ByteFallbackDecoder, StripDecoder

FIXTURES = Path(__file__).parent / "fixtures"
NAMES = ("gemma_bpe", "qwen_bpe")
EXPECTED = FIXTURES / "gemma_qwen_expected.json"
FIELDS = ("ids", "type_ids", "offsets", "word_ids")  # committed, for every fifth case (the whole is checked live)
ODD = [  # runs of spaces, tabs and newlines; added tokens, whole and in parts; bytes outside the vocabulary
    "",
    " ",
    "  ",
    "a  b   c    d",
    "\n\n\nx\n \n",
    "\t\ttab\t",
    " lead",
    "tail  ",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model",
    "<bos><eos> <pad>x<mask>",
    "<|im_start|>system\nYou are<|im_end|><|endoftext|>",
    "<think>\n\n</think>\n\nanswer",
    "<table><h1>x</h1></table>",
    "▁▁ ▁x▁",
    "<0x41> <0xE6>",
    "日本語 😍👍🏽 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \U0010fffd \x00\x7f\u200b",
    "e\u0301 é Å Å ﬁ ①",
    "It's 1234567 don't WE'LL they'Re\r\n\r\n  x",
]
LINES = CORPUS + generated_lines(60, seed=7) + ODD


@pytest.fixture(scope="module")
def ours() -> dict[str, Tokenizer]:
    return fixture_tokenizers(NAMES)


@pytest.fixture(scope="module")
def rust() -> dict:
    return rust_fixture_tokenizers(NAMES)


def cases() -> list[dict]:
    """Each line, and random pairs with truncation."""
    rng = random.Random(41)
    found: list[dict] = [{"text": line} for line in LINES]
    for _ in range(50):
        found.append(
            {
                "text": rng.choice(LINES),
                "pair": rng.choice([None, *filter(None, LINES)]),  # (Rust drops an empty pair)
                "add_special_tokens": rng.random() < 0.8,
                "max_length": rng.choice([None, 10, 16, 40]),
                "strategy": rng.choice(["longest_first", "only_first", "only_second"]),
                "stride": rng.choice([0, 0, 2]),
            }
        )
    return found


def rust_or_none(tok, case: dict) -> list | None:
    try:
        return rust_windows(tok, **case)
    except BaseException:  # noqa: B036 - Rust refuses (a strategy that cannot fit) with an exception or a panic
        return None


def write_expected() -> None:
    """What the Rust library gives on cases(), committed for runs without it (scripts/make_gemma_qwen_tokenizers.py)."""
    import tokenizers

    expected = {}
    for name in NAMES:
        tok = tokenizers.Tokenizer.from_file(str(FIXTURES / f"{name}.json"))
        windows = [rust_or_none(tok, case) for case in cases()[::5]]
        expected[name] = [None if w is None else [{k: x[k] for k in FIELDS} for x in w] for w in windows]
    EXPECTED.write_text(json.dumps(expected, separators=(",", ":")) + "\n", encoding="utf-8")


def assert_equal_windows(mine: Tokenizer, theirs, case: dict) -> None:
    expected = rust_or_none(theirs, case)
    if expected is None:
        with pytest.raises(ValueError):
            our_windows(mine, **case)
    else:
        assert our_windows(mine, **case) == expected, case


def rust_ids(tok, text: str) -> list[int]:
    tok.no_truncation()  # (rust_windows leaves its truncation set)
    return tok.encode(text).ids


def assert_equal_decoding(mine: Tokenizer, theirs, ids: list[int]) -> None:
    for skip in (True, False):
        assert mine.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip), (ids, skip)


# --- live parity -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_corpus_pairs_and_truncation(ours, rust, name):
    """Every line of the corpus (several scripts, characters outside the small vocabulary), random mixtures,
    runs of whitespace and added tokens; pairs, truncation windows; and their decoding."""
    for case in cases():
        assert_equal_windows(ours[name], rust[name], case)
    for line in LINES:
        assert_equal_decoding(ours[name], rust[name], rust_ids(rust[name], line))


@pytest.mark.parametrize("name", NAMES)
def test_decoding_any_ids(ours, rust, name):
    """Random ids, so byte pieces that make no UTF-8 (each byte a U+FFFD for Gemma), pieces out of order, and
    special and added tokens anywhere."""
    rng = random.Random(name)
    size = rust[name].get_vocab_size(with_added_tokens=True)
    byte_ids = [rust[name].token_to_id(f"<0x{b:02X}>") for b in (0x41, 0xE6, 0x97, 0xA5, 0xC3, 0xFF, 0x0A)]
    pool = [i for i in byte_ids if i is not None] or [0]
    for _ in range(300):
        ids = [rng.choice(pool) if rng.random() < 0.4 else rng.randrange(size) for _ in range(rng.randrange(12))]
        assert_equal_decoding(ours[name], rust[name], ids)


@pytest.mark.parametrize("name", NAMES)
def test_the_fast_path_is_the_stages(name):
    """Whatever fast path a file takes gives what the plain stages give."""
    fast = Tokenizer.from_tokenizer_json(FIXTURES / f"{name}.json")
    stages = Tokenizer.from_tokenizer_json(FIXTURES / f"{name}.json", fast=False)
    for line in LINES:
        assert our_windows(fast, line) == our_windows(stages, line), line
        assert our_windows(fast, line, "pair " + line) == our_windows(stages, line, "pair " + line), line


def edited(tmp_path: Path, name: str, edit) -> Path:
    spec = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    edit(spec)
    path = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def bos_only(spec: dict) -> None:
    """Gemma 3's template: <bos> $A (transformers' add_bos_token, no add_eos_token)."""
    processor = spec["post_processor"]
    processor["single"] = processor["single"][:2]
    processor["pair"] = [processor["pair"][i] for i in (0, 1, 3, 4)]


def no_bytes_for_cjk(spec: dict) -> None:
    """Some <0xNN> pieces missing: a character whose bytes are not all there becomes <unk>, consecutive ones fused."""
    for b in range(0xE0, 0xF0):
        del spec["model"]["vocab"][f"<0x{b:02X}>"]


def qwen2_post_processor(spec: dict) -> None:
    """Qwen2's tokenizer.json: ByteLevel(trim_offsets=false) adds nothing."""
    spec["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def both_post_processors(spec: dict) -> None:
    spec["post_processor"] = {
        "type": "Sequence",
        "processors": [
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            spec["post_processor"],
        ],
    }


def llama_decoder(spec: dict) -> None:
    """Llama's and the SentencePiece converter's decoder: the space its dummy prefix added stripped."""
    spec["decoder"]["decoders"].append({"type": "Strip", "content": " ", "start": 1, "stop": 0})


def merge_across_a_space(spec: dict) -> None:
    """A merge joining a piece to the "▁" after it ("e" + "▁t", first of all): no longer cut at each "▁"."""
    vocab = spec["model"]["vocab"]
    vocab["e▁t"] = max(vocab.values()) + 1
    spec["model"]["merges"].insert(0, ["e", "▁t"])


VARIANTS = {
    "gemma3 <bos> only": ("gemma_bpe", bos_only),
    "gemma without a pre-tokenizer": ("gemma_bpe", lambda s: s.update(pre_tokenizer=None)),
    "gemma missing bytes": ("gemma_bpe", no_bytes_for_cjk),
    "gemma with llama's strip": ("gemma_bpe", llama_decoder),
    "gemma with a merge across a space": ("gemma_bpe", merge_across_a_space),
    "qwen2": ("qwen_bpe", qwen2_post_processor),
    "qwen both post-processors": ("qwen_bpe", both_post_processors),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_other_releases_files(tmp_path, variant):
    tokenizers = pytest.importorskip("tokenizers")
    name, edit = VARIANTS[variant]
    path = edited(tmp_path, name, edit)
    mine, theirs = Tokenizer.from_tokenizer_json(path), tokenizers.Tokenizer.from_file(str(path))
    if name == "gemma_bpe":  # a long word is cut at each "▁" after another character unless a merge crosses there
        assert (mine.model.cuts is None) == (edit is merge_across_a_space)
    for case in cases()[::3]:
        assert_equal_windows(mine, theirs, case)
        assert_equal_decoding(mine, theirs, rust_ids(theirs, case["text"]))


FUZZ = settings(
    max_examples=int(os.environ.get("NUMBERT_TOKENIZER_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
fuzz_text = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.one_of(
            st.sampled_from(list(" \t\n\r\x00\x0b\x85\xa0\u3000\u200b\u2028\ufeff\u0301éÅﬁ①½日本한😍▁'")),
            st.sampled_from(["<bos>", "<eos>", "<start_of_turn>", "<|im_end|>", "<|endoftext|>", "<think>", "\n\n"]),
            st.sampled_from(["  ", "\t\t", "\r\n", "'S", "'ll", "123", "The", "ab", " x", "<0xE6>", "<table>"]),
            st.characters(codec="utf-8"),
        ),
        max_size=30,
    ).map("".join),
)


@FUZZ
@given(text=fuzz_text, pair=st.none() | fuzz_text.filter(bool), max_length=st.none() | st.integers(5, 12))
def test_fuzzed_text(ours, rust, text, pair, max_length):
    case = {"text": text, "pair": pair, "max_length": max_length, "strategy": "longest_first", "stride": 0}
    for name in NAMES:
        assert_equal_windows(ours[name], rust[name], case)
        assert_equal_decoding(ours[name], rust[name], rust_ids(rust[name], text))


# --- without the Rust library ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_committed_expectations(ours, name):
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))[name]
    for case, want in zip(cases()[::5], expected, strict=True):
        if want is None:
            with pytest.raises(ValueError):
                our_windows(ours[name], **case)
            continue
        got = [
            {k: [list(o) for o in w[k]] if k == "offsets" else w[k] for k in FIELDS}
            for w in our_windows(ours[name], **case)
        ]
        assert got == want, case


def test_byte_fallback_decoding_by_hand():
    """Runs of byte pieces back to their text; a run that is no UTF-8 one U+FFFD per byte; "<0x+F>" is a byte as
    Rust's u8::from_str_radix reads it, "<0xG0>" and "<0x0A >" are not."""
    decode = ByteFallbackDecoder().chain
    assert decode(["<0xE6>", "<0x97>", "<0xA5>", "x", "<0x41>"]) == ["日", "x", "A"]
    assert decode(["<0xE6>", "<0x97>", "y"]) == ["\ufffd", "\ufffd", "y"]
    assert decode(["<0x+F>", "<0xG0>", "<0x0A >"]) == ["\x0f", "<0xG0>", "<0x0A >"]
    strip = StripDecoder(" ", 1, 0).chain
    assert strip(["  a ", " ", "b"]) == [" a ", "", "b"]


def test_unreadable_decoders_are_refused_by_name(tmp_path):
    for edit, message in (
        (lambda s: s["decoder"]["decoders"].append({"type": "CTC"}), r'decoder.decoders\[3\].type is "CTC"'),
        (lambda s: s["decoder"]["decoders"][0].update(content=5), r"decoder.decoders\[0\].content must be a string"),
        (lambda s: s["decoder"].update(decoders={}), r"decoder.decoders must be a list"),
        (lambda s: s["decoder"]["decoders"].append({"type": "Strip", "content": "ab"}), r"must be one character"),
    ):
        path = edited(tmp_path, "gemma_bpe", edit)
        with pytest.raises(ValueError, match=message) as error:
            Tokenizer.from_tokenizer_json(path)
        assert str(path) in str(error.value)


def test_qwens_split_classes_every_newer_code_point_as_oniguruma():
    """The code points the `regex` package's Unicode assigns and the Rust crate's Oniguruma does not (and U+0295,
    Ll there, Lo here) split by Qwen2's pattern as Rust splits them, next to letters, digits, punctuation and
    spaces; every code point past U+3400 in steps, too."""
    tokenizers = pytest.importorskip("tokenizers")
    from numbert.tokenizer.patterns import NEWER_THAN_ONIGURUMA, Pattern
    from numbert.tokenizer.unicode_tables import code_points

    source = json.loads((FIXTURES / "qwen_bpe.json").read_text(encoding="utf-8"))["pre_tokenizer"]["pretokenizers"][0]
    rust_split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(source["pattern"]["Regex"]), behavior="isolated")
    ours = Pattern(source["pattern"]["Regex"], False, "test")
    chars = sorted(code_points(NEWER_THAN_ONIGURUMA) | {"\u0295"}) + [chr(c) for c in range(0x3400, 0x110000, 97)]
    chars = [c for c in chars if not 0xD800 <= ord(c) <= 0xDFFF]
    text = "".join(f"a{c}:{c}1 {c}{c}'s\n" for c in chars)
    spans = [span for _, span in rust_split.pre_tokenize_str(text)]
    cuts = sorted({0, len(text), *(p for span in ours.spans(text) for p in span)})
    assert [(a, b) for a, b in zip(cuts, cuts[1:])] == spans
