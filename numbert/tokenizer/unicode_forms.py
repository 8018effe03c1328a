"""Unicode's normalization forms, NFD, NFKD, NFC and NFKC (UAX #15), with the alignment the Rust `tokenizers`
library gives each output character (its unicode-normalization-alignments crate).

The algorithm, on the whole text:

    decompose   each character into its full (canonical, or compatibility for NFK*) decomposition; the first
                character of a decomposition replaces the original one (change 0), the others are inserted (+1)
    reorder     each run of non-starters (combining class > 0) sorted by combining class, stably: the changes
                travel with their characters
    compose     (NFC, NFKC) each character composed with the last starter when a primary composite exists and
                nothing between them blocks it (a starter, or a mark of the same or a higher class); a composite
                of k characters whose changes sum to s has change s - (k - 1): it replaces one and removes k - 1

The (character, change) list is aligned as `normalizers.Normalized.transform` aligns it (`UnicodeForm.layout`): a
change 0 takes the span of the next original character, +1 that of the one before, -n the next one's and skips n
more. So the spans are positional, as Rust's are: after a reordering, a mark takes the span of the character that
stood at its place.

Only a few parts of a text ever change: `islands` finds them, so the rest is neither decomposed nor rebuilt.
The tables are Python's `unicodedata`, but for the characters the Rust crate's older tables (Unicode 9.0)
do not know (unicode_tables.NEW_COMBINING_MARKS, NEW_DECOMPOSITIONS, NEW_COMPATIBILITY_DECOMPOSITIONS):
there numbert gives Rust's answer, and elsewhere exactly `unicodedata.normalize`'s.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Literal

from .basic import combining_class  # the canonical combining class, by the Rust crate's tables
from .unicode_tables import NEW_COMPATIBILITY_DECOMPOSITIONS, NEW_DECOMPOSITIONS

Form = Literal["NFC", "NFD", "NFKC", "NFKD"]
FORMS: tuple[Form, ...] = ("NFC", "NFD", "NFKC", "NFKD")

# Hangul syllables are composed and decomposed by arithmetic (Unicode 3.12)
S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
S_COUNT = L_COUNT * V_COUNT * T_COUNT
LAST_DECOMPOSED = 0x2FFFF  # no character past this one decomposes, composes or has a combining class > 0


@functools.lru_cache(maxsize=1 << 16)
def decomposition(c: str, compatibility: bool) -> str:
    """The full decomposition of one character (canonical, or compatibility too), by the Rust crate's tables."""
    code = ord(c)
    if S_BASE <= code < S_BASE + S_COUNT:
        lead, rest = divmod(code - S_BASE, V_COUNT * T_COUNT)
        vowel, trail = divmod(rest, T_COUNT)
        return chr(L_BASE + lead) + chr(V_BASE + vowel) + (chr(T_BASE + trail) if trail else "")
    mapping = unicodedata.decomposition(c)
    if not mapping or c in NEW_DECOMPOSITIONS or (compatibility and c in NEW_COMPATIBILITY_DECOMPOSITIONS):
        return c
    if mapping.startswith("<"):  # a compatibility mapping: "<tag> 0020 0301"
        if not compatibility:
            return c
        mapping = mapping.split(" ", 1)[1]
    return "".join(decomposition(chr(int(part, 16)), compatibility) for part in mapping.split())


@functools.cache
def compositions() -> dict[tuple[str, str], str]:
    """(first, second) -> the primary composite of the two: every canonical decomposition into two characters but
    for the composition exclusions, singletons and non-starter decompositions (whose NFC is not themselves)."""
    pairs = {}
    for code in range(LAST_DECOMPOSED + 1):
        c = chr(code)
        mapping = unicodedata.decomposition(c)
        if not mapping or mapping.startswith("<") or c in NEW_DECOMPOSITIONS:
            continue
        parts = mapping.split()
        if len(parts) == 2 and unicodedata.normalize("NFC", c) == c:
            pairs[chr(int(parts[0], 16)), chr(int(parts[1], 16))] = c
    return pairs


def is_hangul(code: int) -> bool:
    """Whether the code point is a conjoining jamo (leading, vowel or trailing) or a syllable: Hangul composes."""
    return (
        L_BASE <= code < L_BASE + L_COUNT
        or V_BASE <= code < V_BASE + V_COUNT
        or T_BASE < code < T_BASE + T_COUNT
        or S_BASE <= code < S_BASE + S_COUNT
    )


def compose(first: str, second: str) -> str | None:
    """The primary composite of two characters, or None (Hangul syllables by arithmetic)."""
    a, b = ord(first), ord(second)
    if L_BASE <= a < L_BASE + L_COUNT and V_BASE <= b < V_BASE + V_COUNT:
        return chr(S_BASE + ((a - L_BASE) * V_COUNT + b - V_BASE) * T_COUNT)
    if S_BASE <= a < S_BASE + S_COUNT and (a - S_BASE) % T_COUNT == 0 and T_BASE < b < T_BASE + T_COUNT:
        return chr(a + b - T_BASE)
    return compositions().get((first, second))


@functools.lru_cache(maxsize=1 << 16)
def pieces(c: str, compatibility: bool) -> tuple[tuple[str, int, int], ...]:
    """The decomposition of one character as (character, change, combining class): the first replaces it (0),
    the others are inserted (+1)."""
    return tuple((d, 1 if k else 0, combining_class(d)) for k, d in enumerate(decomposition(c, compatibility)))


def decomposed(text: str, compatibility: bool) -> tuple[list[tuple[str, int]], list[int]]:
    """The text decomposed and canonically reordered, as (character, change), and each one's combining class."""
    out: list[tuple[str, int]] = []
    classes: list[int] = []
    pending = 0  # where the run of characters not yet sorted starts (at its starter)
    for original in text:
        for c, change, cc in pieces(original, compatibility):
            if cc == 0:
                if len(out) - pending > 1:
                    _reorder(out, classes, pending)
                pending = len(out)
            out.append((c, change))
            classes.append(cc)
    _reorder(out, classes, pending)
    return out, classes


def _reorder(out: list[tuple[str, int]], classes: list[int], start: int) -> None:
    """Sort out[start:] by combining class, stably (a starter at `start` stays first)."""
    tail = classes[start:]
    if any(a > b for a, b in zip(tail, tail[1:])):
        order = sorted(range(start, len(out)), key=classes.__getitem__)
        out[start:] = [out[i] for i in order]
        classes[start:] = [classes[i] for i in order]


def composed(chars: list[tuple[str, int]], classes: list[int]) -> list[tuple[str, int]]:
    """Canonical composition of a decomposed text, as the Rust crate runs it: a starter waits (the composee)
    while the characters after it compose with it or are kept aside, until a starter it does not compose with."""
    out: list[tuple[str, int]] = []
    composee: tuple[str, int] | None = None
    kept: list[tuple[str, int]] = []  # the characters after the composee that did not compose with it
    last_class = -1  # the class of the last character kept (-1: none)
    for (c, change), cc in zip(chars, classes):
        if composee is None:
            if cc == 0:
                composee = (c, change)
            else:
                out.append((c, change))
            continue
        if last_class >= cc:  # blocked from the composee (a starter always is, after a kept character)
            if cc == 0:
                out.append(composee)
                out += kept
                composee, kept, last_class = (c, change), [], -1
            else:
                kept.append((c, change))
                last_class = cc
            continue
        new = compose(composee[0], c)
        if new is not None:
            composee = (new, composee[1] + change - 1)
        elif cc == 0:  # (nothing kept aside: last_class is -1)
            out.append(composee)
            composee = (c, change)
        else:
            kept.append((c, change))
            last_class = cc
    if composee is not None:
        out.append(composee)
    return out + kept


def changes(form: Form, text: str) -> list[tuple[str, int]]:
    """The normalized text as (character, change) (see the module's docstring)."""
    chars, classes = decomposed(text, compatibility=form in ("NFKC", "NFKD"))
    return composed(chars, classes) if form in ("NFC", "NFKC") else chars


@functools.cache
def restless(form: Form) -> re.Pattern:
    """A run of characters that may change or move under `form`, or make a character before them change: those
    with a combining class, a decomposition, or (NFC, NFKC) a part in a composition (or Hangul). Every other
    character is a starter that stays as it is and composes with nothing, so the text on either side of it
    normalizes apart. (By Python's tables: a superset of the Rust crate's older ones, which only makes an island
    bigger.)"""
    compatibility, composing = form in ("NFKC", "NFKD"), form in ("NFC", "NFKC")
    parts = {ord(part) for pair in compositions() for part in pair} if composing else set()
    combining, mapping = unicodedata.combining, unicodedata.decomposition  # (a superset does no harm: a bigger island)
    codes = [
        code
        for code, c in zip(range(LAST_DECOMPOSED + 1), map(chr, range(LAST_DECOMPOSED + 1)))
        if combining(c)
        or ((m := mapping(c)) and (compatibility or m[0] != "<"))
        or code in parts
        or is_hangul(code)  # (syllables decompose by arithmetic: unicodedata.decomposition gives "")
    ]
    ranges, start = [], codes[0]
    for previous, code in zip(codes, [*codes[1:], -1]):
        if code != previous + 1:
            ranges.append(re.escape(chr(start)) + ("" if previous == start else "-" + re.escape(chr(previous))))
            start = code
    return re.compile(f"[{''.join(ranges)}]+")


def islands(form: Form, text: str) -> list[tuple[int, int]]:
    """The (start, end) of the parts of `text` that may change, each of which normalizes as a text of its own: the
    runs of restless characters (`restless`). The character before a run stays as it is and stays first (a starter
    that composes with nothing), and so does the one after it."""
    return [match.span() for match in restless(form).finditer(text)]


def normalize(form: Form, text: str) -> str:
    """`text` in `form`, as the Rust crate writes it (`unicodedata.normalize` but for the characters of its older
    tables)."""
    return "".join(c for c, _ in changes(form, text))
