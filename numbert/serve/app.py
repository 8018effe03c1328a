"""The HTTP routes (Starlette): OpenAI's /v1/embeddings and /v1/models, text-embeddings-inference's /embed,
/embed_sparse, /tokenize, /rerank, /predict, /health and /metrics, and the Cohere/Jina-style /v1/rerank.

Every route that works on inputs goes through `Server.handle`: 503 until the model is loaded, the body
read up to payload_limit (413) within body_timeout (408), admission once it is whole (429 with
Retry-After beyond max_concurrent_requests), parsing and tokenizing, the model thread's queue, and the
answer rendered, or the error in OpenAI's shape. Parsing, tokenizing and rendering run in threads,
except for small requests (a thread hop costs more than they do), so the event loop never stalls on a
big one and the model never runs on it. An unexpected error is a 500 and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import numpy as np
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from ..recipe import Recipe
from ..reranking import ranking
from ..sparse import prune
from . import protocol
from .batching import Batcher
from .embedder import Embedder
from .metrics import Metrics
from .protocol import ApiError, EmbeddingRequest, ScoringRequest
from .settings import Settings

log = logging.getLogger("numbert.serve")
JSON = "application/json"
TRUNCATE_HINTS = {  # how a client may have a long input cut, by the name of the field holding the inputs
    "input": ", or start the server with --auto-truncate",  # OpenAI's /v1/embeddings has no truncate field
    "inputs": ", or send truncate=true (or start the server with --auto-truncate)",  # TEI's /embed(_sparse), /predict
    "texts": ", or send truncate=true (or start the server with --auto-truncate)",  # TEI's /rerank
}
SMALL = 2048  # bytes of a request body, or numbers in an answer, handled on the event loop itself
SETTINGS_VARIABLE = "NUMBERT_SERVE_SETTINGS"  # how `--workers N` hands the settings to its worker processes
METRICS_VARIABLE = "NUMBERT_SERVE_METRICS"  # ... and the directory where the workers publish their counters
PUBLISH_EVERY = 1.0  # seconds: how stale another worker's counters can be in /metrics


class Server:
    """One server process: its settings, its model (loaded in the background) and its counters."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.metrics = Metrics()
        shared = os.environ.get(METRICS_VARIABLE)
        self.shared_metrics = None if shared is None else Path(shared)  # --workers N: every worker's counters
        self.embedder: Embedder | None = None
        self.batcher: Batcher | None = None
        self.load_error: str | None = None
        self.threads = anyio.CapacityLimiter(2)  # parsing, tokenizing, rendering: off the event loop
        self.started = int(time.time())

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
            if self.batcher is not None:
                await anyio.to_thread.run_sync(self.batcher.stop)
            if self.shared_metrics is not None:
                self.metrics.publish(self.shared_metrics)
            answered = sum(self.metrics.requests.values())
            log.info("numbert serve: stopped after answering %d requests; nothing was left waiting", answered)

    async def load(self) -> None:
        try:
            embedder = await anyio.to_thread.run_sync(Embedder, self.settings)
        except Exception as e:  # noqa: BLE001 (/health says why; the embedding routes answer 503)
            self.load_error = f"cannot load the model {self.settings.model}: {e}"
            log.error("%s", self.load_error)
            return
        s = self.settings
        self.batcher = Batcher(embedder.model.encoder, s.max_batch_tokens, s.max_batch_size, self.metrics)
        self.batcher.start(embedder.warm_up)
        self.embedder = embedder
        log.info(
            "numbert serve: %s ready (%d-dimensional vectors, inputs up to %d tokens)",
            s.name,
            embedder.dim,
            embedder.max_length,
        )

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

    async def tei_embed_sparse(self, request: Request) -> Response:
        return await self.handle(request, "/embed_sparse", self.sparse_answer)

    async def tokenize(self, request: Request) -> Response:
        return await self.handle(request, "/tokenize", self.tokenize_answer)

    async def tei_rerank(self, request: Request) -> Response:
        return await self.handle(request, "/rerank", self.score_answer, protocol.tei_rerank_request)

    async def cohere_rerank(self, request: Request) -> Response:
        return await self.handle(request, "/v1/rerank", self.score_answer, protocol.cohere_rerank_request)

    async def predict(self, request: Request) -> Response:
        return await self.handle(request, "/predict", self.score_answer, protocol.predict_request)

    async def models(self, request: Request) -> Response:
        model = {"id": self.settings.name, "object": "model", "created": self.started, "owned_by": "numbert"}
        return json_response({"object": "list", "data": [model]})

    async def health(self, request: Request) -> Response:
        if self.embedder is not None:
            return json_response({"status": "ready"})
        return json_response({"status": "error" if self.load_error else "loading", "error": self.load_error}, 503)

    async def prometheus(self, request: Request) -> Response:
        metrics = self.metrics if self.shared_metrics is None else self.metrics.merged(self.shared_metrics)
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    # --- one request ------------------------------------------------------------------------------

    async def handle(
        self, request: Request, endpoint: str, answer: Callable[..., Awaitable[tuple[bytes, int, int]]], *args
    ) -> Response:
        """Read, admit, check, tokenize, queue, answer: the path of every request that carries inputs.
        `answer(embedder, batcher, request, *args)` reads the body and gives (the answer, inputs, tokens)."""
        start = time.perf_counter()
        inputs = tokens = 0
        try:
            if self.embedder is None or self.batcher is None:
                raise ApiError(
                    503,
                    self.load_error or "the model is loading; retry in a moment",
                    code="model_not_ready",
                    headers={"Retry-After": "1"},
                )
            try:
                body, inputs, tokens = await answer(self.embedder, self.batcher, request, *args)
            finally:
                self.leave(request)
            response = Response(body, media_type=JSON)
        except ApiError as e:
            response = error_response(e)
        except Exception as e:  # a bug: say so, and keep serving
            log.exception("%s failed", endpoint)
            response = error_response(ApiError(500, f"internal error: {type(e).__name__}: {e}", code="internal_error"))
        self.metrics.answered(endpoint, response.status_code, time.perf_counter() - start, inputs, tokens)
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

    def leave(self, request: Request) -> None:
        """The request is answered: no longer in flight, if it was admitted."""
        if getattr(request.state, "admitted", False):
            self.metrics.in_flight -= 1

    async def embed_answer(
        self, embedder: Embedder, batcher: Batcher, http: Request, parse: Callable, name: str
    ) -> tuple[bytes, int, int]:
        """The answer to /v1/embeddings or /embed, with the number of inputs and tokens it embedded.

        While it waits for the model, a request holds its token ids only (4 bytes a token), not its body or texts;
        if its client disconnects meanwhile, its rows are dropped before they run.
        """
        if embedder.sparse_only:
            raise ApiError(
                400,
                "this model is a SparseEncoder (SPLADE): its vectors are sparse, over the vocabulary; "
                "ask /embed_sparse",
                code="model_is_sparse",
            )
        body = await self.read_body(http)
        request, recipe, rows = await self.run(len(body), self.embedding_rows, embedder, body, parse, name)
        del body
        answers = await until_disconnected(http, batcher.submit(rows, embedder.embedding))
        tokens = sum(len(row.ids) for row in rows)
        vectors = recipe.finish(np.stack(answers)) if answers else np.empty((0, recipe.dim), np.float32)
        answer = await self.run(vectors.size, self.render, request, vectors, tokens)
        return answer, len(rows), tokens

    async def sparse_answer(self, embedder: Embedder, batcher: Batcher, http: Request) -> tuple[bytes, int, int]:
        """The answer to /embed_sparse: each input's SPLADE vector, its non-zero weights (the model's
        max_active_dims largest, if it names it), with the number of inputs and tokens it read."""
        body = await self.read_body(http)
        readout = embedder.sparse  # a model without the masked-LM head is refused before anything is tokenized
        _, _, rows = await self.run(
            len(body), self.embedding_rows, embedder, body, protocol.tei_sparse_request, "inputs"
        )
        del body
        answers = await until_disconnected(http, batcher.submit(rows, readout))
        vectors = [prune(weights, embedder.max_active_dims) for weights in answers]
        answer = await self.run(sum(len(v.ids) for v in vectors), protocol.sparse_response, vectors)
        return answer, len(rows), sum(len(row.ids) for row in rows)

    async def tokenize_answer(self, embedder: Embedder, batcher: Batcher, http: Request) -> tuple[bytes, int, int]:
        """The answer to /tokenize (no inputs embedded)."""
        body, s = await self.read_body(http), self.settings
        answer = await self.run(len(body), tokenize_answer, embedder, body, s.max_client_batch_size, s.max_batch_tokens)
        return answer, 0, 0

    async def score_answer(
        self, embedder: Embedder, batcher: Batcher, http: Request, parse: Callable
    ) -> tuple[bytes, int, int]:
        """The answer to /rerank, /v1/rerank or /predict, with the number of inputs and tokens it scored: each
        input (a pair, or one text) queued as a row for the classifier's logits."""
        body = await self.read_body(http)
        request, score, rows = await self.run(len(body), self.scoring_rows, embedder, body, parse)
        del body
        logits = await until_disconnected(http, batcher.submit(rows, embedder.scores))
        tokens = sum(len(row.ids) for row in rows)
        answer = await self.run(len(rows), self.render_scores, embedder, request, score, np.stack(logits), tokens)
        return answer, len(rows), tokens

    def scoring_rows(self, e: Embedder, body: bytes, parse: Callable) -> tuple[ScoringRequest, Callable, list]:
        """The request, checked; the function of the logits it is answered with (a model unable to answer it
        refused here, before anything is tokenized); and its inputs as rows of token ids."""
        request = parse(body, self.settings.max_client_batch_size)
        score = e.label_scores(request.raw_scores) if request.kind == "predict" else e.relevance(request.raw_scores)
        truncate = self.settings.auto_truncate if request.truncate is None else request.truncate
        hint = TRUNCATE_HINTS.get(request.source, "")
        return request, score, e.pairs_to_rows(request.firsts, request.seconds, request.names, truncate, hint)

    def render_scores(
        self, e: Embedder, request: ScoringRequest, score: Callable, logits: np.ndarray, tokens: int
    ) -> bytes:
        """The logits (inputs, labels) scored and answered: labels best first for /predict, documents best first
        for a rerank."""
        scores = score(logits)
        if request.kind == "predict":
            return protocol.predict_response(scores, e.model.heads.labels, request.single)
        relevance = scores[:, 0]
        return protocol.rerank_response(
            request, relevance, ranking(relevance, request.top_n), self.settings.name, tokens
        )

    async def run(self, size: int, work: Callable, *args):
        """work(*args) in a thread, or right here on the event loop when `size` is SMALL."""
        if size <= SMALL:
            return work(*args)
        return await anyio.to_thread.run_sync(work, *args, limiter=self.threads)

    def embedding_rows(
        self, e: Embedder, body: bytes, parse: Callable, name: str
    ) -> tuple[EmbeddingRequest, Recipe, list]:
        """The request, checked, the recipe it asks for, and its inputs as rows of token ids."""
        request = parse(body, self.settings.max_client_batch_size)
        recipe = e.request_recipe(request.prompt_name, request.normalize, request.dimensions)
        truncate = self.settings.auto_truncate if request.truncate is None else request.truncate
        if request.ids:
            rows = e.ids_to_rows(request.inputs, name)
        else:
            rows = e.texts_to_rows(request.inputs, truncate, name, recipe, TRUNCATE_HINTS[name])
        request.inputs = []  # the token ids stand for them from here on
        return request, recipe, rows

    def render(self, request: EmbeddingRequest, vectors: np.ndarray, tokens: int) -> bytes:
        """The finished vectors as OpenAI's or text-embeddings-inference's JSON."""
        if request.normalize is None:  # OpenAI
            return protocol.openai_response(vectors, request.encoding_format, self.settings.name, tokens)
        return protocol.tei_response(vectors)


async def until_disconnected(http: Request, answer: asyncio.Future):
    """The answer, awaited while watching the client: if it disconnects first, the answer is cancelled (so its
    rows are dropped from the queue unrun) and the request ends with a 499 (nginx's \"client closed request\")."""
    watch = asyncio.ensure_future(http.receive())  # the body is read: the next message is the disconnect
    try:
        await asyncio.wait((answer, watch), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if not answer.done():
        answer.cancel()
        raise ApiError(499, "the client closed the connection before its answer was ready", code="client_closed")
    return answer.result()


def tokenize_answer(e: Embedder, body: bytes, max_inputs: int, max_tokens: int) -> bytes:
    """/tokenize: each input's tokens with ids and character offsets, at most max_length tokens an input and
    `max_tokens` a request (413 beyond), so an answer stays small."""
    texts, special = protocol.tokenize_request(body, max_inputs)
    texts = [t.lower() for t in texts] if e.recipe.lowercase else texts
    return protocol.tokenize_response(e.tokenize_inputs(texts, special, max_tokens), texts)


def json_response(value, status: int = 200) -> Response:
    return Response(json.dumps(value), status, media_type=JSON)


def error_response(error: ApiError) -> Response:
    return Response(error.body(), error.status, headers=error.headers, media_type=JSON)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (404 no such route, 405 wrong method) in OpenAI's shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    return error_response(ApiError(status, f"{request.method} {request.url.path}: {getattr(exc, 'detail', exc)}"))


def create_app(settings: Settings) -> Starlette:
    """The ASGI app serving `settings.model`; the model loads in the background once the app starts."""
    server = Server(settings)
    routes = [
        Route("/v1/embeddings", server.openai_embeddings, methods=["POST"]),
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/embed", server.tei_embed, methods=["POST"]),
        Route("/embed_sparse", server.tei_embed_sparse, methods=["POST"]),
        Route("/tokenize", server.tokenize, methods=["POST"]),
        Route("/rerank", server.tei_rerank, methods=["POST"]),
        Route("/v1/rerank", server.cohere_rerank, methods=["POST"]),
        Route("/predict", server.predict, methods=["POST"]),
        Route("/health", server.health, methods=["GET"]),
        Route("/metrics", server.prometheus, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=server.lifespan, exception_handlers={HTTPException: http_error})
    app.state.server = server
    return app


def log_to_stderr() -> None:
    """The server's own log lines (ready, stopped) on stderr, beside uvicorn's."""
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def app_from_environment() -> Starlette:
    """The app of a worker process started by `numbert serve --workers N` (uvicorn's factory): settings from
    the environment, BLAS threads set for this process alone."""
    log_to_stderr()
    settings = Settings.from_json(os.environ[SETTINGS_VARIABLE])
    if settings.blas_threads is not None:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

        threadpool_limits(settings.blas_threads)
    return create_app(settings)
