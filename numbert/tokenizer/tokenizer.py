"""The `Tokenizer`: the stages of a tokenizer composed, as the Rust `tokenizers` library composes them.

    text ─> added tokens cut out whole (added_tokens.py)
         ─> the text between them: normalizer (normalizers.py) ─> pre-tokenizer (pre_tokenizers.py)
            ─> model on each word (models.py: WordPiece, bpe.py, unigram.py)      [stages.py; fast.py, pipeline_fast.py]
         ─> truncation (truncation.py) ─> post-processor: the template (templates.py) ─> Encoding
    ids ─> tokens ─> decoder (decoders.py) ─> text

BERT's tokenizer is BertNormalizer + BertPreTokenizer + WordPiece + [CLS] A [SEP] (`Tokenizer.from_vocab`);
RoBERTa's and XLM-R's are their tokenizer.json's stages (`Tokenizer.from_tokenizer_json`); load.py builds the
parts from files (`Tokenizer.from_pretrained`). `encode` gives what transformers' Rust-backed tokenizers give:
ids, tokens, type ids, offsets, word ids, truncation windows; and a text cut by truncation is read only as far
as the tokens it keeps (`encode`'s docstring; cuts.py says where a text may be cut).
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import operator
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import load
from .added_tokens import AddedToken, AddedTokens
from .cuts import Cuts
from .decoders import Decoder
from .encoding import Batch, Encoding, Segment, pad
from .fast import FastTokenizer
from .models import Model
from .normalizers import BertNormalizer, Normalizer
from .pipeline_fast import fast_path
from .pre_tokenizers import PreTokenizer
from .stages import Stages, Words
from .templates import PostProcessor
from .tokenizer_json import TokenizerJson
from .truncation import check_side, truncated_lengths, truncation_strategy, window_pairs, windows

# A text cut by truncation is read from a part of about READ_CHARS_PER_TOKEN characters a token it keeps (plus
# READ_MARGIN), cut where no stage reaches across (cuts.py); a part holding too few tokens grows READ_GROWTH times.
READ_CHARS_PER_TOKEN = 4
READ_MARGIN = 64
READ_GROWTH = 4

# encode_batch pauses Python's garbage collector from this many texts on: below a few hundred there is nothing
# to win (docs/performance.md)
PAUSE_COLLECTOR_FROM = 256


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (gc.disable(), process-wide) for the duration, then
    turn it back on if it was on.

    Encodings hold no reference cycles, so the collector has nothing to find while a batch is made;
    left on, its full collections walk every encoding already made, again and again, as the batch
    grows. Another thread's allocations go uncollected meanwhile (reference counting still frees
    everything that is not a cycle); a gc.disable() elsewhere during the pause is undone at its end.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def alias(value, old_value, name: str, old_name: str):
    """An argument that also goes by an older name: the one given (a TypeError if both are)."""
    if old_value is None:
        return value
    if value is not None:
        raise TypeError(f"got both {name} and its older name {old_name}; pass {name} only")
    return old_value


class Tokenizer:
    """A tokenizer: its stages composed. `encode(text)` gives the ids, offsets and word ids of transformers'
    Rust-backed tokenizer built from the same files.

    `fast=False` runs the stages one after another (stages.py) where a fast path would (fast.py for BERT's
    stages, pipeline_fast.py for GPT-2's and Metaspace ones): the same tokens, for tests and for reading."""

    def __init__(
        self,
        model: Model,
        *,
        normalizer: Normalizer | None,
        pre_tokenizer: PreTokenizer | None,
        post_processor: PostProcessor,
        decoder: Decoder,
        vocab: dict[str, int],
        added_tokens: Sequence[AddedToken],
        cls_token: str | None,
        sep_token: str | None,
        pad_token: str | None,
        unk_token: str | None,
        mask_token: str | None,
        appended: Sequence[str] = (),
        vocab_file: Path | None = None,
        model_max_length: int | None = None,
        truncation_side: str = "right",
        fast: bool = True,
    ):
        self.model, self.normalizer, self.pre_tokenizer = model, normalizer, pre_tokenizer
        self.post_processor, self.decoder = post_processor, decoder
        self.vocab, self.vocab_size, self.vocab_file = vocab, len(vocab), vocab_file  # (the file named in errors)
        self.id_to_token = {i: t for t, i in vocab.items()}
        self.added_tokens = AddedTokens(added_tokens)
        self.appended = list(appended)  # special tokens the vocabulary lacked, given the next free ids
        # the named tokens, each None when the tokenizer has none (a tokenizer.json without a template, a WordLevel
        # model without an unknown token: transformers' tokenizer then says None too)
        self.cls_token, self.sep_token, self.pad_token, self.unk_token = cls_token, sep_token, pad_token, unk_token
        self.mask_token = mask_token  # (fill-mask then has nothing to fill)
        self.cls_token_id, self.sep_token_id = self._id(cls_token), self._id(sep_token)
        self.unk_token_id, self.mask_token_id = self._id(unk_token), self._id(mask_token)
        # padding fills with 0 when there is no padding token, as the Rust library's padding does by default
        self.pad_token_id: int = self._id(pad_token) or 0
        self.model_max_length = model_max_length
        self.truncation_side = check_side(truncation_side)  # where truncation cuts: "right" or "left"
        stages = Stages(normalizer, pre_tokenizer, model)
        # the text between added tokens -> its tokens: a fast path of the stages, or the stages
        self.words: Words = (
            fast and (FastTokenizer.of(normalizer, pre_tokenizer, model) or fast_path(stages))
        ) or stages
        self.cuts = Cuts(normalizer, pre_tokenizer, self.added_tokens)  # where a text may be cut

    def _id(self, token: str | None) -> int | None:
        return None if token is None else self.vocab.get(token)

    @classmethod
    def from_vocab(cls, vocab: str | os.PathLike | dict[str, int], *, fast: bool = True, **options: Any) -> Tokenizer:
        """BERT's WordPiece tokenizer over a vocab.txt (or a token -> id dict), with transformers' BertTokenizer
        options: do_lower_case, strip_accents, tokenize_chinese_chars, never_split, the special tokens,
        max_input_chars_per_word, model_max_length, truncation_side (load.wordpiece_parts)."""
        return cls(**load.wordpiece_parts(vocab, **options), fast=fast)

    @classmethod
    def from_tokenizer_json(
        cls, path: str | os.PathLike | TokenizerJson, *, fast: bool = True, **overrides: Any
    ) -> Tokenizer:
        """The tokenizer a Hugging Face tokenizer.json describes: BERT's WordPiece pipeline, or by its
        `model.type`, a byte-level BPE or Unigram pipeline (load.from_tokenizer_json)."""
        return cls(**load.from_tokenizer_json(path, **overrides), fast=fast)

    @classmethod
    def from_pretrained(
        cls, name_or_path: str | os.PathLike, *, revision: str | None = None, cache_dir: str | os.PathLike | None = None
    ) -> Tokenizer:
        """The tokenizer of a model directory or hub id: vocab.txt (else a tokenizer.json), with the options of
        tokenizer_config.json and special_tokens_map.json when present (load.from_pretrained)."""
        return cls(**load.from_pretrained(name_or_path, revision=revision, cache_dir=cache_dir))

    @property
    def do_lower_case(self) -> bool:
        """Whether BERT's normalizer lowercases (False for other stages)."""
        return isinstance(self.normalizer, BertNormalizer) and self.normalizer.lowercase

    @property
    def strip_accents(self) -> bool:
        """Whether BERT's normalizer strips accents (False for other stages)."""
        return isinstance(self.normalizer, BertNormalizer) and self.normalizer.strip_accents

    @property
    def tokenize_chinese_chars(self) -> bool:
        """Whether BERT's normalizer spaces out CJK ideographs (False for other stages)."""
        return isinstance(self.normalizer, BertNormalizer) and self.normalizer.handle_chinese_chars

    def check_embedding_rows(self, rows: int, model: str) -> None:
        """Refuse this vocabulary for `model`, whose word-embedding table has `rows` rows, naming the vocabulary
        file: when a token's id has no row (the vocabulary is another model's), or when the vocabulary lacks
        [CLS], [SEP], [PAD] or [UNK] (the id made up for it would read the row of another token)."""
        source = self.vocab_file or "the vocabulary"
        for option in ("cls_token", "sep_token", "pad_token", "unk_token"):
            if getattr(self, option) in self.appended:
                raise ValueError(
                    f"{source} has no {getattr(self, option)!r} (the {option}, which inputs hold), so the word "
                    f"embeddings of {model} have no row of its own for it; the vocabulary is not this model's"
                )
        last = max(self.vocab, key=self.vocab.__getitem__)
        if self.vocab[last] >= rows:
            raise ValueError(
                f"{source}: token {last!r} has id {self.vocab[last]}, but the word embeddings of {model} have "
                f"{rows} rows (ids 0 to {rows - 1}); the vocabulary is not this model's"
            )

    # -- text to tokens ------------------------------------------------------------------------------

    def normalize(self, text: str) -> tuple[str, Sequence[int]]:
        """The normalized text, and for each of its characters the index of the original character it came from."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, not {type(text).__name__}")
        return self.words.normalize(text)

    def tokenize(self, text: str) -> list[str]:
        """The tokens of `text`, without special tokens of the template."""
        return self._tokens(text, "text").tokens

    def _tokens(self, text: str, name: str) -> Segment:
        """All the tokens of `text` (a str, else a TypeError naming it)."""
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, not {type(text).__name__}")
        return self._segment(text, name)

    def _segment(self, text: str, name: str, start: int = 0) -> Segment:
        """Tokens, ids, offsets and word indices of `text` (found at `start` of the whole text: offsets count from
        there): added tokens cut out whole, each a word of its own; the text between them through the stages."""
        limit = self.words.max_chars
        if limit is not None and len(text) > limit:
            raise ValueError(
                f"{name} has {len(text)} characters; this tokenizer reads at most {limit} at once (past that, "
                "only a truncated encoding, read from the end it keeps): split the text or truncate it"
            )
        parts, pos = [], 0
        for first, last, token in self.added_tokens.find(text):
            parts.append(self.words(text[pos:first], start + pos))
            # the token is the text matched, with the whitespace it strips (as Rust keeps it)
            parts.append(Segment([token.id], [text[first:last]], [(start + first, start + last)], [0]))
            pos = last
        parts.append(self.words(text[pos:], start + pos))
        return Segment.join(parts)

    def _read(self, text: str, name: str, need: int | None, side: str) -> tuple[Segment, bool]:
        """The tokens of `text` and whether they are all of its tokens: all of them when `need` is None; else at
        least its first `need` (side "right") or its last `need` (side "left"), read from a part of the text
        that decides them: one that ends (right) or starts (left) at a break (cuts.py), growing until it holds
        enough tokens. Of a part starting at a break, the tokens before its next break are left out: a text's
        start may change its first word (a prepended space, stripped whitespace), never the rest. Word ids of a
        part count from its first word."""
        if need is None:
            return self._tokens(text, name), True
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, not {type(text).__name__}")
        limit = self.words.max_chars
        size = READ_CHARS_PER_TOKEN * need + READ_MARGIN
        while size < len(text):
            if side == "right":
                cut = self.cuts.after(text, size)
                if cut is None or (limit is not None and cut > limit):
                    break
                segment = self._segment(text[:cut], name)
                if len(segment.ids) >= need:
                    return segment, False
                read = cut
            else:
                cut = self.cuts.before(text, len(text) - size)
                if cut is None or (limit is not None and len(text) - cut > limit):
                    break
                guard, lag = self.cuts.after(text, cut + 1), self.cuts.lag(text, cut)
                if guard is not None and lag is not None:
                    segment = self._segment(text[cut:], name, cut)
                    first = bisect.bisect_left(segment.offsets, guard, key=lambda span: span[0])
                    if len(segment.ids) - first >= need:
                        return lagging(
                            segment[first, len(segment.ids)], lag, piece_end(self.added_tokens, text, cut)
                        ), False
                read = len(text) - cut
            size = max(size * READ_GROWTH, read + 1)  # (past the part just read, which may reach far beyond size)
        return self._segment(text, name), True

    # -- encoding ------------------------------------------------------------------------------------

    def encode(
        self,
        text: str,
        text_pair: str | None = None,
        *,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: bool | str | None = None,
        stride: int = 0,
        return_overflowing_tokens: bool = False,
        truncation_side: str | None = None,
        pair: str | None = None,
    ) -> Encoding:
        """Token ids and their alignment for `text` (and `text_pair`), framed by the template: `[CLS] text [SEP]
        text_pair [SEP]` for BERT.

        Truncation as transformers': "longest_first" (or True), "only_first", "only_second"; False never cuts.
        Unset (None), it cuts only when `max_length` is given; True without `max_length` cuts at the tokenizer's
        `model_max_length`, when it has one. An empty `text_pair` is dropped, as transformers' single-text call
        drops it (`encode_batch` keeps it, as its batch call does). Texts are cut at their end, or with
        `truncation_side="left"` (default: the tokenizer's `truncation_side`, from tokenizer_config.json) at
        their start, keeping their last tokens. With `return_overflowing_tokens`, the cut tokens come back in
        `.overflowing` as further windows, each overlapping the previous one by `stride` tokens. `pair` is an
        older name of `text_pair`.

        A text cut without overflowing windows is read only as far as the tokens it keeps: the result is the
        whole text's encoding truncated (ids, tokens, type ids, offsets, special tokens), at a cost that follows
        max_length, not the text's length, on either side, whatever the model. (Only where the text's first
        tokens are cut, on the left, the word ids count from the first word kept, 0, instead of from the text's
        first word, which only reading the whole text could tell.) A caller learns that a text has more than N
        tokens by asking for N + 1. A pair both of whose texts are cut, by longest_first to an odd number of
        tokens, is read whole: which text is longer decides which keeps the odd token.
        """
        text_pair = alias(text_pair, pair, "text_pair", "pair")
        return self._encode(
            text,
            text_pair or None,
            add_special_tokens=add_special_tokens,
            max_length=max_length,
            truncation=truncation,
            stride=stride,
            return_overflowing_tokens=return_overflowing_tokens,
            truncation_side=truncation_side,
        )

    def _encode(
        self,
        text: str,
        text_pair: str | None,
        *,
        add_special_tokens: bool,
        max_length: int | None,
        truncation: bool | str | None,
        stride: int,
        return_overflowing_tokens: bool,
        truncation_side: str | None,
    ) -> Encoding:
        """`encode`, an empty text_pair kept as an empty second segment."""
        if truncation is None:
            truncation = max_length is not None
        elif truncation is not False and max_length is None:
            max_length = self.model_max_length
        strategy = truncation_strategy(truncation, max_length, stride)
        side = check_side(self.truncation_side if truncation_side is None else truncation_side)
        if max_length is None or strategy == "do_not_truncate":
            a = self._tokens(text, "text")
            return self.post_processor.apply(
                a, None if text_pair is None else self._tokens(text_pair, "pair"), add_special_tokens
            )
        n_special = self.num_special_tokens(text_pair is not None) if add_special_tokens else 0
        if max_length < n_special:
            raise ValueError(f"max_length={max_length} leaves no room for the {n_special} special tokens")
        budget = max_length - n_special
        # Without windows, each text needs only the tokens it may keep, and one more: whether it is cut decides
        # the other's share, or whether a strategy can cut it at all.
        need = None if return_overflowing_tokens else budget + 1
        a, whole_a = self._read(text, "text", need, side)
        b, whole_b = (None, True) if text_pair is None else self._read(text_pair, "pair", need, side)
        try:
            len_a, len_b = truncated_lengths(len(a.ids), None if b is None else len(b.ids), budget, strategy)
            # the length of a text read in part is only "more than the budget", which decides every split but
            # longest_first's of an odd budget between two texts over it: the longer keeps the odd token
            over = b is not None and len(a.ids) > budget and len(b.ids) > budget
            decided = (whole_a and whole_b) or not (over and strategy == "longest_first" and budget % 2)
        except ValueError:
            if whole_a and whole_b:
                raise
            decided = False  # the error names the lengths: those of the whole texts
        if not decided:
            a, whole_a = self._tokens(text, "text"), True
            b, whole_b = (None, True) if text_pair is None else (self._tokens(text_pair, "pair"), True)
            len_a, len_b = truncated_lengths(len(a.ids), None if b is None else len(b.ids), budget, strategy)
        windows_a = windows(len(a.ids), len_a, stride, side)
        windows_b = [None] if b is None or len_b is None else windows(len(b.ids), len_b, stride, side)
        if not return_overflowing_tokens:
            windows_a, windows_b = windows_a[:1], windows_b[:1]
        first, *overflowing = (
            self.post_processor.apply(
                kept(a, wa, whole_a or side == "right"),
                None if b is None else kept(b, wb, whole_b or side == "right"),
                add_special_tokens,
                (wa != windows_a[0], wb != windows_b[0]),
            )
            for wa, wb in window_pairs(windows_a, windows_b)
        )
        first.overflowing = overflowing
        return first

    def num_special_tokens(self, pair: bool) -> int:
        """How many tokens the template adds: [CLS] A [SEP] (2), [CLS] A [SEP] B [SEP] (3) for BERT."""
        return self.post_processor.count(pair)

    def encode_batch(
        self,
        texts: Sequence[str],
        text_pair: Sequence[str] | None = None,
        *,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: bool | str | None = None,
        padding: bool | str = "longest",
        stride: int = 0,
        return_overflowing_tokens: bool = False,
        truncation_side: str | None = None,
        pairs: Sequence[str] | None = None,
    ) -> Batch:
        """Encode `texts` (with a `text_pair` for each) and pad them into (batch, seq) int64 arrays.

        Truncation as in `encode`; an empty pair stays an empty second segment, as in transformers'
        batch call. padding: "longest" (or True) pads to the longest encoding, "max_length" to
        `max_length`, False requires all encodings to have the same length. `pairs` is an older name
        of `text_pair`.

        From PAUSE_COLLECTOR_FROM texts on, Python's cyclic garbage collector is paused while the
        encodings are made (see `collector_paused`).
        """
        pairs = alias(text_pair, pairs, "text_pair", "pairs")
        for name, seq in (("texts", texts), ("text_pair", pairs)):
            if seq is not None and (isinstance(seq, str) or not isinstance(seq, Sequence)):
                raise TypeError(f"{name} must be a list of str, not {type(seq).__name__}")
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(pairs)} pairs")
        if padding not in ("longest", "max_length", True, False):
            raise ValueError(f"unknown padding {padding!r}; use 'longest', 'max_length' or False")
        if padding == "max_length" and max_length is None:
            raise ValueError("padding='max_length' needs max_length")
        fixed_width = max_length if padding == "max_length" else None
        with collector_paused() if len(texts) >= PAUSE_COLLECTOR_FROM else contextlib.nullcontext():
            encodings = [
                self._encode(
                    text,
                    None if pairs is None else pairs[i],
                    add_special_tokens=add_special_tokens,
                    max_length=max_length,
                    truncation=truncation,
                    stride=stride,
                    return_overflowing_tokens=return_overflowing_tokens,
                    truncation_side=truncation_side,
                )
                for i, text in enumerate(texts)
            ]
        lengths = [len(e) for e in encodings]
        width = max(lengths, default=0)
        if fixed_width is not None:
            if width > fixed_width:
                raise ValueError(
                    f"an encoding has {width} tokens, more than max_length={fixed_width}; enable truncation"
                )
            width = fixed_width
        elif padding is False and len(set(lengths)) > 1:
            raise ValueError(f"padding=False needs encodings of one length, got lengths {sorted(set(lengths))}")
        return self.pad(encodings, width)

    def __call__(
        self,
        text: str | Sequence[str],
        text_pair: str | Sequence[str] | None = None,
        *,
        add_special_tokens: bool = True,
        padding: bool | str = False,
        truncation: bool | str | None = None,
        max_length: int | None = None,
        stride: int = 0,
        return_tensors: str | None = None,
        return_overflowing_tokens: bool = False,
        return_offsets_mapping: bool = False,
        return_special_tokens_mask: bool = False,
    ) -> dict:
        """As transformers' tokenizer call: {"input_ids", "token_type_ids", "attention_mask"} (and
        "offset_mapping", "special_tokens_mask", "overflow_to_sample_mapping" when asked), lists for
        one text, lists of lists for a list of texts, padded as `padding` says ("longest" or True,
        "max_length", False). return_tensors="np" gives (batch, seq) int64 arrays, a batch of one
        for one text. An empty text_pair is dropped for one text and kept in a batch, and max_length
        alone truncates only when nothing is padded, as there.
        """
        if return_tensors not in (None, "np"):
            raise ValueError(f'return_tensors={return_tensors!r}: numbert returns lists or NumPy arrays ("np")')
        if padding not in ("longest", "max_length", "do_not_pad", True, False):
            raise ValueError(f"unknown padding {padding!r}; use 'longest', 'max_length' or False")
        if truncation is None and padding not in (False, "do_not_pad"):
            truncation = False  # transformers: max_length alone truncates only when nothing is padded
        options = dict(
            add_special_tokens=add_special_tokens,
            max_length=max_length,
            truncation=truncation,
            stride=stride,
            return_overflowing_tokens=return_overflowing_tokens,
        )
        single = isinstance(text, str)
        if isinstance(text, str):
            if text_pair is not None and not isinstance(text_pair, str):
                raise TypeError(f"text is one str, so text_pair must be one str too, not {type(text_pair).__name__}")
            encodings = [self.encode(text, text_pair, **options)]  # type: ignore[arg-type]
        else:
            if isinstance(text_pair, str):
                raise TypeError("text is a list, so text_pair must be a list of str too, not one str")
            encodings = self.encode_batch(text, text_pair, **options).encodings if text else []  # type: ignore[arg-type]
        windows = [(i, e) for i, enc in enumerate(encodings) for e in [enc, *enc.overflowing]]
        rows = [e for _, e in windows]
        fields: dict[str, list] = {
            "input_ids": [e.ids for e in rows],
            "token_type_ids": [e.type_ids for e in rows],
            "attention_mask": [e.attention_mask for e in rows],
        }
        if return_offsets_mapping:
            fields["offset_mapping"] = [e.offsets for e in rows]
        if return_special_tokens_mask:
            fields["special_tokens_mask"] = [e.special_tokens_mask for e in rows]
        if padding in (True, "longest", "max_length"):
            width = max_length if padding == "max_length" and max_length is not None else max(map(len, rows), default=0)
            fill = {"input_ids": self.pad_token_id, "offset_mapping": (0, 0), "special_tokens_mask": 1}
            for name, values in fields.items():
                fields[name] = [row + [fill.get(name, 0)] * (width - len(row)) for row in values]
        if return_overflowing_tokens:
            fields["overflow_to_sample_mapping"] = [i for i, _ in windows]
        if return_tensors == "np":
            if len({len(row) for row in fields["input_ids"]}) > 1:
                raise ValueError("return_tensors='np' needs rows of one length: pass padding=True")
            return {name: np.asarray(values, dtype=np.int64) for name, values in fields.items()}
        if single and not return_overflowing_tokens:
            return {name: values[0] for name, values in fields.items()}
        return fields

    def pad(self, encodings: Sequence[Encoding], width: int | None = None) -> Batch:
        """Encodings right-padded with [PAD] to `width` (default: the longest) as (batch, seq) int64 arrays."""
        batch = pad(encodings, self.pad_token_id, width)
        batch.encodings = list(encodings)
        return batch

    # -- ids back to text ----------------------------------------------------------------------------

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text from ids, by the decoder (BERT's WordPiece decoder: `##` pieces glue to the previous token, other
        tokens get a space, except `.`, `,`, `!` and `?`). Ids outside the vocabulary are dropped."""
        special = self.added_tokens.special_ids
        return self.convert_tokens_to_string(
            [
                self.id_to_token[i]
                for i in id_list(ids)
                if i in self.id_to_token and not (skip_special_tokens and i in special)
            ]
        )

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        """Tokens joined by the decoder (WordPiece: "##ing" glues on; ByteLevel: bytes back to UTF-8; Metaspace:
        "▁" back to spaces, the first one dropped)."""
        return self.decoder.decode(token_list(tokens))

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | None | list[int | None]:
        """The id of a token (the unknown token's id when it is not in the vocabulary, None without one), or of each
        token of a list."""
        if isinstance(tokens, str):
            return self.vocab.get(tokens, self.unk_token_id)
        return [self.vocab.get(t, self.unk_token_id) for t in token_list(tokens)]

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        """The token of an id (the unknown token for an id outside the vocabulary, "" without one), or of each id
        of a list."""
        unknown = self.unk_token or ""
        if isinstance(ids, (int, np.integer)) and not isinstance(ids, bool):
            return self.id_to_token.get(int(ids), unknown)
        return [self.id_to_token.get(i, unknown) for i in id_list(ids)]

    def __repr__(self) -> str:
        options = (
            f", do_lower_case={self.do_lower_case}, strip_accents={self.strip_accents}, "
            f"tokenize_chinese_chars={self.tokenize_chinese_chars}"
            if isinstance(self.normalizer, BertNormalizer)
            else ""
        )
        source = "" if self.vocab_file is None else f", file={self.vocab_file}"
        return f"Tokenizer({type(self.model).__name__}, vocab_size={self.vocab_size}{options}{source})"


def token_list(tokens: Any) -> list[str]:
    """Tokens as a list of str, or a TypeError naming the first that is not one."""
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Iterable):
        raise TypeError(f"tokens must be a list of str, not {type(tokens).__name__}")
    tokens = list(tokens)
    for i, token in enumerate(tokens):
        if not isinstance(token, str):
            raise TypeError(f"tokens[{i}] is a {type(token).__name__}, not a str")
    return tokens


def id_list(ids: Any, name: str = "ids") -> list[int]:
    """Token ids as a list of int (anything with __index__, such as NumPy's and torch's integers, or an integral
    float such as 101.0), or a TypeError naming the first that is not one."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise TypeError(f"{name} must be a list of token ids (int), not {type(ids).__name__}")
    out: list[int] = []
    for i, value in enumerate(ids):
        if isinstance(value, (float, np.floating)) and np.isfinite(value) and value == int(value):
            out.append(int(value))
        elif isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError(f"{name}[{i}] is {value!r:.40}, not a token id (an int)")
        else:
            out.append(operator.index(value))
    return out


def lagging(segment: Segment, lag: int, end: int) -> Segment:
    """`segment` with the offsets of its tokens before `end` moved back by `lag` characters (cuts.Cuts.lag)."""
    if not lag:
        return segment
    offsets = [(s - lag, e - lag) if s < end else (s, e) for s, e in segment.offsets]
    return Segment(segment.ids, segment.tokens, offsets, segment.words)


def kept(segment: Segment, window: tuple[int, int], words_counted: bool) -> Segment:
    """The tokens of `segment` in `window`; their word ids counted from the first one's word (0) unless the
    segment's word ids are the text's (`words_counted`)."""
    part = segment[window]
    if words_counted or not part.words:
        return part
    first = part.words[0]
    return Segment(part.ids, part.tokens, part.offsets, [w - first for w in part.words])


def piece_end(added_tokens: AddedTokens, text: str, start: int) -> int:
    """Where the first added token from `start` on begins (the text's length if none does)."""
    return next((start + first for first, _, _ in added_tokens.find(text[start:])), len(text))
