"""Cross-encoder reranking: a query and documents in, the documents best first.

A cross-encoder is a BertForSequenceClassification checkpoint that reads a query and a document
together, `[CLS] query [SEP] document [SEP]` (the document's tokens with token type 1), and scores the
pair with its classifier on the pooler output (ms-marco-MiniLM, bge-reranker-base-style BERT
rerankers). As sentence-transformers' CrossEncoder does:

    predict(model, pairs)             CrossEncoder.predict: (n,) scores for one label, (n, labels) for several
    rerank(model, query, documents)   CrossEncoder.rank: [{"corpus_id", "score"(, "text")}], best first

Scores are the logits through the model's activation: the one its directory names (a CrossEncoder's
config_sentence_transformers.json `activation_fn`, else config.json's `sentence_transformers.activation_fn`
or the older `sbert_ce_default_activation_function`), else sigmoid for one label and the logits themselves
for several. A pair longer than the model reads is cut as CrossEncoder's tokenizer call cuts it
(truncation "longest_first": the longer segment loses tokens first) to its sentence_bert_config
max_seq_length, else the tokenizer's model_max_length, at most the model's positions; or, numbert's own
option (long="window"), a long document is scored by its best window. Ties keep the documents' order,
as CrossEncoder.rank's stable sort does.

A decoder reranker (Qwen3-Reranker: a Qwen3ForCausalLM read through its "yes" and "no" logits, or its
Qwen3ForSequenceClassification conversion) is such a model with one label: its pair is one chat prompt
(numbert.pipeline.pair_prompt), `prompt` its instruction, scored on the prompt's last token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ..model.heads import sigmoid, softmax
from ..runtime import blas
from ..runtime.side_by_side import in_order
from . import planner
from .pipeline import Pipeline
from .planner import Row, row_of, text_list
from .recipe import check_long

Activation = Callable[[np.ndarray], np.ndarray]
ACTIVATIONS: dict[str, Activation] = {"sigmoid": sigmoid, "identity": lambda logits: logits, "tanh": np.tanh}
TORCH_ACTIVATIONS = {"Sigmoid": "sigmoid", "Identity": "identity", "Tanh": "tanh"}  # torch.nn classes by name


def default_activation(model: Pipeline) -> str:
    """The name of the activation CrossEncoder applies to this model's logits (a key of ACTIVATIONS).

    A dotted path outside torch is ignored, as CrossEncoder ignores it without trust_remote_code."""
    st = model.sentence_config
    for path in (None if st is None else st.activation_fn, model.heads.head_config.activation_fn):
        if path is not None and path.startswith("torch."):
            name = path.rsplit(".", 1)[-1]
            if name not in TORCH_ACTIVATIONS:
                raise ValueError(
                    f"{model.name}: its activation_fn {path} is not one numbert runs "
                    f"({', '.join(TORCH_ACTIVATIONS)}); pass activation_fn= yourself"
                )
            return TORCH_ACTIVATIONS[name]
    return "sigmoid" if len(model.labels) == 1 else "identity"


def activation_of(model: Pipeline, activation_fn: str | Activation | None) -> Activation:
    """The function scores go through: `activation_fn` (a name of ACTIVATIONS, or a function of the logits
    array), else the model's default."""
    if callable(activation_fn):
        return activation_fn
    name = default_activation(model) if activation_fn is None else activation_fn
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation_fn {name!r}; use one of {', '.join(ACTIVATIONS)} or a function")
    return ACTIVATIONS[name]


def planned_rows(
    model: Pipeline, pairs: Sequence[tuple[str, str]], *, batch_size: int, limit: int, prompt: str
) -> Iterator[tuple[list[int], list[Row]]]:
    """(positions, rows) of each batch of pairs in the order they run, cut to `limit` tokens: planned by length as
    embed plans texts, `prompt` before each query; a decoder reranker's pairs as its prompts (`prompt` its
    instruction: Inputs.prompt_rows), by length too."""
    if model.pair_prompt is not None:
        rows = model.inputs.prompt_rows(pairs, prompt, limit)
        for batch in planner.by_length([len(r.ids) for r in rows], limit, batch_size):
            yield batch, [rows[i] for i in batch]
        return
    planned = planner.plan_texts(
        model.require_tokenizer(),
        [prompt + a for a, _ in pairs],
        [b for _, b in pairs],
        batch_size=batch_size,
        limit=limit,
        window=False,
        prepare=model.inputs.segment,
    )
    for positions, encodings in planned:
        yield positions, [row_of(e) for e in encodings]


def logits(
    model: Pipeline, pairs: Sequence[tuple[str, str]], *, batch_size: int, limit: int, prompt: str = ""
) -> np.ndarray:
    """The classifier's logits of each pair cut to `limit` tokens (`planned_rows`), the planned batches side by
    side where the process runs them so (numbert.runtime.blas.batches_at_once). (n, labels) float32"""
    readout = model.sequence_logits()
    out = np.empty((len(pairs), len(model.labels)), np.float32)
    planned = planned_rows(model, pairs, batch_size=batch_size, limit=limit, prompt=prompt)

    def scored(batch: tuple[list[int], list[Row]]) -> tuple[list[int], np.ndarray]:
        positions, rows = batch
        out = model.forward_rows(rows, one_token=readout.one_token, last_layers=readout.last_layers)
        return positions, np.stack(readout(out))

    side = blas.batches_at_once() if len(pairs) > batch_size else 1
    for positions, logits_of_batch in in_order(scored, planned, side):
        out[positions] = logits_of_batch
    return out


def best_window_logits(
    model: Pipeline, pairs: Sequence[tuple[str, str]], *, batch_size: int, limit: int, stride: int, prompt: str = ""
) -> np.ndarray:
    """Each pair's highest logit over the windows of its document: `[CLS] query [SEP] window [SEP]` of `limit`
    tokens, the query whole in each, the document's windows overlapping by `stride` tokens (the tokenizer's
    truncation="only_second" with its overflowing windows). One label only. (n, 1) float32"""
    tokenizer, prepare = model.require_tokenizer(), model.inputs.segment
    readout = model.sequence_logits()
    windows = []  # (pair index, encoding)
    for i, (query, document) in enumerate(pairs):
        first = tokenizer.encode(
            prepare(prompt + query),
            prepare(document),
            max_length=limit,
            truncation="only_second",
            stride=stride,
            return_overflowing_tokens=True,
        )
        windows += [(i, e) for e in [first, *first.overflowing]]
    best = np.full((len(pairs), 1), -np.inf, np.float32)
    for batch in planner.by_length([len(e) for _, e in windows], limit, batch_size):
        rows = [row_of(windows[w][1]) for w in batch]
        out = model.forward_rows(rows, one_token=readout.one_token, last_layers=readout.last_layers)
        for w, row_logits in zip(batch, readout(out)):
            i = windows[w][0]
            best[i] = np.maximum(best[i], row_logits)
    return best


def pair_list(pairs: Any) -> list[tuple[str, str]]:
    """The pairs as (str, str) tuples, or a TypeError naming the first that is not."""
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Iterable):
        raise TypeError(f"pairs must be a list of (query, document) pairs of str, not {type(pairs).__name__}")
    for i, pair in enumerate(pairs):
        if isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise TypeError(f"pairs[{i}] must be a (query, document) pair of str, not {pair!r:.60}")
        text_list(pair, name=f"pairs[{i}]")
    return [(a, b) for a, b in pairs]


def predict(
    model: Pipeline,
    pairs: Sequence[tuple[str, str]] | tuple[str, str],
    batch_size: int = 32,
    activation_fn: str | Activation | None = None,
    apply_softmax: bool = False,
    *,
    max_length: int | None = None,
    long: str = "truncate",
    stride: int | None = None,
    prompt: str | None = None,
    prompt_name: str | None = None,
) -> np.ndarray:
    """The scores of (query, document) pairs, as CrossEncoder.predict: (n,) float32 for a model with one
    label, (n, labels) for several; one pair (a tuple or list of two str) gives its score alone.

    activation_fn: "sigmoid", "identity" (the logits), "tanh", or a function of the (n, labels) logits;
    default: the model's (see the module's docstring). apply_softmax: with several labels, a softmax over
    them after the activation. max_length: tokens per pair (default: as CrossEncoder reads the model).
    long="window" (numbert's own, one label only): a document too long for max_length is scored by its
    best window, windows overlapping by `stride` tokens (default: a quarter of max_length), the query
    whole in each; the best window is the one of the highest logit, the best score under any increasing
    activation (all of ACTIVATIONS). prompt (or prompt_name, one of the directory's prompts; default its
    default_prompt_name's): CrossEncoder's, put before each query, or a decoder reranker's instruction (its
    template's system message); "" none.
    """
    single = isinstance(pairs, (list, tuple)) and bool(pairs) and isinstance(pairs[0], str)
    checked = pair_list([pairs] if single else pairs)
    activation = activation_of(model, activation_fn)
    batch_size, limit = planner.positive("batch_size", batch_size), model.inputs.pair_limit(max_length)
    check_long(long)
    instruction = prompt_of(model, prompt, prompt_name)
    if long == "window":
        if model.pair_prompt is not None:
            raise ValueError(
                f"long='window' reads a cross-encoder's [CLS] query [SEP] window; {model.name} reads "
                f"a pair as one prompt: use long='truncate'"
            )
        labels = len(model.heads.sequence_classifier.out.weight)
        if labels != 1:
            raise ValueError(
                f"long='window' scores a document by its best window, for one label; {model.name} has {labels}"
            )
        stride = limit // 4 if stride is None else stride
        raw = best_window_logits(model, checked, batch_size=batch_size, limit=limit, stride=stride, prompt=instruction)
    else:
        raw = logits(model, checked, batch_size=batch_size, limit=limit, prompt=instruction)
    scores = activation(raw)
    if scores.shape[1] == 1:
        scores = scores[:, 0]
    elif apply_softmax:
        scores = softmax(scores)
    return scores[0] if single else scores


def prompt_of(model: Pipeline, prompt: str | None, prompt_name: str | None) -> str:
    """The prompt a call asks for: `prompt`, else the directory's prompt named `prompt_name`, else its default
    prompt, else none (""), as CrossEncoder resolves them."""
    if prompt is not None and not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, not {type(prompt).__name__}")
    if model.sentence_config is not None:
        return model.sentence_config.prompt(prompt, prompt_name)
    if prompt_name is not None:
        raise ValueError(f"unknown prompt_name {prompt_name!r}; {model.name} has no prompts")
    return prompt or ""


def ranking(scores: np.ndarray, top_k: int | None = None) -> list[int]:
    """The indices of `scores` (n,), best first, ties in index order (a stable sort); the first top_k."""
    return [int(i) for i in np.argsort(-scores, kind="stable")[:top_k]]


def rerank(
    model: Pipeline,
    query: str,
    documents: Sequence[str],
    top_k: int | None = None,
    raw_scores: bool = False,
    batch_size: int = 32,
    return_documents: bool = False,
    *,
    activation_fn: str | Activation | None = None,
    max_length: int | None = None,
    long: str = "truncate",
    stride: int | None = None,
    prompt: str | None = None,
    prompt_name: str | None = None,
) -> list[dict[str, Any]]:
    """The documents best first for `query`, as CrossEncoder.rank: [{"corpus_id": index in `documents`,
    "score": float}], with "text" (the document) if return_documents; the top_k best, or all.

    Scores as `predict` gives them (long="window": a long document scored by its best window);
    raw_scores=True: the logits themselves (activation_fn="identity"); prompt, prompt_name: as `predict`'s.
    The model must have one label (a relevance score), as CrossEncoder.rank requires.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, not {type(query).__name__}")
    if not query.strip():
        raise ValueError("query is empty")
    documents = text_list(documents, name="documents")
    if not documents:
        raise ValueError("documents is empty: rerank needs at least one document")
    if top_k is not None:
        top_k = planner.positive("top_k", top_k)
    if raw_scores:
        if activation_fn is not None:
            raise ValueError("pass raw_scores=True or activation_fn=, not both")
        activation_fn = "identity"
    labels = len(model.sequence_logits().classifier.out.weight)
    if labels != 1:
        raise ValueError(
            f"rerank needs a cross-encoder with one label (a relevance score); {model.name} has {labels}: "
            f"use predict(pairs) for their scores"
        )
    pairs = [(query, d) for d in documents]
    scores = predict(
        model,
        pairs,
        batch_size,
        activation_fn,
        max_length=max_length,
        long=long,
        stride=stride,
        prompt=prompt,
        prompt_name=prompt_name,
    )
    return [
        {"corpus_id": i, "score": float(scores[i]), **({"text": documents[i]} if return_documents else {})}
        for i in ranking(scores, top_k)
    ]
