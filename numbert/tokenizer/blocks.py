"""Long texts in bounded memory: BERT's fast path (fast.py) on a text of any length, a block at a time.

A text is cut before whitespace and ASCII punctuation into blocks of about `size` characters. The
cuts are exact: a separator starts a new word, and it is a base character, so NFD's reordering of
combining marks never reaches across it. Each block is tokenized as a text of its own; its offsets
count from where it starts, and word indices run on from block to block.

A stretch of more than `size` characters holding no separator (a line of NULs, one enormous word, a
flood of combining marks) is streamed instead (`run_segment`): the characters cleaning deletes are
skipped by a regular expression, the rest is normalized a sub-block at a time, and words are put
together across sub-blocks, a word longer than `max_input_chars_per_word` being kept as its first
and last positions only (it is one [UNK]).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

import numpy as np

from .basic import clean_char, combining_class, decompose, is_punctuation
from .encoding import Segment
from .pre_tokenizers import SEPARATORS
from .words import FIELDS, spans_of, split_words

# Separators: characters that cleaning turns into a space, and ASCII punctuation: BERT starts a word at each
SEPARATOR = re.compile(f"[{SEPARATORS}]")


class FastStages(Protocol):
    """What the blocks need of the fast tokenizer (fast.py): its vocabulary and options, its word memo (a word
    -> its tokens' FIELDS), its normalizer, and its way with a short text."""

    vocab: dict[str, int]
    unk_token: str
    max_input_chars_per_word: int
    block_size: int
    strip: bool

    @property
    def words(self) -> Mapping[str, tuple]: ...

    def normalize(self, text: str) -> tuple[str, Sequence[int]]: ...

    def segment(self, text: str, pos: int = 0) -> Segment: ...


def blocks(text: str, size: int) -> Iterator[tuple[int, int, bool]]:
    """(start, end, is_run): consecutive pieces of `text`, each cut before a separator and about
    `size` characters long (at most 2 * size), or a run: a separator (or the text's start) followed
    by more than `size` characters that hold none."""
    start, n = 0, len(text)
    while start < n:
        found = SEPARATOR.search(text, start + size) if n - start > size else None
        end = found.start() if found else n
        if n - start <= size or end - start <= 2 * size:
            yield start, end, False
        else:  # no separator from the last one before start + size up to `end`
            run_start = max((m.start() for m in SEPARATOR.finditer(text, start, start + size)), default=start)
            if run_start > start:
                yield start, run_start, False
            yield run_start, end, True
        start = end


_DELETED_CATEGORIES = ("Cc", "Cf", "Co", "Cs", "So")  # cleaning deletes characters of these only (U+FFFD is So)


@functools.cache
def deleted_characters() -> tuple[re.Pattern, np.ndarray]:
    """The characters cleaning deletes (control characters and U+FFFD), as a regular expression
    that matches runs of them and as a table over code points, (0x110000,) bool."""
    categories = map(unicodedata.category, map(chr, range(0x110000)))
    candidates = [cp for cp, category in enumerate(categories) if category in _DELETED_CATEGORIES]
    deleted = [cp for cp in candidates if clean_char(chr(cp)) == ""]
    table = np.zeros(0x110000, bool)
    table[deleted] = True
    ranges, first = [], 0
    for i, cp in enumerate(deleted):
        if i + 1 == len(deleted) or deleted[i + 1] != cp + 1:
            ranges.append(re.escape(chr(deleted[first])) + ("" if first == i else "-" + re.escape(chr(cp))))
            first = i + 1
    return re.compile("[" + "".join(ranges) + "]+"), table


@functools.cache
def is_base(ch: str) -> bool:
    """Whether NFD's reordering stops at `ch`: its decomposition starts with a character of combining class 0."""
    return combining_class(decompose(ch)[0]) == 0


def kept_blocks(text: str, start: int, end: int, size: int, cut_anywhere: bool) -> Iterator[tuple[str, np.ndarray]]:
    """The characters of text[start:end] that cleaning keeps, about `size` at a time, each with its
    position in `text`: (characters, positions (n,) int64). A block ends before a base character
    (before any character when `cut_anywhere`: without accent stripping nothing is reordered), so
    each normalizes on its own as it would in the whole text."""
    pattern, table = deleted_characters()
    chars, positions = "", np.zeros(0, np.int64)
    for a in range(start, end, size):
        piece = text[a : min(a + size, end)]
        code_points = np.frombuffer(piece.encode("utf-32-le", "surrogatepass"), np.uint32)
        chars += pattern.sub("", piece)
        positions = np.concatenate([positions, a + np.flatnonzero(~table[code_points])])
        if len(chars) < size:
            continue
        cut = len(chars) if cut_anywhere else next((i for i in range(len(chars) - 1, 0, -1) if is_base(chars[i])), 0)
        if cut:  # else combining marks all the way: gather on
            yield chars[:cut], positions[:cut]
            chars, positions = chars[cut:], positions[cut:]
    if chars:
        yield chars, positions


class BlockWords:
    """Tokens of normalized text fed a block at a time, with each character's position in the
    original text; a word may span blocks. `fast` is the fast tokenizer whose word memo and
    vocabulary it uses."""

    def __init__(self, fast: FastStages):
        self.fast = fast
        self.ids: list[int] = []
        self.tokens: list[str] = []
        self.offsets: list[tuple[int, int]] = []
        self.words: list[int] = []
        self.n_words = 0
        self.open: tuple[str, list[int], int] | None = None  # the word still open: text, positions, length

    def feed(self, normalized: str, positions: list[int]) -> None:
        """Normalized characters and the original position of each."""
        if not normalized:  # only characters that vanish: a word open before goes on
            return
        spans = split_words(normalized)
        if self.open is not None and not (spans and spans[0][0] == 0 and not self._punctuation(normalized, spans[0])):
            self._close()
        for i, (s, e) in enumerate(spans):
            self._extend(normalized[s:e], positions[s:e])
            if not (i == len(spans) - 1 and e == len(normalized) and not self._punctuation(normalized, (s, e))):
                self._close()  # else the word may go on in the next block

    def _punctuation(self, normalized: str, span: tuple[int, int]) -> bool:
        return span[1] - span[0] == 1 and is_punctuation(normalized[span[0]])

    def _extend(self, text: str, positions: list[int]) -> None:
        """Add characters to the open word; past `max_input_chars_per_word` only its length and ends are kept."""
        limit = self.fast.max_input_chars_per_word
        old_text, old_positions, old_length = self.open or ("", [], 0)
        length = old_length + len(text)
        if length > limit:  # an [UNK]: keep the first and the last position
            self.open = ("", [(old_positions or positions)[0], positions[-1]], length)
        else:
            self.open = (old_text + text, old_positions + positions, length)

    def _close(self) -> None:
        """Turn the open word into tokens."""
        if self.open is None:
            return
        text, positions, length = self.open
        self.open = None
        if length > self.fast.max_input_chars_per_word:
            self._add(self.fast.vocab[self.fast.unk_token], self.fast.unk_token, (positions[0], positions[-1] + 1))
        else:
            fields = self.fast.words[text]
            for (s, e), i, token in zip(spans_of(list(fields)), fields[0::FIELDS], fields[1::FIELDS]):
                self._add(i, token, (positions[s], positions[e - 1] + 1))
        self.n_words += 1

    def _add(self, i: int, token: str, span: tuple[int, int]) -> None:
        self.ids.append(i)
        self.tokens.append(token)
        self.offsets.append(span)
        self.words.append(self.n_words)

    def segment(self) -> Segment:
        """Everything fed so far, the open word closed."""
        self._close()
        return Segment(self.ids, self.tokens, self.offsets, self.words)


def run_segment(fast: FastStages, text: str, start: int, end: int, pos: int) -> Segment:
    """The tokens of text[start:end], a separator (or nothing) followed by characters holding none,
    streamed in blocks of `fast.block_size` characters: offsets count from `pos`."""
    parts = []
    if SEPARATOR.match(text, start):
        parts.append(fast.segment(text[start], pos + start))
        start += 1
    words = BlockWords(fast)
    for chars, positions in kept_blocks(text, start, end, fast.block_size, cut_anywhere=not fast.strip):
        normalized, origin = fast.normalize(chars)
        words.feed(normalized, (positions[np.asarray(origin, dtype=np.int64)] + pos).tolist())
    parts.append(words.segment())
    return Segment.join(parts)
