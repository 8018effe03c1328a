"""The HTTP routes (Starlette): OpenAI's /v1/embeddings and /v1/models, text-embeddings-inference's /embed,
/embed_all, /embed_sparse, /similarity, /tokenize, /decode, /rerank, /predict, /info, /health and /metrics,
and the Cohere/Jina-style /v1/rerank; each route that works on inputs also as /models/NAME/... for the served
model NAME (`models`).

Every route that works on inputs is a row of numbert.serve.routes' table, answered by `Server.answer` through
`Server.handle`: the body read up to payload_limit (413)
within body_timeout (408), admission once it is whole (429 with Retry-After beyond
max_concurrent_requests), parsing, the model picked (404 for one not served, 503 until it is loaded),
tokenizing, the model's queue, and the answer rendered within request_timeout (504), or the error in
OpenAI's shape. API keys (`auth`) and CORS are middleware around the routes. Parsing and tokenizing run in threads
whatever the body's size (`Server.in_thread`), each model's tokenizing in threads of its own, and so does rendering
but for a model's answer of at most ON_THE_LOOP numbers to a body of at most ON_THE_LOOP bytes (a few sentence
vectors: rendered on the event loop in less time than the hop to a thread takes), so the event loop never stalls
and one model's slow tokenizer holds no other model's requests; a tokenizer.json pattern matches with the GIL
released and within its time bound (a 422 past it), and the model never runs on the event loop. An unexpected
error is a 500 and the server keeps serving.
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
from ..pipeline import Batcher, Readout, pattern_deadline
from ..runtime.blas import own_process_threads
from . import openapi, protocol
from .auth import OPEN_PATHS, BearerAuth
from .metrics import Metrics
from .models import Models, ServedModel
from .protocol import ApiError
from .routes import ROUTES, Endpoint, Work
from .settings import Settings

log = logging.getLogger("numbert.serve")
JSON = "application/json"
SETTINGS_VARIABLE = "NUMBERT_SERVE_SETTINGS"  # how `--workers N` hands the settings to its worker processes
METRICS_VARIABLE = "NUMBERT_SERVE_METRICS"  # ... and the directory where the workers publish their counters
PUBLISH_EVERY = 1.0  # seconds: how stale another worker's counters can be in /metrics
NOT_TRACED = contextlib.nullcontext()
ON_THE_LOOP = 4096  # numbers of a model's answer, and bytes of its body, small enough to render on the event loop
INFO_AFTER = [r.path for r in ROUTES].index("/predict") + 1  # GET /info's place among the routes (and in /openapi.json)


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

    # --- the routes that describe the server -------------------------------------------------------------

    async def info(self, request: Request) -> Response:
        return await self.handle(request, "/info", self.info_answer)

    async def info_answer(self, http: Request) -> tuple[bytes, int, int]:
        """The answer to GET /info: text-embeddings-inference's description of the (routed, else default) model."""
        info = self.models.pick(routed(http)).info(self.settings, int(self.threads.total_tokens))
        return json.dumps(info).encode(), 0, 0

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

    async def ollama_tags(self, request: Request) -> Response:
        """GET /api/tags: the loaded models as Ollama lists its models (the first call reads each model's files
        once, for their digest)."""
        tags = [await anyio.to_thread.run_sync(m.ollama_tag) for m in self.models if m.loaded]
        return json_response({"models": tags})

    async def openapi_document(self, request: Request) -> Response:
        """GET /openapi.json: the OpenAPI 3.1 document of every route (numbert.serve.openapi)."""
        return json_response(self.described)

    # --- one request ------------------------------------------------------------------------------

    def endpoint(self, route: Endpoint) -> Callable[[Request], Awaitable[Response]]:
        """The Starlette endpoint of a row of the routes' table."""
        errors = ollama_error_response if route.ollama else openai_error_response

        async def answered(request: Request) -> Response:
            return await self.handle(request, route.path, self.answer, route, errors=errors)

        return answered

    async def answer(self, http: Request, route: Endpoint) -> tuple[bytes, int, int]:
        """The answer of a route of the table (numbert.serve.routes), with the number of inputs and tokens it read:
        the body read and checked, the inputs as rows, queued for the model, the answers rendered; each phase
        traced (tokenize, queue and forward, render). While it waits for the model, a request holds its token ids
        only (4 bytes a token), not its body or texts; if its client disconnects or its time is up meanwhile, its
        rows are dropped before they run."""
        start = time.perf_counter_ns()
        body = await self.read_body(http)
        small = len(body) <= ON_THE_LOOP
        with self.phase("tokenize"):
            work = await self.prepared(http, route, body)
            del body
        rows = work.rows
        work.tokens = tokens = sum(len(row.ids) for row in rows)
        work.start = start
        answers: list = []
        if route.readout is not None:
            _, batcher = work.served.ready()
            readout = route.readout(work)
            if rows:
                answers = await self.queue(http, batcher, rows, readout)
        with self.phase("render"):
            if small and route.readout is not None and sum(map(numbers, answers)) <= ON_THE_LOOP:
                answer = rendered(route, self.settings, work, answers)
            else:
                answer = await self.in_thread(http, rendered, route, self.settings, work, answers)
        return answer, len(rows), tokens

    async def prepared(self, http: Request, route: Endpoint, body: bytes) -> Work:
        """The route's parse and rows steps: in one thread when the model is known before the body is read (named
        by the route, or the only one served), so that its tokenizing runs in that model's threads; else parsing in
        the server's threads, then tokenizing in the model's."""
        known = self.models.known(routed(http))
        if known is not None:
            return await self.in_thread(http, parsed_rows, route, self.settings, self.models, routed(http), body,
                                        model=known)  # fmt: skip
        work = await self.in_thread(http, route.parse, self.settings, self.models, routed(http), body)
        work.rows = await self.in_thread(http, route.rows, self.settings, work, model=work.served)
        return work

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

    async def queue(self, http: Request, batcher: Batcher, rows: list, readout: Readout) -> list:
        """The rows' answers from the model thread (until_answered); traced, with queue and forward spans."""
        if self.tracing is None:
            return await self.until_answered(http, batcher.submit(rows, readout))
        forwards: list = []
        queued = time.time_ns()
        answers = await self.until_answered(http, batcher.submit(rows, readout, forwards))
        self.tracing.waited(queued, forwards)
        return answers

    def phase(self, name: str) -> contextlib.AbstractContextManager:
        """A span around a phase of the request when traced (--otlp-endpoint), else nothing."""
        return NOT_TRACED if self.tracing is None else self.tracing.phase(name)

    async def in_thread(self, http: Request, work: Callable, *args, model: ServedModel | None = None):
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


def parsed_rows(route: Endpoint, settings: Settings, models: Models, name: str | None, body: bytes) -> Work:
    """A route's parse and rows steps, one after the other (in one thread)."""
    work = route.parse(settings, models, name, body)
    work.rows = route.rows(settings, work)
    return work


def rendered(route: Endpoint, settings: Settings, work: Work, answers: list) -> bytes:
    """A route's render step, once its answers are known to be finite (`finite_answers`)."""
    return route.render(settings, work, finite_answers(answers, work.served.name))


def numbers(answer: Any) -> int:
    """How many numbers an answer (an array, or a tuple of arrays: a SparseVector) holds."""
    if isinstance(answer, np.ndarray):
        return answer.size
    if isinstance(answer, tuple):
        return sum(numbers(part) for part in answer)
    return 1


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


def routed(http: Request) -> str | None:
    """The model a /models/NAME/... route names, or None."""
    return http.path_params.get("model")


async def ollama_version(request: Request) -> Response:
    """GET /api/version: numbert's version."""
    return json_response({"version": __version__})


async def docs(request: Request) -> Response:
    """GET /docs: Swagger UI over /openapi.json, its files served from the swagger-ui-py package."""
    if openapi.assets() is None:
        return error_response(no_swagger_ui())
    return Response(openapi.PAGE, media_type="text/html")


async def docs_asset(request: Request) -> Response:
    """GET /docs/<file>: one of Swagger UI's files."""
    directory, name = openapi.assets(), request.url.path.rsplit("/", 1)[-1]
    if directory is None:
        return error_response(no_swagger_ui())
    media = {"js": "text/javascript", "css": "text/css", "png": "image/png"}[name.rsplit(".", 1)[-1]]
    content = await anyio.to_thread.run_sync((directory / name).read_bytes)
    return Response(content, media_type=media, headers={"Cache-Control": "max-age=86400"})


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
    routes = [Route(r.path, server.endpoint(r), methods=["POST"]) for r in ROUTES]
    routes.insert(INFO_AFTER, Route("/info", server.info, methods=["GET"]))
    routes += model_routes(routes)
    routes += [
        Route("/openapi.json", server.openapi_document, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        *(Route(f"/docs/{name}", docs_asset, methods=["GET"]) for name in openapi.ASSETS),
        Route("/api/tags", server.ollama_tags, methods=["GET"]),
        Route("/api/version", ollama_version, methods=["GET"]),
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
    beside uvicorn's, as text or as JSON objects (numbert.serve.logs), written by a thread of their own."""
    from .logs import written_by_a_thread

    log = logging.getLogger("numbert")  # the server's, and its model threads' (numbert.pipeline.batcher)
    if not log.handlers:
        handler = logging.StreamHandler()
        if log_format == "json":
            from .logs import JsonFormatter

            handler.setFormatter(JsonFormatter())
        else:
            handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        log.addHandler(written_by_a_thread(handler))
        log.setLevel(logging.INFO)


def app_from_environment() -> Starlette:
    """The app of a worker process started by `numbert serve --workers N` (uvicorn's factory): settings from
    the environment, BLAS and row threads set for this process alone."""
    settings = Settings.from_json(os.environ[SETTINGS_VARIABLE])
    log_to_stderr(settings.log_format)
    if settings.blas_threads is not None:
        own_process_threads(settings.blas_threads)
    return create_app(settings)
