"""A WordPiece tokenizer.json read as BERT's stages: its vocabulary and the options of BERT's normalizer,
pre-tokenizer and template (`wordpiece_settings`), or, for another frame (MPNet's, a model's own), that template
(`other_frame`). The file's sections are read by numbert.tokenizer.tokenizer_json's TokenizerJson."""

from __future__ import annotations

import os
from typing import Any

from .templates import Template
from .tokenizer_json import TokenizerJson


def wordpiece_settings(
    path: str | os.PathLike, contents: Any = None, framing: tuple[str, str] | None = None
) -> tuple[dict[str, int], dict[str, Any]]:
    """(vocabulary token -> id, BERT's options: keyword arguments of `load.wordpiece_parts`) of the WordPiece
    tokenizer.json at `path` (whose `contents` may be given, already read). `framing`: the (cls, sep) of another
    template the caller reads itself (MPNet's `<s> A </s></s> B </s>`), instead of BERT's."""
    spec = TokenizerJson(path, contents)
    path, contents = spec.path, spec.spec
    model, normalizer = spec.section("model"), spec.section("normalizer")
    if model.get("type") != "WordPiece":
        raise spec.refuse("model.type", model.get("type"), '"WordPiece"')
    if model.get("continuing_subword_prefix", "##") != "##":
        raise spec.refuse("model.continuing_subword_prefix", model["continuing_subword_prefix"], '"##"')
    if normalizer.get("type") != "BertNormalizer" or normalizer.get("clean_text", True) is not True:
        raise spec.refuse("normalizer", contents.get("normalizer"), "a BertNormalizer with clean_text")
    if spec.section("pre_tokenizer").get("type") != "BertPreTokenizer":
        raise spec.refuse("pre_tokenizer", contents.get("pre_tokenizer"), "a BertPreTokenizer")
    decoder = spec.section("decoder")
    if decoder and (decoder.get("type") != "WordPiece" or decoder.get("prefix", "##") != "##"):
        raise spec.refuse("decoder", decoder, 'a WordPiece decoder with prefix "##"')
    cls_token, sep_token = framing or _template_tokens(spec)

    vocab = dict(spec.vocabulary(model.get("vocab")))
    if not vocab:
        raise ValueError(f"{path}: model.vocab must map each token to its integer id")
    special = _special_tokens(spec, vocab)
    token, flag = "a non-empty string", "true or false"
    options = {
        "do_lower_case": spec.setting("normalizer", "lowercase", bool, True, flag),
        "strip_accents": spec.setting("normalizer", "strip_accents", bool, None, "true, false or null"),  # null: lower
        "tokenize_chinese_chars": spec.setting("normalizer", "handle_chinese_chars", bool, True, flag),
        "unk_token": spec.setting("model", "unk_token", str, "[UNK]", token),
        "cls_token": cls_token,
        "sep_token": sep_token,
        "pad_token": spec.setting("padding", "pad_token", str, "<pad>" if "[PAD]" not in vocab else "[PAD]", token),
        "max_input_chars_per_word": spec.setting("model", "max_input_chars_per_word", int, 100, "a positive integer"),
    }
    if options["max_input_chars_per_word"] < 1:
        raise spec.refuse("model.max_input_chars_per_word", options["max_input_chars_per_word"], "a positive integer")
    if "[MASK]" not in vocab:  # BERT's mask token; any other special token becomes one numbert never splits
        mask = [t for t in special if "mask" in t.lower()]
        if len(mask) == 1:
            options["mask_token"] = mask[0]
    named = {options[name] for name in ("unk_token", "cls_token", "sep_token", "pad_token")}
    options["never_split"] = [t for t in special if t not in named | {options.get("mask_token", "[MASK]")}] or None
    for name in ("unk_token", "cls_token", "sep_token", "pad_token"):
        if not options[name] or options[name] not in vocab:
            raise ValueError(
                f"{path}: the {name.removesuffix('_token')} token {options[name]!r} is not in the vocabulary"
            )
    return vocab, options


def _special_tokens(spec: TokenizerJson, vocab: dict[str, int]) -> list[str]:
    """The contents of a WordPiece file's added tokens, each a special token, non-empty, with the vocabulary's
    id for it (added to the vocabulary when it is not there)."""
    tokens = spec.spec.get("added_tokens") or []
    expected = 'a list of {"content": a non-empty string, "id": an integer, "special": true}'
    if not isinstance(tokens, list):
        raise spec.refuse("added_tokens", tokens, expected)
    contents = []
    for i, token in enumerate(tokens):
        if not (isinstance(token, dict) and isinstance(token.get("content"), str) and type(token.get("id")) is int):
            raise spec.refuse(f"added_tokens[{i}]", token, expected)
        content, token_id = token["content"], spec.token_id(f"added_tokens[{i}].id", token["id"])
        if not content:
            raise spec.refuse(f"added_tokens[{i}]", token, "a token with a non-empty content")
        if token.get("special") is not True:
            raise ValueError(
                f"{spec.path}: added token {content!r} is not a special token; numbert matches only "
                f"special tokens whole in the raw text"
            )
        if vocab.setdefault(content, token_id) != token_id:
            raise ValueError(
                f"{spec.path}: added token {content!r} has id {token_id}, the vocabulary gives it {vocab[content]}"
            )
        contents.append(content)
    return contents


def is_berts_template(spec: TokenizerJson) -> bool:
    """Whether the post_processor frames inputs as BERT does ([CLS] A [SEP] / [CLS] A [SEP] B:1 [SEP]:1)."""
    try:
        _template_tokens(spec)
    except ValueError:
        return False
    return True


def other_frame(spec: TokenizerJson) -> Template | None:
    """The post-processor of a WordPiece tokenizer.json that frames inputs otherwise than BERT (None when it
    is BERT's, or when templates.py cannot read it either: then `wordpiece_settings` refuses it by name)."""
    if is_berts_template(spec):
        return None
    model = spec.spec.get("model")
    vocab = dict(model.get("vocab") or {}) if isinstance(model, dict) and isinstance(model.get("vocab"), dict) else {}
    try:
        for token in spec.added_tokens(vocab):
            vocab.setdefault(token.content, len(vocab))
        return spec.post_processor(vocab)
    except ValueError:
        return None


def _template_tokens(spec: TokenizerJson) -> tuple[str, str]:
    """(cls, sep) of a post-processor that frames inputs as BERT does; anything else is refused."""
    processor = spec.spec.get("post_processor")
    refused = spec.refuse("post_processor", processor, "BERT's template [CLS] $A [SEP] / [CLS] $A [SEP] $B:1 [SEP]:1")
    if not isinstance(processor, dict):
        raise refused
    if processor.get("type") == "BertProcessing":
        framing: list[Any] = [processor.get("cls"), processor.get("sep")]  # [token, id] each
        if not all(isinstance(t, list) and len(t) == 2 and isinstance(t[0], str) and t[0] for t in framing):
            raise refused
        return framing[0][0], framing[1][0]
    if processor.get("type") != "TemplateProcessing":
        raise refused

    def pieces(template: Any) -> list[tuple[str, Any, Any]]:
        """(kind, id, type id) of each piece of a template: [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, ...]."""
        if not (isinstance(template, list) and all(isinstance(item, dict) for item in template)):
            raise refused
        entries = [entry for item in template for entry in item.items()]
        if not all(isinstance(value, dict) for _, value in entries):
            raise refused
        return [(kind, value.get("id"), value.get("type_id", 0)) for kind, value in entries]

    single, pair = pieces(processor.get("single") or []), pieces(processor.get("pair") or [])
    if len(single) == 3 and all(isinstance(piece[1], str) and piece[1] for piece in single):
        cls_token, sep_token = single[0][1], single[2][1]
        if single == [
            ("SpecialToken", cls_token, 0),
            ("Sequence", "A", 0),
            ("SpecialToken", sep_token, 0),
        ] and pair == [*single, ("Sequence", "B", 1), ("SpecialToken", sep_token, 1)]:
            return cls_token, sep_token
    raise refused
