"""numbert.Bert: what users load. The pipeline (numbert.pipeline.pipeline.Pipeline: tokenizer, encoder, heads and
sentence recipe, and the path of text through them) with every task of this layer as a method.

    model = numbert.load("./all-MiniLM-L6-v2")
    model("a text")                  # the whole forward: an Output with every hidden state
    model.embed(texts)               # sentence vectors (numbert.pipeline.embedding)
    model.rerank(query, documents)   # a cross-encoder's ranking (numbert.pipeline.reranking)

Each method is a function of its module taking the pipeline first: model.fill_mask(text) is
numbert.pipeline.tasks.fill_mask(model, text). The modules know the Pipeline, never this class.
"""

from __future__ import annotations

import os

from . import embedding, late_interaction, m3, reranking, sparse, tasks, vocabulary
from .pipeline import Pipeline


class Bert(Pipeline):
    """A BERT encoder with its tokenizer, the task heads its checkpoint carries and, for a sentence-transformers
    model, its sentence recipe; every task a method."""

    # --- text in, sentence vectors out (numbert.pipeline.embedding, .sparse) --------------------------

    embed = embedding.embed  # sentence vectors of many texts, by a recipe
    encode = embedding.encode  # embed under sentence-transformers' names
    encode_query = embedding.encode_query  # encode with the model's query prompt
    encode_document = embedding.encode_document  # encode with the model's document prompt
    get_embedding_dimension = embedding.get_embedding_dimension  # the sentence vectors' width
    get_sentence_embedding_dimension = embedding.get_embedding_dimension  # its sentence-transformers 5 name
    similarity = embedding.similarity  # cosine similarities of embeddings, as SentenceTransformer.similarity
    word_vectors = embedding.word_vectors  # the words of a text with their vectors
    batches = embedding.batches  # many texts' Outputs, batch by batch, as planned
    windowed = embedding.windowed  # a text of any length as overlapping windows, stitched
    embed_sparse = sparse.embed_sparse  # SPLADE vectors over the vocabulary (the masked-LM head), as SparseEncoder
    sparse_tokens = sparse.token_weights  # a sparse vector as {token: weight}

    # --- a vector per token: late interaction (numbert.pipeline.late_interaction) and BGE-M3 (.m3) ------------

    embed_multi = late_interaction.embed_multi  # each text's token vectors, as a ColBERT checkpoint computes them
    rank_multi = late_interaction.rank_multi  # documents best first by MaxSim with the query
    embed_m3 = m3.embed_m3  # BGE-M3's dense, sparse and multi-vector outputs from one forward
    m3_scores = m3.m3_scores  # BGE-M3's scores of (query, passage) pairs, as BGEM3FlagModel.compute_score

    # --- the heads a checkpoint carries (numbert.pipeline.tasks, .reranking) ---------------------------

    fill_mask = tasks.fill_mask  # masked-LM head: top-k tokens for each [MASK]
    is_next = tasks.is_next  # next-sentence head: P(b follows a)
    classify = tasks.classify  # BertForSequenceClassification: labels and scores
    ner = tasks.ner  # BertForTokenClassification: entities with character offsets
    qa = tasks.qa  # BertForQuestionAnswering: the best answer span of a context
    predict = reranking.predict  # a cross-encoder's scores of (query, document) pairs
    rerank = reranking.rerank  # a cross-encoder's ranking of documents for a query, best first

    # --- the vocabulary's embedding table (numbert.pipeline.vocabulary) ----------------------------------

    token_embedding = vocabulary.token_embedding  # a token's row of the word-embedding table
    nearest_tokens = vocabulary.nearest_tokens  # the vocabulary entries nearest by cosine


def load(
    name_or_path: str | os.PathLike | None = None,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    check_finite: bool = False,
) -> Bert:
    """Load a BERT checkpoint: a hub id such as "bert-base-uncased", or a local directory; by default
    $NUMBERT_MODEL, else bert-base-uncased (as the numbert command). See Pipeline.from_pretrained."""
    return Bert.from_pretrained(name_or_path, revision=revision, cache_dir=cache_dir, check_finite=check_finite)
