"""Where a text may be cut: the one place a tokenizer decides which positions of a text no stage reaches across,
so that a long text is read only as far as the tokens it keeps (`Tokenizer.encode` with truncation).

A *break* is a position `at` of the raw text where text[at] is a character at which the pre-tokenizer may start
a word (its `break_chars`: whitespace for GPT-2's split, a space for Metaspace, whitespace, ASCII punctuation and
CJK ideographs for BERT) and text[at - 1] is not whitespace. The text may be cut there when

- the normalizer, run on text[:at] and on text[at:] apart, gives the whole text's normalization (each normalizer
  says so, and what the break's character becomes: `Normalizer.at_break`), but for the rules of a text's edges
  (Strip's whitespace, a prepended "▁" or space, SentencePiece's map at a text's start), which reach no further
  than the first word of text[at:];
- the pre-tokenizer always starts a word at what the break's character became (`PreTokenizer.starts_word`);
- no added token occurs across it (`AddedTokens.crosses`).

Then the tokens of text[:at] are the whole text's tokens before `at`, and the tokens of text[at:] from its next
break on are the whole text's from there (offsets counted from the text's start). The models work word by word,
so they never reach across a word's end.
"""

from __future__ import annotations

import collections
import re

from .added_tokens import AddedTokens
from .normalizers import ANY_SPACE, Normalizer
from .pre_tokenizers import PreTokenizer
from .precompiled import LAG_LIMIT

TRIES = 64  # breaks looked at, at most, before giving up on cutting a text (reading it whole)


class Cuts:
    """The breaks of a tokenizer's texts (see the module's docstring)."""

    def __init__(self, normalizer: Normalizer | None, pre_tokenizer: PreTokenizer | None, added: AddedTokens):
        self.normalizer, self.pre_tokenizer, self.added = normalizer, pre_tokenizer, added
        chars = "" if pre_tokenizer is None else pre_tokenizer.break_chars
        # a break's character, after one that is not whitespace (to any stage)
        self.candidates = re.compile(f"(?<![{ANY_SPACE}])[{chars}]") if chars else None

    def is_break(self, text: str, at: int) -> bool:
        """Whether the text may be cut at `at`, a candidate of `self.candidates` (0 < at < len(text))."""
        assert self.pre_tokenizer is not None
        char = text[at]
        strings = frozenset([char]) if self.normalizer is None else self.normalizer.at_break(text, at, char)
        return bool(strings) and all(map(self.pre_tokenizer.starts_word, strings)) and not self.added.crosses(text, at)

    def lag(self, text: str, at: int) -> int | None:
        """How many characters the whole text's offsets lag behind at break `at`: the normalizer's lag at the start
        of the text between added tokens that holds `at` (SentencePiece's map deletes characters at a text's
        start without a trace, shifting the offsets of all that follows, in Rust and so in numbert). A text read
        from `at` has none; its offsets are moved back by as many. None: too many to tell."""
        if self.normalizer is None or not self.normalizer.lags:
            return 0
        start = self.piece_start(text, at)
        return self.normalizer.lag(text[start : min(at, start + LAG_LIMIT + 1)])

    def piece_start(self, text: str, at: int) -> int:
        """Where the text between added tokens that holds break `at` starts: the end of the last added token
        before it, or 0. Searched backwards from breaks (the search for added tokens starts over at a break as
        it would go on from the text's start), in windows that grow."""
        size = 1024
        while True:
            start = self.before(text, at - size) if at > size else None
            end = self.added.last_end(text, 0 if start is None else start, at)
            if end is not None or start is None:
                return end or 0
            size *= 4

    def after(self, text: str, at: int) -> int | None:
        """The first break at or after `at` (and past 0), or None."""
        if self.candidates is None:
            return None
        for tries, match in enumerate(self.candidates.finditer(text, max(at, 1))):
            if tries == TRIES:
                return None
            if self.is_break(text, match.start()):
                return match.start()
        return None

    def before(self, text: str, at: int) -> int | None:
        """The last break at or before `at` (and past 0), or None. The text before `at` is searched backwards
        in windows that double in size, so the cost follows the distance to the break found."""
        if self.candidates is None:
            return None
        end, size, tries = at + 1, 256, 0
        while end > 1:
            start = max(1, end - size)
            last = collections.deque((m.start() for m in self.candidates.finditer(text, start, end)), TRIES)
            for candidate in reversed(last):
                if tries == TRIES:
                    return None
                tries += 1
                if self.is_break(text, candidate):
                    return candidate
            end, size = start, 2 * size
        return None
