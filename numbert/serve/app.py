"""The HTTP routes (Starlette): OpenAI's /v1/embeddings and /v1/models, text-embeddings-inference's /embed,
/embed_all, /embed_sparse, /similarity, /tokenize, /decode, /rerank, /predict, /info, /health and /metrics,
and the Cohere/Jina-style /v1/rerank; each route that works on inputs also as /models/NAME/... for the served
model NAME (`models`).

Every route that works on inputs goes through `Server.handle`: the body read up to payload_limit (413)
within body_timeout (408), admission once it is whole (429 with Retry-After beyond
max_concurrent_requests), parsing, the model picked (404 for one not served, 503 until it is loaded),
tokenizing, the model's queue, and the answer rendered within request_timeout (504), or the error in
OpenAI's shape. API keys (`auth`) and CORS are middleware around the routes. Parsing, tokenizing and
rendering run in threads whatever the body's size (`Server.run`), each model's tokenizing in threads of its own,
so the event loop never stalls and one model's slow tokenizer holds no other model's requests; a tokenizer.json
pattern matches with the GIL released and within its time bound (a 422 past it), and the model never runs on the
event loop. An unexpected error is a 500 and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from .. import __version__
from ..pipeline import (
    CALIBRATED,
    Batcher,
    InputTooLong,
    InvalidTokenId,
    PatternTimeout,
    Readout,
    Recipe,
    Row,
    TooManyTokens,
    pattern_deadline,
    ranking,
)
from ..runtime.blas import own_process_threads
from . import openapi, protocol
from .auth import OPEN_PATHS, BearerAuth
from .metrics import Metrics
from .models import Models, ServedModel
from .protocol import ApiError, EmbeddingRequest, ScoringRequest, SimilarityRequest
from .settings import Settings

log = logging.getLogger("numbert.serve")
JSON = "application/json"
TRUNCATE_HINTS = {  # how a client may have a long input cut, by the name of the field holding the inputs
    "input": ", or start the server with --auto-truncate",  # OpenAI's /v1/embeddings has no truncate field
    "inputs": ", or send truncate=true (or start the server with --auto-truncate)",  # TEI's /embed(_sparse), /predict
    "texts": ", or send truncate=true (or start the server with --auto-truncate)",  # TEI's /rerank
    "parameters": ", or send parameters.truncate=true (or start the server with --auto-truncate)",  # /similarity
}
SETTINGS_VARIABLE = "NUMBERT_SERVE_SETTINGS"  # how `--workers N` hands the settings to its worker processes
METRICS_VARIABLE = "NUMBERT_SERVE_METRICS"  # ... and the directory where the workers publish their counters
PUBLISH_EVERY = 1.0  # seconds: how stale another worker's counters can be in /metrics
NOT_TRACED = contextlib.nullcontext()


class Server:
    """One server process: its settings, its models (loaded in the background) and its counters."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.metrics = Metrics()
        shared = os.environ.get(METRICS_VARIABLE)
        self.shared_metrics = None if shared is None else Path(shared)  # --workers N: every worker's counters
        self.models = Models(settings)
        self.threads = anyio.CapacityLimiter(2)  # parsing, tokenizing, rendering: off the event loop
        self.started = int(time.time())
        self.described: dict = {}  # the OpenAPI document, made by create_app once the routes are known
        self.tracing = (
            None if settings.otlp_endpoint is None else tracing(settings.otlp_endpoint, ", ".join(settings.models))
        )

    # --- life: load in the background, stop after the last accepted request ---------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette):
        loading = asyncio.create_task(self.load())
        publishing = None if self.shared_metrics is None else asyncio.create_task(self.publish(self.shared_metrics))
        try:
            yield
        finally:
            await loading
            if publishing is not None:
                publishing.cancel()
            for model in self.models:
                await anyio.to_thread.run_sync(model.stop)
            if self.shared_metrics is not None:
                self.metrics.publish(self.shared_metrics)
            if self.tracing is not None:
                self.tracing.shutdown()
            answered = sum(self.metrics.requests.values())
            log.info("numbert serve: stopped after answering %d requests; nothing was left waiting", answered)

    async def load(self) -> None:
        """Load the models one after the other (the first, the default, first)."""
        for model in self.models:
            await model.load(self.settings, self.metrics)

    async def publish(self, directory: Path) -> None:
        """With --workers N: this worker's counters, to the shared directory, every PUBLISH_EVERY seconds."""
        while True:
            self.metrics.publish(directory)
            await asyncio.sleep(PUBLISH_EVERY)

    # --- the routes -------------------------------------------------------------------------------

    async def openai_embeddings(self, request: Request) -> Response:
        return await self.handle(request, "/v1/embeddings", self.embed_answer, protocol.openai_request, "input")

    async def tei_embed(self, request: Request) -> Response:
        return await self.handle(request, "/embed", self.embed_answer, protocol.tei_request, "inputs")

    async def tei_similarity(self, request: Request) -> Response:
        return await self.handle(request, "/similarity", self.similarity_answer)

    async def embed_all(self, request: Request) -> Response:
        return await self.handle(request, "/embed_all", self.embed_all_answer)

    async def tei_embed_sparse(self, request: Request) -> Response:
        return await self.handle(request, "/embed_sparse", self.sparse_answer)

    async def tokenize(self, request: Request) -> Response:
        return await self.handle(request, "/tokenize", self.tokenize_answer)

    async def decode(self, request: Request) -> Response:
        return await self.handle(request, "/decode", self.decode_answer)

    async def info(self, request: Request) -> Response:
        return await self.handle(request, "/info", self.info_answer)

    async def tei_rerank(self, request: Request) -> Response:
        return await self.handle(request, "/rerank", self.score_answer, protocol.tei_rerank_request)

    async def cohere_rerank(self, request: Request) -> Response:
        return await self.handle(request, "/v1/rerank", self.score_answer, protocol.cohere_rerank_request)

    async def predict(self, request: Request) -> Response:
        return await self.handle(request, "/predict", self.score_answer, protocol.predict_request)

    async def list_models(self, request: Request) -> Response:
        data = [{"id": m.name, "object": "model", "created": self.started, "owned_by": "numbert"} for m in self.models]
        return json_response({"object": "list", "data": data})

    async def health(self, request: Request) -> Response:
        """Ready once every model is loaded; else loading, or the error of the models that failed."""
        if all(m.loaded for m in self.models):
            return json_response({"status": "ready"})
        error = self.models.load_error
        return json_response({"status": "error" if error else "loading", "error": error}, 503)

    async def prometheus(self, request: Request) -> Response:
        metrics = self.metrics if self.shared_metrics is None else self.metrics.merged(self.shared_metrics)
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    # --- numbert's multi-vector route: /embed_multi -------------------------------------------------------

    async def embed_multi(self, request: Request) -> Response:
        return await self.handle(request, "/embed_multi", self.multi_answer)

    async def multi_answer(self, http: Request) -> tuple[bytes, int, int]:
        """The answer to /embed_multi: each input's token vectors, as a query's or a document's, through the queue;
        at most max_batch_tokens tokens a request ([MASK] expansion included; 413 beyond), so an answer stays
        bounded (a vector a token), as /embed_all's."""
        body = await self.read_body(http)
        with self.phase("tokenize"):
            request, served, readout = await self.run(http, self.multi_request, routed(http), body)
            del body
            rows = await self.run(http, self.multi_rows, served, request, model=served)
        tokens = self.within_token_budget(rows, "/embed_multi")
        self.within_answer_budget(rows, served.multi_width(readout), "/embed_multi")
        _, batcher = served.ready()
        vectors = await self.queue(http, batcher, rows, readout)
        with self.phase("render"):
            answer = await self.run(http, protocol.embed_all_response, vectors)
        return answer, len(rows), tokens

    def multi_request(self, route: str | None, body: bytes) -> tuple[protocol.MultiVectorRequest, ServedModel, Any]:
        """The request, checked; the model it is for and its readout (a 400 before anything is tokenized for a
        model without vectors per token)."""
        request = protocol.multi_vector_request(body, self.settings.max_client_batch_size)
        served = self.models.pick(route)
        return request, served, served.multi_vectors(request.is_query)

    def multi_rows(self, served: ServedModel, request: protocol.MultiVectorRequest) -> list[Row]:
        """The request's texts as rows as the model reads a query or a document; a 413 names the text too long."""
        truncate = self.settings.auto_truncate if request.truncate is None else request.truncate
        names = [f"inputs[{i}]" for i in range(len(request.texts))]
        with refused(names, TRUNCATE_HINTS["inputs"]):
            rows = served.opened().multi_rows(
                request.texts, is_query=request.is_query, truncate=truncate, side=request.truncation_side
            )
        request.texts = []
        return rows

    # --- Ollama's embedding API: /api/embed, /api/embeddings, /api/tags, /api/show, /api/version --------------

    async def ollama_embed(self, request: Request) -> Response:
        return await self.handle(request, "/api/embed", self.ollama_answer, "embed", errors=ollama_error_response)

    async def ollama_embeddings(self, request: Request) -> Response:
        answer, kind = self.ollama_answer, "embeddings"
        return await self.handle(request, "/api/embeddings", answer, kind, errors=ollama_error_response)

    async def ollama_answer(self, http: Request, kind: str) -> tuple[bytes, int, int]:
        """The answer to /api/embed (Ollama's embeddings of a string or a list, with its durations) or to the
        older /api/embeddings (one prompt's embedding): the server's recipe, as /v1/embeddings answers."""
        start = time.perf_counter_ns()
        body = await self.read_body(http)
        parse = protocol.ollama_embed_request if kind == "embed" else protocol.ollama_embeddings_parse
        with self.phase("tokenize"):
            request, served, recipe = await self.run(http, self.embedding_request, routed(http), body, parse)
            del body
            refuse_other_kinds(served)
            rows = await self.run(http, self.embedding_rows, served, request, recipe, "input", model=served)
        _, batcher = served.ready()
        answers = await self.queue(http, batcher, rows, served.embedding) if rows else []
        tokens = sum(len(row.ids) for row in rows)
        with self.phase("render"):
            answer = await self.run(http, ollama_render, kind, served.name, recipe, answers, tokens, start)
        return answer, len(rows), tokens

    async def ollama_show(self, request: Request) -> Response:
        return await self.handle(request, "/api/show", self.ollama_show_answer, errors=ollama_error_response)

    async def ollama_show_answer(self, http: Request) -> tuple[bytes, int, int]:
        """POST /api/show: {"model"} -> the model's details, as Ollama describes a model (a 404 for one not served)."""
        body = await self.read_body(http)
        name = await self.run(http, ollama_model_of, body)  # parsed off the event loop, as every body
        served = self.models.pick(routed(http), name)
        served.ready()
        return json.dumps(await self.run(http, served.ollama_show)).encode(), 0, 0

    async def ollama_tags(self, request: Request) -> Response:
        """GET /api/tags: the loaded models as Ollama lists its models (the first call reads each model's files
        once, for their digest)."""
        tags = [await anyio.to_thread.run_sync(m.ollama_tag) for m in self.models if m.loaded]
        return json_response({"models": tags})

    async def ollama_version(self, request: Request) -> Response:
        """GET /api/version: numbert's version."""
        return json_response({"version": __version__})

    # --- the API described: /openapi.json and Swagger UI at /docs ---------------------------------------------

    async def openapi(self, request: Request) -> Response:
        """GET /openapi.json: the OpenAPI 3.1 document of every route (numbert.serve.openapi)."""
        return json_response(self.described)

    async def docs(self, request: Request) -> Response:
        """GET /docs: Swagger UI over /openapi.json, its files served from the swagger-ui-py package."""
        if openapi.assets() is None:
            return error_response(no_swagger_ui())
        return Response(openapi.PAGE, media_type="text/html")

    async def docs_asset(self, request: Request) -> Response:
        """GET /docs/<file>: one of Swagger UI's files."""
        directory, name = openapi.assets(), request.url.path.rsplit("/", 1)[-1]
        if directory is None:
            return error_response(no_swagger_ui())
        media = {"js": "text/javascript", "css": "text/css", "png": "image/png"}[name.rsplit(".", 1)[-1]]
        content = await anyio.to_thread.run_sync((directory / name).read_bytes)
        return Response(content, media_type=media, headers={"Cache-Control": "max-age=86400"})

    # --- one request ------------------------------------------------------------------------------

    async def handle(
        self,
        request: Request,
        endpoint: str,
        answer: Callable[..., Awaitable[tuple[bytes, int, int]]],
        *args,
        errors: Callable[[ApiError], Response] | None = None,
    ) -> Response:
        """Read, admit, check, tokenize, queue, answer: the path of every request that carries inputs.
        `answer(request, *args)` reads the body, picks the model and gives (the answer, inputs, tokens); errors are
        answered in OpenAI's shape, or by `errors` (Ollama's routes: {"error": message})."""
        error_response = errors or openai_error_response
        start = time.perf_counter()
        inputs = tokens = 0
        try:
            try:
                body, inputs, tokens = await answer(request, *args)
            finally:
                self.leave(request)
            response = Response(body, media_type=JSON)
        except ApiError as e:
            response = error_response(e)
        except Exception as e:  # a bug: say so, and keep serving
            log.exception("%s failed", endpoint)
            response = error_response(ApiError(500, f"internal error: {type(e).__name__}: {e}", code="internal_error"))
        self.metrics.answered(endpoint, response.status_code, time.perf_counter() - start, inputs, tokens)
        request.state.inputs, request.state.tokens = inputs, tokens  # for the access log
        return response

    async def read_body(self, request: Request) -> bytes:
        """The request body, read whole, and then the request admitted (429 beyond max_concurrent_requests).

        Reading is not admission: a client sending its body slowly holds a connection (at most
        max_connections) for at most body_timeout seconds (408), not a place among the requests admitted.
        """
        body = await self.receive_body(request)
        self.admit(request)
        return body

    async def receive_body(self, request: Request) -> bytes:
        """The request body, refused with a 413 as soon as it is longer than payload_limit bytes, or with a
        408 that closes the connection when it is not whole body_timeout seconds after the request's head."""
        limit, timeout = self.settings.payload_limit, self.settings.body_timeout
        too_long = ApiError(413, f"the request body is over {limit} bytes (--payload-limit)", code="payload_too_large")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_long
        body = bytearray()
        try:
            with anyio.fail_after(timeout):
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > limit:
                        raise too_long
        except ClientDisconnect:
            raise ApiError(400, "the client disconnected before sending the whole body") from None
        except TimeoutError:
            message = f"the request body did not arrive whole within {timeout} s (--body-timeout)"
            raise ApiError(408, message, code="request_timeout", headers={"Connection": "close"}) from None
        return bytes(body)

    def admit(self, request: Request) -> None:
        """Count the request among those in flight, or refuse it with a 429 when max_concurrent_requests are."""
        if self.metrics.in_flight >= self.settings.max_concurrent_requests:
            raise ApiError(
                429,
                f"the server is busy: {self.metrics.in_flight} requests are in flight "
                f"(--max-concurrent-requests); retry after a second",
                code="rate_limit_exceeded",
                headers={"Retry-After": "1"},
            )
        self.metrics.in_flight += 1
        request.state.admitted = True
        timeout = self.settings.request_timeout
        request.state.deadline = None if timeout is None else time.monotonic() + timeout

    def leave(self, request: Request) -> None:
        """The request is answered: no longer in flight, if it was admitted."""
        if getattr(request.state, "admitted", False):
            self.metrics.in_flight -= 1

    async def embed_answer(self, http: Request, parse: Callable, name: str) -> tuple[bytes, int, int]:
        """The answer to /v1/embeddings or /embed, with the number of inputs and tokens it embedded.

        While it waits for the model, a request holds its token ids only (4 bytes a token), not its body or texts;
        if its client disconnects or its time is up meanwhile, its rows are dropped before they run.
        """
        body = await self.read_body(http)
        with self.phase("tokenize"):
            request, served, recipe = await self.run(http, self.embedding_request, routed(http), body, parse)
            del body
            rows = await self.run(http, self.embedding_rows, served, request, recipe, name, model=served)
        _, batcher = served.ready()
        refuse_other_kinds(served)
        answers = await self.queue(http, batcher, rows, served.embedding_for(recipe))
        tokens = sum(len(row.ids) for row in rows)
        with self.phase("render"):
            answer = await self.run(http, self.render, request, served.name, recipe, answers, tokens)
        return answer, len(rows), tokens

    async def similarity_answer(self, http: Request) -> tuple[bytes, int, int]:
        """The answer to /similarity: the source sentence and the sentences embedded as one request to /embed
        (queued with other work), then the cosine of the source's vector with each sentence's."""
        body = await self.read_body(http)
        request, served, recipe = await self.run(http, self.similarity_request, routed(http), body)
        del body
        rows = await self.run(http, self.similarity_rows, served, request, recipe, model=served)
        _, batcher = served.ready()
        answers = await self.queue(http, batcher, rows, served.embedding)
        answer = await self.run(http, similarity_answer, served, recipe, answers)
        return answer, len(rows), sum(len(row.ids) for row in rows)

    def similarity_request(self, route: str | None, body: bytes) -> tuple[SimilarityRequest, ServedModel, Recipe]:
        """A /similarity request, checked, the model it is for and the recipe it asks for (the server's in float32,
        with its prompt_name)."""
        request = protocol.similarity_request(body, self.settings.max_client_batch_size)
        served = self.models.pick(route)
        return request, served, served.request_recipe(request.prompt_name, None, None, "float32")

    def similarity_rows(self, served: ServedModel, request: SimilarityRequest, recipe: Recipe) -> list[Row]:
        """A /similarity request's texts as rows of token ids, the source sentence first; a 413 names the text too
        long."""
        truncate = self.settings.auto_truncate if request.truncate is None else request.truncate
        with refused(request.names, TRUNCATE_HINTS["parameters"]):
            return served.opened().rows(request.texts, recipe, truncate=truncate, side=request.truncation_side)

    async def embed_all_answer(self, http: Request) -> tuple[bytes, int, int]:
        """The answer to /embed_all: every token's vector of the last layer, as the rows of /embed run them; at most
        max_batch_tokens tokens a request (413 beyond), so an answer stays bounded (a vector a token)."""
        body = await self.read_body(http)
        parse = protocol.tei_tokens_request
        request, served, recipe = await self.run(http, self.embedding_request, routed(http), body, parse)
        del body
        rows = await self.run(http, self.embedding_rows, served, request, recipe, "inputs", model=served)
        tokens = self.within_token_budget(rows, "/embed_all")
        self.within_answer_budget(rows, served.opened().config.hidden_size, "/embed_all")
        _, batcher = served.ready()
        vectors = await self.queue(http, batcher, rows, served.token_vectors)
        answer = await self.run(http, protocol.embed_all_response, vectors)
        return answer, len(rows), tokens

    async def sparse_answer(self, http: Request) -> tuple[bytes, int, int]:
        """The answer to /embed_sparse: each input's SPLADE vector, its non-zero weights (the model's
        max_active_dims largest, if it names it), with the number of inputs and tokens it read."""
        body = await self.read_body(http)
        parse = protocol.tei_tokens_request
        request, served, recipe = await self.run(http, self.embedding_request, routed(http), body, parse)
        del body
        rows = await self.run(http, self.embedding_rows, served, request, recipe, "inputs", model=served)
        _, batcher = served.ready()
        readout = served.sparse  # a 400 naming the tensors for a model without the masked-LM head
        vectors = await self.queue(http, batcher, rows, readout)  # each input's non-zero weights (max_active_dims)
        weights, limit = sum(len(v.ids) for v in vectors), self.settings.max_sparse_weights
        if weights > limit:  # an input may weigh every vocabulary entry: the answer is bounded here, not by the body
            raise ApiError(
                413,
                f"the answer would hold {weights:,} non-zero weights; /embed_sparse answers at most {limit:,} a "
                f"request (--max-sparse-weights): send fewer inputs at a time",
                param="inputs",
                code="answer_too_large",
            )
        answer = await self.run(http, protocol.sparse_response, vectors)
        return answer, len(rows), sum(len(row.ids) for row in rows)

    async def tokenize_answer(self, http: Request) -> tuple[bytes, int, int]:
        """The answer to /tokenize (no inputs embedded)."""
        body, s = await self.read_body(http), self.settings
        served = self.models.pick(routed(http))
        answer = await self.run(
            http, tokenize_answer, served, body, s.max_client_batch_size, s.max_batch_tokens, model=served
        )
        return answer, 0, 0

    async def decode_answer(self, http: Request) -> tuple[bytes, int, int]:
        """The answer to /decode: each list of ids as text."""
        body = await self.read_body(http)
        served = self.models.pick(routed(http))
        answer = await self.run(http, decode_answer, served, body, self.settings.max_client_batch_size, model=served)
        return answer, 0, 0

    async def info_answer(self, http: Request) -> tuple[bytes, int, int]:
        """The answer to GET /info: text-embeddings-inference's description of the (routed, else default) model."""
        info = self.models.pick(routed(http)).info(self.settings, int(self.threads.total_tokens))
        return json.dumps(info).encode(), 0, 0

    async def score_answer(self, http: Request, parse: Callable) -> tuple[bytes, int, int]:
        """The answer to /rerank, /v1/rerank or /predict, with the number of inputs and tokens it scored: each
        input (a pair, or one text) queued as a row for the classifier's logits."""
        body = await self.read_body(http)
        with self.phase("tokenize"):
            request, served, score = await self.run(http, self.scoring_request, routed(http), body, parse)
            del body
            rows = await self.run(http, self.scoring_rows, served, request, model=served)
        _, batcher = served.ready()
        logits = await self.queue(http, batcher, rows, served.scores)
        tokens = sum(len(row.ids) for row in rows)
        with self.phase("render"):
            answer = await self.run(http, self.render_scores, served, request, score, np.stack(logits), tokens)
        return answer, len(rows), tokens

    def scoring_request(
        self, route: str | None, body: bytes, parse: Callable
    ) -> tuple[ScoringRequest, ServedModel, Callable]:
        """The request, checked; the model it is for; the function of the logits it is answered with (a model
        unable to answer it refused here, before anything is tokenized)."""
        request = parse(body, self.settings.max_client_batch_size)
        served = self.models.pick(route, request.model)
        raw = request.raw_scores
        score = served.label_scores(raw) if request.kind == "predict" else served.relevance(raw)
        return request, served, score

    def scoring_rows(self, served: ServedModel, request: ScoringRequest) -> list[Row]:
        """A scoring request's inputs (pairs, or single texts) as rows of token ids; a 413 names the one too long."""
        truncate = self.settings.auto_truncate if request.truncate is None else request.truncate
        pipeline = served.opened()
        with refused(request.names, TRUNCATE_HINTS.get(request.source, ""), pairs=True):
            return pipeline.pair_rows(request.firsts, request.seconds, truncate=truncate, side=request.truncation_side)

    def render_scores(
        self, served: ServedModel, request: ScoringRequest, score: Callable, logits: np.ndarray, tokens: int
    ) -> bytes:
        """The logits (inputs, labels) scored and answered: labels best first for /predict, documents best first
        for a rerank."""
        scores = score(logits)
        if request.kind == "predict":
            pipeline, _ = served.ready()
            return protocol.predict_response(scores, pipeline.labels, request.single)
        relevance = scores[:, 0]
        return protocol.rerank_response(request, relevance, ranking(relevance, request.top_n), served.name, tokens)

    async def queue(self, http: Request, batcher: Batcher, rows: list, readout: Readout) -> list:
        """The rows' answers from the model thread (until_answered); traced, with queue and forward spans; a 500
        naming the model if a number in them is not finite (`finite_answers`)."""
        if self.tracing is None:
            answers = await self.until_answered(http, batcher.submit(rows, readout))
        else:
            forwards: list = []
            queued = time.time_ns()
            answers = await self.until_answered(http, batcher.submit(rows, readout, forwards))
            self.tracing.waited(queued, forwards)
        model = next((m.name for m in self.models if m.batcher is batcher), None)
        return await self.run(http, finite_answers, answers, model)

    def within_token_budget(self, rows: list[Row], route: str) -> int:
        """The rows' tokens, refused with a 413 beyond --max-batch-tokens: `route` answers a vector a token, so its
        answer is bounded by that budget."""
        tokens, limit = sum(len(row.ids) for row in rows), self.settings.max_batch_tokens
        if tokens > limit:
            raise ApiError(
                413,
                f"the inputs are {tokens} tokens; {route} answers at most {limit} tokens a request "
                f"(--max-batch-tokens), a vector each: send fewer inputs at a time",
                param="inputs",
                code="input_too_long",
            )
        return tokens

    def within_answer_budget(self, rows: list[Row], width: int, route: str) -> None:
        """A 413 before the forward if `route`'s answer, a vector of `width` numbers a token, would hold more than
        --max-answer-values numbers (about 14 bytes each in JSON): a few kB of short texts must not become an answer
        of hundreds of MB."""
        values, limit = sum(len(row.ids) for row in rows) * width, self.settings.max_answer_values
        if values > limit:
            raise ApiError(
                413,
                f"the answer would hold {values:,} numbers (a vector of {width} a token); {route} answers at most "
                f"{limit:,} a request (--max-answer-values): send fewer or shorter inputs at a time",
                param="inputs",
                code="answer_too_large",
            )

    def phase(self, name: str) -> contextlib.AbstractContextManager:
        """A span around a phase of the request when traced (--otlp-endpoint), else nothing."""
        return NOT_TRACED if self.tracing is None else self.tracing.phase(name)

    async def run(self, http: Request, work: Callable, *args, model: ServedModel | None = None):
        """work(*args) (parsing, tokenizing, rendering) in a thread, never on the event loop, within the request's
        deadline (--request-timeout: a 504 when it passes; the thread's work is bounded on its own, and a tokenizer
        pattern's searches end at the deadline too). A `model`'s work runs in its own threads, so that one model's
        slow tokenizer never holds another model's requests."""
        limiter = self.threads if model is None else model.threads
        deadline = getattr(http.state, "deadline", None)
        if deadline is None:
            return await anyio.to_thread.run_sync(work, *args, limiter=limiter)
        try:
            with anyio.fail_after(max(0.0, deadline - time.monotonic())):
                return await anyio.to_thread.run_sync(
                    within_deadline, deadline, work, *args, limiter=limiter, abandon_on_cancel=True
                )
        except TimeoutError:
            raise ApiError(
                504,
                f"the request was not answered within {self.settings.request_timeout} s (--request-timeout)",
                code="timeout",
            ) from None

    def embedding_request(
        self, route: str | None, body: bytes, parse: Callable
    ) -> tuple[EmbeddingRequest, ServedModel, Recipe]:
        """The request, checked, the model it is for and the recipe it asks for."""
        request = parse(body, self.settings.max_client_batch_size)
        served = self.models.pick(route, request.model)
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
        return request, served, recipe

    def embedding_rows(self, served: ServedModel, request: EmbeddingRequest, recipe: Recipe, name: str) -> list[Row]:
        """The request's inputs (texts, or token ids) as rows of token ids, the texts emptied (the rows stand for
        them from here on); a 413 names the input too long, a 422 the token id outside the vocabulary."""
        pipeline = served.opened()
        truncate = self.settings.auto_truncate if request.truncate is None else request.truncate
        names = [f"{name}[{i}]" for i in range(len(request.inputs))]
        with refused(names, TRUNCATE_HINTS[name]):
            if request.ids:
                rows = pipeline.id_rows(request.inputs, recipe.max_length)
            else:
                rows = pipeline.rows(request.inputs, recipe, truncate=truncate, side=request.truncation_side)
        request.inputs = []
        return rows

    async def until_answered(self, http: Request, answer: asyncio.Future):
        """The answer, awaited while watching the client and the request's deadline (--request-timeout): if the client
        disconnects first, or the time is up, the answer is cancelled (so its rows are dropped from the queue unrun)
        and the request ends with a 499 (nginx's \"client closed request\") or a 504."""
        deadline = getattr(http.state, "deadline", None)
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        watch = asyncio.ensure_future(http.receive())  # the body is read: the next message is the disconnect
        try:
            await asyncio.wait((answer, watch), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            disconnected = watch.done()
        finally:
            watch.cancel()
        if not answer.done():
            answer.cancel()
            if disconnected:
                message = "the client closed the connection before its answer was ready"
                raise ApiError(499, message, code="client_closed")
            raise ApiError(
                504,
                f"the request was not answered within {self.settings.request_timeout} s "
                f"(--request-timeout); its inputs were dropped unrun",
                code="timeout",
            )
        return answer.result()

    def render(self, request: EmbeddingRequest, model: str, recipe: Recipe, answers: list, tokens: int) -> bytes:
        """The rows' vectors finished by the recipe, as OpenAI's (naming the served `model`) or text-embeddings-
        inference's JSON."""
        vectors = recipe.finish(np.stack(answers)) if answers else np.empty((0, recipe.dim), np.float32)
        if request.normalize is None:  # OpenAI
            return protocol.openai_response(vectors, request.encoding_format, model, tokens)
        return protocol.tei_response(vectors)


def within_deadline(deadline: float, work: Callable, *args):
    """work(*args), its tokenizer patterns' searches ending by time.monotonic() `deadline` (a request's)."""
    with pattern_deadline(deadline):
        return work(*args)


def finite_answers(answers: list, model: str | None) -> list:
    """The model's answers (arrays, or tuples of them), or protocol.NotFinite naming the `model` if a number in them
    is not finite: NaN or infinity come from broken weights or configuration, and strict JSON cannot carry them."""
    if all(all_finite(answer) for answer in answers):
        return answers
    raise protocol.NotFinite(model)


def all_finite(answer: Any) -> bool:
    """Whether every number of an answer (an array, or a tuple of arrays: a SparseVector) is finite."""
    if isinstance(answer, np.ndarray):
        return answer.dtype.kind not in "fc" or bool(np.isfinite(answer).all())
    if isinstance(answer, tuple):
        return all(all_finite(part) for part in answer)
    return True


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


def routed(http: Request) -> str | None:
    """The model a /models/NAME/... route names, or None."""
    return http.path_params.get("model")


def tokenize_answer(served: ServedModel, body: bytes, max_inputs: int, max_tokens: int) -> bytes:
    """/tokenize: each input's tokens with ids and character offsets, at most max_length tokens an input and
    `max_tokens` a request (413 beyond), so an answer stays small."""
    texts, special = protocol.tokenize_request(body, max_inputs)
    pipeline = served.opened()
    with refused([f"inputs[{i}]" for i in range(len(texts))], ""):
        try:
            encodings = pipeline.tokenize(texts, served.recipe, special=special, max_tokens=max_tokens)
        except TooManyTokens as e:
            raise ApiError(
                413,
                f"the inputs up to 'inputs[{e.index}]' are {e.tokens} tokens; /tokenize answers at most {e.limit} "
                f"tokens a request (--max-batch-tokens): send fewer inputs at a time",
                param="inputs",
                code="input_too_long",
            ) from None
    return protocol.tokenize_response(encodings, texts)


def similarity_answer(served: ServedModel, recipe: Recipe, answers: list) -> bytes:
    """/similarity: the cosine of the source sentence's vector (the first) with each other sentence's."""
    vectors = recipe.finish(np.stack(answers))
    similarities = served.opened().similarity(vectors[:1], vectors[1:])  # (1, sentences): of arrays, an array
    assert isinstance(similarities, np.ndarray)
    return protocol.similarity_response(similarities[0])


def decode_answer(served: ServedModel, body: bytes, max_inputs: int) -> bytes:
    """/decode: each list of token ids as text."""
    ids, skip_special_tokens = protocol.decode_request(body, max_inputs)
    pipeline = served.opened()
    with refused([f"ids[{i}]" for i in range(len(ids))], ""):
        texts = pipeline.decode(ids, skip_special_tokens)
    return json.dumps(texts, ensure_ascii=False).encode()


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


def ollama_model_of(body: bytes) -> str | None:
    """The model an Ollama /api/show body names."""
    return protocol.ollama_model(protocol.json_object(body))


def ollama_render(kind: str, model: str, recipe: Recipe, answers: list, tokens: int, start: int) -> bytes:
    """The rows' vectors finished by the recipe, as /api/embed (with its durations since `start`, in ns) or the
    older /api/embeddings answers them."""
    vectors = recipe.finish(np.stack(answers)) if answers else np.empty((0, recipe.dim), np.float32)
    if kind == "embeddings":
        return protocol.ollama_embeddings_response(vectors)
    return protocol.ollama_embed_response(vectors, model, tokens, time.perf_counter_ns() - start, 0)


def no_swagger_ui() -> ApiError:
    return ApiError(
        404, "/docs needs Swagger UI's files: pip install swagger-ui-py (the [serve] extra has it)", code="no_docs"
    )


def ollama_error_response(error: ApiError) -> Response:
    """An error of Ollama's routes, in Ollama's shape: {"error": message}."""
    return Response(protocol.ollama_error(error), error.status, headers=error.headers, media_type=JSON)


def json_response(value, status: int = 200) -> Response:
    return Response(protocol.strict_json(value, ensure_ascii=True), status, media_type=JSON)


def error_response(error: ApiError) -> Response:
    return Response(error.body(), error.status, headers=error.headers, media_type=JSON)


openai_error_response = error_response  # the shape of every route's errors but Ollama's


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (404 no such route, 405 wrong method) in OpenAI's shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    return error_response(ApiError(status, f"{request.method} {request.url.path}: {getattr(exc, 'detail', exc)}"))


def create_app(settings: Settings) -> Starlette:
    """The ASGI app serving `settings.models`; they load in the background once the app starts."""
    server = Server(settings)
    routes = [
        Route("/v1/embeddings", server.openai_embeddings, methods=["POST"]),
        Route("/embed", server.tei_embed, methods=["POST"]),
        Route("/embed_all", server.embed_all, methods=["POST"]),
        Route("/similarity", server.tei_similarity, methods=["POST"]),
        Route("/embed_sparse", server.tei_embed_sparse, methods=["POST"]),
        Route("/embed_multi", server.embed_multi, methods=["POST"]),
        Route("/tokenize", server.tokenize, methods=["POST"]),
        Route("/decode", server.decode, methods=["POST"]),
        Route("/rerank", server.tei_rerank, methods=["POST"]),
        Route("/v1/rerank", server.cohere_rerank, methods=["POST"]),
        Route("/predict", server.predict, methods=["POST"]),
        Route("/info", server.info, methods=["GET"]),
        Route("/api/embed", server.ollama_embed, methods=["POST"]),
        Route("/api/embeddings", server.ollama_embeddings, methods=["POST"]),
        Route("/api/show", server.ollama_show, methods=["POST"]),
    ]
    routes += model_routes(routes)
    routes += [
        Route("/openapi.json", server.openapi, methods=["GET"]),
        Route("/docs", server.docs, methods=["GET"]),
        *(Route(f"/docs/{name}", server.docs_asset, methods=["GET"]) for name in openapi.ASSETS),
        Route("/api/tags", server.ollama_tags, methods=["GET"]),
        Route("/api/version", server.ollama_version, methods=["GET"]),
        Route("/v1/models", server.list_models, methods=["GET"]),
        Route("/health", server.health, methods=["GET"]),
        Route("/metrics", server.prometheus, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware(settings),
        lifespan=server.lifespan,
        exception_handlers={HTTPException: http_error},
    )
    app.state.server = server
    open_paths = open_paths_of(settings)
    server.described = openapi.document(
        [(r.path, r.methods or set()) for r in routes], bool(settings.api_keys), open_paths
    )  # every route described, or the server does not start
    observe(app, server)
    return app


def open_paths_of(settings: Settings) -> tuple[str, ...]:
    """The paths answered without an API key: the documentation always, /health and /metrics unless
    --protect-health."""
    return (*(() if settings.protect_health else OPEN_PATHS), *openapi.DOC_PATHS)


def model_routes(routes: list[Route]) -> list[Route]:
    """Each route as /models/NAME/route too, for the served model NAME (which may hold a slash: a hub id); the
    longest paths first, so /models/a/v1/rerank is /v1/rerank of model a, not /rerank of a model "a/v1"."""
    ordered = sorted(routes, key=lambda r: -len(r.path))
    return [Route("/models/{model:path}" + r.path, r.endpoint, methods=r.methods) for r in ordered]


def middleware(settings: Settings) -> list[Middleware]:
    """CORS (outermost: a preflight carries no key, and a 401 carries the CORS headers a browser needs to read
    it), then the API keys."""
    layers = []
    if settings.cors_allow_origins:
        layers.append(
            Middleware(
                CORSMiddleware,
                allow_origins=settings.cors_allow_origins,
                allow_methods=["GET", "POST"],
                allow_headers=["*"],
            )
        )
    if settings.api_keys:
        layers.append(Middleware(BearerAuth, keys=settings.api_keys, open_paths=open_paths_of(settings)))
    return layers


def observe(app: Starlette, server: Server) -> None:
    """An access line per request, as text or JSON (--log-format; numbert.serve.logs); --otlp-endpoint: a span per
    request (numbert.serve.tracing), around the access line."""
    from .logs import access_log

    app.add_middleware(access_log)
    if server.tracing is not None:
        app.add_middleware(server.tracing.middleware)


def tracing(endpoint: str, model: str):
    """The server's Tracing (numbert.serve.tracing), or an ImportError naming the [otel] extra."""
    try:
        from .tracing import Tracing
    except ImportError as e:
        raise ImportError(
            f"--otlp-endpoint needs the [otel] extra ({e.name} is missing): pip install '.[otel]' in numbert's "
            "checkout (or pip install '/path/to/numbert[otel]')"
        ) from None
    return Tracing(endpoint, model)


def log_to_stderr(log_format: str = "text") -> None:
    """The server's own log lines (ready, stopped, and an access line per request) on stderr,
    beside uvicorn's, as text or as JSON objects (numbert.serve.logs)."""
    log = logging.getLogger("numbert")  # the server's, and its model threads' (numbert.pipeline.batcher)
    if not log.handlers:
        handler = logging.StreamHandler()
        if log_format == "json":
            from .logs import JsonFormatter

            handler.setFormatter(JsonFormatter())
        else:
            handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def app_from_environment() -> Starlette:
    """The app of a worker process started by `numbert serve --workers N` (uvicorn's factory): settings from
    the environment, BLAS and row threads set for this process alone."""
    settings = Settings.from_json(os.environ[SETTINGS_VARIABLE])
    log_to_stderr(settings.log_format)
    if settings.blas_threads is not None:
        own_process_threads(settings.blas_threads)
    return create_app(settings)
