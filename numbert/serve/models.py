"""The models one server serves, by name: each loaded in the background with its own queue and model thread.

    numbert serve --model all-MiniLM-L6-v2 --model rerank=./ms-marco-MiniLM-L6-v2

A request picks its model by the route prefix `/models/NAME/...` (every route that works on inputs has one),
else by its body's `model` field (OpenAI's /v1/embeddings, Cohere's /v1/rerank), else it goes to the first
model. With one model served, any `model` field is answered by it (as a single-model server always did);
with several, a name not served is a 404 listing the served ones. Each model has its own Batcher, so the
queue never mixes models and one thread runs each model's forwards; the weights are memory-mapped, so
`--workers N` processes share their pages.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio

from .. import __version__
from .batching import Batcher
from .embedder import Embedder
from .metrics import Metrics
from .protocol import ApiError
from .settings import Settings

log = logging.getLogger("numbert.serve")


class ServedModel:
    """One model of the server: its served name, its Embedder and Batcher once loaded, or why it failed."""

    def __init__(self, name: str, path: str):
        self.name, self.path = name, path
        self.embedder: Embedder | None = None
        self.batcher: Batcher | None = None
        self.load_error: str | None = None

    async def load(self, settings: Settings, metrics: Metrics) -> None:
        """Load the model in a thread, then start its model thread; a failure is kept (and logged) for /health."""
        try:
            embedder = await anyio.to_thread.run_sync(Embedder, settings, self.path)
        except Exception as e:  # noqa: BLE001 (/health says why; the model's routes answer 503)
            self.load_error = f"cannot load the model {self.name}: {e}"
            log.error("%s", self.load_error)
            return
        self.batcher = Batcher(embedder.model.encoder, settings.max_batch_tokens, settings.max_batch_size, metrics)
        self.batcher.start(embedder.warm_up)
        self.embedder = embedder
        log.info(
            "numbert serve: %s ready (%d-dimensional vectors, inputs up to %d tokens)",
            self.name,
            embedder.dim,
            embedder.max_length,
        )

    def ready(self) -> tuple[Embedder, Batcher]:
        """Its Embedder and Batcher, or a 503: still loading (retry), or failed to load (and why)."""
        if self.embedder is None or self.batcher is None:
            raise ApiError(
                503,
                self.load_error or f"the model {self.name} is loading; retry in a moment",
                code="model_not_ready",
                headers={"Retry-After": "1"},
            )
        return self.embedder, self.batcher

    def stop(self) -> None:
        """Let the model thread finish its queue, then end (blocks)."""
        if self.batcher is not None:
            self.batcher.stop()

    def info(self, settings: Settings, threads: int) -> dict:
        """text-embeddings-inference's GET /info for this model (its Info schema); `threads`: those that parse and
        tokenize requests."""
        embedder, _ = self.ready()
        return {
            "model_id": self.name,
            "model_sha": snapshot_sha(embedder.model.directory),
            "model_dtype": "float32",
            "model_type": embedder.model_type(),
            "max_concurrent_requests": settings.max_concurrent_requests,
            "max_input_length": embedder.max_length,
            "max_batch_tokens": settings.max_batch_tokens,
            "max_batch_requests": settings.max_batch_size,
            "max_client_batch_size": settings.max_client_batch_size,
            "auto_truncate": settings.auto_truncate,
            "tokenization_workers": threads,
            "version": __version__,
            "sha": None,
            "docker_label": None,
        }


class Models:
    """The served models by name, the first the default."""

    def __init__(self, settings: Settings):
        self.by_name = {name: ServedModel(name, path) for name, path in settings.models.items()}
        self.default = next(iter(self.by_name.values()))

    def __iter__(self):
        return iter(self.by_name.values())

    def pick(self, routed: str | None, asked: str | None = None) -> ServedModel:
        """The model a request is for: `routed` (its /models/NAME/ prefix) must be served; `asked` (its body's
        `model` field) must be too when several are served; neither: the default. Else a 404 naming them."""
        name = routed if routed is not None else asked if len(self.by_name) > 1 else None
        if name is None:
            return self.default
        if name not in self.by_name:
            served = ", ".join(repr(n) for n in self.by_name)
            where = "the route" if routed is not None else "'model'"
            raise ApiError(
                404,
                f"{where} names the model {name!r}, which this server does not serve; it serves {served}",
                param=None if routed is not None else "model",
                code="model_not_found",
            )
        return self.by_name[name]

    @property
    def load_error(self) -> str | None:
        """Why the models that failed to load failed, or None."""
        errors = [m.load_error for m in self if m.load_error is not None]
        return "; ".join(errors) if errors else None


def snapshot_sha(directory: Path | None) -> str | None:
    """The hub commit of a model directory in the Hugging Face cache (.../snapshots/<sha>), else None."""
    return directory.name if directory is not None and directory.parent.name == "snapshots" else None
