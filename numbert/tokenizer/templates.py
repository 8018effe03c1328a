"""Post-processors: the last stage, the template that frames one or two tokenized texts with special tokens
and gives each token its type id. One `Template` stands for each of the Rust library's post-processors:

    BertProcessing       [CLS] A [SEP]          [CLS] A [SEP] B:1 [SEP]:1
    RobertaProcessing    <s> A </s>             <s> A </s> </s> B </s>          (type ids all 0)
    TemplateProcessing   whatever the file says, e.g. XLM-R's  <s> A </s> </s> B </s>
    ByteLevel            no tokens; with trim_offsets, offsets lose the spaces their tokens start or end with

RobertaProcessing (and a ByteLevel post-processor) trim offsets: a token "Ġworld" spans "world", not
" world" (except the first token's one added space, with add_prefix_space). Trimming runs on each
window after truncation, as in Rust.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Protocol

from .encoding import NO_TOKENS, Encoding, Segment
from .memo import Memo
from .normalizers import IS_WHITESPACE

SPACES = "Ġ" + "".join(c for c in map(chr, range(0x3001)) if IS_WHITESPACE.match(c))  # what trimming removes


class PostProcessor(Protocol):
    """A post-processor: the tokens of one or two texts -> an Encoding, framed with special tokens."""

    def count(self, pair: bool) -> int: ...

    def named_tokens(self) -> tuple[str, str]: ...

    def apply(
        self, a: Segment, b: Segment | None, add_special_tokens: bool, overflow: tuple[bool, bool] = (False, False)
    ) -> Encoding: ...


@dataclass
class Template:
    """single / pair: the template's items in order: "A", "B", or a Segment of special tokens; with type ids.
    named: (cls, sep), the special tokens before and after A in the single template ("" for none)."""

    single: list[tuple[Segment | str, int]]
    pair: list[tuple[Segment | str, int]]
    trim_offsets: bool = False
    add_prefix_space: bool = False
    named: tuple[str, str] = ("", "")
    # In a window past the first of a text, Rust keeps the type id the text had before the template ran (0 for
    # A, 1 for B): TemplateProcessing always (it sets the first window's only), RobertaProcessing without
    # special tokens. (with special tokens, without them)
    own_types_in_further_windows: tuple[bool, bool] = (False, False)

    @staticmethod
    def bert(cls: Segment, sep: Segment) -> Template:
        """BERT's frame (BertProcessing): [CLS] A [SEP], and [CLS] A [SEP] B [SEP] with type ids 1 from B on."""
        return Template(
            [(cls, 0), ("A", 0), (sep, 0)],
            [(cls, 0), ("A", 0), (sep, 0), ("B", 1), (sep, 1)],
            named=(cls.tokens[0], sep.tokens[0]),
        )

    def named_tokens(self) -> tuple[str, str]:
        """(cls, sep): the special tokens before and after A in the single template."""
        return self.named

    def count(self, pair: bool) -> int:
        """How many special tokens the template adds."""
        return sum(len(item.ids) for item, _ in (self.pair if pair else self.single) if isinstance(item, Segment))

    def apply(
        self, a: Segment, b: Segment | None, add_special_tokens: bool, overflow: tuple[bool, bool] = (False, False)
    ) -> Encoding:
        """The encoding of A (and B) framed by the template (only A and B, with their type ids, without
        special tokens); `overflow`: whether A and B are windows past their first."""
        if self.trim_offsets:
            a, b = self.trim(a), None if b is None else self.trim(b)
        items = self.single if b is None else self.pair
        ids, tokens, type_ids, offsets, word_ids, sequence_ids, special = [], [], [], [], [], [], []
        for item, type_id in items:
            if isinstance(item, str):
                part, sequence_id, is_special = (a, 0, 0) if item == "A" else (b or NO_TOKENS, 1, 0)
                if overflow[sequence_id] and self.own_types_in_further_windows[not add_special_tokens]:
                    type_id = sequence_id
            elif add_special_tokens:
                part, sequence_id, is_special = item, None, 1
            else:
                continue
            n = len(part.ids)
            ids += part.ids
            tokens += part.tokens
            type_ids += [type_id] * n
            offsets += part.offsets
            word_ids += part.words
            sequence_ids += [sequence_id] * n
            special += [is_special] * n
        return Encoding(ids, tokens, type_ids, [1] * len(ids), offsets, word_ids, sequence_ids, special)

    def trim(self, segment: Segment) -> Segment:
        """Offsets without the spaces ("Ġ" or whitespace) their tokens start or end with (trim_offsets)."""
        if not self.trim_offsets:
            return segment
        offsets, counts = list(segment.offsets), list(map(SPACE_COUNTS.__getitem__, segment.tokens))
        prefix = self.add_prefix_space
        for i in itertools.compress(itertools.count(), counts):  # the tokens with spaces only
            (lead, trail), (start, end) = counts[i], offsets[i]
            if prefix and lead == 1 and (i == 0 or start == 0):
                lead = 0  # the one space add_prefix_space put there
            start = start + lead if start + lead < end else end
            if trail and end >= trail:
                end = end - trail if end - trail > start else start
            offsets[i] = (start, end)
        return Segment(segment.ids, segment.tokens, offsets, segment.words)


def spaces(token: str) -> tuple[int, int] | tuple[()]:
    """How many spaces ("Ġ" or whitespace) the token starts and ends with; () when none (most tokens)."""
    lead, trail = len(token) - len(token.lstrip(SPACES)), len(token) - len(token.rstrip(SPACES))
    return (lead, trail) if lead or trail else ()


SPACE_COUNTS = Memo(spaces, 1 << 16)  # token -> spaces(token)
