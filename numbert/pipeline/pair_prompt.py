"""A decoder reranker's input: a (query, document) pair as ONE prompt, tokenized as apply_chat_template tokenizes it.

A causal-LM reranker (Qwen3-Reranker) reads no `[CLS] query [SEP] document [SEP]`: the pair becomes chat messages
[{"role": "query"}, {"role": "document"}], after a {"role": "system"} message holding the instruction when one is
given (CrossEncoder.predict's `prompt`), rendered by the directory's chat template (numbert.tokenizer.chat_template),
as sentence-transformers 6 renders a pair for a CrossEncoder over a causal LM. A directory without a template that
carries both roles gets the model card's prompt (numbert.model.yes_no.reranker_prompt), the instruction in it.

The prompt is tokenized without the tokenizer's special tokens (the template writes its own). A prompt longer than
the model reads is cut at its end, and the template's tail (the tokens after the document: the end of the user's
turn and the assistant's opening, whose last position is scored) written back over its last tokens, as
sentence-transformers' restore_suffix does; the tail is found as sentence-transformers finds it, the longest common
token ending of two renders with different contents.
"""

from __future__ import annotations

import numpy as np

from ..model.yes_no import reranker_prompt
from ..tokenizer import Tokenizer
from ..tokenizer.chat_template import ChatTemplate
from .planner import Row

PAIR_ROLES = ("query", "document")
FILLERS = ("0", "1 2 3 4")  # the two contents the tail is found between (sentence-transformers' skeleton renders)


class PairPrompt:
    """How a decoder reranker reads a pair: the chat template that carries the query and document roles, or (None)
    the model card's prompt."""

    def __init__(self, template: ChatTemplate | None):
        self.template = template
        self.refusal: str | None = None  # why the model cannot score, when its checkpoint lacks what the score reads
        self._tails: dict[str, list[int]] = {}  # instruction -> the template's tail, in token ids

    @classmethod
    def of(cls, template: ChatTemplate | None) -> PairPrompt:
        """The prompt of a directory's template: the template if it carries both roles, else the card's."""
        return cls(template if template is not None and template.carries(PAIR_ROLES) else None)

    @property
    def kind(self) -> str:
        """Where the prompt comes from, for messages: the template's file, or the model card."""
        return "the model card's prompt" if self.template is None else self.template.origin

    def text(self, query: str, document: str, instruction: str = "") -> str:
        """The prompt of one pair; `instruction` "" : the template's (the card's) default instruction."""
        if self.template is None:
            return reranker_prompt(query, document, instruction or None)
        system = [{"role": "system", "content": instruction}] if instruction else []
        pair = [{"role": role, "content": text} for role, text in zip(PAIR_ROLES, (query, document))]
        return self.template.render([*system, *pair])

    def tail(self, tokenizer: Tokenizer, instruction: str = "") -> list[int]:
        """The prompt's fixed ending in token ids (empty when two renders never differ or never agree)."""
        if instruction not in self._tails:
            first, second = (self.ids(tokenizer, self.text(f, f, instruction)) for f in FILLERS)
            count = 0
            for a, b in zip(reversed(first), reversed(second)):
                if a != b:
                    break
                count += 1
            self._tails[instruction] = first[len(first) - count :] if 0 < count < min(len(first), len(second)) else []
        return self._tails[instruction]

    @staticmethod
    def ids(tokenizer: Tokenizer, text: str, limit: int | None = None) -> list[int]:
        """The text's tokens without the tokenizer's special tokens; the first `limit` (one more, to learn the
        text is longer) when given."""
        cut = None if limit is None else limit + 1
        encoding = tokenizer.encode(
            text, add_special_tokens=False, max_length=cut, truncation=cut is not None, truncation_side="right"
        )
        return list(encoding.ids)

    def row(self, tokenizer: Tokenizer, pair: tuple[str, str], instruction: str, limit: int) -> tuple[Row, bool]:
        """A pair's row of at most `limit` tokens, and whether its prompt was longer: cut at the end, the tail
        written back over its last tokens."""
        ids = self.ids(tokenizer, self.text(*pair, instruction), limit)
        longer = len(ids) > limit
        ids = ids[:limit]
        if len(ids) >= limit:  # as sentence-transformers: a row that reached the limit may have lost its tail
            tail = self.tail(tokenizer, instruction)
            keep = min(len(tail), len(ids))
            if keep:
                ids[len(ids) - keep :] = tail[len(tail) - keep :]
        return Row(np.asarray(ids, np.int32)), longer
