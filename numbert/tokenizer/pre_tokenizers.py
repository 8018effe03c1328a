"""The pre-tokenizers of a tokenizer.json: how a normalized text is cut into words before the model sees them.

Each is a function from one `Normalized` word to a list of them (the pipeline applies it to every word so
far). Splitting follows the Rust crate's `SplitDelimiterBehavior`: the matches of a pattern are removed,
isolated (words of their own), merged with the previous or the next piece, or made contiguous (runs of
matches and runs of non-matches alternate). Empty pieces are dropped.

ByteLevel (GPT-2, RoBERTa) splits with GPT-2's regular expression, then spells each word's UTF-8 bytes with
the printable characters of `BYTE_CHARS`, so a BPE vocabulary of 256 "characters" covers every text.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Callable, Sequence

from . import unicode_tables
from .normalizers import IS_WHITESPACE, WHITESPACE, Normalized

PreTokenizer = Callable[[Normalized], list[Normalized]]
BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")


def split(word: Normalized, matches: Sequence[tuple[int, int]], behavior: str) -> list[Normalized]:
    """`word` cut at the (start, end) `matches` of a pattern (in order, not overlapping), by `behavior`."""
    pieces, pos = [], 0  # [start, end, is_match]
    for start, end in matches:
        if start > pos:
            pieces.append([pos, start, False])
        pieces.append([start, end, True])
        pos = end
    if pos < len(word.text):
        pieces.append([pos, len(word.text), False])
    if behavior == "Removed":
        pieces = [p for p in pieces if not p[2]]
    elif behavior == "MergedWithPrevious":  # a match joins the piece before it (unless that was a match)
        merged: list[list] = []
        for i, piece in enumerate(pieces):
            if piece[2] and merged and not pieces[i - 1][2]:
                merged[-1][1] = piece[1]
            else:
                merged.append(piece)
        pieces = merged
    elif behavior == "MergedWithNext":  # a match joins the piece after it (unless that is a match)
        merged = []
        for i in reversed(range(len(pieces))):
            if pieces[i][2] and merged and not pieces[i + 1][2]:
                merged[-1][0] = pieces[i][0]
            else:
                merged.append(pieces[i])
        pieces = merged[::-1]
    elif behavior == "Contiguous":  # runs of matches and runs of non-matches
        merged = []
        for piece in pieces:
            if merged and piece[2] == merged[-1][2]:
                merged[-1][1] = piece[1]
            else:
                merged.append(piece)
        pieces = merged
    return [word[start:end] for start, end, _ in pieces if end > start]


def pattern_split(pattern: re.Pattern, behavior: str) -> PreTokenizer:
    """Split at the (non-empty) matches of a regular expression."""

    def pre_tokenize(word: Normalized) -> list[Normalized]:
        return split(word, [m.span() for m in pattern.finditer(word.text) if m.end() > m.start()], behavior)

    return pre_tokenize


def whitespace_split(word: Normalized) -> list[Normalized]:
    """Words between whitespace (WhitespaceSplit)."""
    return split(word, [m.span() for m in IS_WHITESPACE.finditer(word.text)], "Removed")


def digits(individual: bool) -> PreTokenizer:
    """Numbers (characters of categories Nd, Nl, No, as Rust's char::is_numeric) split off: each on its own,
    or runs of them together."""

    def pre_tokenize(word: Normalized) -> list[Normalized]:
        matches = [(i, i + 1) for i, c in enumerate(word.text) if is_numeric(c)]
        return split(word, matches, "Isolated" if individual else "Contiguous")

    return pre_tokenize


def metaspace(replacement: str, prepend_scheme: str, split_words: bool) -> PreTokenizer:
    """SentencePiece's spaces: each " " becomes `replacement` ("▁"), which is prepended to a word that does not
    start with one ("always"; "first": only at the text's start) and starts the words it splits into."""

    def pre_tokenize(word: Normalized) -> list[Normalized]:
        text = word.text
        if " " in text:  # one for one: each replacement keeps its space's span
            word = Normalized(text.replace(" ", replacement), word.spans)
        if (
            word.text
            and not word.text.startswith(replacement)
            and (prepend_scheme == "always" or (prepend_scheme == "first" and word.spans[0][0] == 0))
        ):
            word = Normalized(replacement + word.text, [word.spans[0], *word.spans])
        if not split_words:
            return [word]
        return split(word, [(i, i + 1) for i, c in enumerate(word.text) if c == replacement], "MergedWithNext")

    return pre_tokenize


def is_numeric(c: str) -> bool:
    """Rust's char::is_numeric: categories Nd, Nl, No, by the Rust tables (newer than Python's)."""
    return unicodedata.category(c)[0] == "N" or c in unicode_tables.NEWER_NUMBERS


# --- ByteLevel ---------------------------------------------------------------------------------------------


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> character table: printable bytes stand for themselves, the others for U+0100 onward."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in table:
            table[b], extra = chr(256 + extra), extra + 1
    return table


BYTE_CHARS = bytes_to_unicode()
CHAR_BYTES = {c: b for b, c in BYTE_CHARS.items()}


@functools.lru_cache(maxsize=1)
def gpt2_pattern() -> re.Pattern:
    r"""GPT-2's split: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+, with \p{L}
    (letters) and \p{N} (numbers) spelled out from `unicodedata` and the Rust crate's newer ones
    (unicode_tables.py), and \s as Unicode's White_Space."""
    letters, numbers = [], []
    for code in range(sys.maxunicode + 1):
        c = chr(code)
        category = unicodedata.category(c)
        if category[0] == "L" or c in unicode_tables.NEWER_LETTERS:
            letters.append(code)
        elif category[0] == "N" or c in unicode_tables.NEWER_NUMBERS:
            numbers.append(code)
    L, N = _char_class(letters), _char_class(numbers)
    return re.compile(
        rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{WHITESPACE}{L}{N}]+|[{WHITESPACE}]+(?![^{WHITESPACE}])"
        rf"|[{WHITESPACE}]+"
    )


def _char_class(codes: list[int]) -> str:
    """A regular-expression class body for sorted code points, as ranges."""
    ranges, start = [], codes[0]
    for prev, code in zip(codes, codes[1:] + [-1]):
        if code != prev + 1:
            ranges.append(re.escape(chr(start)) + ("" if prev == start else "-" + re.escape(chr(prev))))
            start = code
    return "".join(ranges)


def byte_level(add_prefix_space: bool, use_regex: bool) -> PreTokenizer:
    """GPT-2's pre-tokenizer: a space prepended when `add_prefix_space` and the text does not start with one,
    GPT-2's split, then every character spelled as its UTF-8 bytes (each byte keeps its character's span)."""

    def pre_tokenize(word: Normalized) -> list[Normalized]:
        if add_prefix_space and word.text and not word.text.startswith(" "):
            word = Normalized(" " + word.text, [word.spans[0], *word.spans])
        words = pattern_split(gpt2_pattern(), "Isolated")(word) if use_regex else [word]
        return [as_bytes(w) for w in words]

    return pre_tokenize


def as_bytes(word: Normalized) -> Normalized:
    """The word's UTF-8 bytes, as BYTE_CHARS characters."""
    if word.text.isascii():
        return Normalized(word.text.translate(ASCII_BYTE_CHARS), word.spans)
    text, spans = [], []
    for c, span in zip(word.text, word.spans):
        encoded = c.encode("utf-8", "surrogatepass")  # a lone surrogate: its 3 bytes, as Python spells them
        text += [BYTE_CHARS[b] for b in encoded]
        spans += [span] * len(encoded)
    return Normalized("".join(text), spans)


ASCII_BYTE_CHARS = {b: c for b, c in BYTE_CHARS.items() if b < 128}


def sequence(steps: Sequence[PreTokenizer]) -> PreTokenizer:
    def pre_tokenize(word: Normalized) -> list[Normalized]:
        words = [word]
        for step in steps:
            words = [piece for w in words for piece in step(w)]
        return words

    return pre_tokenize
