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

import numpy as np

from ..checkpoint.colbert_config import ColbertConfig, read_colbert_config
from ..checkpoint.hub import VOCAB_FILES, default_model, model_checkpoint
from ..checkpoint.logit_score import LogitScore, read_logit_score
from ..checkpoint.m3_heads import M3Heads, read_m3_heads
from ..checkpoint.model_config import read_model_config
from ..checkpoint.sentence_config import (
    Modules,
    SentenceConfig,
    listed_modules,
    read_sentence_config,
    recipe_directory,
    sentence_modules,
)
from ..checkpoint.weights import UNEMBEDDING, Checkpoint, load_weights
from ..model.config import BertConfig, config_file
from ..model.decoder import build_encoder
from ..model.encoder import Encoder
from ..model.heads import SCORE, HeadConfig
from ..model.tensors import EMBEDDING_NAMES
from ..model.yes_no import score_weight
from ..tokenizer import Tokenizer
from ..tokenizer.chat_template import ChatTemplate
from ..tokenizer.load import SLOW_TOKENIZER_FILES, read_options
from .pair_prompt import PairPrompt


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
    pair_prompt: PairPrompt | None  # a decoder reranker's (Qwen3-Reranker): how a pair becomes its prompt


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
    pair_prompt = None
    if is_decoder_reranker(config, head_config.architecture, listed):
        pair_prompt = PairPrompt.of(ChatTemplate.read(directory) if has_vocab else None)
        if (head_config.architecture or "").endswith("ForCausalLM"):
            unembedding = None if head_config.tie_word_embeddings else checkpoint
            pair_prompt.refusal = add_score_row(weights, unembedding, tokenizer, read_logit_score(directory, listed))
    return Loaded(
        build_encoder(config, weights),
        tokenizer,
        sentence_config,
        name=str(name_or_path),
        head_config=head_config,
        directory=checkpoint.location if root == directory else root,
        colbert=colbert,
        m3=m3,
        pair_prompt=pair_prompt,
    )


def is_decoder_reranker(config: BertConfig, architecture: str | None, listed: Modules) -> bool:
    """A Qwen3 checkpoint that scores pairs: a Qwen3ForSequenceClassification, or a Qwen3ForCausalLM read as
    sentence-transformers' CrossEncoder reads it (no modules.json, or one listing a LogitScore); a
    sentence-transformers embedding directory over a Qwen3ForCausalLM (Qwen3-Embedding's) stays an embedder."""
    if config.model_type != "qwen3" or architecture is None:
        return False
    if architecture.endswith("ForSequenceClassification"):
        return True
    return architecture.endswith("ForCausalLM") and (listed is None or any(k == "LogitScore" for _, k in listed))


def add_score_row(
    weights: dict[str, np.ndarray],
    unembedding: Checkpoint | None,
    tokenizer: Tokenizer | None,
    score: LogitScore | None,
) -> str | None:
    """A causal-LM reranker's score as a sequence classifier: weights["score.weight"] = the "yes" row minus the "no"
    row (yes_no.score_weight) of lm_head.weight (only those two rows read) or, tied, of the word table. The ids are
    the LogitScore module's, else the tokenizer's "yes" and "no" (as sentence-transformers'). -> None, or why not."""
    if score is None:
        if tokenizer is None:
            return "its directory has no tokenizer to find the 'yes' and 'no' tokens in, and no LogitScore module"
        yes, no = tokenizer.convert_tokens_to_ids("yes"), tokenizer.convert_tokens_to_ids("no")
        missing = [word for word, i in (("yes", yes), ("no", no)) if i is None]
        if not isinstance(yes, int) or not isinstance(no, int):
            return (
                f"its tokenizer has no {' and no '.join(map(repr, missing))} token, whose logits a causal-LM "
                f"reranker reads, and its directory no LogitScore module naming others"
            )
        score = LogitScore(yes, no)
    wanted = [score.true_token_id] + ([] if score.false_token_id is None else [score.false_token_id])
    table = weights[EMBEDDING_NAMES["word"] + ".weight"]
    for token in wanted:
        if not 0 <= token < len(table):
            return f"its score token id {token} is not a row of the vocabulary (0 to {len(table) - 1})"
    if unembedding is None:
        rows = np.asarray(table[wanted], np.float32)
    else:
        found = unembedding.rows(UNEMBEDDING, wanted)
        if found is None:
            return f"config.json unties the word table, but {unembedding.path} has no {UNEMBEDDING!r}"
        rows = found
    weights[SCORE] = score_weight(rows[0], rows[1] if len(rows) > 1 else None)
    return None


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
