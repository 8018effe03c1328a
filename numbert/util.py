"""sentence_transformers.util's functions in NumPy: code written for sentence-transformers runs with
`from numbert import util` in place of `from sentence_transformers import util`.

The same names, arguments and Python structures as sentence-transformers 6.2, but NumPy float32 arrays where
it returns torch tensors. cos_sim / dot_score: (n, dim), (m, dim) -> (n, m); pairwise_*: (n, dim), (n, dim)
-> (n,); semantic_search: [[{"corpus_id", "score"}, ...] per query]; paraphrase_mining: [[score, i, j], ...]
best first; community_detection: [[center, member, ...], ...] largest first; quantize_embeddings: as
numbert.pipeline.quantize.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

import numpy as np

from . import pipeline

f32 = np.float32
Scores = Callable[[np.ndarray, np.ndarray], np.ndarray]


__all__ = [  # sentence_transformers.util's functions (batch and Scores are this module's helpers)
    "community_detection",
    "cos_sim",
    "dot_score",
    "euclidean_sim",
    "manhattan_sim",
    "normalize_embeddings",
    "pairwise_cos_sim",
    "pairwise_dot_score",
    "pairwise_euclidean_sim",
    "pairwise_manhattan_sim",
    "paraphrase_mining",
    "paraphrase_mining_embeddings",
    "quantize_embeddings",
    "semantic_search",
]


def batch(value, name: str) -> np.ndarray:
    """`value` as a float32 (rows, dim) matrix (a single vector becomes one row), or an error naming `name`."""
    try:
        array = np.asarray(value)
    except ValueError:
        raise ValueError(f"{name} must be a vector or a matrix of rows of one length") from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be embeddings (numbers), not {type(value).__name__} of {array.dtype}")
    if array.ndim not in (1, 2):
        raise ValueError(f"{name} must be a vector or a (rows, dim) matrix, not of shape {array.shape}")
    with np.errstate(over="raise"):
        try:
            array = array.astype(f32, copy=False)
        except FloatingPointError:
            raise ValueError(f"{name} holds numbers beyond float32's range") from None
    return array[None] if array.ndim == 1 else array


def positive(value, name: str) -> int:
    """`value` if a positive int, else a ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def pair(a, b, pairwise: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """a and b as float32 (rows, dim) matrices of one width (and, pairwise, as many rows), else a ValueError."""
    u, v = batch(a, "a"), batch(b, "b")
    if u.ndim != 2 or v.ndim != 2:
        raise ValueError(f"a and b must be vectors or (rows, dim) matrices, not of shapes {u.shape} and {v.shape}")
    if u.shape[1] != v.shape[1]:
        raise ValueError(f"a's vectors have {u.shape[1]} values and b's {v.shape[1]}: they must be as wide")
    if pairwise and len(u) != len(v):
        raise ValueError(f"a has {len(u)} vectors and b {len(v)}: pairwise scores need as many of each")
    return u, v


def one_if_one(scores: np.ndarray, a, b) -> np.ndarray:
    """The pairwise scores, or of two single vectors their one score (as sentence-transformers' sum over the last
    axis gives it)."""
    return scores[0] if np.ndim(a) == 1 and np.ndim(b) == 1 else scores


def normalize_embeddings(embeddings) -> np.ndarray:
    """Each row divided by its L2 norm (a zero row stays zero), as torch's normalize(p=2, dim=-1, eps=1e-12)."""
    vectors = batch(embeddings, "embeddings")
    if vectors.ndim == 0:
        raise ValueError("embeddings must be a vector or a matrix of vectors, not one number")
    vectors = vectors[0] if np.ndim(embeddings) == 1 else vectors
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, f32(1e-12))


def cos_sim(a, b) -> np.ndarray:
    """Cosine similarities of every row of a with every row of b: res[i][j] = cos(a[i], b[j]). -> (n, m)"""
    u, v = pair(a, b)
    return normalize_embeddings(u) @ normalize_embeddings(v).T


def dot_score(a, b) -> np.ndarray:
    """Dot products of every row of a with every row of b: res[i][j] = a[i] . b[j]. -> (n, m)"""
    u, v = pair(a, b)
    return u @ v.T


def pairwise_dot_score(a, b) -> np.ndarray:
    """res[i] = a[i] . b[i]. -> (n,)"""
    u, v = pair(a, b, pairwise=True)
    return one_if_one((u * v).sum(axis=-1), a, b)


def pairwise_cos_sim(a, b) -> np.ndarray:
    """res[i] = cos(a[i], b[i]). -> (n,)"""
    u, v = pair(a, b, pairwise=True)
    return one_if_one(pairwise_dot_score(normalize_embeddings(u), normalize_embeddings(v)), a, b)


def euclidean_sim(a, b) -> np.ndarray:
    """Negative Euclidean distances of every row of a to every row of b. -> (n, m)"""
    u, v = pair(a, b)
    return -np.sqrt(((u[:, None, :] - v[None, :, :]) ** 2).sum(axis=-1))


def manhattan_sim(a, b) -> np.ndarray:
    """Negative Manhattan (L1) distances of every row of a to every row of b. -> (n, m)"""
    u, v = pair(a, b)
    return -np.abs(u[:, None, :] - v[None, :, :]).sum(axis=-1)


def pairwise_euclidean_sim(a, b) -> np.ndarray:
    """res[i] = -|a[i] - b[i]|. -> (n,)"""
    u, v = pair(a, b, pairwise=True)
    return one_if_one(-np.linalg.norm(u - v, axis=-1), a, b)


def pairwise_manhattan_sim(a, b) -> np.ndarray:
    """res[i] = -sum |a[i] - b[i]|. -> (n,)"""
    u, v = pair(a, b, pairwise=True)
    return one_if_one(-np.abs(u - v).sum(axis=-1), a, b)


SIMILARITIES = {  # similarity_fn_name -> (matrix, pairwise), as sentence-transformers' SimilarityFunction
    "cosine": (cos_sim, pairwise_cos_sim),
    "dot": (dot_score, pairwise_dot_score),
    "euclidean": (euclidean_sim, pairwise_euclidean_sim),
    "manhattan": (manhattan_sim, pairwise_manhattan_sim),
}


def semantic_search(
    query_embeddings,
    corpus_embeddings,
    query_chunk_size: int = 100,
    corpus_chunk_size: int = 500000,
    top_k: int = 10,
    score_function: Scores = cos_sim,
) -> list[list[dict[str, int | float]]]:
    """For each query its top_k corpus rows as {"corpus_id", "score"}, best first (numbert.pipeline's
    semantic_search, with sentence-transformers' argument order)."""
    options = {} if score_function is cos_sim else {"score_function": score_function}
    queries, corpus = batch(query_embeddings, "query_embeddings"), batch(corpus_embeddings, "corpus_embeddings")
    hits = pipeline.semantic_search(
        queries[0] if np.ndim(query_embeddings) == 1 else queries,
        corpus,
        top_k=top_k,
        query_chunk_size=query_chunk_size,
        corpus_chunk_size=corpus_chunk_size,
        **options,
    )
    return [[{"corpus_id": hit["corpus_id"], "score": hit["score"]} for hit in query] for query in hits]


def paraphrase_mining(
    model: pipeline.Bert,
    sentences: Sequence[str],
    show_progress_bar: bool = False,
    batch_size: int = 32,
    query_chunk_size: int = 5000,
    corpus_chunk_size: int = 100000,
    max_pairs: int = 500000,
    top_k: int = 100,
    score_function: Scores = cos_sim,
    **options,
) -> list[list[float | int]]:
    """The most similar pairs of `sentences` as [score, i, j] (i < j), best first: the sentences embedded by
    `model` (options such as truncate_dim, prompt_name, prompt go to its encode), then paraphrase_mining_embeddings."""
    embeddings = model.encode(list(sentences), batch_size=batch_size, show_progress_bar=show_progress_bar, **options)
    return paraphrase_mining_embeddings(
        embeddings, query_chunk_size, corpus_chunk_size, max_pairs, top_k, score_function
    )


def paraphrase_mining_embeddings(
    embeddings,
    query_chunk_size: int = 5000,
    corpus_chunk_size: int = 100000,
    max_pairs: int = 500000,
    top_k: int = 100,
    score_function: Scores = cos_sim,
) -> list[list[float | int]]:
    """The pairs of rows with the highest scores as [score, i, j] (i < j), best first: each row's top_k other
    rows, at most max_pairs pairs kept (a min-heap, as sentence-transformers keeps them)."""
    vectors = batch(embeddings, "embeddings")
    pairs: list[tuple[float, int, int]] = []
    queued: set[tuple[int, int]] = set()
    min_score = float("-inf")
    for start in range(0, len(vectors), query_chunk_size):
        scores = np.concatenate(
            [
                np.asarray(
                    score_function(vectors[start : start + query_chunk_size], vectors[c : c + corpus_chunk_size])
                )
                for c in range(0, len(vectors), corpus_chunk_size)
            ],
            axis=1,
        )
        best = np.argsort(-scores, axis=1, kind="stable")[:, : top_k + 1]
        for row, ids in enumerate(best):
            i = start + row
            for j in [int(j) for j in ids if j != i][:top_k]:
                score = float(scores[row, j])
                pair = (i, j) if i < j else (j, i)
                if score <= min_score or pair in queued:
                    continue
                queued.add(pair)
                if len(pairs) < max_pairs:
                    heapq.heappush(pairs, (score, *pair))
                else:
                    evicted = heapq.heappushpop(pairs, (score, *pair))
                    queued.discard(evicted[1:])
                    min_score = evicted[0]
    return sorted(([score, i, j] for score, i, j in pairs), key=lambda x: x[0], reverse=True)


def community_detection(
    embeddings,
    threshold: float = 0.75,
    min_community_size: int = 10,
    batch_size: int = 1024,
    show_progress_bar: bool = False,
) -> list[list[int]]:
    """Communities of rows whose cosine similarity to a central row is at least `threshold`, of at least
    min_community_size rows, none sharing a row, largest first; each list starts with its central row."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not abs(threshold) <= 1e30:
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    min_community_size, batch_size = (
        positive(min_community_size, "min_community_size"),
        positive(batch_size, "batch_size"),
    )
    vectors = normalize_embeddings(batch(embeddings, "embeddings"))
    if len(vectors) == 0 or vectors.shape[1] == 0:
        return []
    if len(vectors) < min_community_size:
        return []
    found = []
    for start in range(0, len(vectors), batch_size):
        scores = vectors[start : start + batch_size] @ vectors.T
        for row, center_scores in enumerate(scores):
            order = np.argsort(-center_scores, kind="stable")
            if center_scores[order[min_community_size - 1]] >= f32(threshold):
                members = order[center_scores[order] >= f32(threshold)]
                found.append((start + row, members.astype(np.int64)))
    found.sort(key=lambda x: len(x[1]), reverse=True)
    communities: list[list[int]] = []
    used = np.zeros(len(vectors), dtype=bool)
    for center, members in found:
        if used[center]:
            continue
        free = members[~used[members]]
        if len(free) >= min_community_size:
            community = [center] + free[free != center].tolist()
            communities.append(community)
            used[community] = True
    return sorted(communities, key=len, reverse=True)


def quantize_embeddings(
    embeddings, precision: str, ranges: np.ndarray | None = None, calibration_embeddings: np.ndarray | None = None
) -> np.ndarray:
    """Embeddings at `precision` (float32, int8, uint8, binary, ubinary), as numbert.pipeline.quantize; int8 and
    uint8 scaled by `ranges` ((2, dim): min, max), else by calibration_embeddings' min and max, else by their own."""
    if ranges is None and calibration_embeddings is not None:
        calibration = batch(calibration_embeddings, "calibration_embeddings")
        ranges = np.stack([calibration.min(axis=0), calibration.max(axis=0)])
    vectors = batch(embeddings, "embeddings")
    return pipeline.quantize(vectors[0] if np.ndim(embeddings) == 1 else vectors, precision, ranges)
