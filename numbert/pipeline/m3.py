"""BGE-M3: a dense vector, a sparse vector and a vector per token, all three from one forward.

BGE-M3 (Chen et al., 2024; BAAI/bge-m3, XLM-RoBERTa large) reads three outputs off the last layer, h (seq, hidden):

    dense    = h[CLS] / |h[CLS]|                                             (hidden,)
    sparse   = for each vocabulary id, the largest relu(sparse_linear(h_t)) over the tokens t of that id,
               [CLS], end of sequence, padding and unknown dropped           {id: weight}
    multi    = normalize(colbert_linear(h_t)) for every token after [CLS]   (tokens - 1, dim)

and scores a (query, passage) pair by each and by their weighted sum, as FlagEmbedding's BGEM3FlagModel does:

    dense   q.p          sparse  sum over shared ids of q_id * p_id          colbert  MaxSim / query vectors
    sparse+dense         (w_sparse * sparse + w_dense * dense) / (w_sparse + w_dense)
    colbert+sparse+dense (w_colbert * colbert + w_sparse * sparse + w_dense * dense) / (w_dense + w_sparse + w_colbert)

with weights (w_dense, w_sparse, w_colbert) = (1, 1, 1) unless given. These are methods of numbert.Bert:
model.embed_m3(texts) is BGEM3FlagModel.encode(return_dense=True, return_sparse=True, return_colbert_vecs=True),
model.m3_scores(pairs) its compute_score. The model's other methods give each output alone: embed (the dense
vector: a directory with BGE-M3's heads and no sentence-transformers files embeds by the normalized [CLS]),
embed_sparse (the lexical weights) and embed_multi (the token vectors).

One difference, by choice: FlagEmbedding's compute_score scores a batch of pairs padded together, so a passage
shorter than its batch's longest also offers its padding (zero vectors) to MaxSim, and a query token whose every
real match is negative scores 0 there instead. numbert takes the best over the passage's own tokens, as
FlagEmbedding's colbert_score of encoded vectors does, so a pair's score never depends on its batch-mates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..runtime import blas
from ..runtime.side_by_side import in_order
from . import planner
from .late_interaction import maxsim
from .pipeline import Pipeline, m3_vectors
from .planner import text_list
from .reranking import pair_list
from .sparse import SparseVector, dot

MODES = ("dense", "sparse", "colbert", "sparse+dense", "colbert+sparse+dense")


class M3Embeddings(NamedTuple):
    """BGE-M3's three outputs of texts, in input order."""

    dense: np.ndarray  # (n, hidden) float32, unit length
    sparse: list[SparseVector]  # ids ascending, weights > 0
    multi: list[np.ndarray]  # (tokens - 1, dim) float32 each, unit length


def embed_m3(
    model: Pipeline,
    texts: str | Sequence[str],
    *,
    batch_size: int = 32,
    max_length: int | None = None,
    truncation_side: str | None = None,
) -> M3Embeddings:
    """The dense vector, lexical weights and token vectors of each text from one forward, as BGEM3FlagModel.encode
    gives them; texts cut to max_length tokens (default: the model's, 512 for BGE-M3), planned by length."""
    texts = text_list([texts] if isinstance(texts, str) else texts)
    batch_size = planner.positive("batch_size", batch_size)
    read = m3_vectors(model)
    given = None if max_length is None else planner.positive("max_length", max_length)
    limit = model.inputs.multi_limit(is_query=False) if given is None else min(given, model.config.max_tokens)
    side = truncation_side or model.require_tokenizer().truncation_side
    rows = [model.inputs.bounded(i, t, None, limit, truncate=True, side=side) for i, t in enumerate(texts)]
    dense = np.empty((len(texts), model.config.hidden_size), np.float32)
    sparse: list[SparseVector] = [SparseVector(np.empty(0, np.int32), np.empty(0, np.float32))] * len(texts)
    multi: list[np.ndarray] = [np.empty((0, 0), np.float32)] * len(texts)

    def run(batch: list[int]) -> tuple[list[int], list]:
        return batch, read(model.forward_rows([planner.row_of(rows[i]) for i in batch], last_layers=read.last_layers))

    side_by_side = (
        blas.batches_at_once() if len(texts) > batch_size else 1
    )  # batches side by side where there are several
    for batch, answers in in_order(run, planner.by_length([len(r) for r in rows], limit, batch_size), side_by_side):
        for i, answer in zip(batch, answers):
            dense[i], sparse[i], multi[i] = answer
    return M3Embeddings(dense, sparse, multi)


def mode_weights(weights) -> tuple[float, float, float]:
    """weights_for_different_modes as three finite numbers (dense, sparse, colbert) whose mixes divide by a sum that
    is not 0, or a ValueError naming them (default: 1, 1, 1)."""
    if weights is None:
        return (1.0, 1.0, 1.0)
    numbers = isinstance(weights, (list, tuple)) and all(
        isinstance(w, (int, float, np.number)) and not isinstance(w, bool) and np.isfinite(w) for w in weights
    )
    if not numbers or len(weights) != 3:
        raise ValueError(
            f"weights_for_different_modes takes 3 finite numbers (dense, sparse, colbert), got {weights!r:.80}"
        )
    dense, sparse, colbert = map(float, weights)
    if dense + sparse == 0 or dense + sparse + colbert == 0:
        raise ValueError(f"weights_for_different_modes {weights!r} mix scores by dividing by sums that are 0")
    return dense, sparse, colbert


def m3_scores(
    model: Pipeline,
    pairs: Sequence[tuple[str, str]] | tuple[str, str],
    weights_for_different_modes: Sequence[float] | None = None,
    *,
    batch_size: int = 32,
    max_query_length: int | None = None,
    max_passage_length: int | None = None,
) -> dict[str, list[float]] | dict[str, float]:
    """Each (query, passage) pair's scores by every mode (MODES), as BGEM3FlagModel.compute_score gives them:
    {"dense": [...], "sparse": [...], "colbert": [...], "sparse+dense": [...], "colbert+sparse+dense": [...]};
    floats for one pair. weights_for_different_modes: (dense, sparse, colbert), default (1, 1, 1)."""
    single = isinstance(pairs, (list, tuple)) and len(pairs) == 2 and all(isinstance(p, str) for p in pairs)
    checked = pair_list([pairs] if single else pairs)
    weights = mode_weights(weights_for_different_modes)
    queries = embed_m3(model, [q for q, _ in checked], batch_size=batch_size, max_length=max_query_length)
    passages = embed_m3(model, [p for _, p in checked], batch_size=batch_size, max_length=max_passage_length)
    w_dense, w_sparse, w_colbert = weights
    scores: dict[str, list[float]] = {mode: [] for mode in MODES}
    for i in range(len(checked)):
        dense = float(queries.dense[i] @ passages.dense[i])
        sparse = dot(queries.sparse[i], passages.sparse[i])
        colbert = float(maxsim(queries.multi[i], passages.multi[i], length_normalize=True))
        scores["dense"].append(dense)
        scores["sparse"].append(sparse)
        scores["colbert"].append(colbert)
        scores["sparse+dense"].append((w_sparse * sparse + w_dense * dense) / (w_sparse + w_dense))
        scores["colbert+sparse+dense"].append(
            (w_colbert * colbert + w_sparse * sparse + w_dense * dense) / (w_dense + w_sparse + w_colbert)
        )
    return {mode: values[0] for mode, values in scores.items()} if single else scores
