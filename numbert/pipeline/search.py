"""Semantic search: for each query vector, the corpus rows that score best against it, as util.semantic_search.

    hits = numbert.semantic_search(model.embed(queries), np.load("vectors.npy", mmap_mode="r"), top_k=5)
    hits[0]   # [{"corpus_id": 41, "score": 0.83}, ...] the first query's hits, best first

The corpus is read `corpus_chunk_size` rows at a time (a memory-mapped .npy is read a chunk at a time, never
whole) and scored against `query_chunk_size` queries at a time, so memory holds one chunk of each and their
score block, (query_chunk_size, corpus_chunk_size) float32, whatever the corpus's length. Each query keeps
its best `top_k` (score, corpus id) so far; a chunk's candidates are those at or above its top_k-th score.

Cosine (the default) normalizes each corpus chunk once and scores it by dot products, as
sentence-transformers does. Ties: equal scores rank the lower corpus id first. (sentence-transformers has no
rule: the order of its equal scores follows torch.topk's unspecified order and a heap, and changes with
top_k.) A row whose score is not a finite number (a row of NaN, an infinite value, a dot product past
float32's range) is skipped, never a hit: a query may get fewer than top_k hits, but never loses a finite one
to such a row, whatever the chunk sizes (sentence-transformers' torch.topk takes NaN for the best score).
Equal rows need not score equal to the last bit: BLAS may round a row by its place in the chunk, so
the chunk sizes can change a score's last bit, here as in sentence-transformers. Everything is float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypedDict

import numpy as np

from ..model.pooling import cosine_matrix, normalize

f32 = np.float32
Scores = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (queries, dim), (rows, dim) -> (queries, rows)


class Corpus(Protocol):
    """What semantic_search reads corpus vectors through: an array, a memory-mapped .npy, or any object with a
    shape, a dtype and row slices (numbert.engines.npy.NpyIndex reads a .npy so)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype: ...

    def __len__(self) -> int: ...

    def __getitem__(self, rows: slice, /) -> np.ndarray: ...


class Hit(TypedDict):
    """A corpus row found for a query: its index in the corpus and its score."""

    corpus_id: int
    score: float


def dot_score(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """All pairwise dot products. a: (n, dim), b: (m, dim) -> (n, m)"""
    return a @ b.T


def semantic_search(
    query_vectors: np.ndarray,
    corpus_vectors: Corpus,
    top_k: int = 10,
    query_chunk_size: int = 100,
    corpus_chunk_size: int = 500_000,
    score_function: Scores = cosine_matrix,
) -> list[list[Hit]]:
    """For each query, its `top_k` best corpus rows as {"corpus_id", "score"}, best first (rows whose score is
    not finite skipped: fewer hits then).

    query_vectors: (queries, dim) or (dim,); corpus_vectors: (rows, dim), of the same width and float type,
    in either byte order (a memory-mapped .npy too: replace such a file by renaming a new one over it, never
    by rewriting it in place, which mixes old and new rows into the hits or, truncated, kills the process
    with SIGBUS). score_function: cosine_matrix (default) or dot_score, or any function of two float32
    matrices giving their (n, m) scores."""
    queries = float_array(query_vectors, "query_vectors")
    queries = queries[None] if queries.ndim == 1 else queries
    check_search(queries, corpus_vectors, top_k, query_chunk_size, corpus_chunk_size)
    queries = queries.astype(f32, copy=False)
    cosine = score_function is cosine_matrix
    kept = [(np.empty(0, f32), np.empty(0, np.int64)) for _ in queries]
    for start in range(0, len(corpus_vectors), corpus_chunk_size):
        chunk = np.asarray(corpus_vectors[start : start + corpus_chunk_size], dtype=f32)
        with np.errstate(invalid="ignore", over="ignore"):  # rows that are not numbers: skipped by best_hits
            chunk = normalize(chunk) if cosine else chunk
        for first in range(0, len(queries), query_chunk_size):
            block = queries[first : first + query_chunk_size]
            with np.errstate(invalid="ignore", over="ignore"):
                scores = normalize(block) @ chunk.T if cosine else score_function(block, chunk)
            for i, row in enumerate(np.asarray(scores, dtype=f32), first):
                kept[i] = best_hits(row, start, *kept[i], top_k)
    return [[Hit(corpus_id=int(i), score=float(s)) for s, i in zip(*hits)] for hits in kept]


def float_array(value, name: str) -> np.ndarray:
    """`value` as a NumPy array of numbers, or a TypeError naming `name` (None, text, objects)."""
    array = np.asarray(value)
    if array.dtype.kind not in "biufc":
        raise TypeError(f"{name} must be an array of numbers, not {type(value).__name__} of {array.dtype}")
    return array


def best_hits(
    scores: np.ndarray, offset: int, kept_scores: np.ndarray, kept_ids: np.ndarray, top_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The top_k best of one query's kept hits and a chunk's scores (corpus ids from `offset`), best first,
    equal scores by lower id; a score that is not finite is no hit. scores: (rows,) -> ((<= top_k,) scores,
    (<= top_k,) ids)"""
    finite = np.isfinite(scores)  # np.partition would rank NaN above every number
    rows = None if finite.all() else np.flatnonzero(finite)  # the finite rows' places (None: all of them)
    scores = scores if rows is None else scores[rows]
    k = min(top_k, len(scores))
    if k == 0:
        return kept_scores, kept_ids
    kth = np.partition(scores, len(scores) - k)[len(scores) - k]  # the chunk's k-th best score
    candidates = np.flatnonzero(scores >= kth)  # every row tied with it too, so ties can go to the lower id
    all_scores = np.concatenate([kept_scores, scores[candidates]])
    all_ids = np.concatenate([kept_ids, (candidates if rows is None else rows[candidates]) + offset])
    best = np.lexsort((all_ids, -all_scores))[:top_k]
    return all_scores[best], all_ids[best]


def check_search(
    queries: np.ndarray, corpus: Corpus, top_k: int, query_chunk_size: int, corpus_chunk_size: int
) -> None:
    """A ValueError naming the argument: matrices of different widths or dtypes, not floats, or sizes below 1."""
    if not hasattr(corpus, "shape") or not hasattr(corpus, "dtype"):
        raise TypeError(f"corpus_vectors must be a (rows, dim) array, not {type(corpus).__name__}")
    if queries.ndim != 2 or len(corpus.shape) != 2:
        raise ValueError(
            f"query_vectors must be (queries, dim) or (dim,) and corpus_vectors (rows, dim), "
            f"got shapes {queries.shape} and {corpus.shape}"
        )
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(
            f"query_vectors have width {queries.shape[1]} but corpus_vectors {corpus.shape[1]}: "
            f"embed both with the same recipe (dimensions, pooling)"
        )
    if queries.dtype.type != corpus.dtype.type:  # float32 is float32 in either byte order
        raise ValueError(
            f"query_vectors are {queries.dtype} but corpus_vectors {corpus.dtype}: give both the same dtype"
        )
    if not np.issubdtype(queries.dtype, np.floating):
        raise ValueError(
            f"semantic_search scores float vectors, got {queries.dtype} (quantized vectors?): search float32 vectors"
        )
    for name, value in (
        ("top_k", top_k),
        ("query_chunk_size", query_chunk_size),
        ("corpus_chunk_size", corpus_chunk_size),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
