"""Normalizers: the first stage, text -> normalized text, each character keeping track of where it came from.

A `Normalized` text is the output characters and, for each, the span (start, end) of original characters it
stands for. The Rust `tokenizers` crate aligns the same way (NormalizedString.transform_range):

- a character that replaces one keeps that character's span;
- a character that replaces several takes the span of the first one only;
- an inserted character takes the span of the character before it (the first character's, at the start).

Offsets of tokens are then (span of their first character's start, span of their last character's end).

    BertNormalizer   BERT's: clean, space out CJK, strip accents, lowercase (basic.normalize)
    NFC, NFD, ...    Unicode's forms (`UnicodeForm`)
    Lowercase        character by character, as Rust (no final sigma)
    Strip            whitespace off the ends
    Replace          a pattern's matches replaced by a string (patterns.py: Oniguruma's dialect, bounded)
    Precompiled      SentencePiece's compiled character map (precompiled.py)
    NormalizerSequence several in turn (tokenizer.json's Sequence)

Each also says what it does at a break (cuts.py): `at_break(text, at, char)` is what the character at a break
becomes when the text is normalized on either side of it apart, which then gives the whole text's
normalization there (but for the rules of a text's edges, such as Strip's, which reach no further than the
whitespace at an edge); an empty set when this normalizer may reach across the break.
"""

from __future__ import annotations

import re
import unicodedata
from collections import abc
from dataclasses import dataclass
from typing import Literal, Protocol, overload

from . import basic, unicode_forms
from .memo import Memo
from .patterns import Pattern
from .precompiled import CharsMap, break_class
from .unicode_forms import Form
from .unicode_tables import NEW_COMBINING_MARKS, NEW_COMPATIBILITY_DECOMPOSITIONS, NEW_DECOMPOSITIONS, NEW_LOWERCASE

# Rust's char::is_whitespace (Unicode White_Space): Python's str.isspace also counts U+001C..U+001F.
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
IS_WHITESPACE = re.compile(f"[{WHITESPACE}]")
ANY_SPACE = WHITESPACE + "\x1c-\x1f"  # whitespace to any stage: Unicode's, and Python's str.isspace (U+001C..U+001F)
NOTHING: frozenset[str] = frozenset()
# characters whose normalization Python's tables (Unicode 14) change where the Rust crate's (Unicode 9) do not
ONLY_RUST_CHANGES = re.compile(
    "[{}]".format(
        "".join(map(re.escape, sorted(NEW_COMBINING_MARKS | NEW_DECOMPOSITIONS | NEW_COMPATIBILITY_DECOMPOSITIONS)))
    )
)


class Normalizer(Protocol):
    """A normalizer: the text (and where each character came from) -> the normalized text."""

    def __call__(self, normalized: Normalized) -> Normalized: ...

    def at_break(self, text: str | None, at: int, char: str) -> frozenset[str]:
        """What `char`, the character at break `at` as the steps before this one left it, becomes when the text
        is normalized on either side of the break apart (cuts.py); empty when this normalizer may reach across
        it. `text`: the original text, given to the first normalizer only."""
        ...

    @property
    def lags(self) -> bool:
        """Whether `lag` may be more than 0."""
        ...

    def lag(self, text: str) -> int | None:
        """How many characters the offsets of a text's tokens lag behind their characters: 0 but for a map that
        deletes characters at a text's start without a trace (Precompiled, as Rust aligns it); None when too
        many to tell (precompiled.LAG_LIMIT: `text` may be cut past that)."""
        ...


@dataclass(slots=True)
class Normalized:
    """Normalized text: `text`, and `spans[i]` = (start, end) of the original characters text[i] stands for."""

    text: str
    spans: abc.Sequence[tuple[int, int]]

    @staticmethod
    def of(text: str, start: int = 0) -> Normalized:
        """`text` as it is, its characters at start, start + 1, ... of the original."""
        return Normalized(text, Unchanged(start, len(text)))

    def __getitem__(self, s: slice) -> Normalized:
        return Normalized(self.text[s], self.spans[s])

    def transform(self, changes: abc.Sequence[tuple[str, int]]) -> Normalized:
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

    def rebuild(self, pieces: abc.Sequence[tuple[str, int, int]]) -> Normalized:
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


class Unchanged(abc.Sequence[tuple[int, int]]):
    """The spans of `size` characters as they are, at `start` of the original: (start + i, start + i + 1), each
    made when read (a normalizer that leaves a text alone costs no list of its spans)."""

    __slots__ = ("start", "size")

    def __init__(self, start: int, size: int):
        self.start, self.size = start, size

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> abc.Iterator[tuple[int, int]]:
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


def per_char(normalized: Normalized, transform: abc.Callable[[str], str]) -> Normalized:
    """Each character replaced by transform(character) (one, several or none)."""
    text = normalized.text
    if transform(text) == text and all(transform(c) == c for c in text):
        return normalized
    return normalized.rebuild([(transform(c), i, i + 1) for i, c in enumerate(text)])


def is_space(c: str) -> bool:
    """Whether `c` is whitespace to any of the stages (ANY_SPACE)."""
    return _ANY_SPACE.match(c) is not None


_ANY_SPACE = re.compile(f"[{ANY_SPACE}]")


class BertNormalizer:
    """BERT's normalizer, `basic.normalize` with these options: clean (control characters deleted, whitespace
    made a space), CJK ideographs spaced out, accents stripped, lowercased; each output character keeps the span
    of the original one it came from. `strip_accents=None` follows `lowercase`, as in transformers."""

    def __init__(self, lowercase: bool = True, strip_accents: bool | None = None, handle_chinese_chars: bool = True):
        self.lowercase, self.handle_chinese_chars = lowercase, handle_chinese_chars
        self.strip_accents = lowercase if strip_accents is None else strip_accents

    def __call__(self, normalized: Normalized) -> Normalized:
        text, origin = basic.normalize(
            normalized.text, lower=self.lowercase, strip=self.strip_accents, split_chinese=self.handle_chinese_chars
        )
        spans = normalized.spans
        return Normalized(text, [spans[i] for i in origin])

    lags = False

    def lag(self, text: str) -> int | None:
        return 0

    def at_break(self, text: str | None, at: int, char: str) -> frozenset[str]:
        """Character by character but for accent stripping's reordering of combining marks, which stops at a
        base character: normalizing either side of a base character apart changes nothing."""
        if basic.combining_class(basic.decompose(char)[0]):
            return NOTHING
        return frozenset(
            [
                basic.normalize_char(
                    char, lower=self.lowercase, strip=self.strip_accents, split_chinese=self.handle_chinese_chars
                )
            ]
        )


MEMO_ISLAND = 64  # islands up to this long are memoized (words repeat; a flood of marks need not be kept)


class UnicodeForm:
    """NFC, NFD, NFKC or NFKD (unicode_forms.py), each output character aligned as the Rust crate aligns it. Only
    the parts of the text that may change are normalized (`unicode_forms.islands`), each as a text of its own."""

    def __init__(self, form: Form):
        self.form = form
        self.layouts = Memo(self.layout, 1 << 14)  # a short island -> its layout

    def layout(self, island: str) -> tuple[str, list[int]]:
        """The island normalized, and for each of its characters the island's character whose span it takes (the
        alignment of Normalized.transform; -1: the character before the island's)."""
        new, where, pos = [], [], 0
        for c, change in unicode_forms.changes(self.form, island):
            new.append(c)
            where.append(pos - 1 if change > 0 else pos)
            pos += 0 if change > 0 else 1 - change
        return "".join(new), where

    def __call__(self, normalized: Normalized) -> Normalized:
        form, text = self.form, normalized.text
        if text.isascii() or (unicodedata.is_normalized(form, text) and not ONLY_RUST_CHANGES.search(text)):
            return normalized
        texts: list[str] = []
        spans: list[tuple[int, int]] = []
        pos = 0
        for start, end in unicode_forms.islands(form, text):
            texts.append(text[pos:start])
            spans += normalized.spans[pos:start]
            island = text[start:end]
            new, where = self.layouts[island] if end - start <= MEMO_ISLAND else self.layout(island)
            texts.append(new)
            before = normalized.spans[start - 1] if start > 0 else (0, 0)
            old = normalized.spans[start:end]
            spans += [old[i] if i >= 0 else before for i in where]
            pos = end
        if pos == 0:
            return normalized
        texts.append(text[pos:])
        spans += normalized.spans[pos:]
        return Normalized("".join(texts), spans)

    lags = False

    def lag(self, text: str) -> int | None:
        return 0

    def at_break(self, text: str | None, at: int, char: str) -> frozenset[str]:
        """Whitespace is a starter that no decomposition starts with a mark and that composes with nothing: the text
        on either side of it normalizes apart (tests/test_tokenizer_unicode.py checks every whitespace character)."""
        return frozenset([unicode_forms.normalize(self.form, char)]) if is_space(char) else NOTHING


def lower(c: str) -> str:
    """One character lowercased as Rust does, with the pairs Rust's newer Unicode knows (NEW_LOWERCASE)."""
    return NEW_LOWERCASE.get(c) or c.lower()


class Lowercase:
    """Each character lowercased on its own (so a final Σ becomes σ, as in Rust)."""

    def __call__(self, normalized: Normalized) -> Normalized:
        return per_char(normalized, lower)

    lags = False

    def lag(self, text: str) -> int | None:
        return 0

    def at_break(self, text: str | None, at: int, char: str) -> frozenset[str]:
        return frozenset([lower(char)])


class Strip:
    """Whitespace removed from the left and/or right end (the text itself when there is none)."""

    def __init__(self, left: bool, right: bool):
        self.left, self.right = left, right

    def __call__(self, normalized: Normalized) -> Normalized:
        text, start, end = normalized.text, 0, len(normalized.text)
        while self.left and start < end and IS_WHITESPACE.match(text[start]):
            start += 1
        while self.right and end > start and IS_WHITESPACE.match(text[end - 1]):
            end -= 1
        return normalized if (start, end) == (0, len(text)) else normalized[start:end]

    lags = False

    def lag(self, text: str) -> int | None:
        return 0

    def at_break(self, text: str | None, at: int, char: str) -> frozenset[str]:
        """Only the ends change, and only their whitespace: the text before a break ends with a character that
        is not whitespace, and the whitespace the text from it loses is that edge's."""
        return frozenset([char])


# A regular expression whose every match is whitespace, one character or more: a run of the atoms " ", \s, \t,
# \n, \r, or classes of them, quantified (" {2,}", "\s+", "[ \t]+", ...)
_ATOM = r"(?: |\\s|\\t|\\n|\\r|\[(?: |\\s|\\t|\\n|\\r)+\])"
_QUANTIFIER = r"(?:[+*?]|\{\d+(?:,\d*)?\})[?+]?"
_WHITESPACE_REGEX = re.compile(f"(?:{_ATOM}{_QUANTIFIER}?)+")
_MAY_BE_EMPTY = re.compile(rf"(?:{_ATOM}(?:[*?]|\{{0(?:,\d*)?\}})[?+]?)+")


def pattern_kind(source: str, literal: bool) -> Literal["whitespace", "no whitespace"] | None:
    """What the matches of a tokenizer.json pattern hold: only whitespace (and at least one character), no
    whitespace, or either (None, also for any pattern too intricate to tell)."""
    if literal:
        if source and all(map(is_space, source)):
            return "whitespace"
        return "no whitespace" if source and not any(map(is_space, source)) else None
    if _WHITESPACE_REGEX.fullmatch(source) and not _MAY_BE_EMPTY.fullmatch(source):
        return "whitespace"
    return None


class Replace:
    """Every match of `pattern` replaced by `content`; its characters are inserted after the match, so they
    take the span of the match's last character (Rust's NormalizedString.replace). `kind`: what the matches
    hold (`pattern_kind`)."""

    def __init__(self, pattern: Pattern, content: str, kind: Literal["whitespace", "no whitespace"] | None):
        self.pattern, self.content, self.kind = pattern, content, kind

    def __call__(self, normalized: Normalized) -> Normalized:
        text, pieces, pos = normalized.text, [], 0
        for start, end in self.pattern.spans(text):  # empty matches too: the content is inserted there
            pieces += [(text[i], i, i + 1) for i in range(pos, start)]
            pieces.append(("", start, end))
            pieces += [(c, end, end) for c in self.content]
            pos = end
        if not pieces:
            return normalized
        pieces += [(text[i], i, i + 1) for i in range(pos, len(text))]
        return normalized.rebuild(pieces)

    lags = False

    def lag(self, text: str) -> int | None:
        return 0

    def at_break(self, text: str | None, at: int, char: str) -> frozenset[str]:
        """Matches of whitespace only never reach the character before a break; the break's whitespace may become
        the content. Matches without whitespace never reach the break's whitespace; their content must hold no
        whitespace (nor be empty), or it could bring whitespace next to the break."""
        if self.kind == "whitespace":
            return frozenset([char, self.content[:1]]) if is_space(char) else frozenset([char])
        if self.kind == "no whitespace" and self.content and not any(map(is_space, self.content)) and is_space(char):
            return frozenset([char])
        return NOTHING


class Precompiled:
    """SentencePiece's compiled character map (see precompiled.py): each piece it maps, replaced."""

    def __init__(self, charsmap: CharsMap):
        self.charsmap = charsmap

    def __call__(self, normalized: Normalized) -> Normalized:
        changes = self.charsmap.changes(normalized.text)
        return normalized if changes is None else normalized.transform(changes)

    lags = True

    def lag(self, text: str) -> int | None:
        return self.charsmap.lag(text)

    def at_break(self, text: str | None, at: int, char: str) -> frozenset[str]:
        """The map runs grapheme by grapheme, and a grapheme ends before whitespace; a break is one when the
        map keeps its whitespace as whitespace, does not delete the character before it or end it with
        whitespace, and the whitespace is a grapheme of its own (no mark on it). Looks at the original text:
        only as the first normalizer (`text` None: the text has changed, so nothing is known)."""
        if text is None or char != text[at] or not is_space(char):
            return NOTHING
        new = self.charsmap.transform[char]
        before = self.charsmap.transform[text[at - 1]]
        if not (new is None or (len(new) == 1 and is_space(new))) or (before is not None and not before[-1:].strip()):
            return NOTHING
        if at + 1 < len(text) and break_class[text[at + 1]] in ("Extend", "ZWJ", "SpacingMark"):
            return NOTHING
        return frozenset([char if new is None else new])


class NormalizerSequence:
    """Several normalizers in turn."""

    def __init__(self, steps: abc.Sequence[Normalizer]):
        self.steps = list(steps)

    def __call__(self, normalized: Normalized) -> Normalized:
        for step in self.steps:
            normalized = step(normalized)
        return normalized

    @property
    def lags(self) -> bool:
        return bool(self.steps) and self.steps[0].lags

    def lag(self, text: str) -> int | None:
        """The first step's: a later step's own would follow from a changed text, where no text is cut."""
        return self.steps[0].lag(text) if self.steps else 0

    def at_break(self, text: str | None, at: int, char: str) -> frozenset[str]:
        """Each step's answer for what the steps before made of the break's character; only the first sees the
        original text."""
        chars = frozenset([char])
        for i, step in enumerate(self.steps):
            chars = frozenset(
                new for c in chars for new in (step.at_break(text if i == 0 else None, at, c) if c else {c})
            )
            if not chars:
                return NOTHING
        return chars
