"""The `Tokenizer`: BERT's WordPiece tokenizer, token for token transformers' Rust-backed `BertTokenizer`.

It loads vocab.txt (and a model directory's tokenizer options), cuts special tokens such as
`[MASK]` out of the text whole, tokenizes the text between them (the stages of basic.py, made
fast by fast.py), wraps the tokens in `[CLS] A [SEP]` / `[CLS] A [SEP] B [SEP]`, truncates
(truncation.py) and pads; and turns ids back into text.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .encoding import NO_TOKENS, Batch, Encoding, Segment, pad
from .fast import FastTokenizer
from .truncation import check_side, truncated_lengths, truncation_strategy, window_pairs, windows

if TYPE_CHECKING:
    from .pipeline import TokenizerJson
    from .templates import Template

TOKEN_FIELDS = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# the files of transformers' Python BPE and SentencePiece tokenizers, which numbert does not read
SLOW_TOKENIZER_FILES = ("vocab.json", "merges.txt", "sentencepiece.bpe.model", "spiece.model", "tokenizer.model")


def read_options(path: Path) -> dict:
    """The tokenizer options in a tokenizer_config.json or special_tokens_map.json, as Tokenizer's
    arguments; every field numbert reads is checked, and an error names the file and the field.

    A token is a string or an AddedToken object {"content": ...}; model_max_length is kept only when it
    is a real limit (transformers writes a huge number for "none")."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not valid UTF-8 ({e})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} must hold a JSON object, not a {type(config).__name__}")

    def token(field: str, value) -> str:
        value = value.get("content") if isinstance(value, dict) else value
        if not (isinstance(value, str) and value):
            raise ValueError(
                f"{path}: {field} must be a non-empty string or an object with one as 'content', got {config[field]!r}"
            )
        return value

    options: dict = {}
    for field in ("do_lower_case", "strip_accents", "tokenize_chinese_chars"):
        if field in config and not (
            isinstance(config[field], bool) or (field == "strip_accents" and config[field] is None)
        ):
            raise ValueError(f"{path}: {field} must be true or false, got {config[field]!r}")
        if field in config:
            options[field] = config[field]
    options |= {field: token(field, config[field]) for field in TOKEN_FIELDS if config.get(field) is not None}
    for field in ("never_split", "additional_special_tokens"):
        tokens = config.get(field) or []
        if not isinstance(tokens, list):
            raise ValueError(f"{path}: {field} must be a list of strings, got {tokens!r}")
        if tokens:
            options[field] = [token(field, t) for t in tokens]
    max_length = config.get("model_max_length")
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, (int, float))):
        raise ValueError(f"{path}: model_max_length must be an integer, got {max_length!r}")
    if isinstance(max_length, int) and max_length < 10**12:
        options["model_max_length"] = max_length
    if config.get("truncation_side") is not None:
        try:
            options["truncation_side"] = check_side(config["truncation_side"])
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
    return options


def load_vocab(path: str | os.PathLike) -> dict[str, int]:
    """vocab.txt: one token a line, the line number is the id (a repeated token keeps its last id).

    A line may end in "\n" or "\r\n", as both of transformers' tokenizers read it; a "\r" anywhere else
    is refused, naming the line: the Python tokenizer reads it as a line break, the Rust one as part of
    the token, so the ids would depend on which one made them.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"vocabulary file not found: {path}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = raw.count(b"\n", 0, e.start) + 1, e.start - raw.rfind(b"\n", 0, e.start)
        raise ValueError(
            f"{path}: line {line} is not valid UTF-8 (byte {raw[e.start]:#04x} at column {column})"
        ) from None
    lone = re.search("\r(?!\n)", text)
    if lone is not None:
        raise ValueError(
            f"{path}: line {text.count(chr(10), 0, lone.start()) + 1} holds a carriage return (\\r) that does "
            f"not end the line; transformers' Python and Rust tokenizers read it differently, so numbert refuses it"
        )
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        raise ValueError(f"vocabulary file is empty: {path}")
    return {token: i for i, token in enumerate(lines)}


# encode_batch(texts, max_length=512) on scripts/bench_tokenizer.py's corpus, collector paused vs
# on (medians, 2 cores shared with other jobs, noisy; 2026-11-23): 32 texts 1.0x, 256 texts 1.24x,
# 1000 texts 1.4x, 10,000 texts 2.0x. Below a few hundred texts there is nothing to win.
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


class Tokenizer:
    """BERT's WordPiece tokenizer: `encode(text)` gives the ids, offsets and word ids of transformers'
    Rust-backed `BertTokenizer`, built from the same vocab.txt."""

    # BERT's pre-tokenizer splits words at whitespace and drops it, so a run of spaces tokenizes as one space
    whitespace_runs_matter = False

    def __init__(
        self,
        vocab_path: str | os.PathLike | Mapping[str, int],
        *,
        do_lower_case: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        never_split: Sequence[str] | None = None,
        unk_token: str = "[UNK]",
        sep_token: str = "[SEP]",
        pad_token: str = "[PAD]",
        cls_token: str = "[CLS]",
        mask_token: str = "[MASK]",
        max_input_chars_per_word: int = 100,
        model_max_length: int | None = None,
        truncation_side: str = "right",
    ):
        self.vocab = dict(vocab_path) if isinstance(vocab_path, Mapping) else load_vocab(vocab_path)
        self.vocab_file = None if isinstance(vocab_path, Mapping) else Path(vocab_path)  # named in errors
        if not self.vocab:
            raise ValueError("the vocabulary is empty")
        self.do_lower_case = do_lower_case
        self.strip_accents = do_lower_case if strip_accents is None else strip_accents  # None follows lowercasing
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.unk_token, self.sep_token, self.pad_token = unk_token, sep_token, pad_token
        self.cls_token, self.mask_token = cls_token, mask_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self.model_max_length = model_max_length
        self.truncation_side = check_side(truncation_side)  # where truncation cuts: "right" or "left"
        # Special tokens are matched whole in the raw text, never normalized or split; like
        # transformers, a special token missing from the vocabulary gets the next free id.
        named = {
            "unk_token": unk_token,
            "sep_token": sep_token,
            "pad_token": pad_token,
            "cls_token": cls_token,
            "mask_token": mask_token,
        }
        for option, token in [*named.items(), *(("never_split", t) for t in never_split or ())]:
            if not (isinstance(token, str) and token):
                raise ValueError(f"{option} must be a non-empty string, got {token!r}")
        self.special_tokens = list(dict.fromkeys([*named.values(), *(never_split or ())]))
        self.added_tokens = [t for t in self.special_tokens if t not in self.vocab]  # given the next free ids
        next_id = max(self.vocab.values()) + 1
        for token in self.special_tokens:
            if token not in self.vocab:
                self.vocab[token], next_id = next_id, next_id + 1
        self.vocab_size = len(self.vocab)
        self.unk_token_id, self.sep_token_id = self.vocab[unk_token], self.vocab[sep_token]
        self.pad_token_id = self.vocab[pad_token]
        self.cls_token_id, self.mask_token_id = self.vocab[cls_token], self.vocab[mask_token]
        self._special_ids = {self.vocab[t] for t in self.special_tokens}
        self._special = re.compile("|".join(map(re.escape, sorted(self.special_tokens, key=len, reverse=True))))
        self._fast = FastTokenizer(
            self.vocab,
            lower=do_lower_case,
            strip=self.strip_accents,
            split_chinese=tokenize_chinese_chars,
            unk_token=unk_token,
            max_input_chars_per_word=max_input_chars_per_word,
        )
        self._id_to_token = self._fast.id_to_token
        self.template: Template | None = None  # BERT's [CLS] A [SEP] B [SEP] (`_template`), unless set
        self._cls = Segment([self.cls_token_id], [cls_token], [(0, 0)], [None])
        self._sep = Segment([self.sep_token_id], [sep_token], [(0, 0)], [None])

    @classmethod
    def from_pretrained(
        cls, name_or_path: str | os.PathLike, *, revision: str | None = None, cache_dir: str | os.PathLike | None = None
    ) -> Tokenizer:
        """The tokenizer of a model directory or hub id: vocab.txt (else a BERT tokenizer.json), with
        the options of tokenizer_config.json and special_tokens_map.json when present."""
        from ..checkpoint.hub import model_dir
        from ..model.config import google_release_lowercases

        directory = model_dir(name_or_path, weights=False, revision=revision, cache_dir=cache_dir)
        options: dict = {}
        for name in ("tokenizer_config.json", "special_tokens_map.json"):  # the second overrides the first
            if (directory / name).is_file():
                options |= read_options(directory / name)
        never_split = [*options.pop("never_split", ()), *options.pop("additional_special_tokens", ())]
        if "do_lower_case" not in options and (directory / "bert_config.json").is_file():  # Google's release
            options["do_lower_case"] = google_release_lowercases(directory) is not False
        max_length = options.pop("model_max_length", None)
        if not (directory / "vocab.txt").is_file() and (directory / "tokenizer.json").is_file():
            from .pipeline import TokenizerJson

            spec = TokenizerJson(directory / "tokenizer.json")
            wordpiece = isinstance(spec.spec.get("model"), dict) and spec.spec["model"].get("type") == "WordPiece"
            named = ("pad_token", "mask_token") if wordpiece else TOKEN_FIELDS  # WordPiece: the rest from the file
            named = (*named, "truncation_side")
            return cls.from_tokenizer_json(
                spec, model_max_length=max_length, **{k: options[k] for k in named if k in options}
            )
        slow = [name for name in SLOW_TOKENIZER_FILES if (directory / name).is_file()]
        if slow and not (directory / "vocab.txt").is_file():
            raise ValueError(
                f"{directory} has {' and '.join(slow)} but no tokenizer.json: numbert reads BPE and SentencePiece "
                "tokenizers from a tokenizer.json only (transformers writes one: "
                "AutoTokenizer.from_pretrained(directory).save_pretrained(directory))"
            )
        return cls(directory / "vocab.txt", never_split=never_split or None, **options, model_max_length=max_length)

    @classmethod
    def from_tokenizer_json(cls, path: str | os.PathLike | TokenizerJson, **overrides) -> Tokenizer:
        """The tokenizer a Hugging Face tokenizer.json describes: BERT's WordPiece pipeline (vocabulary,
        [UNK], lowercasing, accents, Chinese characters and special tokens from the file), or by its
        `model.type`, a byte-level BPE or Unigram pipeline (pipeline.py's PipelineTokenizer)."""
        from .pipeline import PipelineTokenizer, TokenizerJson
        from .tokenizer_json import is_berts_template, wordpiece_settings

        spec = path if isinstance(path, TokenizerJson) else TokenizerJson(Path(path))
        model = spec.spec.get("model")
        if isinstance(model, dict) and model.get("type") != "WordPiece":
            if spec.component("model", model, "model")[0] in ("BPE", "Unigram"):  # (any other type is refused)
                return PipelineTokenizer(spec, **overrides)
        template = None if is_berts_template(spec.path, spec.spec) else _other_frame(spec)
        if template is None:  # BERT's frame (or a broken one, which wordpiece_settings refuses by name)
            vocab, settings = wordpiece_settings(spec.path, spec.spec)
            tokenizer = cls(vocab, **(settings | overrides))
        else:  # WordPiece in another frame (MPNet: <s> A </s></s> B </s>), read by templates.py
            vocab, settings = wordpiece_settings(spec.path, spec.spec, framing=template.named_tokens())
            tokenizer = cls(vocab, **(settings | overrides))
            tokenizer.template = template
        tokenizer.vocab_file = spec.path
        return tokenizer

    def check_embedding_rows(self, rows: int, model: str) -> None:
        """Refuse this vocabulary for `model`, whose word-embedding table has `rows` rows, naming the vocabulary
        file: when a token's id has no row (the vocabulary is another model's), or when the vocabulary lacks
        [CLS], [SEP], [PAD] or [UNK] (the id made up for it would read the row of another token)."""
        source = self.vocab_file or "the vocabulary"
        for option in ("cls_token", "sep_token", "pad_token", "unk_token"):
            if getattr(self, option) in self.added_tokens:
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
        """The normalized text, and for each of its characters the index of the original character it
        came from (`basic.normalize` with this tokenizer's options)."""
        return self._fast.normalize(text)

    def tokenize(self, text: str) -> list[str]:
        """The WordPiece tokens of `text`, without [CLS]/[SEP]."""
        return self._segment(text).tokens

    def _segment(self, text: str, name: str = "text", limit: int | None = None) -> Segment:
        """Tokens, ids, offsets and word indices of one text. Special tokens are cut out of the raw
        text first and make words of their own. With `limit`, tokenizing may stop once the first
        `limit` tokens are known."""
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, not {type(text).__name__}")
        parts, pos, count = [], 0, 0
        for special in self._special.finditer(text):
            token = special.group()
            parts += [
                self._fast.segment(text[pos : special.start()], pos, None if limit is None else limit - count),
                Segment([self.vocab[token]], [token], [special.span()], [0]),
            ]
            count += len(parts[-2].ids) + 1
            pos = special.end()
            if limit is not None and count >= limit:
                return Segment.join(parts)
        parts.append(self._fast.segment(text[pos:], pos, None if limit is None else limit - count))
        return Segment.join(parts)

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
        """Token ids and their alignment for `text` (and `text_pair`): `[CLS] text [SEP] text_pair [SEP]`.

        Truncation as transformers': "longest_first" (or True), "only_first", "only_second"; False
        never cuts. Unset (None), it cuts only when `max_length` is given; True without `max_length`
        cuts at the tokenizer's `model_max_length`, when it has one. An empty `text_pair` is dropped,
        as transformers' single-text call drops it (`encode_batch` keeps it, as its batch call does).
        Texts are cut at their end, or with `truncation_side="left"` (default: the tokenizer's
        `truncation_side`, from tokenizer_config.json) at their start, keeping their last tokens.

        A text cut at its end is tokenized only as far as the kept tokens reach, so a long text costs no
        more than its first window. With `return_overflowing_tokens`, the whole text is tokenized and
        the cut tokens come back in `.overflowing` as further windows, each overlapping the previous
        one by `stride` tokens. `pair` is an older name of `text_pair`.
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
            return self._template(
                self._segment(text), None if text_pair is None else self._segment(text_pair, "pair"), add_special_tokens
            )
        n_special = self.num_special_tokens(text_pair is not None) if add_special_tokens else 0
        if max_length < n_special:
            raise ValueError(f"max_length={max_length} leaves no room for the {n_special} special tokens")
        budget = max_length - n_special
        # A single text cut at its end without windows needs only its first `budget` tokens (plus one,
        # to know whether it was cut); a pair's split depends on both lengths.
        enough = budget + 1 if text_pair is None and not return_overflowing_tokens and side == "right" else None
        a = self._segment(text, limit=enough)
        b = None if text_pair is None else self._segment(text_pair, "pair")
        len_a, len_b = truncated_lengths(len(a.ids), None if b is None else len(b.ids), budget, strategy)
        windows_a = windows(len(a.ids), len_a, stride, side)
        windows_b = [None] if b is None or len_b is None else windows(len(b.ids), len_b, stride, side)
        if not return_overflowing_tokens:
            windows_a, windows_b = windows_a[:1], windows_b[:1]
        first, *overflowing = (
            self._template(
                a[wa], None if b is None else b[wb], add_special_tokens, (wa != windows_a[0], wb != windows_b[0])
            )
            for wa, wb in window_pairs(windows_a, windows_b)
        )
        first.overflowing = overflowing
        return first

    def num_special_tokens(self, pair: bool) -> int:
        """How many tokens the template adds: [CLS] A [SEP] (2), [CLS] A [SEP] B [SEP] (3)."""
        return (3 if pair else 2) if self.template is None else self.template.count(pair)

    def _template(
        self, a: Segment, b: Segment | None, add_special_tokens: bool, overflow: tuple[bool, bool] = (False, False)
    ) -> Encoding:
        """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`: type ids 0 up to the first [SEP], 1 after it;
        sequence ids None for the template's own tokens. (`overflow`: whether A and B are further windows,
        which only other templates treat differently.)"""
        if self.template is not None:  # another frame, from a tokenizer.json (templates.py)
            return self.template.apply(a, b, add_special_tokens, overflow)
        cls, sep = (self._cls, self._sep) if add_special_tokens else (NO_TOKENS, NO_TOKENS)
        b, sep_b = (NO_TOKENS, NO_TOKENS) if b is None else (b, sep)
        n_cls, n_a, n_sep, n_b, n_sep_b = len(cls.ids), len(a.ids), len(sep.ids), len(b.ids), len(sep_b.ids)
        return Encoding(
            ids=[*cls.ids, *a.ids, *sep.ids, *b.ids, *sep_b.ids],
            tokens=[*cls.tokens, *a.tokens, *sep.tokens, *b.tokens, *sep_b.tokens],
            type_ids=[0] * (n_cls + n_a + n_sep) + [1] * (n_b + n_sep_b),
            attention_mask=[1] * (n_cls + n_a + n_sep + n_b + n_sep_b),
            offsets=[*cls.offsets, *a.offsets, *sep.offsets, *b.offsets, *sep_b.offsets],
            word_ids=[*cls.words, *a.words, *sep.words, *b.words, *sep_b.words],
            sequence_ids=[*[None] * n_cls, *[0] * n_a, *[None] * n_sep, *[1] * n_b, *[None] * n_sep_b],
            special_tokens_mask=[*[1] * n_cls, *[0] * n_a, *[1] * n_sep, *[0] * n_b, *[1] * n_sep_b],
        )

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
        """Text from ids, as the Rust WordPiece decoder: `##` pieces glue to the previous token, other
        tokens get a space, except `.`, `,`, `!` and `?`. Ids outside the vocabulary are dropped.

        The decoder cleans up each token on its own, so its rules that span tokens (" n't", " 's", ...)
        never apply: "don't" comes back as "don ' t" (transformers' Python tokenizer gives "don't").
        """
        return self.convert_tokens_to_string(
            [
                self._id_to_token[i]
                for i in map(int, ids)
                if i in self._id_to_token and not (skip_special_tokens and i in self._special_ids)
            ]
        )

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        """Tokens joined as the Rust WordPiece decoder joins them (see `decode`): "##ing" glues on."""
        out = []
        for i, token in enumerate(tokens):
            if i > 0:
                token = token[2:] if token.startswith("##") else " " + token
            out.append(_cleanup(token))
        return "".join(out)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """The id of a token (the [UNK] id when it is not in the vocabulary), or of each token of a list."""
        if isinstance(tokens, str):
            return self.vocab.get(tokens, self.unk_token_id)
        return [self.vocab.get(t, self.unk_token_id) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        """The token of an id (the [UNK] token for an id outside the vocabulary), or of each id of a list."""
        if isinstance(ids, (int, np.integer)):
            return self._id_to_token.get(int(ids), self.unk_token)
        return [self._id_to_token.get(int(i), self.unk_token) for i in ids]

    def __repr__(self) -> str:
        return (
            f"Tokenizer(vocab_size={self.vocab_size}, do_lower_case={self.do_lower_case}, "
            f"strip_accents={self.strip_accents}, tokenize_chinese_chars={self.tokenize_chinese_chars})"
        )


def _other_frame(spec: TokenizerJson) -> Template | None:
    """The post-processor of a WordPiece tokenizer.json that frames inputs otherwise than BERT (None when
    templates.py cannot read it either)."""
    from .templates import read_template

    model = spec.spec.get("model")
    vocab = dict(model.get("vocab") or {}) if isinstance(model, dict) and isinstance(model.get("vocab"), dict) else {}
    try:
        for token in spec.added_tokens(vocab):
            vocab.setdefault(token["content"], len(vocab))
        return read_template(spec, vocab)
    except ValueError:
        return None


def alias(value, old_value, name: str, old_name: str):
    """An argument that also goes by an older name: the one given (a TypeError if both are)."""
    if old_value is None:
        return value
    if value is not None:
        raise TypeError(f"got both {name} and its older name {old_name}; pass {name} only")
    return old_value


def _cleanup(token: str) -> str:
    """The Rust WordPiece decoder's clean-up, applied to each (space-prefixed) token."""
    for dirty, clean in (
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" do not", " don't"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ):
        token = token.replace(dirty, clean)
    return token
