"""A tokenizer.json's tables read as the Rust `tokenizers` library reads them, and a malformed one refused in one
line (issue 35): Unigram's pieces in a radix tree (linear in the vocabulary's length) and its scores (non-finite
refused, -1e308 tokenized as Rust does), BPE merges listed twice (the last rank), ids and type ids as Rust's u32,
special tokens without ids, compiled charsmaps checked at load, nesting bounded; and what Rust accepts that numbert
refused: Split `invert`, WordLevel models, BPE `dropout` (tokenized without it), files without cls/sep tokens.

Every accepted case is compared with the library live and with its outputs committed in
tests/fixtures/tables_expected.json (scripts/make_unicode_fixture.py); every refusal is a ValueError naming the
file and the field, from `Tokenizer.from_tokenizer_json`, `numbert.load` and `numbert tokenize`, within a bound
of time and memory.
"""

from __future__ import annotations

import base64
import json
import math
import random
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers import bounded, run_limited

import numbert
from numbert.tokenizer import Tokenizer
from numbert.tokenizer.precompiled import _offset
from numbert.tokenizer.unigram import Trie, Unigram

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = FIXTURES / "tables_expected.json"
VOCAB = {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "<s>": 5, "</s>": 6}
SPACED = VOCAB | {" ": 7}  # (a character the vocabulary lacks, dropped, shifts Rust's later offsets: not a case here)


def bpe(vocab: dict, merges: list, post: dict | None = None, pre: dict | None = None, **model) -> dict:
    """A tokenizer.json with a BPE model (no normalizer, words between whitespace unless `pre` says otherwise)."""
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": pre if pre is not None else {"type": "WhitespaceSplit"},
        "post_processor": post,
        "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "vocab": vocab, "merges": merges, **model},
    }


def unigram(pieces: list) -> dict:
    spec = bpe({}, [])
    spec["model"] = {"type": "Unigram", "unk_id": 0, "vocab": pieces, "byte_fallback": False}
    return spec


def word_level(vocab: dict, unk_token: str) -> dict:
    spec = bpe({}, [])
    spec["model"] = {"type": "WordLevel", "vocab": vocab, "unk_token": unk_token}
    return spec


def template(ids: list, tokens: list, type_id=0) -> dict:
    """A TemplateProcessing post-processor: <s> A, and A B:1, with the special token <s> of these ids and tokens."""
    return {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": type_id}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": ids, "tokens": tokens}},
    }


def split(behavior: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": "a+"}, "behavior": behavior, "invert": True}


BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")
UNIGRAM_PIECES = [["<unk>", 0.0], ["a", -1.0], ["b", -2.0], ["ab", -2.5]]
# name -> (the file, the texts (a pair is a list), the file Rust reads to give the expected outputs)
CASES: dict[str, tuple[dict, list, dict | None]] = {
    "unigram_score_-1e308": (unigram([*UNIGRAM_PIECES, ["c", -1e308]]), ["ab c abc", "cab cc"], None),
    "unigram_piece_of_30000": (unigram([*UNIGRAM_PIECES, ["a" * 30_000, -3.0]]), ["ab " + "a" * 50, "ba"], None),
    "bpe_merges_twice_strings": (bpe(VOCAB, ["a b", "b c", "a b"]), ["abc", "abcab cab"], None),
    "bpe_merges_twice_pairs": (bpe(VOCAB, [["a", "b"], ["b", "c"], ["a", "b"]]), ["abc", "abcab cab"], None),
    "template_without_ids": (bpe(VOCAB, ["a b"], post=template([], [])), ["ab c", ["ab", "c"]], None),
    "template_two_ids": (bpe(VOCAB, ["a b"], post=template([5, 6], ["<s>", "</s>"])), ["ab c", ["ab", "c"]], None),
    "word_level": (word_level({"hello": 0, "world": 1, "<unk>": 2}, "<unk>"), ["hello there world", "x"], None),
    "word_level_one_word": (
        word_level({"hello": 0, "[UNK]": 1}, "[UNK]") | {"pre_tokenizer": None},
        ["hello", "hello world"],
        None,
    ),
    "no_cls_or_sep": (bpe({"a": 0, "b": 1, "ab": 2}, ["a b"]), ["ab b", ["ab", "ba"]], None),
    "bpe_dropout_0": (bpe(VOCAB, ["a b", "b c"], dropout=0.0), ["abc ab", "b"], None),
    "bpe_dropout_half": (bpe(VOCAB, ["a b", "b c"], dropout=0.5), ["abc ab", "b"], bpe(VOCAB, ["a b", "b c"])),
    **{
        f"split_invert_{behavior}": (bpe(SPACED, ["a b"], pre=split(behavior)), ["baab aac", "aaa", " b b "], None)
        for behavior in BEHAVIORS
    },
}
FIELDS = ("ids", "tokens", "offsets", "type_ids")


def write(tmp_path: Path, name: str, spec: dict) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    return path


def encoded(tok, text, fields=FIELDS) -> dict:
    enc = tok.encode(*text) if isinstance(text, list) else tok.encode(text)
    return {f: [list(o) for o in enc.offsets] if f == "offsets" else list(getattr(enc, f)) for f in fields}


@pytest.fixture(scope="module")
def tokenizers():
    return pytest.importorskip("tokenizers")


@pytest.mark.parametrize("name", CASES)
def test_accepted_files_tokenize_as_rust(tokenizers, tmp_path, name):
    """Each accepted file: every field of every text as the Rust library gives it (dropout: as it gives it
    without dropout, which it applies at random on every call), and as committed."""
    spec, texts, rust_spec = CASES[name]
    with bounded(seconds=10, memory=30e6):
        mine = Tokenizer.from_tokenizer_json(write(tmp_path, name, spec))
        got = [encoded(mine, text) for text in texts]
    theirs = tokenizers.Tokenizer.from_file(str(write(tmp_path, name + "_rust", rust_spec or spec)))
    assert got == [encoded(theirs, text) for text in texts]
    assert got == json.loads(EXPECTED.read_text(encoding="utf-8"))[name]


def test_files_without_cls_or_sep_pad_with_zero(tmp_path):
    """Such a tokenizer names no cls, sep, pad or unknown token (None, as transformers says), and pads with 0."""
    tok = Tokenizer.from_tokenizer_json(write(tmp_path, "plain", CASES["no_cls_or_sep"][0]))
    assert (tok.cls_token, tok.sep_token, tok.pad_token, tok.unk_token) == (None, None, None, None)
    assert tok.encode_batch(["ab b", "a"]).input_ids.tolist() == [[2, 1], [0, 0]]


def test_word_level_without_its_unknown_token_fails_on_an_unknown_word(tokenizers, tmp_path):
    """Rust loads a WordLevel file whose unk_token is not in the vocabulary and fails on the first unknown word:
    so does numbert, in one line."""
    path = write(tmp_path, "wl", word_level({"hello": 0}, "<unk>"))
    assert Tokenizer.from_tokenizer_json(path).encode("hello").ids == [0]
    with pytest.raises(Exception, match="Missing"):
        tokenizers.Tokenizer.from_file(str(path)).encode("hello there")
    with pytest.raises(ValueError, match=r"^'there' is not in the WordLevel vocabulary, which has no unknown token"):
        Tokenizer.from_tokenizer_json(path).encode("hello there")


# --- Unigram's radix tree -----------------------------------------------------------------------------------


def plain_viterbi(pieces: list[tuple[str, float]], word: str) -> list[str]:
    """The plain rule: every piece tried at every position (Rust's order and tie rule), unknown runs fused."""
    scores = {p: s for p, s in pieces}  # a piece listed twice: its last score (and id), as in Rust
    unk = min(s for _, s in pieces) - 10  # (the lowest of every entry)
    best: list[float] = [0.0] + [math.nan] * len(word)
    back: list[tuple[int, bool] | None] = [None] * (len(word) + 1)
    for start in range(len(word)):
        for end in range(start + 1, len(word) + 1):
            if word[start:end] in scores:
                score = best[start] + scores[word[start:end]]
                if back[end] is None or score > best[end]:
                    best[end], back[end] = score, (start, False)
        if word[start] not in scores:
            score = best[start] + unk
            if back[start + 1] is None or score > best[start + 1]:
                best[start + 1], back[start + 1] = score, (start, True)
    out: list[tuple[str, bool]] = []
    end = len(word)
    while end:
        start, unknown = back[end]  # type: ignore[misc]
        if unknown and out and out[-1][1]:
            out[-1] = (word[start:end] + out[-1][0], True)
        else:
            out.append((word[start:end], unknown))
        end = start
    return [p for p, _ in reversed(out)]


def test_the_radix_tree_finds_what_the_plain_rule_finds():
    """Random vocabularies over three letters (prefixes of each other, long pieces, repeated pieces) and random
    words: the tree's Viterbi gives the plain rule's pieces."""
    rng = random.Random(35)
    for _ in range(200):
        pieces = [("<unk>", 0.0)] + [
            ("".join(rng.choice("abc") for _ in range(rng.randint(1, 6))), -rng.choice([0.5, 1.0, 2.0, 1e308]))
            for _ in range(rng.randint(1, 15))
        ]
        model = Unigram(pieces, unk_id=0)
        for _ in range(10):
            word = "".join(rng.choice("abcd") for _ in range(rng.randint(1, 12)))
            assert [t for _, t, _, _ in model.tokenize(word)] == plain_viterbi(pieces, word), (pieces, word)


def test_the_tree_is_linear_in_the_vocabularys_length(tmp_path):
    """A piece of 100,000 characters is one edge: the file loads and tokenizes in milliseconds and a few MB (the
    table of every prefix took 463 MB for 30,000 characters); the search from each position of a word of 30,000
    letters follows the pieces that match, not the long piece's length."""
    spec = unigram([*UNIGRAM_PIECES, ["a" * 100_000, -3.0], ["a" * 99_999 + "b", -3.0]])
    path = write(tmp_path, "long", spec)
    with bounded(seconds=10, memory=30e6):
        tok = Tokenizer.from_tokenizer_json(path)
        assert tok.encode("ab " + "a" * 30_000).tokens[:2] == ["ab", "a"]
    trie = Trie()
    for i, piece in enumerate(["abc", "abd", "a" * 1000, "ab"]):
        trie.insert(piece, i)
    assert trie.edges == ["", "c", "b", "d", "a", "a" * 999]  # each node once, split where pieces part
    assert trie.ids == [-1, 0, 3, 1, -1, 2]


# --- refused, in one line -----------------------------------------------------------------------------------


def charsmap(blob: bytes) -> dict:
    return {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(blob).decode()}


def out_of_range_trie() -> bytes:
    """XLM-R's compiled charsmap with the unit that ends the key "é" pointing past the trie (the value is read
    there): the Rust library panics on the first "é", numbert's earlier reader raised IndexError on it."""
    spec = json.loads((FIXTURES / "xlmr_spm.json").read_text(encoding="utf-8"))
    blob = bytearray(base64.b64decode(spec["normalizer"]["normalizers"][0]["precompiled_charsmap"]))
    (size,) = struct.unpack_from("<I", blob)
    units = np.frombuffer(bytes(blob), "<u4", size // 4, 4).copy()
    pos = _offset(int(units[0]))
    for byte in "é".encode():
        pos ^= byte
        child, pos = pos, pos ^ _offset(int(units[pos]))
    assert (units[child] >> 8) & 1  # a key ends there
    units[child] = (units[child] & 0x1FF) | ((child ^ (len(units) + 5)) << 10)  # its value past the end
    blob[4 : 4 + size] = units.tobytes()
    return bytes(blob)


def deep(spec: dict) -> str:
    return json.dumps(spec).replace('"padding": null', '"padding": ' + "[" * 100_000 + "]" * 100_000)


def sequence_of_sequences(depth: int) -> dict:
    normalizer: dict = {"type": "Lowercase"}
    for _ in range(depth):
        normalizer = {"type": "Sequence", "normalizers": [normalizer]}
    return normalizer


def with_score(score: str) -> str:
    return json.dumps(unigram([*UNIGRAM_PIECES, ["c", 12345.5]])).replace("12345.5", score)


# name -> (the file's text, the message's pattern (after the file's path), whether Rust refuses it too)
REFUSED: dict[str, tuple[Callable[[], str], str, bool]] = {
    "score_nan": (lambda: with_score("NaN"), r": model.vocab\[4\] \('c'\) has the score nan, which is not", True),
    "score_inf": (lambda: with_score("Infinity"), r": model.vocab\[4\] \('c'\) has the score inf", True),
    "score_-inf": (lambda: with_score("-Infinity"), r": model.vocab\[4\] \('c'\) has the score -inf", True),
    "score_1e309": (lambda: with_score("1e309"), r": model.vocab\[4\] \('c'\) has the score inf", True),
    "vocab_id_-5": (lambda: json.dumps(bpe(dict(VOCAB, c=-5), [])), r': model.vocab\["c"\] is -5, not an id', True),
    "vocab_id_2^40": (lambda: json.dumps(bpe(dict(VOCAB, c=2**40), [])), r': model.vocab\["c"\] is 10995', True),
    "template_id_zz": (
        lambda: json.dumps(bpe(VOCAB, [], post=template(["zz"], ["<s>"]))),
        r': post_processor.special_tokens.<s>.ids\[0\] is "zz", not an id',
        True,
    ),
    "template_id_2.5": (
        lambda: json.dumps(bpe(VOCAB, [], post=template([2.5], ["<s>"]))),
        r": post_processor.special_tokens.<s>.ids\[0\] is 2.5, not an id",
        True,
    ),
    "template_ids_unpaired": (
        lambda: json.dumps(bpe(VOCAB, [], post=template(["zz"], []))),
        r": post_processor.special_tokens.<s> must pair each of its ids with a token",
        False,  # (Rust loads ids without tokens and gives encodings whose ids and tokens differ in number)
    ),
    "type_id_-1": (
        lambda: json.dumps(bpe(VOCAB, [], post=template([5], ["<s>"], type_id=-1))),
        r": post_processor.single\[0\].type_id is -1, not an id",
        True,
    ),
    "type_id_2^40": (
        lambda: json.dumps(bpe(VOCAB, [], post=template([5], ["<s>"], type_id=2**40))),
        r": post_processor.single\[0\].type_id is 1099511627776, not an id",
        True,
    ),
    "added_token_id_-1": (
        lambda: json.dumps(
            bpe(VOCAB, []) | {"added_tokens": [{"id": -1, "content": "<x>", "special": True, "normalized": False}]}
        ),
        r": added_tokens\[0\].id is -1, not an id",
        True,
    ),
    "nested_100000_deep": (
        lambda: deep(bpe(VOCAB, [])),
        r": not valid JSON \(nests arrays and objects too deeply to be read\)",
        True,
    ),
    "sequence_200_deep": (
        lambda: json.dumps(bpe(VOCAB, []) | {"normalizer": sequence_of_sequences(200)}),
        r": normalizer nests arrays and objects more than 128 deep",
        True,
    ),
    "charsmap_of_1_byte": (
        lambda: json.dumps(bpe(VOCAB, []) | {"normalizer": charsmap(b"\x01")}),
        r": normalizer.precompiled_charsmap is not a SentencePiece charsmap \(the charsmap holds 1 of the 4 bytes",
        False,  # (Rust panics)
    ),
    "charsmap_trie_out_of_range": (
        lambda: json.dumps(bpe(VOCAB, []) | {"normalizer": charsmap(out_of_range_trie())}),
        r": normalizer.precompiled_charsmap is not a SentencePiece charsmap \(a key of the trie points at unit \d+ of",
        False,  # (Rust panics at the first "é")
    ),
    "dropout_1.5": (
        lambda: json.dumps(bpe(VOCAB, [], dropout=1.5)),
        r": model.dropout is 1.5, not a probability from 0 to 1",
        True,
    ),
    "word_level_without_unk_token": (
        lambda: json.dumps(word_level({"a": 0}, "") | {"model": {"type": "WordLevel", "vocab": {"a": 0}}}),
        r": model.unk_token must be a string, not null",
        True,
    ),
}


@pytest.mark.parametrize("name", REFUSED)
def test_malformed_files_are_refused_in_one_line(tokenizers, tmp_path, name):
    """A ValueError naming the file and the field, within 10 s and 50 MB; Rust refuses the same files (or
    panics on them)."""
    make, message, rust_refuses = REFUSED[name]
    path = tmp_path / "tokenizer.json"
    path.write_text(make(), encoding="utf-8")
    with bounded(seconds=10, memory=50e6), pytest.raises(ValueError) as refused:
        Tokenizer.from_tokenizer_json(path)
    assert refused.match("^" + str(path).replace(".", r"\.") + message)
    assert "\n" not in str(refused.value)
    if rust_refuses:
        with pytest.raises(Exception):  # noqa: B017 (the library's own exception type)
            tokenizers.Tokenizer.from_file(str(path))


@pytest.mark.parametrize("name", ["score_nan", "vocab_id_-5", "charsmap_trie_out_of_range", "nested_100000_deep"])
def test_the_api_and_the_command_line_refuse_them_in_one_line(tmp_path, name):
    """`numbert.load` of a model directory holding such a tokenizer.json, and `numbert tokenize` on it: one line
    naming the file (RoBERTa's tiny fixture gives the weights)."""
    directory = tmp_path / "model"
    shutil.copytree(FIXTURES / "family" / "roberta-ForMaskedLM", directory)
    (directory / "tokenizer.json").write_text(REFUSED[name][0](), encoding="utf-8")
    with pytest.raises(ValueError, match="^" + str(directory / "tokenizer.json").replace(".", r"\.")):
        numbert.load(directory)
    result = run_limited("tokenize", "--model", directory, "a b", seconds=60)
    lines = result.stderr.decode().strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr.decode()
    assert lines[0].startswith(f"numbert tokenize: error: {directory / 'tokenizer.json'}")
