"""Running the server: uvicorn in one process or `--workers N`, and a graceful stop (`numbert serve` calls `run`).

Connections are `connection.Connection`s, at most max_connections of them (uvicorn answers a
plain-text 503 beyond). On SIGTERM or SIGINT uvicorn stops accepting connections, closes the idle ones,
lets every accepted request finish within graceful_timeout seconds (a body still arriving has
body_timeout, then a 408) and cancels what is left; the model thread stops once its queue is empty, and
the process exits 0. With `--workers N`, N processes share the listening socket and (memory-mapped)
the weights' pages; each runs its own queue and model thread with cores/N BLAS threads, set in that
worker process only; they publish their counters to a temporary directory, which /metrics sums.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import tempfile
from typing import Any

from ..runtime.blas import configure_own_process, cores
from .settings import Settings


def run(settings: Settings, host: str = "127.0.0.1", port: int = 8000, workers: int = 1) -> int:
    """Serve until SIGTERM or SIGINT; 0 after a graceful stop. The models are checked before the port opens."""
    try:
        import uvicorn

        from .app import METRICS_VARIABLE, SETTINGS_VARIABLE, create_app, log_to_stderr
        from .connection import Connection
    except ImportError as e:
        raise ImportError(
            f"numbert serve needs the [serve] extra ({e.name} is missing): pip install '.[serve]' in numbert's "
            "checkout (or pip install '/path/to/numbert[serve]')"
        ) from None
    from .models import ServedModel

    for name, model in settings.models.items():  # loads each model (memory-mapped): fails early and clearly
        served = ServedModel(name, model)
        served.open(settings)
        if settings.max_batch_tokens < (limit := served.recipe.max_length):
            raise ValueError(
                f"--max-batch-tokens ({settings.max_batch_tokens}) must hold one input of the model {name}'s "
                f"maximum length ({limit})"
            )
    log_to_stderr(settings.log_format)
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "access_log": False,
        "http": Connection,
        "limit_concurrency": settings.max_connections,
        "timeout_keep_alive": settings.keep_alive_timeout,
        "timeout_graceful_shutdown": settings.graceful_timeout,
    }
    if settings.log_format == "json":
        from .logs import uvicorn_log_config

        options["log_config"] = uvicorn_log_config()
    if workers == 1:
        server = uvicorn.Server(uvicorn.Config(create_app(settings), **options))
        with signals_end_quietly():
            server.run()
        return 0 if server.started else 1
    threads = max(1, cores() // workers)
    os.environ[SETTINGS_VARIABLE] = dataclasses.replace(settings, blas_threads=threads).to_json()
    configure_own_process(threads)  # the worker processes uvicorn starts inherit it, set before their NumPy loads
    with tempfile.TemporaryDirectory(prefix="numbert-serve-metrics-") as shared:
        os.environ[METRICS_VARIABLE] = shared
        uvicorn.run("numbert.serve.app:app_from_environment", factory=True, workers=workers, **options)
    return 0


@contextlib.contextmanager
def signals_end_quietly():
    """uvicorn stops gracefully on SIGTERM / SIGINT and then raises the signal again, to end the process the
    default way (killed, or KeyboardInterrupt). With these handlers in place while it runs, that second
    raise does nothing, so a graceful stop is a normal exit."""
    previous = {sig: signal.signal(sig, lambda number, frame: None) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
