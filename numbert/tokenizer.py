"""BERT's WordPiece tokenizer in pure Python, token for token the same as Hugging Face's.

Text becomes token ids in two stages, as in BERT:

1. Basic tokenization. `normalize_char` cleans each character (control characters go, every kind of
   whitespace becomes a space, CJK ideographs get spaces around them) and, for uncased models,
   strips accents and lowercases; `pre_tokenize` then splits on spaces and makes every punctuation
   character a word of its own.
2. WordPiece. `wordpiece` splits each word greedily into the longest pieces found in the vocabulary,
   `##` marking a piece that continues a word. A word with no such split, or longer than 100
   characters, becomes `[UNK]`.

`Tokenizer.encode` wraps the pieces in `[CLS] A [SEP]` / `[CLS] A [SEP] B [SEP]`, truncates, and
reports for every token its character span in the original text and the word it belongs to.

The reference is transformers' Rust-backed `BertTokenizer` (the `tokenizers` crate). Normalisation
works character by character there, so every normalised character remembers the original character
it came from; that is how offsets stay exact when accents vanish or 'İ' lowercases to two characters.

For speed, each word's tokens are memoized (text repeats its words), and ASCII text, which
normalizes character for character, takes a fast path that runs both stages on the whole string.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import json
import operator
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

# ---------------------------------------------------------------------------------------------------
# The Rust tokenizer's Unicode tables.
# It takes character categories from Unicode 8.0 (the `unicode_categories` crate) and lowercasing
# from a newer Unicode than Python 3.11's `unicodedata` (14.0). These are the characters on which
# the two disagree, found by running both over every code point (re-checked by
# tests/test_tokenizer_parity.py::test_every_code_point). Everywhere else `unicodedata` is right.


def _chars(ranges: str) -> frozenset[str]:
    """The characters of a list of hex code points and ranges, e.g. "061D 0898-089F"."""
    chars = set()
    for item in ranges.split():
        first, _, last = item.partition("-")
        chars.update(map(chr, range(int(first, 16), int(last or first, 16) + 1)))
    return frozenset(chars)


def _lowercase_table(ranges: str) -> dict[str, str]:
    """{upper: lower} from items "FIRST-LAST>LOWER_OF_FIRST"."""
    table = {}
    for item in ranges.split():
        source, _, target = item.partition(">")
        for offset, ch in enumerate(sorted(_chars(source))):
            table[ch] = chr(int(target, 16) + offset)
    return table


_NEW_FORMAT_CHARS = _chars("0890-0891 08E2 110CD 13430-13438")  # Cf since 8.0: kept, not deleted
_NEW_PUNCTUATION = _chars(  # P* since 8.0: not punctuation
    "061D 09FD 0A76 0C77 0C84 1B7D-1B7E 2E43-2E4F 2E52-2E5D 10EAD 10F55-10F59 10F86-10F89 1144B-1144F "
    "1145A-1145B 1145D 11660-1166C 116B9 1183B 11944-11946 119E2 11A3F-11A46 11A9A-11A9C 11A9E-11AA2 "
    "11C41-11C45 11C70-11C71 11EF7-11EF8 11FFF 12FF1-12FF2 16E97-16E9A 16FE2 1E95E-1E95F")
_OLD_PUNCTUATION = _chars("166D 111C9")  # punctuation in 8.0, since reclassified
_NEW_NONSPACING_MARKS = _chars(  # Mn since 8.0: accent stripping keeps them
    "07FD 0898-089F 08CA-08E1 09FE 0AFA-0AFF 0B55 0C04 0C3C 0D00 0D3B-0D3C 0D81 0EBA 180F 1885-1886 "
    "1ABF-1ACE 1DF6-1DFB A82C A8C5 A8FF A9BD 10D24-10D27 10EAB-10EAC 10F46-10F50 10F82-10F85 11070 "
    "11073-11074 110C2 111C9 111CF 1123E 1133B 11438-1143F 11442-11444 11446 1145E 1182F-11837 "
    "11839-1183A 1193B-1193C 1193E 11943 119D4-119D7 119DA-119DB 119E0 11A01-11A0A 11A33-11A38 "
    "11A3B-11A3E 11A47 11A51-11A56 11A59-11A5B 11A8A-11A96 11A98-11A99 11C30-11C36 11C38-11C3D 11C3F "
    "11C92-11CA7 11CAA-11CB0 11CB2-11CB3 11CB5-11CB6 11D31-11D36 11D3A 11D3C-11D3D 11D3F-11D45 11D47 "
    "11D90-11D91 11D95 11D97 11EF3-11EF4 16F4F 16FE4 1CF00-1CF2D 1CF30-1CF46 1E000-1E006 1E008-1E018 "
    "1E01B-1E021 1E023-1E024 1E026-1E02A 1E130-1E136 1E2AE 1E2EC-1E2EF 1E944-1E94A")
_OLD_NONSPACING_MARKS = _chars("1734")  # Mn in 8.0, Mc since: accent stripping drops it
_NEW_DECOMPOSITIONS = _chars("11938")  # NFD leaves it whole
_NEW_LOWERCASE = _lowercase_table(  # lowercase pairs newer than Python's tables
    "1C89>1C8A A7CB>0264 A7CC>A7CD A7CE>A7CF A7D2>A7D3 A7D4>A7D5 A7DA>A7DB A7DC>019B "
    "10D50-10D65>10D70 16EA0-16EB8>16EBB")

# ---------------------------------------------------------------------------------------------------
# Stage 1: basic tokenization.


def is_whitespace(ch: str) -> bool:
    """A space for BERT: tab, newline, carriage return and Unicode White_Space (U+00A0, U+3000, ...).

    Python's isspace() also counts U+001C..U+001F, which are control characters to BERT.
    """
    return ch.isspace() and ch not in "\x1c\x1d\x1e\x1f"


def is_control(ch: str) -> bool:
    """A character BERT deletes: categories Cc, Cf, Co, Cs, except tab, newline and carriage return.

    Unassigned code points (Cn) are kept: the Rust tokenizer keeps them (and they become [UNK]).
    """
    if ch in "\t\n\r" or ch in _NEW_FORMAT_CHARS:
        return False
    return unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs")


@functools.cache
def is_punctuation(ch: str) -> bool:
    """A word of its own: Unicode punctuation (P*) and every printable ASCII character that is not a
    letter or digit, so `$`, `+`, `^` and `` ` `` too."""
    if ch.isascii():
        return ch.isprintable() and not ch.isalnum() and ch != " "
    if ch in _OLD_PUNCTUATION:
        return True
    return unicodedata.category(ch).startswith("P") and ch not in _NEW_PUNCTUATION


def is_chinese_char(ch: str) -> bool:
    """A CJK ideograph (the CJK Unified Ideographs blocks and their compatibility blocks).

    Hangul, Hiragana and Katakana are not: those scripts put spaces between words.
    """
    cp = ord(ch)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF  # the Rust tables skip 2B820..2B91F
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def is_nonspacing_mark(ch: str) -> bool:
    """A combining mark (category Mn), what accent stripping removes after NFD."""
    if ch in _OLD_NONSPACING_MARKS:
        return True
    return unicodedata.category(ch) == "Mn" and ch not in _NEW_NONSPACING_MARKS


def clean_char(ch: str, split_chinese: bool) -> str:
    """Cleaning: '' for a control character (deleted), ' ' for whitespace, ' 中 ' for a CJK
    ideograph (when `split_chinese`), else the character itself."""
    if ch == "\ufffd" or is_control(ch):
        return ""
    if is_whitespace(ch):
        return " "
    return f" {ch} " if split_chinese and is_chinese_char(ch) else ch


def decompose(ch: str) -> str:
    """The canonical decomposition (NFD) of one character: 'é' -> 'e' + U+0301."""
    return ch if ch in _NEW_DECOMPOSITIONS else unicodedata.normalize("NFD", ch)


def strip_accents(text: str) -> str:
    """Decompose and drop the combining marks: 'é' -> 'e', 'Å' -> 'A'."""
    return "".join(c for d in map(decompose, text) for c in d if not is_nonspacing_mark(c))


def lowercase(text: str) -> str:
    """Lowercase character by character, as Rust does: no final-sigma rule, so 'Σ' is always 'σ'."""
    return "".join(_NEW_LOWERCASE.get(c) or c.lower() for c in text)


def normalize_char(ch: str, *, lower: bool, strip: bool, split_chinese: bool) -> str:
    """What BERT's normalizer turns one character into: '' (deleted), ' ' (a space), or characters.

    The steps run in the Rust order: clean, space out CJK, strip accents, lowercase.
    """
    out = clean_char(ch, split_chinese)
    if strip:
        out = strip_accents(out)
    return lowercase(out) if lower else out


def canonical_order(chars: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """NFD's canonical reordering of (character, payload) pairs: every run of combining marks
    (combining class > 0) sorted, stably, by combining class."""
    by_class = lambda item: unicodedata.combining(item[0])  # noqa: E731
    out, run = [], []
    for item in chars:
        if by_class(item):
            run.append(item)
        else:
            out += sorted(run, key=by_class) + [item]
            run = []
    return out + sorted(run, key=by_class)


@functools.cache
def keeps_combining_mark(ch: str) -> bool:
    """Whether accent stripping leaves a combining mark (class > 0 but not Mn, like U+1D165) from
    `ch`: only then can canonical reordering change what the normalizer gives."""
    return any(unicodedata.combining(c) and not is_nonspacing_mark(c) for c in decompose(ch))


_ASCII_WORDS = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9 ]")


def pre_tokenize(text: str) -> list[tuple[int, int]]:
    """Split normalized text into words: at spaces, and around every punctuation character.

    Returns (start, end) spans. Example: "don't stop" -> "don", "'", "t", "stop".
    """
    if text.isalnum():  # fast path: one plain word
        return [(0, len(text))]
    if text.isascii():  # fast path: normalized ASCII holds only letters, digits, punctuation and spaces
        return [m.span() for m in _ASCII_WORDS.finditer(text)]
    spans, start = [], None
    for i, ch in enumerate(text):
        if ch == " " or is_punctuation(ch):
            if start is not None:
                spans.append((start, i))
                start = None
            if ch != " ":
                spans.append((i, i + 1))
        elif start is None:
            start = i
    if start is not None:
        spans.append((start, len(text)))
    return spans


# ---------------------------------------------------------------------------------------------------
# Stage 2: WordPiece.


def wordpiece(word: str, vocab: dict[str, int] | set[str], *, unk_token: str = "[UNK]",
              max_input_chars_per_word: int = 100, longest_piece: int | None = None) -> list[tuple[str, int, int]]:
    """Split one word into vocabulary pieces, greedy longest-match-first: [(piece, start, end)].

    "embeddings" -> em ##bed ##ding ##s. A word that cannot be split, or is longer than
    `max_input_chars_per_word` characters, is one `[UNK]`. `longest_piece` (the length of the
    longest vocabulary entry) only saves trying substrings that cannot be in the vocabulary.
    """
    if len(word) > max_input_chars_per_word:
        return [(unk_token, 0, len(word))]
    pieces, start = [], 0
    while start < len(word):
        end = len(word) if longest_piece is None else min(len(word), start + longest_piece)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        else:
            return [(unk_token, 0, len(word))]
        pieces.append((piece, start, end))
        start = end
    return pieces


# ---------------------------------------------------------------------------------------------------
# Encodings.


@dataclass(slots=True)
class Encoding:
    """One encoded input, as the Rust tokenizer's `Encoding`."""

    ids: list[int]
    tokens: list[str]
    type_ids: list[int]
    attention_mask: list[int]
    offsets: list[tuple[int, int]]  # character span in its segment's original text; (0, 0) for [CLS]/[SEP]
    word_ids: list[int | None]  # pre-tokenizer word index (restarts in the second segment); None for [CLS]/[SEP]
    sequence_ids: list[int | None]  # 0 / 1 for the first / second segment; None for [CLS]/[SEP]
    special_tokens_mask: list[int]  # 1 for the [CLS]/[SEP] the template adds
    overflowing: list[Encoding] = field(default_factory=list)  # further windows when truncation cut tokens

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Batch:
    """Encodings padded into rectangular int64 arrays, ready for the model."""

    input_ids: np.ndarray  # (batch, seq), padded with pad_token_id
    token_type_ids: np.ndarray  # (batch, seq)
    attention_mask: np.ndarray  # (batch, seq), 1 for real tokens
    encodings: list[Encoding]  # unpadded, one per input, in input order


@dataclass(slots=True)
class _Segment:
    """The tokens of one text before the template adds [CLS]/[SEP]."""

    ids: list[int]
    tokens: list[str]
    offsets: list[tuple[int, int]]
    words: list[int]

    def __getitem__(self, window: tuple[int, int]) -> _Segment:
        if window == (0, len(self.ids)):
            return self
        s = slice(*window)
        return _Segment(self.ids[s], self.tokens[s], self.offsets[s], self.words[s])

    @staticmethod
    def join(parts: list[_Segment]) -> _Segment:
        """Consecutive parts of one text as one segment: word indices run on from part to part."""
        if len(parts) == 1:
            return parts[0]
        first_words = itertools.accumulate((part.words[-1] + 1 if part.words else 0 for part in parts), initial=0)
        return _Segment(ids=[i for part in parts for i in part.ids], tokens=[t for part in parts for t in part.tokens],
                        offsets=[o for part in parts for o in part.offsets],
                        words=[first + w for first, part in zip(first_words, parts) for w in part.words])


_NO_TOKENS = _Segment([], [], [], [])


def windows(length: int, max_len: int, stride: int) -> list[tuple[int, int]]:
    """The token windows truncation keeps: [0, max_len), then windows of `max_len` tokens, each
    overlapping the previous one by `stride`, until the end (as Rust's `Encoding.truncate`)."""
    if length <= max_len:
        return [(0, length)]
    if max_len == 0:
        return [(0, 0), (0, length)]
    if stride >= max_len:
        raise ValueError(f"stride ({stride}) must be smaller than the window it overlaps ({max_len} tokens "
                         f"once the special tokens are taken out of max_length)")
    step = max_len - stride
    return [(start, min(start + max_len, length)) for start in range(0, length - max_len + step, step)]


def truncated_lengths(len_a: int, len_b: int | None, budget: int, strategy: str) -> tuple[int, int | None]:
    """How many tokens of A and B fit in `budget`, by transformers' truncation strategies."""
    if len_a + (len_b or 0) <= budget:
        return len_a, len_b
    excess = len_a + (len_b or 0) - budget
    if strategy == "longest_first":
        if len_b is None:
            return budget, None
        short, long_ = sorted((len_a, len_b))  # the Rust arithmetic: keep the shorter whole if it fits
        long_ = short if short > budget else max(short, budget - short)
        if short + long_ > budget:
            short, long_ = budget // 2, budget // 2 + budget % 2
        return (short, long_) if len_a <= len_b else (long_, short)
    if strategy == "only_second" and len_b is None:
        raise ValueError("truncation='only_second' needs a second sequence")
    target = len_a if strategy == "only_first" else len_b
    if target <= excess:
        raise ValueError(f"truncation={strategy!r} cannot fit max_length: the sequence it may cut has "
                         f"{target} tokens but {excess} must go")
    return (len_a - excess, len_b) if strategy == "only_first" else (len_a, len_b - excess)


# ---------------------------------------------------------------------------------------------------
# The tokenizer.

_STRATEGIES = ("longest_first", "only_first", "only_second", "do_not_truncate")
# Runs of text between spaces. Python's \s also matches \x0b \x0c \x1c-\x1f \x85: control
# characters for BERT, deleted, so they never separate words.
_CHUNKS = re.compile(r"(?:[^\s]|[\x0b\x0c\x1c-\x1f\x85])+")


def load_vocab(path: str | os.PathLike) -> dict[str, int]:
    """vocab.txt: one token a line, the line number is the id (a repeated token keeps its last id)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"vocabulary file not found: {path}")
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        raise ValueError(f"vocabulary file is empty: {path}")
    return {token: i for i, token in enumerate(lines)}


@contextlib.contextmanager
def _gc_paused():
    """Encodings hold no reference cycles, so the collector has nothing to find while a batch is made;
    left on, it walks every list already made, again and again (half the time of a large batch)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Memo(dict):
    """A dict that fills in a missing key with fn(key), and starts afresh once it holds `max_size`."""

    def __init__(self, fn, max_size: int = 1 << 17):
        super().__init__()
        self.fn, self.max_size = fn, max_size

    def __missing__(self, key):
        if len(self) >= self.max_size:
            self.clear()
        self[key] = value = self.fn(key)
        return value


class _Chunk(NamedTuple):
    """The token ids of a whitespace-free run of text; spans and word indices are relative to it."""

    ids: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]
    words: tuple[int, ...]
    n_words: int


# Stage 2's memo maps a word (on the fast path, with the whitespace before it) to its tokens as one
# flat tuple of _FIELDS values per token: its id, its string, 1 if it starts the word (else 0), the
# characters from the previous token's end (or the word's start) to its start, and its length.
# One object per word for the collector to count; and on the fast path, where the words tile the
# text, a text's tokens are one list that slices apart into ids and strings, whose word starts add
# up to word indices, and whose gaps and lengths add up to spans.
_FIELDS = 5
_flat = itertools.chain.from_iterable


def _spans_of(fields: list, start: int = 0) -> list[tuple[int, int]]:
    """The character spans of consecutive tokens, from their fields, counting from `start`.
    Empties `fields` of all but the gaps and lengths."""
    del fields[0::_FIELDS], fields[0::_FIELDS - 1], fields[0::_FIELDS - 2]  # ids, strings, word starts
    bounds = itertools.accumulate(fields, initial=start)
    next(bounds)  # start itself; then the start and end of each token in turn
    return list(zip(bounds, bounds))


# The fast path's text: ASCII that normalizes character for character, printable or the whitespace
# \t \n \r (which becomes a space); lowercased if at all. Its words, each with the whitespace before
# it, tile it: "a  (b)" -> "a", "  (", "b", ")".
_ASCII_SPACES = " \t\n\r"
_PLAIN_ASCII = re.compile(r"[ -~\t\n\r]*")
_SPACED_ASCII_WORDS = re.compile(r"[ \t\n\r]*(?:[A-Za-z0-9]+|[^A-Za-z0-9 \t\n\r])")


def _is_plain_ascii(text: str) -> bool:
    """Whether `text` is the fast path's."""
    return text.isascii() and (text.isprintable() or _PLAIN_ASCII.fullmatch(text) is not None)


class Tokenizer:
    """BERT's WordPiece tokenizer: `encode(text)` gives the ids, offsets and word ids of transformers'
    Rust-backed `BertTokenizer`, built from the same vocab.txt."""

    def __init__(self, vocab_path: str | os.PathLike, *, do_lower_case: bool = True, strip_accents: bool | None = None,
                 tokenize_chinese_chars: bool = True, never_split: Sequence[str] | None = None,
                 unk_token: str = "[UNK]", sep_token: str = "[SEP]", pad_token: str = "[PAD]",
                 cls_token: str = "[CLS]", mask_token: str = "[MASK]", max_input_chars_per_word: int = 100,
                 model_max_length: int | None = None):
        self.vocab = load_vocab(vocab_path)
        self.do_lower_case = do_lower_case
        self.strip_accents = do_lower_case if strip_accents is None else strip_accents  # None follows lowercasing
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.unk_token, self.sep_token, self.pad_token = unk_token, sep_token, pad_token
        self.cls_token, self.mask_token = cls_token, mask_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self.model_max_length = model_max_length
        # Special tokens are matched whole in the raw text, never normalized or split; like
        # transformers, a special token missing from the vocabulary gets the next free id.
        self.special_tokens = list(dict.fromkeys([unk_token, sep_token, pad_token, cls_token, mask_token,
                                                  *(never_split or ())]))
        next_id = max(self.vocab.values()) + 1
        for token in self.special_tokens:
            if token not in self.vocab:
                self.vocab[token], next_id = next_id, next_id + 1
        self.vocab_size = len(self.vocab)
        self.unk_token_id, self.sep_token_id, self.pad_token_id = (self.vocab[t] for t in (unk_token, sep_token, pad_token))
        self.cls_token_id, self.mask_token_id = self.vocab[cls_token], self.vocab[mask_token]
        self._special_ids = {self.vocab[t] for t in self.special_tokens}
        self._id_to_token = {i: t for t, i in self.vocab.items()}
        self._special = re.compile("|".join(map(re.escape, sorted(self.special_tokens, key=len, reverse=True))))
        self._longest_piece = max(map(len, self.vocab))
        # Memos of each character's normalization, each word's pieces and each whitespace-free chunk's
        # tokens: text repeats its words, so most have been seen before.
        self._normalized = _Memo(functools.partial(normalize_char, lower=do_lower_case, strip=self.strip_accents,
                                                   split_chinese=tokenize_chinese_chars))
        self._chunks = _Memo(self._tokenize_chunk)
        self._words = _Memo(self._tokenize_word)
        self._cls = _Segment([self.cls_token_id], [cls_token], [(0, 0)], [None])
        self._sep = _Segment([self.sep_token_id], [sep_token], [(0, 0)], [None])

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, *, revision: str | None = None,
                        cache_dir: str | os.PathLike | None = None) -> Tokenizer:
        """The tokenizer of a model directory or hub id: vocab.txt, with the options of
        tokenizer_config.json and special_tokens_map.json when present."""
        from .hub import model_dir

        directory = model_dir(name_or_path, weights=False, revision=revision, cache_dir=cache_dir)
        config = {}
        for name in ("tokenizer_config.json", "special_tokens_map.json"):
            if (directory / name).is_file():
                config.update(json.loads((directory / name).read_text(encoding="utf-8")))
        content = lambda token: token["content"] if isinstance(token, dict) else token  # AddedToken dicts
        options = {key: config[key] for key in ("do_lower_case", "strip_accents", "tokenize_chinese_chars")
                   if key in config}
        options |= {key: content(config[key]) for key in ("unk_token", "sep_token", "pad_token", "cls_token",
                                                          "mask_token") if config.get(key) is not None}
        never_split = [*(config.get("never_split") or ()), *map(content, config.get("additional_special_tokens") or ())]
        max_length = config.get("model_max_length")
        return cls(directory / "vocab.txt", never_split=never_split or None, **options,
                   model_max_length=max_length if isinstance(max_length, int) and max_length < 10**12 else None)

    # -- text to tokens ------------------------------------------------------------------------------

    def normalize(self, text: str) -> tuple[str, Sequence[int]]:
        """Stage 1a: the normalized text, and for each of its characters the index of the original
        character it came from."""
        if text.isascii() and text.isprintable():  # fast path: lowercasing maps one char to one char
            return (text.lower() if self.do_lower_case else text), range(len(text))
        if self.strip_accents and any(map(keeps_combining_mark, text)):
            return self._normalize_reordering(text)
        pieces = list(map(self._normalized.__getitem__, text))
        return "".join(pieces), [i for i, piece in enumerate(pieces) for _ in piece]

    def _normalize_reordering(self, text: str) -> tuple[str, list[int]]:
        """`normalize` the long way, for text in which NFD may reorder a mark that stays. The Rust
        normalizer hands out alignments by position, so a moved mark takes the origin of the
        character that stood in its place."""
        cleaned = [(c, i) for i, ch in enumerate(text) for c in clean_char(ch, self.tokenize_chinese_chars)]
        decomposed = canonical_order([(d, j > 0) for c, _ in cleaned for j, d in enumerate(decompose(c))])
        chars, origin, k = [], [], -1
        for ch, inserted in decomposed:
            k += not inserted  # a decomposition's first character takes the next position
            if not is_nonspacing_mark(ch):
                out = lowercase(ch) if self.do_lower_case else ch
                chars.append(out)
                origin += [cleaned[k][1]] * len(out)
        return "".join(chars), origin

    def tokenize(self, text: str) -> list[str]:
        """The WordPiece tokens of `text`, without [CLS]/[SEP]."""
        return self._segment(text).tokens

    def _segment(self, text: str, name: str = "text") -> _Segment:
        """Tokens, ids, offsets and word indices of one text. Special tokens are cut out of the raw
        text first and make words of their own."""
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, not {type(text).__name__}")
        parts, pos = [], 0
        for special in self._special.finditer(text):
            token = special.group()
            parts += [self._tokenize_between(text, pos, special.start()),
                      _Segment([self.vocab[token]], [token], [special.span()], [0])]
            pos = special.end()
        parts.append(self._tokenize_between(text, pos, len(text)))
        return _Segment.join(parts)

    def _tokenize_between(self, text: str, pos: int, end: int) -> _Segment:
        """Both stages on text[pos:end], which holds no special token: at once on plain ASCII (the fast
        path), else whitespace-free chunk by chunk, each memoized."""
        part = text[pos:end]
        if _is_plain_ascii(part):
            return self._tokenize_ascii(part, pos)
        if part.isprintable():  # no whitespace but ' ', no control characters
            runs = part.split(" ")  # '' between two spaces: a chunk without tokens
            starts = map(operator.add, itertools.accumulate(map(len, runs), initial=0), itertools.count(pos))
            chunks = list(zip(starts, map(self._chunks.__getitem__, runs)))
        else:
            chunks = [(pos + m.start(), self._chunks[m.group()]) for m in _CHUNKS.finditer(part)]
        first_words = itertools.accumulate((chunk.n_words for _, chunk in chunks), initial=0)
        ids = [i for _, chunk in chunks for i in chunk.ids]
        return _Segment(ids, [self._id_to_token[i] for i in ids],
                        offsets=[(start + s, start + e) for start, chunk in chunks for s, e in chunk.spans],
                        words=[first + w for (_, chunk), first in zip(chunks, first_words) for w in chunk.words])

    def _tokenize_ascii(self, text: str, pos: int) -> _Segment:
        """Fast path: both stages at once on ASCII that normalizes character for character. Its words,
        each with the whitespace before it, tile the text, so their memoized tokens join up without a
        Python step per token."""
        text = text.lower() if self.do_lower_case else text
        fields = list(_flat(map(self._words.__getitem__, _SPACED_ASCII_WORDS.findall(text))))
        ids, tokens, word_starts = fields[0::_FIELDS], fields[1::_FIELDS], fields[2::_FIELDS]
        words = list(itertools.accumulate(word_starts, initial=-1))  # each token's word: word starts so far - 1
        del words[0]
        return _Segment(ids, tokens, _spans_of(fields, pos), words)

    def _tokenize_chunk(self, chunk: str) -> _Chunk:
        """Both stages on a whitespace-free run of text: normalize, split into words, WordPiece."""
        if _is_plain_ascii(chunk):  # (in text that is not all plain ASCII)
            seg = self._tokenize_ascii(chunk, 0)
            return _Chunk(tuple(seg.ids), tuple(seg.offsets), tuple(seg.words), seg.words[-1] + 1 if seg.words else 0)
        text, origin = self.normalize(chunk)
        spans = pre_tokenize(text)
        ids, offsets, words = [], [], []
        for w, (start, end) in enumerate(spans):
            fields = self._words[text[start:end]]
            ids += fields[0::_FIELDS]
            offsets += [(origin[s], origin[e - 1] + 1) for s, e in _spans_of(list(fields), start)]
            words += [w] * (len(fields) // _FIELDS)
        return _Chunk(tuple(ids), tuple(offsets), tuple(words), len(spans))

    def _tokenize_word(self, word: str) -> tuple:
        """Stage 2 on one word: its tokens' fields (see _FIELDS). Whitespace before the word (on the
        fast path) only puts its first token further."""
        bare = word.lstrip(_ASCII_SPACES)
        if bare != word:
            fields = self._words[bare]
            return (*fields[:3], fields[3] + len(word) - len(bare), *fields[4:])
        pieces = wordpiece(word, self.vocab, unk_token=self.unk_token, longest_piece=self._longest_piece,
                           max_input_chars_per_word=self.max_input_chars_per_word)
        return tuple(_flat((self.vocab[piece], piece, int(start == 0), 0, end - start) for piece, start, end in pieces))

    # -- encoding ------------------------------------------------------------------------------------

    def encode(self, text: str, pair: str | None = None, *, add_special_tokens: bool = True,
               max_length: int | None = None, truncation: bool | str = True, stride: int = 0) -> Encoding:
        """Token ids and their alignment for `text` (and `pair`): `[CLS] text [SEP] pair [SEP]`.

        With `max_length`, truncation (True = "longest_first", "only_first", "only_second"; False:
        none) cuts the segments to fit; the cut tokens come back in `.overflowing` as further windows,
        each overlapping the previous one by `stride` tokens.
        """
        strategy = self._strategy(truncation, max_length, stride)
        a = self._segment(text)
        b = None if pair is None else self._segment(pair, "pair")
        if strategy == "do_not_truncate":
            return self._template(a, b, add_special_tokens)
        n_special = (2 if b is None else 3) if add_special_tokens else 0
        if max_length < n_special:
            raise ValueError(f"max_length={max_length} leaves no room for the {n_special} special tokens")
        len_a, len_b = truncated_lengths(len(a.ids), None if b is None else len(b.ids), max_length - n_special,
                                         strategy)
        windows_a = windows(len(a.ids), len_a, stride)
        windows_b = [None] if b is None else windows(len(b.ids), len_b, stride)
        # In Rust's order (Encoding.merge_with): the first windows of A and B, then each further window
        # of A with every window of B, then the first window of A with each further window of B.
        combos = [(windows_a[0], windows_b[0])]
        combos += [(wa, wb) for wa in windows_a[1:] for wb in windows_b]
        combos += [(windows_a[0], wb) for wb in windows_b[1:]]
        first, *overflowing = (self._template(a[wa], None if b is None else b[wb], add_special_tokens)
                               for wa, wb in combos)
        first.overflowing = overflowing
        return first

    @staticmethod
    def _strategy(truncation: bool | str, max_length: int | None, stride: int) -> str:
        """The truncation strategy's name, "do_not_truncate" without max_length; checks the arguments."""
        if truncation is True:
            truncation = "longest_first"
        elif truncation is False:
            truncation = "do_not_truncate"
        if truncation not in _STRATEGIES:
            raise ValueError(f"unknown truncation {truncation!r}; use True, False or one of {', '.join(_STRATEGIES)}")
        if stride < 0:
            raise ValueError(f"stride must be >= 0, not {stride}")
        if max_length is None:
            return "do_not_truncate"
        if truncation != "do_not_truncate" and stride > max(0, max_length - 2):  # transformers' check: [CLS] A [SEP]
            raise ValueError(f"stride ({stride}) may not exceed max_length minus [CLS] and [SEP] ({max_length - 2})")
        return truncation

    def _template(self, a: _Segment, b: _Segment | None, add_special_tokens: bool) -> Encoding:
        """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`: type ids 0 up to the first [SEP], 1 after it;
        sequence ids None for the template's own tokens."""
        cls, sep = (self._cls, self._sep) if add_special_tokens else (_NO_TOKENS, _NO_TOKENS)
        b, sep_b = (_NO_TOKENS, _NO_TOKENS) if b is None else (b, sep)
        n_cls, n_a, n_sep, n_b, n_sep_b = len(cls.ids), len(a.ids), len(sep.ids), len(b.ids), len(sep_b.ids)
        return Encoding(ids=[*cls.ids, *a.ids, *sep.ids, *b.ids, *sep_b.ids],
                        tokens=[*cls.tokens, *a.tokens, *sep.tokens, *b.tokens, *sep_b.tokens],
                        type_ids=[0] * (n_cls + n_a + n_sep) + [1] * (n_b + n_sep_b),
                        attention_mask=[1] * (n_cls + n_a + n_sep + n_b + n_sep_b),
                        offsets=[*cls.offsets, *a.offsets, *sep.offsets, *b.offsets, *sep_b.offsets],
                        word_ids=[*cls.words, *a.words, *sep.words, *b.words, *sep_b.words],
                        sequence_ids=[*[None] * n_cls, *[0] * n_a, *[None] * n_sep, *[1] * n_b, *[None] * n_sep_b],
                        special_tokens_mask=[*[1] * n_cls, *[0] * n_a, *[1] * n_sep, *[0] * n_b, *[1] * n_sep_b])

    def encode_batch(self, texts: Sequence[str], pairs: Sequence[str] | None = None, *,
                     add_special_tokens: bool = True, max_length: int | None = None, truncation: bool | str = True,
                     padding: bool | str = "longest", stride: int = 0) -> Batch:
        """Encode `texts` (with `pairs`) and pad them into (batch, seq) int64 arrays.

        padding: "longest" (or True) pads to the longest encoding, "max_length" to `max_length`,
        False requires all encodings to have the same length.
        """
        for name, seq in (("texts", texts), ("pairs", pairs)):
            if seq is not None and (isinstance(seq, str) or not isinstance(seq, Sequence)):
                raise TypeError(f"{name} must be a list of str, not {type(seq).__name__}")
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(pairs)} pairs")
        if padding not in ("longest", "max_length", True, False):
            raise ValueError(f"unknown padding {padding!r}; use 'longest', 'max_length' or False")
        if padding == "max_length" and max_length is None:
            raise ValueError("padding='max_length' needs max_length")
        with _gc_paused():
            encodings = [self.encode(text, None if pairs is None else pairs[i], add_special_tokens=add_special_tokens,
                                     max_length=max_length, truncation=truncation, stride=stride)
                         for i, text in enumerate(texts)]
        lengths = [len(e) for e in encodings]
        width = max(lengths, default=0)
        if padding == "max_length":
            if width > max_length:
                raise ValueError(f"an encoding has {width} tokens, more than max_length={max_length}; "
                                 f"enable truncation")
            width = max_length
        elif padding is False and len(set(lengths)) > 1:
            raise ValueError(f"padding=False needs encodings of one length, got lengths {sorted(set(lengths))}")
        return self.pad(encodings, width)

    def pad(self, encodings: Sequence[Encoding], width: int | None = None) -> Batch:
        """Encodings right-padded with [PAD] to `width` (default: the longest) as (batch, seq) int64 arrays."""
        width = max((len(e) for e in encodings), default=0) if width is None else width
        input_ids = np.full((len(encodings), width), self.pad_token_id, dtype=np.int64)
        token_type_ids = np.zeros((len(encodings), width), dtype=np.int64)
        attention_mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            n = len(enc)
            input_ids[row, :n] = enc.ids
            token_type_ids[row, :n] = enc.type_ids
            attention_mask[row, :n] = 1
        return Batch(input_ids, token_type_ids, attention_mask, list(encodings))

    # -- ids back to text ----------------------------------------------------------------------------

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text from ids, as the Rust WordPiece decoder: `##` pieces glue to the previous token, other
        tokens get a space, except `.`, `,`, `!` and `?`. Ids outside the vocabulary are dropped."""
        return self.convert_tokens_to_string([self._id_to_token[i] for i in map(int, ids) if i in self._id_to_token
                                              and not (skip_special_tokens and i in self._special_ids)])

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        """Tokens joined as the Rust WordPiece decoder joins them (see `decode`): "##ing" glues on."""
        out = []
        for i, token in enumerate(tokens):
            if i > 0:
                token = token[2:] if token.startswith("##") else " " + token
            out.append(_cleanup(token))
        return "".join(out)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """The id of a token (the [UNK] id when it is not in the vocabulary), or of each token of a list."""
        if isinstance(tokens, str):
            return self.vocab.get(tokens, self.unk_token_id)
        return [self.vocab.get(t, self.unk_token_id) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        """The token of an id (the [UNK] token for an id outside the vocabulary), or of each id of a list."""
        if isinstance(ids, (int, np.integer)):
            return self._id_to_token.get(int(ids), self.unk_token)
        return [self._id_to_token.get(int(i), self.unk_token) for i in ids]

    def __repr__(self) -> str:
        return (f"Tokenizer(vocab_size={self.vocab_size}, do_lower_case={self.do_lower_case}, "
                f"strip_accents={self.strip_accents}, tokenize_chinese_chars={self.tokenize_chinese_chars})")


def _cleanup(token: str) -> str:
    """The Rust WordPiece decoder's clean-up, applied to each (space-prefixed) token."""
    for dirty, clean in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                         (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        token = token.replace(dirty, clean)
    return token
