"""`numbert serve`: an OpenAI- and text-embeddings-inference-compatible embedding server.

    numbert serve --model ./all-MiniLM-L6-v2 --port 8000

Requests are validated and tokenized off the event loop, queued, and run by each model's queue
(numbert.pipeline.batcher: a model thread that batches the waiting inputs by a token budget and runs them on
its lanes, two batches at once under load); answers are `Bert.embed`'s up to the last bits.
The modules, bottom up: `settings` (what the server was told), `metrics` (Prometheus text),
`protocol` (the JSON wire formats and their errors), `auth` (API keys), `models` (the models served, each with
its queue), `openapi` (the API's description), `app` (the Starlette routes), `connection` (uvicorn's HTTP
connection, with a deadline on request heads), `main` (the uvicorn process: workers, signals, graceful shutdown);
`logs` (--log-format json) and `tracing` (OpenTelemetry spans, --otlp-endpoint), imported only when asked for
(docs/serving.md).
Needs the [serve] extra (Starlette and uvicorn): `pip install ".[serve]"` in numbert's checkout.
"""

from __future__ import annotations

from .settings import Settings

__all__ = ["Settings"]
