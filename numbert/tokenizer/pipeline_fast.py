"""The stages of a BPE or Unigram tokenizer.json made fast for the two common pipelines: the same tokens,
offsets and word indices as the stages one after another (stages.py; tests/test_tokenizer_family.py checks
fast == stages).

- Byte-level (GPT-2, RoBERTa: no normalizer, ByteLevel without a prefix space). GPT-2's split tiles the
  text, so its words are found by one `findall` (pre_tokenizers.gpt2_split: on ASCII text directly, on any
  other on the characters written as their classes), and their start positions add up from their lengths.
- Metaspace (SentencePiece, XLM-R: a normalizer, then Metaspace). When the normalizer leaves the text as
  it is (its stages hand back the very `Normalized` they were given), each character is its own origin: the
  text's spaces become "▁" and one regular expression cuts it into words, with no span per character. A
  text the normalizer changes goes through the stages.

Both look each word up in a `Memo` (memo.py): word -> its token ids, tokens and where each starts and
ends in it, computed once through the stages (ByteLevel's bytes, the model), so a text's tokens join
up by `map` and `chain`, without a Python step per token. Where the tokens of a word tile it (each starts
where the one before ends, the first at 0, the last at the word's end; so every word of ASCII text), the
memo also keeps their lengths, and when every word of a text tiles, its offsets are one running sum of
lengths taken in pairs (`pairwise(accumulate(...))`), about half the cost of adding each word's start.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Sequence

from . import pre_tokenizers
from .bpe import BPE
from .encoding import Segment
from .memo import Memo
from .models import Model
from .normalizers import Normalized, Normalizer
from .pre_tokenizers import ByteLevel, Metaspace
from .stages import MEMO_SIZE, Stages

# (ids, tokens, starts, ends, lengths, firsts) of one word: its tokens, where each starts and ends in the word,
# their lengths when they tile the word (else None), and 1, 0, 0, ...: which token starts the word
Ints = tuple[int, ...]
WordTokens = tuple[Ints, tuple[str, ...], Ints, Ints, Ints | None, Ints]


def word_tokens(pieces: Sequence[tuple[int, str, int, int]], size: int) -> WordTokens:
    """The memo's entry of a word of `size` characters split into `pieces`: (id, token, start, end) in it."""
    if not pieces:
        return (), (), (), (), None if size else (), ()
    ids, tokens, starts, ends = zip(*pieces)
    tiles = starts[0] == 0 and ends[-1] == size and starts[1:] == ends[:-1]
    lengths = tuple(map(operator.sub, ends, starts)) if tiles else None
    return ids, tokens, starts, ends, lengths, (1,) + (0,) * (len(ids) - 1)


def join_words(words: list[str], starts: list[int], memo: Memo, contiguous: bool = True) -> Segment:
    """The tokens of consecutive words, word w at offset starts[w] of the original text; `contiguous`: each
    word starts where the one before ends."""
    found: list[WordTokens] = list(map(memo.__getitem__, words))
    lengths = list(map(_LENGTHS, found))
    if contiguous and None not in lengths:  # every word tiled by its tokens, so the tokens tile the text
        offsets = list(itertools.pairwise(itertools.accumulate(_flat(lengths), initial=starts[0])))
        word_ids = list(itertools.islice(itertools.accumulate(_flat(map(_FIRSTS, found)), initial=-1), 1, None))
    else:
        at = list(_flat(map(itertools.repeat, starts, map(len, map(_IDS, found)))))  # each token's word's start
        token_starts = map(operator.add, _flat(map(_STARTS, found)), at)
        offsets = list(zip(token_starts, map(operator.add, _flat(map(_ENDS, found)), at)))
        word_ids = list(_flat(map(itertools.repeat, itertools.count(), map(len, map(_IDS, found)))))
    return Segment(list(_flat(map(_IDS, found))), list(_flat(map(_TOKENS, found))), offsets, word_ids)


_flat = itertools.chain.from_iterable
_IDS, _TOKENS, _STARTS, _ENDS, _LENGTHS, _FIRSTS = map(operator.itemgetter, range(6))


def fast_path(stages: Stages) -> ByteLevelWords | MetaspaceWords | None:
    """The words of GPT-2's pipeline (no normalizer, ByteLevel without a prefix space, BPE) or of a normalizer
    followed by a splitting Metaspace, made fast; None for other stages."""
    pre, model = stages.pre_tokenizer, stages.model
    if (
        stages.normalizer is None
        and isinstance(model, BPE)
        and isinstance(pre, ByteLevel)
        and not pre.add_prefix_space
        and pre.use_regex
    ):
        return ByteLevelWords(model, stages)
    if isinstance(pre, Metaspace) and pre.split:
        return MetaspaceWords(stages.normalizer, pre.replacement, pre.prepend_scheme, model, stages)
    return None


class ByteLevelWords:
    """The words of GPT-2's pipeline: GPT-2's split, then each word's bytes through BPE."""

    def __init__(self, model: BPE, stages: Stages):
        self.model, self.stages = model, stages
        self.memo = Memo(self.tokens_of, MEMO_SIZE)

    def tokens_of(self, word: str) -> WordTokens:
        """The memo's entry of a word: its bytes through BPE."""
        if word.isascii():  # a byte a character: the tokens' places in the bytes are theirs in the word
            return word_tokens(self.model.tokenize(word.translate(pre_tokenizers.ASCII_BYTE_CHARS)), len(word))
        spelled = pre_tokenizers.as_bytes(Normalized.of(word))
        pieces = self.model.tokenize(spelled.text)
        return word_tokens([(i, t, *spelled.original(s, e)) for i, t, s, e in pieces], len(word))

    @property
    def max_chars(self) -> int | None:
        return self.stages.max_chars

    def normalize(self, text: str) -> tuple[str, Sequence[int]]:
        return self.stages.normalize(text)

    def __call__(self, text: str, start: int) -> Segment:
        words = pre_tokenizers.gpt2_split(text)  # they tile the text
        return join_words(words, list(itertools.accumulate(map(len, words), initial=start)), self.memo)


class MetaspaceWords:
    """The words of a normalizer and a Metaspace pre-tokenizer (splitting), then the model, for the texts
    the normalizer leaves as they are; for the others, the normalized text goes on through the stages (the
    pre-tokenizer and the model, `Stages.after_normalizer`)."""

    def __init__(
        self, normalizer: Normalizer | None, replacement: str, prepend_scheme: str, model: Model, stages: Stages
    ):
        self.normalizer, self.replacement, self.prepend_scheme = normalizer, replacement, prepend_scheme
        self.stages = stages
        # Metaspace's MergedWithNext split: each replacement starts a word
        self.split = re.compile(f"{re.escape(replacement)}[^{re.escape(replacement)}]*|[^{re.escape(replacement)}]+")
        self.model = model
        self.memo = Memo(self.tokens_of, MEMO_SIZE)

    def tokens_of(self, word: str) -> WordTokens:
        """The memo's entry of a word: its tokens by the model."""
        return word_tokens(self.model.tokenize(word), len(word))

    @property
    def max_chars(self) -> int | None:
        return self.stages.max_chars

    def normalize(self, text: str) -> tuple[str, Sequence[int]]:
        return self.stages.normalize(text)

    def __call__(self, text: str, start: int) -> Segment:
        if self.normalizer is not None:
            unchanged = Normalized.of(text, start)
            normalized = self.normalizer(unchanged)
            if normalized is not unchanged:  # normalized once: the stages go on from there
                return self.stages.after_normalizer(normalized)
        spelled = text.replace(" ", self.replacement)
        prepend = (
            spelled != ""
            and not spelled.startswith(self.replacement)
            and (self.prepend_scheme == "always" or (self.prepend_scheme == "first" and start == 0))
        )
        if prepend:  # the replacement put first stands for the first character: it shifts the rest by one
            spelled = self.replacement + spelled
        words = self.split.findall(spelled)
        starts = list(itertools.accumulate(map(len, words), initial=start - prepend))
        segment = join_words(words, starts, self.memo)
        offsets = segment.offsets
        for k in range(len(offsets) if prepend else 0):  # the first tokens, whose span reaches the prepended one
            if offsets[k][0] >= start:
                break
            offsets[k] = (start, max(offsets[k][1], start + 1))  # the text's first character
        return segment
