"""The factory: a tokenizer's parts from the files that describe it, for `Tokenizer(**parts)`.

    wordpiece_parts(vocab, ...)   BERT's stages over a vocab.txt (or a vocabulary), with BERT's options
    from_tokenizer_json(path)     the pipeline of a tokenizer.json (tokenizer_json.py reads it)
    from_pretrained(directory)    a model directory or hub id: vocab.txt, else tokenizer.json, with the options
                                  of tokenizer_config.json and special_tokens_map.json

`Tokenizer.from_vocab`, `Tokenizer.from_tokenizer_json` and `Tokenizer.from_pretrained` build a Tokenizer of
what these return. Every error names the file and the field.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from ..checkpoint.json_file import read_object
from .added_tokens import AddedToken
from .decoders import Decoder, WordPieceDecoder
from .encoding import Segment
from .models import Model, WordPiece
from .normalizers import BertNormalizer, Normalizer
from .pre_tokenizers import BertPreTokenizer, PreTokenizer
from .templates import PostProcessor, Template
from .tokenizer_json import TokenizerJson, read_stages
from .truncation import check_side
from .wordpiece_json import other_frame, wordpiece_settings

TOKEN_FIELDS = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# the files of transformers' Python BPE and SentencePiece tokenizers, which numbert does not read
SLOW_TOKENIZER_FILES = ("vocab.json", "merges.txt", "sentencepiece.bpe.model", "spiece.model", "tokenizer.model")
# the options a tokenizer.json's BPE or Unigram pipeline takes besides the file
PIPELINE_OPTIONS = (
    "model_max_length",
    "truncation_side",
    "cls_token",
    "sep_token",
    "unk_token",
    "pad_token",
    "mask_token",
)


class Parts(TypedDict):
    """A tokenizer's parts: the keyword arguments of `Tokenizer`."""

    model: Model
    normalizer: Normalizer | None
    pre_tokenizer: PreTokenizer | None
    post_processor: PostProcessor
    decoder: Decoder
    vocab: dict[str, int]  # every token's id: the model's, the added tokens', the appended ones'
    added_tokens: list[AddedToken]
    cls_token: str | None
    sep_token: str | None
    pad_token: str | None
    unk_token: str | None
    mask_token: str | None
    appended: list[str]  # special tokens the vocabulary lacked, given the next free ids
    vocab_file: Path | None
    model_max_length: int | None
    truncation_side: str


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


def wordpiece_parts(
    vocab: str | os.PathLike | Mapping[str, int],
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
    frame: Template | None = None,
) -> Parts:
    """BERT's tokenizer over a vocab.txt (or a token -> id mapping), with transformers' BertTokenizer options:
    BertNormalizer(lowercase, strip_accents (None follows lowercasing), CJK), BertPreTokenizer, WordPiece, and
    BERT's template [CLS] A [SEP] / [CLS] A [SEP] B [SEP] (or another `frame`, as MPNet's).

    Special tokens are matched whole in the raw text, never normalized or split; like transformers, a special
    token missing from the vocabulary gets the next free id."""
    vocab_file = None if isinstance(vocab, Mapping) else Path(vocab)  # named in errors
    vocab = dict(vocab) if isinstance(vocab, Mapping) else load_vocab(vocab)
    if not vocab:
        raise ValueError("the vocabulary is empty")
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
    special_tokens = list(dict.fromkeys([*named.values(), *(never_split or ())]))
    appended = [t for t in special_tokens if t not in vocab]
    next_id = max(vocab.values()) + 1
    for token in appended:
        vocab[token], next_id = next_id, next_id + 1

    def one(token: str) -> Segment:
        return Segment([vocab[token]], [token], [(0, 0)], [None])

    return Parts(
        model=WordPiece(vocab, unk_token, max_input_chars_per_word),
        normalizer=BertNormalizer(do_lower_case, strip_accents, tokenize_chinese_chars),
        pre_tokenizer=BertPreTokenizer(),
        post_processor=Template.bert(one(cls_token), one(sep_token)) if frame is None else frame,
        decoder=WordPieceDecoder(),
        vocab=vocab,
        added_tokens=[AddedToken(t, vocab[t]) for t in special_tokens],
        cls_token=cls_token,
        sep_token=sep_token,
        pad_token=pad_token,
        unk_token=unk_token,
        mask_token=mask_token,
        appended=appended,
        vocab_file=vocab_file,
        model_max_length=model_max_length,
        truncation_side=check_side(truncation_side),
    )


def from_tokenizer_json(path: str | os.PathLike | TokenizerJson, **overrides: Any) -> Parts:
    """The tokenizer a Hugging Face tokenizer.json describes: BERT's WordPiece pipeline (vocabulary, [UNK],
    lowercasing, accents, Chinese characters and special tokens from the file), or by its `model.type`, a
    byte-level BPE or Unigram pipeline. `overrides`: options the file does not hold (model_max_length,
    truncation_side) or that a tokenizer_config.json names (the special tokens)."""
    spec = path if isinstance(path, TokenizerJson) else TokenizerJson(path)
    try:
        return _tokenizer_json_parts(spec, **overrides)
    except (RecursionError, LookupError, AttributeError, struct.error) as e:  # a malformed file's last resort
        raise ValueError(f"{spec.path} is not a tokenizer.json numbert can read ({type(e).__name__}: {e})") from None


def _tokenizer_json_parts(spec: TokenizerJson, **overrides: Any) -> Parts:
    """`from_tokenizer_json`'s parts: the pipeline its model type names, or BERT's WordPiece stages."""
    model = spec.spec.get("model")
    if isinstance(model, dict) and model.get("type") != "WordPiece":
        if spec.model_type() in ("BPE", "Unigram", "WordLevel"):  # (any other type is refused)
            return pipeline_parts(spec, **overrides)
    frame = other_frame(spec)  # None: BERT's frame (or a broken one, which wordpiece_settings refuses by name)
    vocab, settings = wordpiece_settings(spec.path, spec.spec, framing=None if frame is None else frame.named_tokens())
    parts = wordpiece_parts(vocab, **(settings | overrides), frame=frame)
    parts["vocab_file"] = spec.path
    return parts


def pipeline_parts(
    spec: TokenizerJson, *, model_max_length: int | None = None, truncation_side: str = "right", **tokens: str
) -> Parts:
    """A BPE or Unigram tokenizer.json's stages. The named tokens (cls, sep, unk, pad, mask) come from its
    post-processor, model and padding, unless given."""
    unknown = set(tokens) - set(TOKEN_FIELDS)
    if unknown:
        raise TypeError(f"unexpected options {sorted(unknown)}; a {spec.path.name} tokenizer takes {PIPELINE_OPTIONS}")
    read = read_stages(spec)
    vocab, model_unk = read.vocab, read.model.unk_token
    cls, sep = read.post_processor.named_tokens()
    # each None when neither the options, the file nor the vocabulary name one (a WordLevel or BPE file without a
    # template has no cls and sep: it encodes without special tokens, as Rust does)
    cls_token = tokens.get("cls_token") or cls or _first_in(vocab, "<s>", "[CLS]")
    sep_token = tokens.get("sep_token") or sep or _first_in(vocab, "</s>", "[SEP]") or cls_token
    unk_token = tokens.get("unk_token") or model_unk
    pad_token = tokens.get("pad_token") or read.pad_token or _first_in(vocab, "<pad>", "[PAD]") or unk_token
    mask_token = tokens.get("mask_token") or _first_in(vocab, "<mask>", "[MASK]")
    named = {"cls_token": cls_token, "sep_token": sep_token, "pad_token": pad_token, "unk_token": unk_token}
    for option, token in named.items():
        if token is not None and token not in vocab:
            raise ValueError(f"{spec.path}: the {option} {token!r} is not in the vocabulary")
    return Parts(
        model=read.model,
        normalizer=read.normalizer,
        pre_tokenizer=read.pre_tokenizer,
        post_processor=read.post_processor,
        decoder=read.decoder,
        vocab=vocab,
        added_tokens=read.added_tokens,
        cls_token=cls_token,
        sep_token=sep_token,
        pad_token=pad_token,
        unk_token=unk_token,
        mask_token=mask_token,
        appended=[],  # added tokens carry their ids
        vocab_file=spec.path,
        model_max_length=model_max_length,
        truncation_side=check_side(truncation_side),
    )


def _first_in(vocab: dict[str, int], *tokens: str) -> str | None:
    return next((t for t in tokens if t in vocab), None)


def from_pretrained(
    name_or_path: str | os.PathLike, *, revision: str | None = None, cache_dir: str | os.PathLike | None = None
) -> Parts:
    """The tokenizer of a model directory or hub id: vocab.txt (else a tokenizer.json), with the options of
    tokenizer_config.json and special_tokens_map.json when present."""
    from ..checkpoint.hub import model_dir  # (here: the hub's client loads only for a directory)
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
        spec = TokenizerJson(directory / "tokenizer.json")
        wordpiece = isinstance(spec.spec.get("model"), dict) and spec.spec["model"].get("type") == "WordPiece"
        named = ("pad_token", "mask_token") if wordpiece else TOKEN_FIELDS  # WordPiece: the rest from the file
        named = (*named, "truncation_side")
        return from_tokenizer_json(spec, model_max_length=max_length, **{k: options[k] for k in named if k in options})
    slow = [name for name in SLOW_TOKENIZER_FILES if (directory / name).is_file()]
    if slow and not (directory / "vocab.txt").is_file():
        raise ValueError(
            f"{directory} has {' and '.join(slow)} but no tokenizer.json: numbert reads BPE and SentencePiece "
            "tokenizers from a tokenizer.json only (transformers writes one: "
            "AutoTokenizer.from_pretrained(directory).save_pretrained(directory))"
        )
    return wordpiece_parts(
        directory / "vocab.txt", never_split=never_split or None, **options, model_max_length=max_length
    )


def read_options(path: Path) -> dict:
    """The tokenizer options in a tokenizer_config.json or special_tokens_map.json, as `wordpiece_parts`'
    arguments; every field numbert reads is checked, and an error names the file and the field.

    A token is a string or an AddedToken object {"content": ...}; model_max_length is kept only when it
    is a real limit (transformers writes a huge number for "none")."""
    config = read_object(path)

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
