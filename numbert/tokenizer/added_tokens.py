"""Added tokens: special tokens such as `[MASK]` or `<s>` (and any token a tokenizer.json adds), cut out of the
raw text whole before the stages see it, each a word of its own (the Rust library's AddedVocabulary).

A token may take the whitespace on its left (`lstrip`) or right (`rstrip`) with it, as RoBERTa's `<mask>`
does; the token's text is then what it matched, whitespace included, as Rust keeps it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .normalizers import WHITESPACE


@dataclass(frozen=True)
class AddedToken:
    """A token matched whole in the raw text: its content, its id, whether it is special (dropped by
    `decode(..., skip_special_tokens=True)`), and the whitespace it takes with it."""

    content: str
    id: int
    special: bool = True
    lstrip: bool = False
    rstrip: bool = False


class AddedTokens:
    """The added tokens of a tokenizer, found in a text longest first, as one regular expression."""

    def __init__(self, tokens: Sequence[AddedToken]):
        self.tokens = list(tokens)
        self.by_length = sorted(self.tokens, key=lambda t: len(t.content), reverse=True)  # one group each, in order
        space = f"[{WHITESPACE}]*"
        alternatives = [
            (space if t.lstrip else "") + re.escape(t.content) + (space if t.rstrip else "") for t in self.by_length
        ]
        self.pattern = re.compile("|".join(f"({a})" for a in alternatives)) if alternatives else None
        self.contents = [t.content for t in self.by_length]
        self.special_ids = {t.id for t in self.tokens if t.special}

    def find(self, text: str) -> Sequence[tuple[int, int, AddedToken]]:
        """(start, end, token) of each added token in `text`, in order, with the whitespace it takes. (A text
        holding none of them, the most common case, skips the pattern's scan.)"""
        for content in self.contents:
            if content in text:
                return [(m.start(), m.end(), self.by_length[m.lastindex - 1]) for m in self.pattern.finditer(text)]  # type: ignore[operator, union-attr]
        return ()

    def last_end(self, text: str, start: int, end: int) -> int | None:
        """The end of the last added token in text[start:end] (`start` and `end` positions no added token
        crosses), or None."""
        if self.pattern is None or all(text.find(content, start, end) < 0 for content in self.contents):
            return None
        return max((match.end() for match in self.pattern.finditer(text, start, end)), default=None)

    def crosses(self, text: str, at: int) -> bool:
        """Whether a cut at `at` (text[at - 1] is not whitespace) could go through an added token: one occurs
        across it, or one that takes the whitespace on its right ends there. (One that takes the whitespace on
        its left starts its match at `at` at the earliest.)"""
        for token in self.tokens:
            content, n = token.content, len(token.content)
            if (token.rstrip and at >= n and text.startswith(content, at - n)) or (
                0 <= text.find(content, max(0, at - n + 1), at + n - 1) < at
            ):
                return True
        return False
