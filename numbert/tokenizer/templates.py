"""Post-processors: the template that frames one or two tokenized texts with special tokens, and gives
each token its type id.

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
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .encoding import NO_TOKENS, Encoding, Segment
from .fast import Memo
from .normalizers import IS_WHITESPACE

if TYPE_CHECKING:
    from .pipeline import TokenizerJson

SUPPORTED = ("RobertaProcessing", "TemplateProcessing", "BertProcessing", "ByteLevel", "Sequence")
SPACES = "Ġ" + "".join(c for c in map(chr, range(0x3001)) if IS_WHITESPACE.match(c))  # what trimming removes


@dataclass
class Template:
    """single / pair: the template's items in order: "A", "B", or a Segment of special tokens; with type ids."""

    single: list[tuple[Segment | str, int]]
    pair: list[tuple[Segment | str, int]]
    trim_offsets: bool = False
    add_prefix_space: bool = False
    _named: tuple[str, str] = field(default=("", ""))
    # In a window past the first of a text, Rust keeps the type id the text had before the template ran (0 for
    # A, 1 for B): TemplateProcessing always (it sets the first window's only), RobertaProcessing without
    # special tokens. (with special tokens, without them)
    own_types_in_further_windows: tuple[bool, bool] = (False, False)

    def named_tokens(self) -> tuple[str, str]:
        """(cls, sep): the special tokens before and after A in the single template."""
        return self._named

    def count(self, pair: bool) -> int:
        """How many special tokens the template adds."""
        return sum(len(item.ids) for item, _ in (self.pair if pair else self.single) if isinstance(item, Segment))

    def apply(
        self, a: Segment, b: Segment | None, add_special_tokens: bool, overflow: tuple[bool, bool] = (False, False)
    ) -> Encoding:
        """The encoding of A (and B) framed by the template (only A and B, with their type ids, without
        special tokens); `overflow`: whether A and B are windows past their first."""
        texts = {"A": self.trim(a), "B": NO_TOKENS if b is None else self.trim(b)}
        ids, tokens, type_ids, offsets, word_ids, sequence_ids, special = [], [], [], [], [], [], []
        for item, type_id in self.single if b is None else self.pair:
            if isinstance(item, str):
                part, sequence_id, is_special = texts[item], "AB".index(item), 0
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


def read_template(spec: TokenizerJson, vocab: dict[str, int]) -> Template:
    """The template of a tokenizer.json's post_processor (none: A, then B, type ids 0)."""
    value = spec.spec.get("post_processor")
    if value is None:
        return Template([("A", 0)], [("A", 0), ("B", 1)])
    return _read(spec, value, "post_processor", vocab)


def _special(spec: TokenizerJson, field: str, tokens: list[str], ids: list[int], vocab: dict[str, int]) -> Segment:
    for token, token_id in zip(tokens, ids):
        if vocab.get(token) != token_id:
            raise spec.error(field, f"names {token!r} with id {token_id}, which the vocabulary does not give it")
    return Segment(list(ids), list(tokens), [(0, 0)] * len(ids), [None] * len(ids))


def _pair_token(spec: TokenizerJson, field: str, value: Any, vocab: dict[str, int]) -> Segment:
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and type(value[1]) is int):
        raise spec.error(field, f"must be [token, id], not {json.dumps(value)[:100]}")
    return _special(spec, field, [value[0]], [value[1]], vocab)


def _read(spec: TokenizerJson, value: Any, field: str, vocab: dict[str, int]) -> Template:
    if not isinstance(value, dict) or value.get("type") not in SUPPORTED:
        kind = value.get("type") if isinstance(value, dict) else value
        raise spec.error(
            f"{field}.type",
            f"is {json.dumps(kind)[:100]}, which numbert does not implement; it supports post_processors of type "
            + ", ".join(SUPPORTED),
        )
    kind = value["type"]
    if kind in ("RobertaProcessing", "BertProcessing"):
        cls = _pair_token(spec, f"{field}.cls", value.get("cls"), vocab)
        sep = _pair_token(spec, f"{field}.sep", value.get("sep"), vocab)
        roberta = kind == "RobertaProcessing"
        pair_items: list[tuple[Segment | str, int]] = [
            (cls, 0),
            ("A", 0),
            (sep, 0),
            *([(sep, 0)] if roberta else []),
            ("B", int(not roberta)),
            (sep, int(not roberta)),
        ]
        return Template(
            [(cls, 0), ("A", 0), (sep, 0)],
            pair_items,
            trim_offsets=roberta and spec.flag(f"{field}.trim_offsets", value.get("trim_offsets"), True),
            add_prefix_space=roberta and spec.flag(f"{field}.add_prefix_space", value.get("add_prefix_space"), True),
            _named=(cls.tokens[0], sep.tokens[0]),
            own_types_in_further_windows=(False, roberta),
        )
    if kind == "ByteLevel":
        return Template(
            [("A", 0)],
            [("A", 0), ("B", 1)],
            trim_offsets=spec.flag(f"{field}.trim_offsets", value.get("trim_offsets"), True),
            add_prefix_space=spec.flag(f"{field}.add_prefix_space", value.get("add_prefix_space"), True),
        )
    if kind == "Sequence":
        steps = value.get("processors")
        if not isinstance(steps, list) or not steps:
            raise spec.error(f"{field}.processors", "must be a non-empty list")
        templates = [_read(spec, s, f"{field}.processors[{i}]", vocab) for i, s in enumerate(steps)]
        framing = [t for t in templates if t.count(True)] or templates[-1:]
        if len(framing) > 1:
            raise spec.error(field, "adds special tokens in more than one step, which numbert does not implement")
        trimming = [t for t in templates if t.trim_offsets]
        return Template(
            framing[0].single,
            framing[0].pair,
            trim_offsets=bool(trimming),
            add_prefix_space=bool(trimming) and trimming[0].add_prefix_space,
            _named=framing[0]._named,
            own_types_in_further_windows=framing[0].own_types_in_further_windows,
        )
    specials = value.get("special_tokens") or {}
    if not isinstance(specials, dict):
        raise spec.error(f"{field}.special_tokens", "must be an object")

    def items(name: str) -> list[tuple[Segment | str, int]]:
        template = value.get(name)
        if not isinstance(template, list):
            raise spec.error(f"{field}.{name}", "must be a list")
        out: list[tuple[Segment | str, int]] = []
        for i, item in enumerate(template):
            where = f"{field}.{name}[{i}]"
            ((kind, piece),) = item.items() if isinstance(item, dict) and len(item) == 1 else [(None, None)]
            if not isinstance(piece, dict) or type(piece.get("type_id", 0)) is not int:
                raise spec.error(where, f"must be a Sequence or a SpecialToken, not {json.dumps(item)[:100]}")
            if kind == "Sequence" and piece.get("id") in ("A", "B"):
                out.append((piece["id"], piece.get("type_id", 0)))
            elif kind == "SpecialToken" and isinstance(piece.get("id"), str) and piece["id"] in specials:
                entry = specials[piece["id"]]
                if not (
                    isinstance(entry, dict)
                    and isinstance(entry.get("ids"), list)
                    and isinstance(entry.get("tokens"), list)
                ):
                    raise spec.error(f"{field}.special_tokens.{piece['id']}", "must hold ids and tokens")
                out.append(
                    (
                        _special(spec, f"{field}.special_tokens", entry["tokens"], entry["ids"], vocab),
                        piece.get("type_id", 0),
                    )
                )
            else:
                raise spec.error(
                    where,
                    f"must be Sequence A/B or a SpecialToken listed in special_tokens, not {json.dumps(item)[:100]}",
                )
        return out

    single, pair = items("single"), items("pair")
    a: int = (
        next(i for i, (item, _) in enumerate(single) if item == "A") if any(item == "A" for item, _ in single) else 0
    )
    before = [item.tokens[0] for item, _ in single[:a] if isinstance(item, Segment)]
    after = [item.tokens[0] for item, _ in single[a + 1 :] if isinstance(item, Segment)]
    named = (before[0] if before else (after[0] if after else ""), after[0] if after else (before[0] if before else ""))
    return Template(single, pair, _named=named, own_types_in_further_windows=(True, True))
