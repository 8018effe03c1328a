"""What the tokenizer hands out: an `Encoding` per input, a padded `Batch`; and a `Segment`, the
tokens of one text before [CLS]/[SEP] are added."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass(slots=True)
class Encoding:
    """One encoded input, as the Rust tokenizer's `Encoding`."""

    ids: list[int]
    tokens: list[str]
    type_ids: list[int]
    attention_mask: list[int]
    offsets: list[tuple[int, int]]  # character span in its segment's original text; (0, 0) for [CLS]/[SEP]
    word_ids: list[int | None]  # pre-tokenizer word index (restarts in the second segment); None for [CLS]/[SEP]
    sequence_ids: list[int | None]  # 0 / 1 for the first / second segment; None for [CLS]/[SEP]
    special_tokens_mask: list[int]  # 1 for the [CLS]/[SEP] the template adds
    overflowing: list[Encoding] = field(default_factory=list)  # further windows (return_overflowing_tokens=True)

    def __len__(self) -> int:
        return len(self.ids)


class Padded(Protocol):
    """One input's token ids and type ids (None: all 0): an `Encoding`, or the planner's `Row`."""

    @property
    def ids(self) -> Sequence[int] | np.ndarray: ...

    @property
    def type_ids(self) -> Sequence[int] | np.ndarray | None: ...


@dataclass
class Batch:
    """Inputs right-padded into rectangular int64 arrays, as `Encoder.forward` takes them."""

    input_ids: np.ndarray  # (batch, seq), padded with pad_token_id
    token_type_ids: np.ndarray  # (batch, seq)
    attention_mask: np.ndarray  # (batch, seq), 1 for real tokens
    encodings: list[Encoding] = field(default_factory=list)  # the tokenizer's: unpadded, one per input, in order


def pad(rows: Sequence[Padded], pad_id: int, width: int | None = None) -> Batch:
    """`rows` right-padded with `pad_id` to `width` (default: the longest); padding has mask 0 and type id 0."""
    width = max((len(r.ids) for r in rows), default=0) if width is None else width
    input_ids = np.full((len(rows), width), pad_id, np.int64)
    token_type_ids = np.zeros((len(rows), width), np.int64)
    attention_mask = np.zeros((len(rows), width), np.int64)
    for i, row in enumerate(rows):
        n = len(row.ids)
        input_ids[i, :n] = row.ids
        if row.type_ids is not None:
            token_type_ids[i, :n] = row.type_ids
        attention_mask[i, :n] = 1
    return Batch(input_ids, token_type_ids, attention_mask)


@dataclass(slots=True)
class Segment:
    """The tokens of one text (or of a part of it) before the template adds [CLS]/[SEP]."""

    ids: list[int]
    tokens: list[str]
    offsets: list[tuple[int, int]]  # character spans in the text
    words: list  # each token's word index (None for the template's [CLS] and [SEP])

    def __getitem__(self, window: tuple[int, int]) -> Segment:
        """The tokens in [start, end)."""
        if window == (0, len(self.ids)):
            return self
        s = slice(*window)
        return Segment(self.ids[s], self.tokens[s], self.offsets[s], self.words[s])

    @staticmethod
    def join(parts: list[Segment]) -> Segment:
        """Consecutive parts of one text as one segment: word indices run on from part to part."""
        if len(parts) == 1:
            return parts[0]
        first_words = itertools.accumulate((part.words[-1] + 1 if part.words else 0 for part in parts), initial=0)
        return Segment(
            ids=[i for part in parts for i in part.ids],
            tokens=[t for part in parts for t in part.tokens],
            offsets=[o for part in parts for o in part.offsets],
            words=[first + w for first, part in zip(first_words, parts) for w in part.words],
        )


NO_TOKENS = Segment([], [], [], [])
