"""OpenTelemetry traces of the requests (`numbert serve --otlp-endpoint URL`), sent over OTLP/HTTP.

Each request is a span named after its route (`POST /v1/embeddings`), a child of the caller's span when
the request carries a W3C `traceparent` header. A request that carries inputs has four kinds of child:

    tokenize   the body parsed and checked, the inputs turned into rows of token ids
    queue      from the rows queued until a lane of the model's queue starts the first of them
    forward    one per batch the request's rows ran in (attributes: rows and padded tokens of the batch)
    render     the answers as the response body

A forward serves several requests at once, so it is recorded by the lane that ran it as start and end
times (numbert.pipeline.batcher.Job.forwards) and turned into spans afterwards, one per request it served.
Spans leave in batches (every SCHEDULE_DELAY_MS) and the last ones when the server stops (waiting at most
EXPORT_TIMEOUT for a collector that does not answer). Needs the
[otel] extra; without --otlp-endpoint this module is never imported.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

SCHEDULE_DELAY_MS = 500  # how long a finished span may wait before it is sent
EXPORT_TIMEOUT = 5  # seconds an export may take, retries included (so a stop waits at most that for a dead collector)
TRACES_PATH = "/v1/traces"


def traces_url(endpoint: str) -> str:
    """The collector's traces URL: `endpoint` as given if it ends in /v1/traces, else that path appended
    (OTEL_EXPORTER_OTLP_ENDPOINT's convention: http://collector:4318 means http://collector:4318/v1/traces)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


class Tracing:
    """The spans of one server process, exported to `endpoint` as the service `numbert` serving `model`."""

    def __init__(self, endpoint: str, model: str):
        resource = Resource.create({"service.name": "numbert", "numbert.model": model})
        self.provider = TracerProvider(resource=resource)
        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=EXPORT_TIMEOUT)
        processor = BatchSpanProcessor(
            exporter, schedule_delay_millis=SCHEDULE_DELAY_MS, export_timeout_millis=EXPORT_TIMEOUT * 1000
        )
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer("numbert.serve")

    def middleware(self, app):
        """`app` (ASGI) with a span around each HTTP request."""

        async def traced(scope, receive, send):
            if scope["type"] != "http":
                return await app(scope, receive, send)
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            name = f"{scope['method']} {scope['path']}"
            with self.tracer.start_as_current_span(name, context=extract(headers), kind=trace.SpanKind.SERVER) as span:
                span.set_attribute("http.request.method", scope["method"])
                span.set_attribute("url.path", scope["path"])

                async def send_status(message):
                    if message["type"] == "http.response.start":
                        span.set_attribute("http.response.status_code", message["status"])
                    await send(message)

                await app(scope, receive, send_status)

        return traced

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """A child span of the current one (the request's) around the block."""
        with self.tracer.start_as_current_span(name):
            yield

    def waited(self, queued: int, forwards: list[tuple[int, int, int, int]]) -> None:
        """The queue and forward spans of a request whose rows were queued at `queued` (time.time_ns()) and ran
        in `forwards`: (start, end, rows, padded tokens) of each batch, in the order they ran."""
        parent = context.get_current()
        first = forwards[0][0] if forwards else time.time_ns()
        self.tracer.start_span("queue", parent, start_time=queued).end(end_time=first)
        for start, end, rows, tokens in forwards:
            attributes = {"numbert.batch.rows": rows, "numbert.batch.padded_tokens": tokens}
            self.tracer.start_span("forward", parent, attributes=attributes, start_time=start).end(end_time=end)

    def shutdown(self) -> None:
        """Send the spans not yet sent, then stop."""
        self.provider.shutdown()
