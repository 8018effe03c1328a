"""The table of routes that work on inputs: each a row of four steps that `Server.answer` drives the same way.

    parse    the body checked (numbert.serve.protocol) and the model it is for picked: a `Work`
    rows     the inputs as rows of token ids (or, for /tokenize and /decode, the whole answer's contents)
    readout  what the model thread gives each row (None: the route runs no model)
    render   the answers as the response body

A route refuses what it cannot answer in the earliest step that can tell (a model without a classifier before
anything is tokenized, an answer over its budget before the forward), in the client's words.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..pipeline import (
    CALIBRATED,
    InputTooLong,
    InvalidTokenId,
    NotAPair,
    PatternTimeout,
    Readout,
    Row,
    TooManyTokens,
    ranking,
)
from . import protocol
from .models import Models, ServedModel
from .protocol import ApiError
from .settings import Settings

TRUNCATE_HINTS = {  # how a client may have a long input cut, by the name of the field holding the inputs
    "input": ", or start the server with --auto-truncate",  # OpenAI's /v1/embeddings has no truncate field
    "inputs": ", or send truncate=true (or start the server with --auto-truncate)",  # TEI's /embed(_sparse), /predict
    "texts": ", or send truncate=true (or start the server with --auto-truncate)",  # TEI's /rerank
    "parameters": ", or send parameters.truncate=true (or start the server with --auto-truncate)",  # /similarity
}


@dataclass
class Work:
    """One request on its way through its route: what it asks, the model it is for, and what the steps hand on."""

    served: ServedModel
    request: Any = None  # the parsed request (protocol's EmbeddingRequest, ScoringRequest, ...)
    choice: Any = None  # what the route reads out and renders with: a Recipe, a score function, a readout
    rows: list[Row] = field(default_factory=list)
    tokens: int = 0  # the rows' tokens
    result: Any = None  # what a route that runs no model answers with (tokens, texts)
    start: int = 0  # time.perf_counter_ns() when the request arrived (Ollama's durations)


@dataclass(frozen=True)
class Endpoint:
    """A row of the table: a route that works on inputs, by its four steps (the module's docstring)."""

    path: str
    parse: Callable[[Settings, Models, str | None, bytes], Work]
    rows: Callable[[Settings, Work], list[Row]]
    readout: Callable[[Work], Readout] | None
    render: Callable[[Settings, Work, list], bytes]
    ollama: bool = False  # errors in Ollama's shape ({"error": message}), not OpenAI's


# --- parse: the body checked, the model picked -----------------------------------------------------------------


def embedding(parse: Callable, refuse_kinds: bool = False) -> Callable[[Settings, Models, str | None, bytes], Work]:
    """The parse step of a sentence-vector route: `parse` (protocol's) checks the body; the model it names, and the
    recipe it asks for (the server's with the request's choices); `refuse_kinds`: a model whose vectors are sparse
    or one per token refused here, before anything is tokenized."""

    def parsed(settings: Settings, models: Models, route: str | None, body: bytes) -> Work:
        request = parse(body, settings.max_client_batch_size)
        served = models.pick(route, request.model)
        recipe = served.request_recipe(
            request.prompt_name, request.normalize, request.dimensions, request.precision, request.task
        )
        if recipe.precision in CALIBRATED and recipe.ranges is None and len(request.inputs) < 2:
            raise ApiError(
                422,
                f"'embedding_type' {recipe.precision} scales each dimension by the minimum and maximum of the "
                f"request's vectors, as quantize_embeddings does without ranges: send at least 2 inputs",
                param="embedding_type",
            )
        if refuse_kinds:
            refuse_other_kinds(served)
        return Work(served, request, recipe)

    return parsed


def similarity_parse(settings: Settings, models: Models, route: str | None, body: bytes) -> Work:
    """A /similarity request, the model it is for and its recipe: the server's in float32, with its prompt_name."""
    request = protocol.similarity_request(body, settings.max_client_batch_size)
    served = models.pick(route)
    return Work(served, request, served.request_recipe(request.prompt_name, None, None, "float32"))


def multi_parse(settings: Settings, models: Models, route: str | None, body: bytes) -> Work:
    """An /embed_multi request, the model it is for and its readout (a 400 for a model without vectors per token)."""
    request = protocol.multi_vector_request(body, settings.max_client_batch_size)
    served = models.pick(route)
    return Work(served, request, served.multi_vectors(request.is_query))


def scoring_parse(parse: Callable) -> Callable[[Settings, Models, str | None, bytes], Work]:
    """The parse step of /rerank, /v1/rerank or /predict: the request, the model it names, and the function of the
    logits it is answered with (a model unable to answer refused here, before anything is tokenized)."""

    def parsed(settings: Settings, models: Models, route: str | None, body: bytes) -> Work:
        request = parse(body, settings.max_client_batch_size)
        served = models.pick(route, request.model)
        raw = request.raw_scores
        return Work(served, request, served.label_scores(raw) if request.kind == "predict" else served.relevance(raw))

    return parsed


def tokenize_parse(settings: Settings, models: Models, route: str | None, body: bytes) -> Work:
    """A /tokenize request: (texts, add_special_tokens), for the routed model (picked first)."""
    served = models.pick(route)
    return Work(served, protocol.tokenize_request(body, settings.max_client_batch_size))


def decode_parse(settings: Settings, models: Models, route: str | None, body: bytes) -> Work:
    """A /decode request: (ids, skip_special_tokens), for the routed model (picked first)."""
    served = models.pick(route)
    return Work(served, protocol.decode_request(body, settings.max_client_batch_size))


def show_parse(settings: Settings, models: Models, route: str | None, body: bytes) -> Work:
    """An Ollama /api/show request: the model it names (a 404 for one not served, a 503 until it is loaded)."""
    served = models.pick(route, protocol.ollama_model(protocol.json_object(body)))
    served.ready()
    return Work(served)


# --- rows: the inputs as rows of token ids --------------------------------------------------------------------


def embedding_rows(name: str, budget: bool = False) -> Callable[[Settings, Work], list[Row]]:
    """The rows step of a route whose inputs are in field `name` (texts, or token ids): the texts emptied (the rows
    stand for them from here on); a 413 names the input too long, a 422 the token id outside the vocabulary;
    `budget`: a vector a token is answered (/embed_all), so the tokens and the answer's numbers are bounded."""

    def rows_of(settings: Settings, work: Work) -> list[Row]:
        request, pipeline = work.request, work.served.opened()
        truncate = settings.auto_truncate if request.truncate is None else request.truncate
        names = [f"{name}[{i}]" for i in range(len(request.inputs))]
        with refused(names, TRUNCATE_HINTS[name]):
            if request.ids:
                rows = pipeline.id_rows(request.inputs, work.choice.max_length)
            else:
                rows = pipeline.rows(request.inputs, work.choice, truncate=truncate, side=request.truncation_side)
        request.inputs = []
        if budget:
            within_token_budget(settings, rows, "/embed_all")
            within_answer_budget(settings, rows, pipeline.config.hidden_size, "/embed_all")
        return rows

    return rows_of


def similarity_rows(settings: Settings, work: Work) -> list[Row]:
    """A /similarity request's texts as rows, the source sentence first; a 413 names the text too long."""
    request = work.request
    truncate = settings.auto_truncate if request.truncate is None else request.truncate
    with refused(request.names, TRUNCATE_HINTS["parameters"]):
        return work.served.opened().rows(request.texts, work.choice, truncate=truncate, side=request.truncation_side)


def multi_rows(settings: Settings, work: Work) -> list[Row]:
    """The texts as rows as the model reads a query or a document, within the token and answer budgets."""
    request = work.request
    truncate = settings.auto_truncate if request.truncate is None else request.truncate
    names = [f"inputs[{i}]" for i in range(len(request.texts))]
    with refused(names, TRUNCATE_HINTS["inputs"]):
        rows = work.served.opened().multi_rows(
            request.texts, is_query=request.is_query, truncate=truncate, side=request.truncation_side
        )
    request.texts = []
    within_token_budget(settings, rows, "/embed_multi")
    within_answer_budget(settings, rows, work.served.multi_width(work.choice), "/embed_multi")
    return rows


def scoring_rows(settings: Settings, work: Work) -> list[Row]:
    """A scoring request's inputs (pairs, or single texts) as rows; a 413 names the one too long."""
    request = work.request
    truncate = settings.auto_truncate if request.truncate is None else request.truncate
    with refused(request.names, TRUNCATE_HINTS.get(request.source, ""), pairs=True):
        return work.served.opened().pair_rows(
            request.firsts, request.seconds, truncate=truncate, side=request.truncation_side
        )


def tokenize_rows(settings: Settings, work: Work) -> list[Row]:
    """/tokenize: each input's tokens, at most max_length an input and max_batch_tokens a request (413 beyond), so
    an answer stays small; kept as the work's result (no rows run)."""
    texts, special = work.request
    with refused([f"inputs[{i}]" for i in range(len(texts))], ""):
        try:
            work.result = work.served.opened().tokenize(
                texts, work.served.recipe, special=special, max_tokens=settings.max_batch_tokens
            )
        except TooManyTokens as e:
            raise ApiError(
                413,
                f"the inputs up to 'inputs[{e.index}]' are {e.tokens} tokens; /tokenize answers at most {e.limit} "
                f"tokens a request (--max-batch-tokens): send fewer inputs at a time",
                param="inputs",
                code="input_too_long",
            ) from None
    return []


def decode_rows(settings: Settings, work: Work) -> list[Row]:
    """/decode: each list of token ids as text, kept as the work's result (no rows run)."""
    ids, skip_special_tokens = work.request
    with refused([f"ids[{i}]" for i in range(len(ids))], ""):
        work.result = work.served.opened().decode(ids, skip_special_tokens)
    return []


def no_rows(settings: Settings, work: Work) -> list[Row]:
    return []


def within_token_budget(settings: Settings, rows: list[Row], route: str) -> None:
    """A 413 beyond --max-batch-tokens: `route` answers a vector a token, so its answer is bounded by that budget."""
    tokens, limit = sum(len(row.ids) for row in rows), settings.max_batch_tokens
    if tokens > limit:
        raise ApiError(
            413,
            f"the inputs are {tokens} tokens; {route} answers at most {limit} tokens a request "
            f"(--max-batch-tokens), a vector each: send fewer inputs at a time",
            param="inputs",
            code="input_too_long",
        )


def within_answer_budget(settings: Settings, rows: list[Row], width: int, route: str) -> None:
    """A 413 before the forward if `route`'s answer, a vector of `width` numbers a token, would hold more than
    --max-answer-values numbers (about 14 bytes each in JSON): a few kB of short texts must not become an answer
    of hundreds of MB."""
    values, limit = sum(len(row.ids) for row in rows) * width, settings.max_answer_values
    if values > limit:
        raise ApiError(
            413,
            f"the answer would hold {values:,} numbers (a vector of {width} a token); {route} answers at most "
            f"{limit:,} a request (--max-answer-values): send fewer or shorter inputs at a time",
            param="inputs",
            code="answer_too_large",
        )


@contextlib.contextmanager
def refused(names: list[str], hint: str, pairs: bool = False) -> Iterator[None]:
    """The pipeline's refusal of an input (too long, a token id outside the vocabulary) as the ApiError naming it
    in the request, and a tokenizer pattern past its time bound as a 422: `names[i]` is where input i is; `hint`
    ends a 413 (how the client may have it cut)."""
    try:
        yield
    except InputTooLong as e:
        where = names[e.index]
        count = str(e.tokens) if e.exact else f"at least {e.tokens}"
        says = f"makes an input of {count} tokens" if pairs else f"is {count} tokens long"
        special = "[CLS] and [SEP]s included" if pairs else "special tokens included"
        raise ApiError(
            413,
            f"'{where}' {says}; this model takes at most {e.limit} ({special}). Shorten it{hint}",
            param=where,
            code="input_too_long",
        ) from None
    except NotAPair as e:  # a decoder reranker asked to score one text
        where = names[e.index]
        raise ApiError(
            422, f"'{where}' is one text; this model scores (query, document) pairs only", param=where
        ) from None
    except PatternTimeout as e:  # a tokenizer.json pattern that backtracks catastrophically on an input
        raise ApiError(422, f"this model's tokenizer cannot read the inputs: {e}", code="pattern_timeout") from None
    except InvalidTokenId as e:
        where = f"{names[e.index]}[{e.position}]"
        raise ApiError(
            422,
            f"'{where}' is {e.value}, not a token id of this model's vocabulary [0, {e.vocab_size})",
            param=where,
            code="invalid_token_id",
        ) from None


# --- readout: what the model thread gives each row ---------------------------------------------------------------


def refuse_other_kinds(served: ServedModel) -> None:
    """A 400 for a sentence-vector request to a model whose vectors are sparse (SPLADE) or one per token (ColBERT)."""
    if served.sparse_only:
        raise ApiError(
            400,
            "this model is a SparseEncoder (SPLADE): its vectors are sparse, over the vocabulary; ask /embed_sparse",
            code="model_is_sparse",
        )
    if served.multi_only:
        raise ApiError(
            400,
            "this model is a multi-vector (ColBERT) model: it gives a vector per token, not one per text; "
            "ask /embed_multi",
            code="model_is_multi_vector",
        )


def sentence_readout(work: Work) -> Readout:
    refuse_other_kinds(work.served)
    return work.served.embedding_for(work.choice)


# --- render: the answers as the response body ------------------------------------------------------------------


def embedding_render(settings: Settings, work: Work, answers: list) -> bytes:
    """The rows' vectors finished by the recipe, as OpenAI's (naming the served model) or text-embeddings-
    inference's JSON."""
    recipe, request = work.choice, work.request
    vectors = recipe.finish(np.stack(answers)) if answers else np.empty((0, recipe.dim), np.float32)
    if request.normalize is None:  # OpenAI
        return protocol.openai_response(vectors, request.encoding_format, work.served.name, work.tokens)
    return protocol.tei_response(vectors)


def similarity_render(settings: Settings, work: Work, answers: list) -> bytes:
    """/similarity: the cosine of the source sentence's vector (the first) with each other sentence's."""
    vectors = work.choice.finish(np.stack(answers))
    similarities = work.served.opened().similarity(vectors[:1], vectors[1:])  # (1, sentences): of arrays, an array
    assert isinstance(similarities, np.ndarray)
    return protocol.similarity_response(similarities[0])


def sparse_render(settings: Settings, work: Work, answers: list) -> bytes:
    """/embed_sparse: each input's non-zero weights, within --max-sparse-weights (an input may weigh every
    vocabulary entry: the answer is bounded here, not by the body)."""
    weights, limit = sum(len(v.ids) for v in answers), settings.max_sparse_weights
    if weights > limit:
        raise ApiError(
            413,
            f"the answer would hold {weights:,} non-zero weights; /embed_sparse answers at most {limit:,} a "
            f"request (--max-sparse-weights): send fewer inputs at a time",
            param="inputs",
            code="answer_too_large",
        )
    return protocol.sparse_response(answers)


def scores_render(settings: Settings, work: Work, answers: list) -> bytes:
    """The logits (inputs, labels) scored: labels best first for /predict, documents best first for a rerank."""
    request, scores = work.request, work.choice(np.stack(answers))
    if request.kind == "predict":
        pipeline, _ = work.served.ready()
        return protocol.predict_response(scores, pipeline.labels, request.single)
    relevance = scores[:, 0]
    order = ranking(relevance, request.top_n)
    return protocol.rerank_response(request, relevance, order, work.served.name, work.tokens)


def ollama_vectors(work: Work, answers: list) -> np.ndarray:
    """The rows' vectors finished by the recipe (none for Ollama's empty prompt)."""
    recipe = work.choice
    return recipe.finish(np.stack(answers)) if answers else np.empty((0, recipe.dim), np.float32)


def ollama_embed_render(settings: Settings, work: Work, answers: list) -> bytes:
    """/api/embed's answer, with its durations since the request arrived, in ns."""
    total = time.perf_counter_ns() - work.start
    return protocol.ollama_embed_response(ollama_vectors(work, answers), work.served.name, work.tokens, total, 0)


def ollama_embeddings_render(settings: Settings, work: Work, answers: list) -> bytes:
    """The older /api/embeddings' answer: one prompt's embedding."""
    return protocol.ollama_embeddings_response(ollama_vectors(work, answers))


def show_render(settings: Settings, work: Work, answers: list) -> bytes:
    """Ollama's /api/show: the model's details."""
    return json.dumps(work.served.ollama_show()).encode()


def all_render(settings: Settings, work: Work, answers: list) -> bytes:
    """/embed_all and /embed_multi: per input, a vector per token."""
    return protocol.embed_all_response(answers)


def tokenize_render(settings: Settings, work: Work, answers: list) -> bytes:
    return protocol.tokenize_response(work.result, work.request[0])


def decode_render(settings: Settings, work: Work, answers: list) -> bytes:
    return json.dumps(work.result, ensure_ascii=False).encode()


ROUTES = (
    Endpoint("/v1/embeddings", embedding(protocol.openai_request), embedding_rows("input"), sentence_readout,
             embedding_render),
    Endpoint("/embed", embedding(protocol.tei_request), embedding_rows("inputs"), sentence_readout, embedding_render),
    Endpoint("/embed_all", embedding(protocol.tei_tokens_request), embedding_rows("inputs", budget=True),
             lambda work: work.served.token_vectors, all_render),
    Endpoint("/similarity", similarity_parse, similarity_rows, lambda work: work.served.embedding, similarity_render),
    Endpoint("/embed_sparse", embedding(protocol.tei_tokens_request), embedding_rows("inputs"),
             lambda work: work.served.sparse, sparse_render),
    Endpoint("/embed_multi", multi_parse, multi_rows, lambda work: work.choice, all_render),
    Endpoint("/tokenize", tokenize_parse, tokenize_rows, None, tokenize_render),
    Endpoint("/decode", decode_parse, decode_rows, None, decode_render),
    Endpoint("/rerank", scoring_parse(protocol.tei_rerank_request), scoring_rows, lambda work: work.served.scores,
             scores_render),
    Endpoint("/v1/rerank", scoring_parse(protocol.cohere_rerank_request), scoring_rows,
             lambda work: work.served.scores, scores_render),
    Endpoint("/predict", scoring_parse(protocol.predict_request), scoring_rows, lambda work: work.served.scores,
             scores_render),
    Endpoint("/api/embed", embedding(protocol.ollama_embed_request, refuse_kinds=True), embedding_rows("input"),
             lambda work: work.served.embedding, ollama_embed_render, ollama=True),
    Endpoint("/api/embeddings", embedding(protocol.ollama_embeddings_parse, refuse_kinds=True),
             embedding_rows("input"), lambda work: work.served.embedding, ollama_embeddings_render, ollama=True),
    Endpoint("/api/show", show_parse, no_rows, None, show_render, ollama=True),
)  # fmt: skip
