"""Sparse vectors (SPLADE): a text as weights over the vocabulary, for inverted-index and hybrid search.

SPLADE (Formal et al., 2021) reads the masked-LM head's scores of every token of a text: a token's logit
for vocabulary entry j says how much j belongs there. Each logit goes through log(1 + relu(x)), and the
text's weight for j is the maximum over its tokens (SPLADE v2's max pooling; sum in the first SPLADE):

    w_j = max over real tokens t of log(1 + relu(logits[t, j]))          (vocab,), almost all 0

This is sentence-transformers' SparseEncoder with an MLMTransformer (or a fill-mask Transformer) and
SpladePooling, and `embed_sparse` gives SparseEncoder.encode's vectors: the same active ids, the same
weights to float32 rounding. A directory saved by a SparseEncoder names its pooling, activation and
max_active_dims (numbert.checkpoint.sentence_config); any other checkpoint with a masked-LM head (bert-base-uncased)
runs as SparseEncoder runs it: max pooling of log(1 + relu), every weight kept.

`top_k` (SparseEncoder's max_active_dims) keeps each vector's k largest weights; among exactly equal
weights at the cut the lower ids are kept (torch.topk leaves that order unspecified). A vector comes as
its ids, ascending as in SparseEncoder's sparse tensor, and their weights; `token_weights` names them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..checkpoint.safetensors_file import read_safetensors
from ..runtime import blas
from ..runtime.side_by_side import in_order
from ..tokenizer import Tokenizer
from . import planner
from .pipeline import Pipeline
from .planner import row_of, text_list
from .readouts import SparseVector, prune


def embed_sparse(
    model: Pipeline,
    texts: str | Sequence[str],
    top_k: int | None = None,
    *,
    batch_size: int = 32,
    max_length: int | None = None,
    prompt: str | None = None,
    prompt_name: str | None = None,
    truncation_side: str | None = None,
    route: str | None = None,
) -> list[SparseVector] | SparseVector:
    """The SPLADE vectors of texts, as SparseEncoder.encode gives them: a SparseVector (ids ascending, weights)
    per text in input order, or one for a single string.

    top_k: the weights each vector keeps (SparseEncoder's max_active_dims; default: the directory's
    max_active_dims, else all). Texts are cut to max_length tokens (default: the model's max_seq_length, else
    its positions; at their start with truncation_side="left", default the tokenizer's), with the model's
    lowercasing and prompt (prompt=, prompt_name=) as `embed` prepares them; planned by length as `embed`
    plans them. An empty list or a text that is not a str is a clear error.

    route: a sentence-transformers Router's route ("query", "document"; None: its default route). A static route
    (an inference-free model's SparseStaticEmbedding) weighs each token a text holds by its fixed table: no forward.
    """
    single = isinstance(texts, str)
    texts = text_list([texts] if single else texts)
    if not texts:
        raise ValueError("texts is empty: embed_sparse needs at least one text")
    st = model.sentence_config
    top_k = st.max_active_dims if top_k is None and st is not None else top_k
    top_k = None if top_k is None else planner.positive("top_k", top_k)
    router = st.router if st is not None else None
    if st is not None and router is not None and router.route(route) != router.encoder_route:
        folder = router.directory / router.routes[router.route(route)][0][0]
        static = static_vectors(model, texts, folder, top_k, st.prompt(prompt, prompt_name))
        return static[0] if single else static
    if router is None and route not in (None, "query", "document"):
        raise ValueError(f"route {route!r}: {model.name} has no Router; its texts all take one route")
    read = model.sparse_vectors(top_k)
    shape = model.recipe(  # the text: its length, prompt and lowercasing
        pooling="mean", max_length=max_length, prompt=prompt, prompt_name=prompt_name, truncation_side=truncation_side
    )
    vectors: list[SparseVector] = [SparseVector(np.empty(0, np.int32), np.empty(0, np.float32))] * len(texts)

    def run(batch: tuple[list[int], list]) -> tuple[list[int], list[SparseVector]]:
        return batch[0], read(model.forward_rows([row_of(e) for e in batch[1]], last_layers=read.last_layers))

    side = blas.batches_at_once() if len(texts) > batch_size else 1  # batches side by side where there are several
    for positions, answers in in_order(run, model.inputs.plan(texts, None, shape, batch_size), side):
        for i, vector in zip(positions, answers):
            vectors[i] = vector
    return vectors[0] if single else vectors


def dot(a: SparseVector, b: SparseVector) -> float:
    """The dot product of two sparse vectors (SparseEncoder's default similarity): over the ids they share."""
    _, i, j = np.intersect1d(a.ids, b.ids, assume_unique=True, return_indices=True)
    return float(a.weights[i] @ b.weights[j])


def token_weights(model: Pipeline, vector: SparseVector) -> dict[str, float]:
    """A sparse vector as {token: weight}, the largest weight first (ties: the lower id first)."""
    if not isinstance(vector, SparseVector):
        raise TypeError(f"sparse_tokens takes a SparseVector (of embed_sparse), not {type(vector).__name__}")
    order = np.argsort(-vector.weights, kind="stable")
    tokens = model.require_tokenizer().convert_ids_to_tokens(vector.ids[order].tolist())
    return dict(zip(tokens, vector.weights[order].tolist()))


def static_vectors(
    model: Pipeline, texts: list[str], folder: Path, top_k: int | None, prompt: str
) -> list[SparseVector]:
    """The sparse vectors of a SparseStaticEmbedding route (in `folder`): each token the text (after `prompt`) holds,
    counted once, weighs its entry of the route's table; tokenized without special tokens and cut to its
    tokenizer's model_max_length, as sentence-transformers tokenizes for that module."""
    weights, tokenizer = static_route(folder)
    if model.tokenizer is not None and len(weights) != model.config.vocab_size:
        raise ValueError(
            f"{folder}: its table has {len(weights)} weights for a vocabulary of {model.config.vocab_size}"
        )
    limit = tokenizer.model_max_length
    vectors = []
    for text in texts:
        ids = tokenizer.encode(
            prompt + text, add_special_tokens=False, max_length=limit, truncation=limit is not None
        ).ids
        dense = np.zeros(len(weights), np.float32)
        present = np.unique(np.asarray(ids, np.int64))
        dense[present] = weights[present]
        vectors.append(prune(dense, top_k))
    return vectors


@functools.lru_cache(maxsize=4)
def static_route(folder: Path) -> tuple[np.ndarray, Tokenizer]:
    """A SparseStaticEmbedding folder's table (vocab,) float32 and its tokenizer, read once."""
    file = folder / "model.safetensors"
    try:
        weight = read_safetensors(file).get("weight")
    except OSError as e:
        raise ValueError(f"{file}: cannot read the SparseStaticEmbedding's weights ({e})") from None
    if weight is None or weight.ndim != 1 or not np.isfinite(weight).all():
        raise ValueError(f"{file}: a SparseStaticEmbedding needs one finite 'weight' vector (vocab,)")
    return weight.astype(np.float32, copy=False), Tokenizer.from_pretrained(folder)
