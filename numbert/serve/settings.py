"""What the server is told: the models, their sentence-vector recipe, the limits that bound its memory, and who
may call it (API keys, CORS origins)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..checkpoint.hub import model_name


@dataclass(frozen=True)
class Settings:
    """Everything a server process needs to build its app (JSON round-trips it to worker processes).

    recipe: the choices of the served recipe (pooling, layers, combine, normalize, max_length, prompt,
    prompt_name: `Bert.recipe`'s; absent = the model's own, its Dense layers and default prompt included).
    Limits, with
    text-embeddings-inference's names and defaults where it has them: payload_limit bytes per request
    body, max_client_batch_size inputs per request (413 beyond), max_concurrent_requests requests
    admitted at once (429 beyond), max_batch_tokens padded tokens and max_batch_size inputs per forward;
    max_sparse_weights bounds an /embed_sparse answer (a SPLADE vector may weigh every vocabulary entry),
    max_answer_values an /embed_all or /embed_multi answer (a vector a token: tokens x width numbers).
    A request is admitted once its body is read whole: reading takes at most body_timeout seconds (408
    beyond), and max_connections (uvicorn's limit_concurrency) bounds the connections, hence the bodies
    being read (about payload_limit x max_connections bytes). A request waiting for the model holds its
    token ids only (4 bytes a token, and a token takes at least a byte of the body), so the queue holds
    at most about 4 x payload_limit x max_concurrent_requests bytes. A connection is closed when it has
    not sent a whole request head keep_alive_timeout seconds after it opened, after its last answer or
    after the head's first byte; on SIGTERM the accepted requests have graceful_timeout seconds to finish.
    A request admitted is answered within request_timeout seconds (504 beyond, its rows dropped unrun).

    Several models: `model` is the first (the default of the routes that name none), `more_models` the
    others by served name; each gets the same recipe choices, on top of its own recipe.
    """

    model: str
    served_model_name: str | None = None  # the first model's name in /v1/models and answers (default: model_name)
    more_models: dict[str, str] = field(default_factory=dict)  # served name -> directory or hub id
    recipe: dict = field(default_factory=dict)  # keyword arguments of Bert.recipe
    auto_truncate: bool = False  # cut inputs over max_length instead of answering 413
    answer_any_model_name: bool = False  # a request's `model` naming no served model gets the default, not a 404
    max_batch_tokens: int = 16384
    max_batch_size: int = 32
    max_concurrent_requests: int = 512
    max_client_batch_size: int = 2048
    max_sparse_weights: int = 1 << 20  # non-zero weights in one /embed_sparse answer (413 beyond): about 40 MB
    max_answer_values: int = 1 << 21  # numbers in one /embed_all or /embed_multi answer (413 beyond): about 30 MB
    payload_limit: int = 2_000_000
    max_connections: int = 1024
    body_timeout: int = 30  # seconds
    keep_alive_timeout: int = 5  # seconds
    graceful_timeout: int = 30  # seconds
    request_timeout: float | None = None  # seconds from admission to answer (None: no limit)
    api_keys: list[str] = field(default_factory=list, repr=False)  # Bearer keys; none: every request is let in
    protect_health: bool = False  # /health and /metrics need a key too
    cors_allow_origins: list[str] = field(default_factory=list)  # browser origins allowed ("*": any)
    log_format: str = "text"  # "json": one JSON object a log line, an access line per request (serve.logs)
    otlp_endpoint: str | None = None  # an OTLP/HTTP collector receiving the requests' spans (serve.tracing)
    blas_threads: int | None = None  # set in a worker process `numbert serve --workers N` started
    lane_processes: bool = True  # side-by-side batches run in processes of their own (serve.lanes)

    @property
    def name(self) -> str:
        """The first (default) model's served name."""
        return self.served_model_name or model_name(self.model)

    @property
    def models(self) -> dict[str, str]:
        """Every model served: served name -> directory or hub id, the default first."""
        return {self.name: self.model, **self.more_models}

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Settings:
        return cls(**json.loads(text))
