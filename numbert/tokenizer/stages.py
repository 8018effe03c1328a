"""The stages one after another, as the Rust `tokenizers` library runs them on the text between added tokens:

    normalizer (normalizers.py) -> pre-tokenizer (pre_tokenizers.py) -> model on each word (models.py)

each token's offsets the span of original characters its first and last characters came from. This is the
plain composition; the fast paths (fast.py for BERT's stages, pipeline_fast.py for GPT-2's and Metaspace ones)
give the same tokens faster, and the tests hold them equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .encoding import Segment
from .memo import Memo
from .models import Model
from .normalizers import Normalized, Normalizer
from .pre_tokenizers import PreTokenizer

# A text is read whole up to MAX_INPUT_CHARS characters (the stages hold a span per character); past that, only a
# truncating encode is served, from the end it keeps (Tokenizer.encode), so memory stays bounded on hostile lines.
MAX_INPUT_CHARS = 1_000_000
MEMO_SIZE = 1 << 15  # words per generation of a word memo
MEMO_WORD = 256  # characters: longer words are tokenized without the memo (Gemma's whole texts rarely repeat)


class Words(Protocol):
    """What turns the text between added tokens into tokens: the stages, or a fast path of them.

    `words(text, start)` gives the tokens of `text`, found at `start` of the whole text (offsets count from the
    whole text's start); `normalize(text)` the normalized text and, for each of its characters, the position of
    the original character it came from; `max_chars` the longest text it reads at once (None: any, in bounded
    memory)."""

    def __call__(self, text: str, start: int, /) -> Segment: ...

    def normalize(self, text: str) -> tuple[str, Sequence[int]]: ...

    @property
    def max_chars(self) -> int | None: ...


class Stages:
    """The normalizer, the pre-tokenizer and the model, one after another; each word's tokens memoized."""

    def __init__(self, normalizer: Normalizer | None, pre_tokenizer: PreTokenizer | None, model: Model):
        self.normalizer, self.pre_tokenizer, self.model = normalizer, pre_tokenizer, model
        self.model_tokens = Memo(model.tokenize, MEMO_SIZE)  # word -> the model's (id, token, start, end)

    @property
    def max_chars(self) -> int:
        return MAX_INPUT_CHARS

    def __call__(self, text: str, start: int) -> Segment:
        return self.after_normalizer(self.normalized(text, start))

    def normalized(self, text: str, start: int) -> Normalized:
        normalized = Normalized.of(text, start)
        return normalized if self.normalizer is None else self.normalizer(normalized)

    def normalize(self, text: str) -> tuple[str, Sequence[int]]:
        normalized = self.normalized(text, 0)
        return normalized.text, [start for start, _ in normalized.spans]

    def after_normalizer(self, normalized: Normalized) -> Segment:
        """The stages after the normalizer: the pre-tokenizer's words, each split by the model."""
        words = [normalized] if self.pre_tokenizer is None else self.pre_tokenizer(normalized)
        ids, tokens, offsets, word_ids = [], [], [], []
        for w, word in enumerate(words):
            spans = word.spans
            text = word.text
            found = self.model_tokens[text] if len(text) <= MEMO_WORD else self.model.tokenize(text)
            for token_id, token, s, e in found:
                ids.append(token_id)
                tokens.append(token)
                offsets.append((spans[s][0], spans[e - 1][1]))
                word_ids.append(w)
        return Segment(ids, tokens, offsets, word_ids)
