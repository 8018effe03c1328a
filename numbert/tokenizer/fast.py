"""BERT's stages made fast (BertNormalizer, BertPreTokenizer and WordPiece at once): the same tokens, offsets and
word indices as `basic.tokenize`, and as the stages one after another.

Two ideas (tests/test_tokenizer.py checks fast == basic on random text):
- Memos. Text repeats its characters, words and whitespace-free chunks, so each one's normalization,
  WordPiece split and tokens are computed once (`Memo`).
- ASCII. Printable ASCII (and \\t \\n \\r) normalizes character for character, so both stages run on
  the whole string with two regular expressions, and the memoized tokens of its words join up
  without a Python step per token.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from collections.abc import Sequence
from typing import NamedTuple

from .basic import combining_class, decompose, is_nonspacing_mark, normalize, normalize_char, wordpiece
from .blocks import blocks, run_segment
from .encoding import Segment
from .memo import Memo
from .models import Model, WordPiece
from .normalizers import BertNormalizer, Normalizer
from .pre_tokenizers import BertPreTokenizer, PreTokenizer
from .words import FIELDS, spans_of, split_words

BLOCK_SIZE = 1 << 16  # characters: a longer text is tokenized a block at a time, in bounded memory
MEMO_CHUNK = 256  # characters: longer whitespace-free runs are tokenized without the memo


@functools.cache
def keeps_combining_mark(ch: str) -> bool:
    """Whether accent stripping leaves a combining mark (class > 0 but not Mn, like U+1D165) from
    `ch`: only then can canonical reordering make `normalize` differ from `normalize_char` character
    by character."""
    return any(combining_class(c) and not is_nonspacing_mark(c) for c in decompose(ch))


class Chunk(NamedTuple):
    """The token ids of a whitespace-free run of text; spans and word indices are relative to it."""

    ids: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]
    words: tuple[int, ...]
    n_words: int


_flat = itertools.chain.from_iterable


# The ASCII path's text: ASCII that normalizes character for character, printable or the whitespace
# \t \n \r (which becomes a space); lowercased if at all. Its words, each with the whitespace before
# it, tile it: "a  (b)" -> "a", "  (", "b", ")".
_ASCII_SPACES = " \t\n\r"
_PLAIN_ASCII = re.compile(r"[ -~\t\n\r]*")
_SPACED_ASCII_WORDS = re.compile(r"[ \t\n\r]*(?:[A-Za-z0-9]+|[^A-Za-z0-9 \t\n\r])")
# Runs of text between spaces. Python's \s also matches \x0b \x0c \x1c-\x1f \x85: control
# characters for BERT, deleted, so they never separate words.
_CHUNKS = re.compile(r"(?:[^\s]|[\x0b\x0c\x1c-\x1f\x85])+")


def is_plain_ascii(text: str) -> bool:
    """Whether `text` takes the ASCII path."""
    return text.isascii() and (text.isprintable() or _PLAIN_ASCII.fullmatch(text) is not None)


class FastTokenizer:
    """`basic.tokenize`, memoized, for text that holds no special token: the words of BERT's stages
    (`Tokenizer.words`). It reads a text of any length in bounded memory (`max_chars` None)."""

    max_chars: int | None = None

    def __init__(
        self,
        vocab: dict[str, int],
        *,
        lower: bool,
        strip: bool,
        split_chinese: bool,
        unk_token: str,
        max_input_chars_per_word: int,
        block_size: int = BLOCK_SIZE,
    ):
        self.vocab, self.lower, self.strip, self.split_chinese = vocab, lower, strip, split_chinese
        self.unk_token, self.max_input_chars_per_word = unk_token, max_input_chars_per_word
        self.block_size = block_size
        self.id_to_token = {i: t for t, i in vocab.items()}
        self.longest_piece = max(map(len, vocab))
        self.chars = Memo(functools.partial(normalize_char, lower=lower, strip=strip, split_chinese=split_chinese))
        self.chunks = Memo(self._tokenize_chunk)  # whitespace-free run -> its Chunk
        self.words = Memo(self._tokenize_word)  # word (on the ASCII path, with the whitespace before it) -> FIELDS

    @staticmethod
    def of(normalizer: Normalizer | None, pre_tokenizer: PreTokenizer | None, model: Model) -> FastTokenizer | None:
        """The fast path of BERT's stages (BertNormalizer, BertPreTokenizer, WordPiece); None for other stages."""
        if not (
            isinstance(normalizer, BertNormalizer)
            and isinstance(pre_tokenizer, BertPreTokenizer)
            and isinstance(model, WordPiece)
        ):
            return None
        return FastTokenizer(
            model.vocab,
            lower=normalizer.lowercase,
            strip=normalizer.strip_accents,
            split_chinese=normalizer.handle_chinese_chars,
            unk_token=model.unk_token,
            max_input_chars_per_word=model.max_input_chars_per_word,
        )

    def normalize(self, text: str) -> tuple[str, Sequence[int]]:
        """`basic.normalize`: character by character from a memo unless canonical reordering may move
        a mark that stays; printable ASCII as it is (lowercased)."""
        if text.isascii() and text.isprintable():  # lowercasing maps one char to one char
            return (text.lower() if self.lower else text), range(len(text))
        if self.strip and any(map(keeps_combining_mark, text)):
            return normalize(text, lower=self.lower, strip=self.strip, split_chinese=self.split_chinese)
        pieces = list(map(self.chars.__getitem__, text))
        return "".join(pieces), [i for i, piece in enumerate(pieces) for _ in piece]

    def segment(self, text: str, pos: int = 0) -> Segment:
        """The tokens of `text`, offsets counted from `pos`. A text longer than `block_size` characters
        goes a block at a time (blocks.py)."""
        if len(text) <= self.block_size:
            return self._segment_block(text, pos)
        return Segment.join(
            [
                run_segment(self, text, start, end, pos)
                if is_run
                else self._segment_block(text[start:end], pos + start)
                for start, end, is_run in blocks(text, self.block_size)
            ]
        )

    __call__ = segment  # the tokenizer's words (stages.Words): the text between added tokens -> its tokens

    def _segment_block(self, text: str, pos: int) -> Segment:
        """The tokens of `text`: at once on plain ASCII, else whitespace-free chunk by chunk, each
        memoized (up to MEMO_CHUNK characters)."""
        if is_plain_ascii(text):
            return self._tokenize_ascii(text, pos)
        if text.isprintable():  # no whitespace but ' ', no control characters
            runs = text.split(" ")  # '' between two spaces: a chunk without tokens
            starts = map(operator.add, itertools.accumulate(map(len, runs), initial=0), itertools.count(pos))
            chunks = list(zip(starts, map(self._chunk, runs)))
        else:
            chunks = [(pos + m.start(), self._chunk(m.group())) for m in _CHUNKS.finditer(text)]
        first_words = itertools.accumulate((chunk.n_words for _, chunk in chunks), initial=0)
        ids = [i for _, chunk in chunks for i in chunk.ids]
        return Segment(
            ids,
            [self.id_to_token[i] for i in ids],
            offsets=[(start + s, start + e) for start, chunk in chunks for s, e in chunk.spans],
            words=[first + w for (_, chunk), first in zip(chunks, first_words) for w in chunk.words],
        )

    def _tokenize_ascii(self, text: str, pos: int) -> Segment:
        """Both stages at once on ASCII that normalizes character for character. Its words, each with
        the whitespace before it, tile the text, so their memoized tokens join up without a Python
        step per token."""
        text = text.lower() if self.lower else text
        # (whitespace at the end holds no word: left out, the pattern never rescans it from each of its positions)
        words = _SPACED_ASCII_WORDS.findall(text, 0, len(text.rstrip(_ASCII_SPACES)))
        fields = list(_flat(map(self.words.__getitem__, words)))
        ids, tokens, word_starts = fields[0::FIELDS], fields[1::FIELDS], fields[2::FIELDS]
        words = list(itertools.accumulate(word_starts, initial=-1))  # each token's word: word starts so far - 1
        del words[0]
        return Segment(ids, tokens, spans_of(fields, pos), words)

    def _chunk(self, chunk: str) -> Chunk:
        """The tokens of a whitespace-free run, from the memo unless it is long (long runs rarely repeat)."""
        return self.chunks[chunk] if len(chunk) <= MEMO_CHUNK else self._tokenize_chunk(chunk)

    def _tokenize_chunk(self, chunk: str) -> Chunk:
        """Both stages on a whitespace-free run of text: normalize, split into words, WordPiece."""
        if is_plain_ascii(chunk):  # (in text that is not all plain ASCII)
            seg = self._tokenize_ascii(chunk, 0)
            return Chunk(tuple(seg.ids), tuple(seg.offsets), tuple(seg.words), seg.words[-1] + 1 if seg.words else 0)
        text, origin = self.normalize(chunk)
        spans = split_words(text)
        ids, offsets, words = [], [], []
        for w, (start, end) in enumerate(spans):
            fields = self.words[text[start:end]]
            ids += fields[0::FIELDS]
            offsets += [(origin[s], origin[e - 1] + 1) for s, e in spans_of(list(fields), start)]
            words += [w] * (len(fields) // FIELDS)
        return Chunk(tuple(ids), tuple(offsets), tuple(words), len(spans))

    def _tokenize_word(self, word: str) -> tuple:
        """WordPiece on one word: its tokens' fields (see FIELDS). Whitespace before the word (on the
        ASCII path) only puts its first token further."""
        bare = word.lstrip(_ASCII_SPACES)
        if bare != word:
            fields = self.words[bare]
            return (*fields[:3], fields[3] + len(word) - len(bare), *fields[4:])
        pieces = wordpiece(
            word,
            self.vocab,
            unk_token=self.unk_token,
            longest_piece=self.longest_piece,
            max_input_chars_per_word=self.max_input_chars_per_word,
        )
        return tuple(_flat((self.vocab[piece], piece, int(start == 0), 0, end - start) for piece, start, end in pieces))
