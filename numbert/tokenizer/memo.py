"""`Memo`: a function's results kept in a dict, in bounded memory (words, chunks and characters repeat)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Memo(dict):
    """A dict that fills in a missing key with fn(key), in bounded memory: once it holds `size` keys, they
    become the previous generation, and only those used again are carried into the new one. Frequent
    words stay; a corpus of a million distinct words holds at most 2 x `size` (about 600 bytes each).

    A hit is a plain dict lookup (`memo[key]`, C speed); only a miss runs Python."""

    def __init__(self, fn: Callable[[Any], Any], size: int = 1 << 13):
        super().__init__()
        self.fn, self.size = fn, size
        self.previous: dict = {}

    def __missing__(self, key):
        if len(self) >= self.size:
            self.previous = dict(self)
            self.clear()
        value = self.previous[key] if key in self.previous else self.fn(key)
        self[key] = value
        return value
