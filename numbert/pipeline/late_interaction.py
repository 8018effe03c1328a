"""Late interaction (ColBERT): a text as one vector per token, and MaxSim between a query's and a document's.

ColBERT (Khattab and Zaharia, 2020) keeps every token vector instead of pooling them: each goes through a linear
projection (128 wide for most checkpoints) and is scaled to unit length. A query and a document are scored by
MaxSim, the sum over the query's tokens of their best dot product with any of the document's tokens:

    maxsim(Q, D) = sum over query tokens i of  max over document tokens j of  Q_i . D_j

These are methods of numbert.Bert, for checkpoints saved by PyLate or by sentence-transformers' MultiVectorEncoder
(numbert.checkpoint.colbert_config reads their recipe), and for BGE-M3's multi-vector output:

    model.embed_multi(texts, is_query=False)   one (tokens, dim) float32 array per text, as MultiVectorEncoder's
                                               encode_document (is_query=True: encode_query) and PyLate's
                                               ColBERT.encode(is_query=...) give them
    numbert.maxsim(q, d)                       MaxSim of two texts' vectors (or of lists of them: a matrix)
    model.rank_multi(query, documents)         the documents best first by the model's late-interaction score

A query is marked (PyLate: a token after [CLS]; MultiVectorEncoder: its "query" prompt), cut to the query length the
model was trained with and padded with [MASK]s to it (query expansion: the [MASK]s read the query, which never
reads them, unless the recipe attends to them), and every position gives a vector. A document is marked, cut to the
document length, and its punctuation (the skiplist) gives no vector. BGE-M3's vectors are those of every token
after [CLS] (no markers, no expansion) and it scores by MaxSim divided by the query's vectors (meanmaxsim), as
FlagEmbedding's colbert_score does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..runtime import blas
from ..runtime.side_by_side import in_order
from . import planner
from .inputs import multi_vector_kind
from .pipeline import Pipeline
from .planner import text_list
from .reranking import ranking

SIMILARITIES = ("maxsim", "meanmaxsim")


def embed_multi(
    model: Pipeline,
    texts: str | Sequence[str],
    is_query: bool = False,
    *,
    batch_size: int = 32,
    truncation_side: str | None = None,
) -> list[np.ndarray] | np.ndarray:
    """Each text's token vectors, (tokens, dim) float32, in input order; one array for a single string.

    is_query: encode queries (marked, expanded with [MASK] to the query length) rather than documents (marked,
    cut to the document length, the skiplist's tokens dropped). Texts are cut to the model's lengths (on
    truncation_side, default the tokenizer's), planned by length in batches of batch_size as `embed` plans them.
    """
    single = isinstance(texts, str)
    texts = text_list([texts] if single else texts)
    batch_size = planner.positive("batch_size", batch_size)
    rows = model.multi_rows(texts, is_query=is_query, truncate=True, side=truncation_side)
    read = model.multi_vectors(is_query)
    vectors: list[np.ndarray] = [np.empty((0, 0), np.float32)] * len(texts)
    limit = max((len(r.ids) for r in rows), default=1)

    def run(batch: list[int]) -> tuple[list[int], list[np.ndarray]]:
        return batch, read(model.forward_rows([rows[i] for i in batch], last_layers=read.last_layers))

    side = blas.batches_at_once() if len(texts) > batch_size else 1  # batches side by side where there are several
    for batch, answers in in_order(run, planner.by_length([len(r.ids) for r in rows], limit, batch_size), side):
        for i, answer in zip(batch, answers):
            vectors[i] = answer
    return vectors[0] if single else vectors


def maxsim(
    query_vectors: np.ndarray | Sequence[np.ndarray],
    document_vectors: np.ndarray | Sequence[np.ndarray],
    length_normalize: bool = False,
) -> float | np.ndarray:
    """MaxSim: for each query token its best dot product with the document's tokens, summed (divided by the
    query's tokens with length_normalize: meanmaxsim). Of two (tokens, dim) arrays a float; of lists of them the
    (queries, documents) float32 matrix, as MultiVectorEncoder.similarity gives it."""
    single_query, single_document = _is_one(query_vectors), _is_one(document_vectors)
    queries = [_vectors(query_vectors, "query_vectors")] if single_query else _list(query_vectors, "query_vectors")
    documents = (
        [_vectors(document_vectors, "document_vectors")]
        if single_document
        else _list(document_vectors, "document_vectors")
    )
    widths = {v.shape[1] for v in (*queries, *documents)}
    if len(widths) > 1:
        raise ValueError(f"maxsim takes token vectors of one width, got widths {sorted(widths)}")
    scores = np.zeros((len(queries), len(documents)), np.float32)
    for j, d in enumerate(documents):
        for i, q in enumerate(queries):
            if len(q) and len(d):
                best = (q @ d.T).max(axis=1)  # (query tokens,)
                scores[i, j] = best.sum(dtype=np.float32) / (np.float32(len(q)) if length_normalize else 1)
    if single_query and single_document:
        return float(scores[0, 0])
    return scores


def rank_multi(
    model: Pipeline,
    query: str,
    documents: Sequence[str],
    top_k: int | None = None,
    return_documents: bool = False,
    *,
    batch_size: int = 32,
) -> list[dict[str, Any]]:
    """The documents best first for `query` by the model's late-interaction score (MaxSim; meanmaxsim for a model
    that names it, and BGE-M3): [{"corpus_id": index in `documents`, "score": float}] with "text" if
    return_documents; the top_k best, or all. Ties keep the documents' order."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, not {type(query).__name__}")
    documents = text_list(documents, name="documents")
    if not documents:
        raise ValueError("documents is empty: rank_multi needs at least one document")
    if top_k is not None:
        top_k = planner.positive("top_k", top_k)
    q = embed_multi(model, [query], is_query=True, batch_size=batch_size)
    d = embed_multi(model, documents, is_query=False, batch_size=batch_size)
    scores = np.asarray(maxsim(q, d, length_normalize=similarity_of(model) == "meanmaxsim"))[0]
    return [
        {"corpus_id": i, "score": float(scores[i]), **({"text": documents[i]} if return_documents else {})}
        for i in ranking(scores, top_k)
    ]


def similarity_of(model: Pipeline) -> str:
    """The model's late-interaction score: its recipe's ("maxsim" or "meanmaxsim"), BGE-M3's "meanmaxsim"."""
    found = multi_vector_kind(model)
    return found.similarity if model.colbert is not None else "meanmaxsim"  # type: ignore[union-attr]


def _is_one(vectors) -> bool:
    return isinstance(vectors, np.ndarray) and vectors.ndim == 2


def _vectors(value, name: str) -> np.ndarray:
    given = np.asarray(value)
    if given.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be (tokens, dim) arrays of numbers, not {type(value).__name__} of {given.dtype}")
    array = given.astype(np.float32, copy=False)
    if array.ndim != 2:
        raise ValueError(f"{name} must be (tokens, dim) arrays, got shape {array.shape}")
    return array


def _list(values, name: str) -> list[np.ndarray]:
    if isinstance(values, np.ndarray) and values.ndim == 3:
        return [_vectors(v, f"{name}[{i}]") for i, v in enumerate(values)]
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a (tokens, dim) array or a list of them, not {type(values).__name__}")
    return [_vectors(v, f"{name}[{i}]") for i, v in enumerate(values)]
