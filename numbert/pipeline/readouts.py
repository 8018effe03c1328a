"""Readouts: what one forward's rows become for each task, the head it needs and the output it reads.

    readout                      reads                   through                   one answer per row
    SentenceVectors(recipe)      hidden states, mask     pooling, Dense layers     (width,)
    TokenVectors()               last hidden state       nothing                   (seq, hidden)
    SequenceLogits(classifier)   pooler output ([CLS])   classifier                (labels,)
    TokenLogits(classifier)      last hidden state       classifier on each token  (seq, labels)
    SpanLogits(qa_outputs)       last hidden state       qa_outputs                (seq, 2): start, end
    MaskedLMLogits(head, config) last hidden state       cls.predictions           (seq, vocab)
    SparseVectors(head, ...)     last hidden state       cls.predictions, SPLADE   SparseVector: ids, weights
    MultiVectors(projection...)  last hidden state       Dense layers, normalize   (kept tokens, dim): ColBERT
    LexicalWeights(head, ...)    last hidden state       BGE-M3's sparse_linear    a SparseVector (ids, weights)
    M3Vectors(heads, ...)        last hidden state       BGE-M3's three outputs    an M3Vectors.Triple

Each is built from its head (numbert.model.heads.Heads builds and checks it), so a checkpoint without the
head fails when the readout is made, before any forward.

A readout is the task half of a planned batch: numbert.pipeline.planner runs the rows (a text, or a pair with its
token type ids) through the encoder, the readout turns the Output into each row's answer (token-level
answers cut to the row's own length, padding dropped). The server's queue groups rows by readout, so
one forward serves one task; the text tasks of numbert.pipeline.tasks (classify, ner, qa, fill_mask) read the
same logits and turn them into labels, entities, answers and words.

A readout that reads one token a row says which (`one_token`): the first ([CLS]: a classifier's logits, CLS pooling)
or the last real one (a decoder's last-token pooling and score); the forward then computes its last layer for those
tokens only (`Encoder.forward`): the same answers within rounding, for about 1/layers less work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..checkpoint.sentence_config import SpladePooling
from ..model.config import BertConfig
from ..model.encoder import ONE_TOKENS, Output
from ..model.heads import (
    MaskedLM,
    SequenceClassifier,
    classifier_logits,
    masked_lm_logits,
    sequence_input,
    sequence_logits,
    splade_weights,
)
from ..model.layers import Linear, linear, relu
from ..model.pooling import normalize
from .recipe import Recipe

BLOCK_TOKENS = 256  # tokens whose vocabulary scores SparseVectors holds at once: 256 x 30522 x 4 bytes = 31 MB


def row_lengths(out: Output) -> list[int]:
    """Each row's real tokens (its attention mask's sum); a windowed Output (no batch axis) is one row."""
    mask = out.attention_mask if out.batched else out.attention_mask[None]
    return [int(n) for n in mask.sum(axis=-1)]


def per_token(out: Output, values: np.ndarray) -> list[np.ndarray]:
    """(batch, seq, k) values of a batch -> each row's (length, k), its padding cut off."""
    values = values if out.batched else values[None]
    return [v[:n] for v, n in zip(values, row_lengths(out))]


@dataclass(frozen=True, eq=False)
class SentenceVectors:
    """A sentence vector per row: the recipe's pooling and Dense layers, before its `finish`. (width,)"""

    recipe: Recipe
    name = "embed"

    @property
    def task(self) -> str | None:
        """The task adapters its rows run through (jina-embeddings-v3: the recipe's task), or None."""
        return self.recipe.task

    @property
    def one_token(self) -> str | None:
        """The one token a row it reads, if it reads one ("first": CLS pooling; "last"): `Recipe.one_token`."""
        return self.recipe.one_token

    @property
    def last_layers(self) -> int | None:
        """How many of the last hidden states it reads (None: every one): see `Recipe.last_layers`."""
        return self.recipe.last_layers

    def __call__(self, out: Output) -> list[np.ndarray]:
        vectors = self.recipe.sentence_vectors(out)
        return list(vectors if out.batched else vectors[None])


@dataclass(frozen=True, eq=False)
class TokenVectors:
    """Every real token's vector of the last layer, unpooled (text-embeddings-inference's /embed_all). (seq, hidden)"""

    name = "embed_all"
    task = None  # no task adapters
    one_token = None  # reads every token
    last_layers = 1  # of the last layer alone

    def __call__(self, out: Output) -> list[np.ndarray]:
        return per_token(out, out.last_hidden_state)


@dataclass(frozen=True, eq=False)
class SequenceLogits:
    """A sequence classifier's logits per row (a text or a pair), on the pooler output (BERT), the first
    token's last hidden state (its relatives) or the last real token's (a decoder's score). (labels,)"""

    classifier: SequenceClassifier  # Heads.sequence_classifier
    name = "classify"
    task = None  # no task adapters
    last_layers = 1  # the last layer (and the pooler output made of it)

    @property
    def one_token(self) -> str | None:
        """The one token a row it reads: the first, or the last (a decoder's score); None for a head pooling the
        mean (ModernBERT's)."""
        return self.classifier.pooling if self.classifier.pooling in ONE_TOKENS else None

    def __call__(self, out: Output) -> list[np.ndarray]:
        pooled = out.pooler_output if out.batched or out.pooler_output is None else out.pooler_output[None]
        last, mask = out.last_hidden_state, out.states_mask
        first = sequence_input(
            last if out.batched else last[None], mask if out.batched else mask[None], self.classifier
        )
        return list(sequence_logits(first, pooled, self.classifier))


@dataclass(frozen=True, eq=False)
class TokenLogits:
    """A token classifier's logits for each real token of each row. (length, labels)"""

    classifier: Linear  # Heads.token_classifier: (labels, hidden)
    name = "token_classify"
    task = None  # no task adapters
    one_token = None  # reads every token
    last_layers = 1  # of the last layer alone

    def __call__(self, out: Output) -> list[np.ndarray]:
        return per_token(out, classifier_logits(out.last_hidden_state, self.classifier))


@dataclass(frozen=True, eq=False)
class SpanLogits:
    """The QA head's start and end logits for each real token of each row. (length, 2)"""

    qa_outputs: Linear  # Heads.question_answering: (2, hidden)
    name = "qa"
    task = None  # no task adapters
    one_token = None  # reads every token
    last_layers = 1  # of the last layer alone

    def __call__(self, out: Output) -> list[np.ndarray]:
        return per_token(out, classifier_logits(out.last_hidden_state, self.qa_outputs))


@dataclass(frozen=True, eq=False)
class MaskedLMLogits:
    """The masked-LM head's scores over the vocabulary for each real token of each row. (length, vocab)

    vocab x 4 bytes per token (122 kB for BERT's 30522): meant for short rows or few of them."""

    head: MaskedLM  # Heads.masked_lm
    config: BertConfig  # its LayerNorm epsilon
    name = "masked_lm"
    task = None  # no task adapters
    one_token = None  # reads every token
    last_layers = 1  # of the last layer alone

    def __call__(self, out: Output) -> list[np.ndarray]:
        c = self.config
        return [masked_lm_logits(h, self.head, c.layer_norm_eps) for h in per_token(out, out.last_hidden_state)]


class SparseVector(NamedTuple):
    """One text's sparse vector: the vocabulary ids of its non-zero weights, ascending, and the weights."""

    ids: np.ndarray  # (active,) int32, ascending
    weights: np.ndarray  # (active,) float32, > 0


def prune(weights: np.ndarray, top_k: int | None = None) -> SparseVector:
    """A dense SPLADE vector (vocab,) as a SparseVector of its non-zero weights, the top_k largest if given
    (ties at the cut: the lower ids), as select_max_active_dims and to_sparse() leave it."""
    ids = np.flatnonzero(weights)
    if top_k is not None and len(ids) > top_k:
        best = np.argsort(-weights[ids], kind="stable")[:top_k]  # ids ascending, so ties keep the lower
        ids = np.sort(ids[best])
    return SparseVector(ids.astype(np.int32), weights[ids])


@dataclass(frozen=True, eq=False)
class SparseVectors:
    """A SPLADE vector per row over the vocabulary, as its non-zero weights (`prune`): the masked-LM logits of each real
    token through log(1 + relu), pooled over the row's tokens (max, or sum), as SparseEncoder's SpladePooling.
    (vocab,)

    The real tokens of all rows are scored BLOCK_TOKENS at a time, so a batch never holds batch x seq x vocab
    floats: a block's rows (or pieces of them) are pooled into their vectors before the next block is scored.
    log(1 + relu(x)) never decreases as x grows, so the max of the weights is the weight of the max logit:
    with max pooling the logits are pooled and the activation runs once per row, not once per token."""

    head: MaskedLM  # Heads.masked_lm
    config: BertConfig  # its LayerNorm epsilon
    pooling: SpladePooling = SpladePooling()
    top_k: int | None = None  # the weights each vector keeps (`prune`); None: every non-zero one
    name = "embed_sparse"
    task = None  # no task adapters
    one_token = None  # reads every token
    last_layers = 1  # of the last layer alone

    def __call__(self, out: Output) -> list[SparseVector]:
        c, by_max = self.config, self.pooling.strategy == "max"
        pool = np.maximum if by_max else np.add
        rows = per_token(out, out.last_hidden_state)
        tokens = np.concatenate(rows)  # (real tokens, hidden)
        row_of_token = np.repeat(np.arange(len(rows)), [len(r) for r in rows])  # (real tokens,)
        vectors = np.zeros((len(rows), len(self.head.decoder)), np.float32)  # max: relu comes with the 0s
        for start in range(0, len(tokens), BLOCK_TOKENS):
            scores = masked_lm_logits(tokens[start : start + BLOCK_TOKENS], self.head, c.layer_norm_eps)
            if not by_max:
                scores = splade_weights(scores, self.pooling.activation)  # (block, vocab)
            owners = row_of_token[start : start + BLOCK_TOKENS]
            firsts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])  # where each row's piece begins
            here = owners[firsts]
            vectors[here] = pool(vectors[here], pool.reduceat(scores, firsts, axis=0))
        weights = splade_weights(vectors, self.pooling.activation) if by_max else vectors
        return [prune(row, self.top_k) for row in weights]


@dataclass(frozen=True, eq=False)
class MultiVectors:
    """A vector per kept token of each row, as a multi-vector (ColBERT) model reads them: the last layer's token
    vectors through the projection, each scaled to unit length. (kept tokens, dim)

    Kept: the row's real tokens from `first` on (BGE-M3 drops [CLS]); a query's first `expansion` positions
    whether real or expansion tokens ([MASK]s the other tokens never read); not the tokens whose ids are in
    `skip_ids` (a document's skiplist of punctuation). The kept tokens of all rows are projected in one product."""

    projection: Sequence[Callable[[np.ndarray], np.ndarray]]  # (tokens, hidden) -> (tokens, dim), in order
    normalize: bool = True
    skip_ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # ids whose vectors are dropped
    expansion: int = 0  # a query's expansion length: its first `expansion` positions are kept
    first: int = 0  # positions dropped at the start of each row
    name = "embed_multi"
    task = None  # no task adapters
    one_token = None  # reads every token
    last_layers = 1  # of the last layer alone

    def kept(self, out: Output) -> np.ndarray:
        """Which positions of the batch give a vector. (batch, seq) bool"""
        mask = (out.attention_mask if out.batched else out.attention_mask[None]).astype(bool)
        ids = out.input_ids if out.batched else out.input_ids[None]
        mask[:, : self.expansion] = True
        mask[:, : self.first] = False
        if len(self.skip_ids):
            mask &= ~np.isin(ids, self.skip_ids)
        return mask

    def __call__(self, out: Output) -> list[np.ndarray]:
        hidden = out.last_hidden_state if out.batched else out.last_hidden_state[None]
        kept = self.kept(out)
        vectors = hidden[kept]  # (kept tokens of all rows, hidden), row after row
        for layer in self.projection:
            vectors = layer(vectors)
        if self.normalize:
            vectors = normalize(vectors)
        return np.split(vectors, np.cumsum(kept.sum(axis=1))[:-1])


@dataclass(frozen=True, eq=False)
class LexicalWeights:
    """BGE-M3's sparse vector of each row: relu(sparse_linear(h)) per token, the largest per vocabulary id, the
    special tokens ([CLS], end of sequence, padding, unknown) dropped, as FlagEmbedding's lexical weights."""

    head: Linear  # M3Heads.sparse: (1, hidden)
    unused_ids: np.ndarray  # ids whose weights are dropped
    top_k: int | None = None  # the weights each vector keeps (the largest; ties: the lower ids); None: all
    name = "embed_sparse"
    task = None  # no task adapters
    one_token = None  # reads every token
    last_layers = 1  # of the last layer alone

    def __call__(self, out: Output) -> list[SparseVector]:
        weights = relu(linear(out.last_hidden_state, self.head))[..., 0]  # ([batch,] seq)
        weights = weights if out.batched else weights[None]
        batch_ids = out.input_ids if out.batched else out.input_ids[None]
        vectors = []
        for row_ids, row_weights, n in zip(batch_ids, weights, row_lengths(out)):
            keep = (row_weights[:n] > 0) & ~np.isin(row_ids[:n], self.unused_ids)
            kept_ids, kept_weights = row_ids[:n][keep], row_weights[:n][keep]
            order = np.lexsort((-kept_weights, kept_ids))  # by id, the largest weight of each id first
            kept_ids, kept_weights = kept_ids[order], kept_weights[order]
            first = np.ones(len(kept_ids), bool)  # no token kept (an empty text): no weight, FlagEmbedding's {}
            first[1:] = kept_ids[1:] != kept_ids[:-1]
            ids, values = kept_ids[first].astype(np.int32), kept_weights[first].astype(np.float32)
            if self.top_k is not None and len(ids) > self.top_k:
                best = np.sort(np.argsort(-values, kind="stable")[: self.top_k])  # ids ascending: ties keep the lower
                ids, values = ids[best], values[best]
            vectors.append(SparseVector(ids, values))
        return vectors


@dataclass(frozen=True, eq=False)
class M3Vectors:
    """BGE-M3's three outputs of each row from one forward: the dense vector (the normalized [CLS] vector), the
    lexical weights (LexicalWeights) and the multi-vector output (MultiVectors: colbert_linear on every token after
    [CLS], normalized), as FlagEmbedding's BGEM3FlagModel.encode gives them."""

    sparse: LexicalWeights
    multi: MultiVectors
    name = "embed_m3"
    task = None  # no task adapters
    one_token = None  # reads every token
    last_layers = 1  # of the last layer alone

    class Triple(NamedTuple):
        dense: np.ndarray  # (hidden,)
        sparse: SparseVector
        multi: np.ndarray  # (tokens - 1, dim)

    def __call__(self, out: Output) -> list[M3Vectors.Triple]:
        first = out.last_hidden_state[..., 0, :]
        dense = normalize(first if out.batched else first[None])
        return [M3Vectors.Triple(*answer) for answer in zip(dense, self.sparse(out), self.multi(out))]
