"""The fast path's words: splitting normalized text into words, and the word memo's token layout.

Shared by the memoized tokenizer (fast.py) and the block-at-a-time one for long texts (blocks.py).
"""

from __future__ import annotations

import itertools
import re

from .basic import pre_tokenize

_ASCII_WORDS = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9 ]")


def split_words(text: str) -> list[tuple[int, int]]:
    """`pre_tokenize`, with shortcuts for one plain word and for ASCII."""
    if text.isalnum():
        return [(0, len(text))]
    if text.isascii():  # normalized ASCII holds only letters, digits, punctuation and spaces
        return [m.span() for m in _ASCII_WORDS.finditer(text)]
    return pre_tokenize(text)


# The word memo maps a word (on the ASCII path, with the whitespace before it) to its tokens as one
# flat tuple of FIELDS values per token: its id, its string, 1 if it starts the word (else 0), the
# characters from the previous token's end (or the word's start) to its start, and its length.
# One object per word for the garbage collector to count; and on the ASCII path, where the words
# tile the text, a text's tokens are one list that slices apart into ids and strings, whose word
# starts add up to word indices, and whose gaps and lengths add up to spans.
FIELDS = 5


def spans_of(fields: list, start: int = 0) -> list[tuple[int, int]]:
    """The character spans of consecutive tokens, from their fields, counting from `start`.
    Empties `fields` of all but the gaps and lengths."""
    del fields[0::FIELDS], fields[0 :: FIELDS - 1], fields[0 :: FIELDS - 2]  # ids, strings, word starts
    bounds = itertools.accumulate(fields, initial=start)
    next(bounds)  # start itself; then the start and end of each token in turn
    return list(zip(bounds, bounds))
