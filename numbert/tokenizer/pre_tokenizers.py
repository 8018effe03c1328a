"""Pre-tokenizers: the second stage, how a normalized text is cut into words before the model sees them.

    BertPreTokenizer   BERT's: at whitespace, and around every punctuation character (basic.pre_tokenize)
    ByteLevel          GPT-2's split, then each word's UTF-8 bytes spelled as characters
    Metaspace          SentencePiece's: spaces become "▁", which starts each word
    WhitespaceSplit, Split, Digits, PreTokenizerSequence (tokenizer.json's Sequence)

Each takes one `Normalized` word to a list of them (the tokenizer applies it to the text between added
tokens; a Sequence applies each step to every word so far). Splitting follows the Rust crate's
`SplitDelimiterBehavior`: the matches of a pattern are removed, isolated (words of their own), merged with the
previous or the next piece, or made contiguous (runs of matches and runs of non-matches alternate). Empty
pieces are dropped.

ByteLevel (GPT-2, RoBERTa) splits with GPT-2's regular expression (`gpt2_split`), then spells each word's UTF-8
bytes with the printable characters of `BYTE_CHARS`, so a BPE vocabulary of 256 "characters" covers every text.
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
import unicodedata
from collections import abc
from typing import Literal, Protocol

from . import basic, unicode_tables
from .normalizers import IS_WHITESPACE, WHITESPACE, Normalized
from .patterns import Pattern

BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")


class PreTokenizer(Protocol):
    """A pre-tokenizer: a normalized text -> its words.

    Where it lets a text be cut (cuts.py): `break_chars`, the characters (a regular-expression class body) at
    which it may start a word; `starts_word(s)`, whether a word always starts at `s` (what a break's
    character became) whatever character other than whitespace comes before it; `carries(s)`, what `s`
    becomes for the pre-tokenizers after this one."""

    break_chars: str

    def __call__(self, word: Normalized) -> list[Normalized]: ...

    def starts_word(self, s: str) -> bool: ...

    def carries(self, s: str) -> str: ...


# Characters before which BERT always starts a word: whitespace (every character cleaning makes a space; all lie
# below U+3001) and ASCII punctuation, as a regular-expression class body; and CJK ideographs (words of their own
# when the normalizer spaces them out).
SEPARATORS = re.escape("".join(c for c in map(chr, range(0x3001)) if basic.clean_char(c) == " ")) + r"!-/:-@\[-`{-~"
CJK = (  # the CJK Unified Ideographs blocks and their compatibility blocks, as basic.is_chinese_char
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002b81f"
    "\U0002b920-\U0002ceaf\U0002f800-\U0002fa1f"
)


class BertPreTokenizer:
    """BERT's pre-tokenizer (basic.pre_tokenize): words between spaces, every punctuation character a word of its
    own."""

    break_chars = SEPARATORS + CJK

    def __call__(self, word: Normalized) -> list[Normalized]:
        return [word[start:end] for start, end in basic.pre_tokenize(word.text)]

    def starts_word(self, s: str) -> bool:
        return s[:1] == " " or (s != "" and basic.is_punctuation(s[0]))

    def carries(self, s: str) -> str:
        return s


def split(
    word: Normalized, matches: abc.Sequence[tuple[int, int]], behavior: str, invert: bool = False
) -> list[Normalized]:
    """`word` cut at the (start, end) `matches` of a pattern (in order, not overlapping), by `behavior`; with
    `invert`, the matches and the pieces between them trade places (Rust's Split `invert`)."""
    pieces, pos = [], 0  # [start, end, is_match]
    for start, end in matches:
        if start > pos:
            pieces.append([pos, start, invert])
        pieces.append([start, end, not invert])
        pos = end
    if pos < len(word.text):
        pieces.append([pos, len(word.text), invert])
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


class Split:
    """Split at the matches of a tokenizer.json pattern (patterns.py: Oniguruma's dialect and its iterator, so
    empty matches cut too), by `behavior` (with `invert`, the text between them counts as the matches); `kind`:
    what the matches hold (normalizers.pattern_kind)."""

    def __init__(
        self,
        pattern: Pattern,
        behavior: str,
        kind: Literal["whitespace", "no whitespace"] | None,
        invert: bool = False,
    ):
        self.pattern, self.behavior, self.invert = pattern, behavior, invert
        # a word starts at whitespace the pattern matches, unless the match joins the piece before it (inverted,
        # the text between matches is what counts: no break is claimed)
        self.cuts = kind == "whitespace" and behavior != "MergedWithPrevious" and not invert
        self.break_chars = WHITESPACE if self.cuts else ""

    def __call__(self, word: Normalized) -> list[Normalized]:
        return split(word, self.pattern.spans(word.text), self.behavior, self.invert)

    def starts_word(self, s: str) -> bool:
        return self.cuts and s != "" and self.pattern.fullmatch(s[0])

    def carries(self, s: str) -> str:
        return s


class WhitespaceSplit:
    """Words between whitespace."""

    break_chars = WHITESPACE

    def __call__(self, word: Normalized) -> list[Normalized]:
        return split(word, [m.span() for m in IS_WHITESPACE.finditer(word.text)], "Removed")

    def starts_word(self, s: str) -> bool:
        return IS_WHITESPACE.match(s[:1]) is not None

    def carries(self, s: str) -> str:
        return s


class Digits:
    """Numbers (characters of categories Nd, Nl, No, as Rust's char::is_numeric) split off: each on its own,
    or runs of them together."""

    break_chars = ""

    def __init__(self, individual: bool):
        self.individual = individual

    def __call__(self, word: Normalized) -> list[Normalized]:
        matches = [(i, i + 1) for i, c in enumerate(word.text) if is_numeric(c)]
        return split(word, matches, "Isolated" if self.individual else "Contiguous")

    def starts_word(self, s: str) -> bool:
        return False

    def carries(self, s: str) -> str:
        return s


class Metaspace:
    """SentencePiece's spaces: each " " becomes `replacement` ("▁"), which is prepended to a word that does not
    start with one ("always"; "first": only at the text's start) and starts the words it splits into."""

    def __init__(self, replacement: str, prepend_scheme: str, split: bool):
        self.replacement, self.prepend_scheme, self.split = replacement, prepend_scheme, split
        self.break_chars = " " + re.escape(replacement) if split else ""

    def __call__(self, word: Normalized) -> list[Normalized]:
        text, replacement = word.text, self.replacement
        if " " in text:  # one for one: each replacement keeps its space's span
            word = Normalized(text.replace(" ", replacement), word.spans)
        if (
            word.text
            and not word.text.startswith(replacement)
            and (self.prepend_scheme == "always" or (self.prepend_scheme == "first" and word.spans[0][0] == 0))
        ):
            word = Normalized(replacement + word.text, [word.spans[0], *word.spans])
        if not self.split:
            return [word]
        return split(word, [(i, i + 1) for i, c in enumerate(word.text) if c == replacement], "MergedWithNext")

    def starts_word(self, s: str) -> bool:
        return self.split and s[:1] in (" ", self.replacement)

    def carries(self, s: str) -> str:
        return s.replace(" ", self.replacement)


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
    (unicode_tables.py), and \s as Unicode's White_Space. The plain statement of the split, built in a few hundred
    milliseconds (every code point's category); `gpt2_split` finds the same words without it (the tests hold them
    equal)."""
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


_SPACE = r"\t\n\x0b\x0c\r "  # the ASCII members of Unicode's White_Space (not \x1c-\x1f)
ASCII_SPLIT = re.compile(  # gpt2_pattern() on ASCII text
    rf"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^{_SPACE}A-Za-z0-9]+|[{_SPACE}]+(?![^{_SPACE}])|[{_SPACE}]+"
)


class Gpt2Classes(dict):
    """str.translate's table from a character to one ASCII character GPT-2's split treats the same way: ASCII
    stands for itself; any other letter is "a", number "0", whitespace "\x0b", anything else "!" (none of them
    spells a contraction, none is " "). Each character is classed when first met; at most `size` are kept."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def __missing__(self, code: int) -> str:
        c = chr(code)
        if code < 128:
            classed = c
        elif unicodedata.category(c)[0] == "L" or c in unicode_tables.NEWER_LETTERS:
            classed = "a"
        elif unicodedata.category(c)[0] == "N" or c in unicode_tables.NEWER_NUMBERS:
            classed = "0"
        else:
            classed = "\x0b" if IS_WHITESPACE.match(c) else "!"
        if len(self) < self.size:
            self[code] = classed
        return classed


GPT2_CLASSES = Gpt2Classes(1 << 16)


def gpt2_split(text: str) -> list[str]:
    """GPT-2's words of `text`, gpt2_pattern()'s matches (they tile the text): ASCII_SPLIT's on the text's
    characters written as their classes (Gpt2Classes), so no pattern of all of Unicode's letters is ever built."""
    if text.isascii():
        return ASCII_SPLIT.findall(text)
    words, at = [], 0
    for classed in ASCII_SPLIT.findall(text.translate(GPT2_CLASSES)):
        words.append(text[at : at + len(classed)])
        at += len(classed)
    return words


class ByteLevel:
    """GPT-2's pre-tokenizer: a space prepended when `add_prefix_space` and the text does not start with one,
    GPT-2's split (when `use_regex`), then every character spelled as its UTF-8 bytes (each byte keeps its
    character's span)."""

    def __init__(self, add_prefix_space: bool, use_regex: bool):
        self.add_prefix_space, self.use_regex = add_prefix_space, use_regex
        # GPT-2's split starts a word at whitespace that follows anything else
        self.break_chars = WHITESPACE if use_regex else ""

    def __call__(self, word: Normalized) -> list[Normalized]:
        if self.add_prefix_space and word.text and not word.text.startswith(" "):
            word = Normalized(" " + word.text, [word.spans[0], *word.spans])
        if self.use_regex:  # GPT-2's words tile the text
            ends = list(itertools.accumulate(map(len, gpt2_split(word.text))))
            words = [word[start:end] for start, end in zip([0, *ends], ends)]
        else:
            words = [word]
        return [as_bytes(w) for w in words]

    def starts_word(self, s: str) -> bool:
        return self.use_regex and IS_WHITESPACE.match(s[:1]) is not None

    def carries(self, s: str) -> str:
        return as_bytes(Normalized.of(s)).text


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


class PreTokenizerSequence:
    """Several pre-tokenizers in turn, each splitting the words of the one before."""

    def __init__(self, steps: abc.Sequence[PreTokenizer]):
        self.steps = list(steps)
        self.break_chars = "".join(dict.fromkeys(step.break_chars for step in self.steps))

    def __call__(self, word: Normalized) -> list[Normalized]:
        words = [word]
        for step in self.steps:
            words = [piece for w in words for piece in step(w)]
        return words

    def starts_word(self, s: str) -> bool:
        """A word starts there if one step starts it (pre-tokenizers only split words, never join them), as the
        steps before that one spell the break."""
        for step in self.steps:
            if step.starts_word(s):
                return True
            s = step.carries(s)
        return False

    def carries(self, s: str) -> str:
        for step in self.steps:
            s = step.carries(s)
        return s
