"""The normalizers of a tokenizer.json (NFKC, Lowercase, Strip, Replace, Precompiled, ...), each keeping
track of where every character of its output came from.

A `Normalized` text is the output characters and, for each, the span (start, end) of original characters it
stands for. The Rust `tokenizers` crate aligns the same way (NormalizedString.transform_range):

- a character that replaces one keeps that character's span;
- a character that replaces several takes the span of the first one only;
- an inserted character takes the span of the character before it (the first character's, at the start).

Offsets of tokens are then (span of their first character's start, span of their last character's end).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, overload

from .precompiled import Precompiled
from .unicode_tables import NEW_LOWERCASE

# Rust's char::is_whitespace (Unicode White_Space): Python's str.isspace also counts U+001C..U+001F.
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
IS_WHITESPACE = re.compile(f"[{WHITESPACE}]")


@dataclass(slots=True)
class Normalized:
    """Normalized text: `text`, and `spans[i]` = (start, end) of the original characters text[i] stands for."""

    text: str
    spans: Sequence[tuple[int, int]]

    @staticmethod
    def of(text: str, start: int = 0) -> Normalized:
        """`text` as it is, its characters at start, start + 1, ... of the original."""
        return Normalized(text, Unchanged(start, len(text)))

    def __getitem__(self, s: slice) -> Normalized:
        return Normalized(self.text[s], self.spans[s])

    def transform(self, changes: Sequence[tuple[str, int]]) -> Normalized:
        """The text the Rust crate's change list describes: (character, change) where change 0 replaces the
        next character, 1 inserts, and -n replaces the next character and removes n more."""
        spans, pos = [], 0
        for _, change in changes:
            if change > 0:
                spans.append(self.spans[pos - 1] if pos > 0 else (0, 0))
            else:
                spans.append(self.spans[pos])
                pos += 1 - change
        return Normalized("".join(c for c, _ in changes), spans)

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The original span of characters [start, end) of the normalized text."""
        return self.spans[start][0], self.spans[end - 1][1]

    def rebuild(self, pieces: Sequence[tuple[str, int, int]]) -> Normalized:
        """A new text from (replacement, first, last): each replaces characters [first, last) of this one (the
        pieces cover it, in order) by the alignment rules above; first == last inserts, "" deletes."""
        text, spans = [], []
        for new, first, last in pieces:
            text.append(new)
            if last > first:  # the i-th new character: the i-th replaced one's span, the last one's past it
                spans += [self.spans[first + min(i, last - first - 1)] for i in range(len(new))]
            else:  # inserted
                spans += [self.spans[first - 1] if first > 0 else (0, 0)] * len(new)
        return Normalized("".join(text), spans)


class Unchanged(Sequence[tuple[int, int]]):
    """The spans of `size` characters as they are, at `start` of the original: (start + i, start + i + 1), each
    made when read (a normalizer that leaves a text alone costs no list of its spans)."""

    __slots__ = ("start", "size")

    def __init__(self, start: int, size: int):
        self.start, self.size = start, size

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(range(self.start, self.start + self.size), range(self.start + 1, self.start + self.size + 1))

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...

    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(i, slice):
            first, last, step = i.indices(self.size)
            starts = range(self.start + first, self.start + last, step)
            return list(zip(starts, map((1).__add__, starts)))
        if not -self.size <= i < self.size:
            raise IndexError("span index out of range")
        at = self.start + i % self.size
        return at, at + 1


def per_char(normalized: Normalized, transform: Callable[[str], str]) -> Normalized:
    """Each character replaced by transform(character) (one, several or none)."""
    text = normalized.text
    if transform(text) == text and all(transform(c) == c for c in text):
        return normalized
    return normalized.rebuild([(transform(c), i, i + 1) for i, c in enumerate(text)])


Form = Literal["NFC", "NFD", "NFKC", "NFKD"]
MAX_RUN = 64  # characters composed together at most (a run of combining marks is cut there)


def unicode_form(form: Form) -> Callable[[Normalized], Normalized]:
    """NFC, NFD, NFKC or NFKD, run by run: a run is a character and what composes with it."""

    def normalize(normalized: Normalized) -> Normalized:
        text = normalized.text
        if unicodedata.is_normalized(form, text):
            return normalized
        pieces, start = [], 0
        for end in range(1, len(text) + 1):
            if end == len(text) or (end - start >= MAX_RUN or _separable(form, text[start:end], text[end])):
                run = unicodedata.normalize(form, text[start:end])
                pieces += _aligned(run, start, end)
                start = end
        return normalized.rebuild(pieces)

    return normalize


def _separable(form: Form, run: str, c: str) -> bool:
    """Whether character `c` starts a new run after `run` (it neither composes nor reorders with it)."""
    if unicodedata.combining(c) or not unicodedata.is_normalized(form, c):
        return unicodedata.normalize(form, run + c) == unicodedata.normalize(form, run) + unicodedata.normalize(form, c)
    return not ("\u1100" <= run[-1] <= "\u11ff" or "\uac00" <= run[-1] <= "\ud7a3")  # Hangul jamo compose


def _aligned(run: str, start: int, end: int) -> list[tuple[str, int, int]]:
    """The normalized `run` of original characters [start, end) as rebuild pieces: character for character
    when the lengths agree, else the whole run at once."""
    if len(run) == end - start:
        return [(c, start + i, start + i + 1) for i, c in enumerate(run)]
    return [(run, start, end)]


def lowercase(normalized: Normalized) -> Normalized:
    """Each character lowercased on its own (so a final Σ becomes σ, as in Rust), with the pairs Rust's
    newer Unicode knows (unicode_tables.NEW_LOWERCASE)."""
    return per_char(normalized, lower)


def lower(c: str) -> str:
    return NEW_LOWERCASE.get(c) or c.lower()


def strip(left: bool, right: bool) -> Callable[[Normalized], Normalized]:
    """Whitespace removed from the left and/or right end (the text itself when there is none)."""

    def normalize(normalized: Normalized) -> Normalized:
        text, start, end = normalized.text, 0, len(normalized.text)
        while left and start < end and IS_WHITESPACE.match(text[start]):
            start += 1
        while right and end > start and IS_WHITESPACE.match(text[end - 1]):
            end -= 1
        return normalized if (start, end) == (0, len(text)) else normalized[start:end]

    return normalize


def replace(pattern: re.Pattern, content: str) -> Callable[[Normalized], Normalized]:
    """Every match of `pattern` replaced by `content`; its characters are inserted after the match, so they
    take the span of the match's last character (Rust's NormalizedString.replace)."""

    def normalize(normalized: Normalized) -> Normalized:
        text, pieces, pos = normalized.text, [], 0
        for match in pattern.finditer(text):
            pieces += [(text[i], i, i + 1) for i in range(pos, match.start())]
            pieces.append(("", match.start(), match.end()))
            pieces += [(c, match.end(), match.end()) for c in content]
            pos = match.end()
        if not pieces:
            return normalized
        pieces += [(text[i], i, i + 1) for i in range(pos, len(text))]
        return normalized.rebuild(pieces)

    return normalize


def precompiled(charsmap: Precompiled) -> Callable[[Normalized], Normalized]:
    """SentencePiece's compiled character map (see precompiled.py): each piece it maps, replaced."""

    def normalize(normalized: Normalized) -> Normalized:
        changes = charsmap.changes(normalized.text)
        return normalized if changes is None else normalized.transform(changes)

    return normalize


def sequence(steps: Sequence[Callable[[Normalized], Normalized]]) -> Callable[[Normalized], Normalized]:
    def normalize(normalized: Normalized) -> Normalized:
        for step in steps:
            normalized = step(normalized)
        return normalized

    return normalize
