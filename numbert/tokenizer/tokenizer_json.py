"""BERT's WordPiece settings from a Hugging Face `tokenizer.json`, for directories without a vocab.txt.

A tokenizer.json describes a pipeline of the Rust `tokenizers` library. numbert's tokenizer is that
pipeline for BERT, so the file is read only when it is exactly BERT's:

    normalizer      BertNormalizer(clean_text=true, handle_chinese_chars, strip_accents, lowercase)
    pre_tokenizer   BertPreTokenizer (whitespace, then punctuation)
    model           WordPiece(vocab, unk_token, continuing_subword_prefix="##", max_input_chars_per_word)
    post_processor  [CLS] $A [SEP] / [CLS] $A [SEP] $B [SEP], type ids 0...0 / 1...1
                    (TemplateProcessing or BertProcessing)
    added_tokens    the special tokens, matched whole in the raw text

Any other pipeline (BPE, Unigram, other normalizers or templates) is refused, naming the field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def wordpiece_settings(path: str | os.PathLike) -> tuple[dict[str, int], dict[str, Any]]:
    """(vocabulary token -> id, keyword arguments for Tokenizer) of the tokenizer.json at `path`."""
    path = Path(path)
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{path} must hold a JSON object")

    def refuse(field: str, value: Any, expected: str) -> ValueError:
        return ValueError(
            f"{path}: {field} is {json.dumps(value)[:200]}, not {expected}; numbert runs BERT's "
            f"WordPiece tokenizer only"
        )

    model, normalizer = spec.get("model") or {}, spec.get("normalizer") or {}
    if model.get("type") != "WordPiece":
        raise refuse("model.type", model.get("type"), '"WordPiece"')
    if model.get("continuing_subword_prefix", "##") != "##":
        raise refuse("model.continuing_subword_prefix", model["continuing_subword_prefix"], '"##"')
    if normalizer.get("type") != "BertNormalizer" or not normalizer.get("clean_text", True):
        raise refuse("normalizer", spec.get("normalizer"), "a BertNormalizer with clean_text")
    if (spec.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer":
        raise refuse("pre_tokenizer", spec.get("pre_tokenizer"), "a BertPreTokenizer")
    decoder = spec.get("decoder")
    if decoder is not None and (decoder.get("type") != "WordPiece" or decoder.get("prefix", "##") != "##"):
        raise refuse("decoder", decoder, 'a WordPiece decoder with prefix "##"')
    cls_token, sep_token = _template_tokens(spec.get("post_processor"), refuse)

    vocab = model.get("vocab")
    if not (isinstance(vocab, dict) and vocab and all(isinstance(i, int) for i in vocab.values())):
        raise ValueError(f"{path}: model.vocab must map each token to its integer id")
    special = []
    for token in spec.get("added_tokens") or []:
        content, token_id = token.get("content"), token.get("id")
        if not token.get("special"):
            raise ValueError(
                f"{path}: added token {content!r} is not a special token; numbert matches only "
                f"special tokens whole in the raw text"
            )
        if vocab.setdefault(content, token_id) != token_id:
            raise ValueError(
                f"{path}: added token {content!r} has id {token_id}, the vocabulary gives it {vocab[content]}"
            )
        special.append(content)
    unk_token = model.get("unk_token", "[UNK]")
    pad_token = (spec.get("padding") or {}).get("pad_token", "[PAD]")
    options = {
        "do_lower_case": normalizer.get("lowercase", True),
        "strip_accents": normalizer.get("strip_accents"),  # None follows lowercase, as in the Rust normalizer
        "tokenize_chinese_chars": normalizer.get("handle_chinese_chars", True),
        "unk_token": unk_token,
        "cls_token": cls_token,
        "sep_token": sep_token,
        "pad_token": pad_token,
        "max_input_chars_per_word": model.get("max_input_chars_per_word", 100),
    }
    if "[MASK]" not in vocab:  # BERT's mask token; any other special token becomes one numbert never splits
        mask = [t for t in special if "mask" in t.lower()]
        if len(mask) == 1:
            options["mask_token"] = mask[0]
    named = {unk_token, cls_token, sep_token, pad_token, options.get("mask_token", "[MASK]")}
    options["never_split"] = [t for t in special if t not in named] or None
    for name in ("unk_token", "cls_token", "sep_token", "pad_token"):
        if options[name] not in vocab:
            raise ValueError(
                f"{path}: the {name.removesuffix('_token')} token {options[name]!r} is not in the vocabulary"
            )
    return vocab, options


def _template_tokens(processor: Any, refuse) -> tuple[str, str]:
    """(cls, sep) of a post-processor that frames inputs as BERT does; anything else is refused."""
    expected = "BERT's template [CLS] $A [SEP] / [CLS] $A [SEP] $B:1 [SEP]:1"
    if not isinstance(processor, dict):
        raise refuse("post_processor", processor, expected)
    if processor.get("type") == "BertProcessing":
        return processor["cls"][0], processor["sep"][0]
    if processor.get("type") != "TemplateProcessing":
        raise refuse("post_processor", processor, expected)

    def pieces(template: list) -> list[tuple[str, str, int]]:
        return [(kind, value["id"], value.get("type_id", 0)) for item in template for kind, value in item.items()]

    single, pair = pieces(processor.get("single") or []), pieces(processor.get("pair") or [])
    if len(single) == 3 and single[0][0] == single[2][0] == "SpecialToken":
        cls_token, sep_token = single[0][1], single[2][1]
        if single == [
            ("SpecialToken", cls_token, 0),
            ("Sequence", "A", 0),
            ("SpecialToken", sep_token, 0),
        ] and pair == [*single, ("Sequence", "B", 1), ("SpecialToken", sep_token, 1)]:
            return cls_token, sep_token
    raise refuse("post_processor", processor, expected)
