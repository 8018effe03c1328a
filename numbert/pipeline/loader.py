"""The loader: a model directory (or hub id) -> its parts, each of the directory's files read here and once: the
config, the weights, the tokenizer, a sentence-transformers recipe, a ColBERT recipe, BGE-M3's heads, the task heads'
config. `Pipeline.from_pretrained` composes the parts.

    parts = load_parts("./all-MiniLM-L6-v2")
    parts.encoder, parts.tokenizer, parts.sentence_config
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from ..checkpoint.colbert_config import ColbertConfig, read_colbert_config
from ..checkpoint.hub import VOCAB_FILES, default_model, model_checkpoint
from ..checkpoint.m3_heads import M3Heads, read_m3_heads
from ..checkpoint.model_config import read_model_config
from ..checkpoint.sentence_config import (
    SentenceConfig,
    listed_modules,
    read_sentence_config,
    recipe_directory,
    sentence_modules,
)
from ..checkpoint.weights import load_weights
from ..model.config import config_file
from ..model.decoder import build_encoder
from ..model.encoder import Encoder
from ..model.heads import HeadConfig
from ..tokenizer import Tokenizer
from ..tokenizer.load import SLOW_TOKENIZER_FILES, read_options


class Loaded(NamedTuple):
    """A model directory's parts, as `Pipeline` takes them."""

    encoder: Encoder
    tokenizer: Tokenizer | None  # None: a directory without a vocabulary (it runs on token ids)
    sentence_config: SentenceConfig | None  # a sentence-transformers directory's recipe
    name: str
    head_config: HeadConfig  # the task heads' options (labels, problem type)
    directory: Path  # where the checkpoint was found (a TF checkpoint: its prefix; a Router's: its directory)
    colbert: ColbertConfig | None  # a multi-vector (ColBERT) model's recipe: PyLate's or MultiVectorEncoder's
    m3: M3Heads | None  # BGE-M3's heads (colbert_linear.pt, sparse_linear.pt)


def load_parts(
    name_or_path: str | os.PathLike | None = None,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    check_finite: bool = False,
) -> Loaded:
    """Config, tokenizer, weights and recipes from a local directory or a Hugging Face hub id (default:
    $NUMBERT_MODEL, else bert-base-uncased). check_finite: refuse weights holding NaN or infinity, naming the
    tensor (it reads every page of the weights)."""
    name_or_path = default_model() if name_or_path is None else name_or_path
    checkpoint = model_checkpoint(name_or_path, revision=revision, cache_dir=cache_dir)
    directory = checkpoint.directory
    config, head_config = read_model_config(config_file(directory))  # config.json, or Google's bert_config.json
    weights = load_weights(checkpoint, config, check_finite=check_finite)
    listed = listed_modules(directory)  # modules.json, read once
    colbert = read_colbert_config(directory, config, sentence_modules(directory, listed))
    m3 = read_m3_heads(directory, config.hidden_size)
    has_vocab = any((directory / f).is_file() for f in (*VOCAB_FILES, *SLOW_TOKENIZER_FILES))  # (slow: refused)
    pylate = colbert is not None and colbert.library == "PyLate"
    tokenizer = load_tokenizer(directory, pylate) if has_vocab else None
    if tokenizer is not None:  # a vocabulary that does not fit the embedding table is refused here, named
        tokenizer.check_embedding_rows(config.vocab_size, str(checkpoint.location))
    root = recipe_directory(directory)  # a Router's encoder folder: the Router's directory holds the recipe
    sentence_config = read_sentence_config(root, config.hidden_size, listed if root == directory else ...)
    if sentence_config is None and m3 is not None:  # BGEM3FlagModel's dense vector: the normalized [CLS]
        sentence_config = SentenceConfig(("cls",), normalize=True)
    return Loaded(
        build_encoder(config, weights),
        tokenizer,
        sentence_config,
        name=str(name_or_path),
        head_config=head_config,
        directory=checkpoint.location if root == directory else root,
        colbert=colbert,
        m3=m3,
    )


def load_tokenizer(directory: Path, pylate: bool) -> Tokenizer:
    """The directory's tokenizer. PyLate saves its markers ("[Q] ", "[D] ") in tokenizer.json as added tokens that
    are not special, which numbert's tokenizer does not match; numbert inserts their ids itself, and, as
    sentence-transformers does when it loads a PyLate checkpoint, registers them as special tokens (matched whole in
    the raw text, where transformers would match them in the lowercased text too)."""
    path = directory / "tokenizer.json"
    if not pylate or (directory / "vocab.txt").is_file() or not path.is_file():
        return Tokenizer.from_pretrained(directory)
    from ..tokenizer.tokenizer_json import TokenizerJson

    spec = TokenizerJson(path)
    for token in spec.spec.get("added_tokens") or []:
        if isinstance(token, dict) and token.get("special") is False:
            token["special"], token["normalized"] = True, False
    options: dict = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if (directory / name).is_file():
            options |= read_options(directory / name)
    named = ("pad_token", "mask_token", "truncation_side")
    kept = {k: options[k] for k in named if k in options}
    return Tokenizer.from_tokenizer_json(spec, model_max_length=options.get("model_max_length"), **kept)
