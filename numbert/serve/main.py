"""Running the server: uvicorn in one process or `--workers N`, and a graceful stop (`numbert serve` calls `run`).

On SIGTERM or SIGINT uvicorn stops accepting connections, lets every accepted request finish, stops
the model thread once its queue is empty, and the process exits 0. With `--workers N`, N processes
share the listening socket and (memory-mapped) the weights' pages; each runs its own queue and
model thread with cores/N BLAS threads, set in that worker process only; they publish their counters
to a temporary directory, which /metrics sums.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import tempfile

from .settings import Settings


def run(settings: Settings, host: str = "127.0.0.1", port: int = 8000, workers: int = 1) -> int:
    """Serve until SIGTERM or SIGINT; 0 after a graceful stop. The model is checked before the port opens."""
    try:
        import uvicorn

        from .app import METRICS_VARIABLE, SETTINGS_VARIABLE, create_app, log_to_stderr
    except ImportError as e:
        raise ImportError(
            f"numbert serve needs the [serve] extra ({e.name} is missing): pip install 'numbert[serve]'"
        ) from None
    from .embedder import Embedder

    if settings.max_batch_tokens < (limit := Embedder(settings).max_length):  # loads the model: fails early and clearly
        raise ValueError(
            f"--max-batch-tokens ({settings.max_batch_tokens}) must hold one input of the model's "
            f"maximum length ({limit})"
        )
    log_to_stderr()
    if workers == 1:
        server = uvicorn.Server(uvicorn.Config(create_app(settings), host=host, port=port, access_log=False))
        with signals_end_quietly():
            server.run()
        return 0 if server.started else 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ[SETTINGS_VARIABLE] = dataclasses.replace(settings, blas_threads=max(1, cpus // workers)).to_json()
    with tempfile.TemporaryDirectory(prefix="numbert-serve-metrics-") as shared:
        os.environ[METRICS_VARIABLE] = shared
        uvicorn.run(
            "numbert.serve.app:app_from_environment",
            factory=True,
            workers=workers,
            host=host,
            port=port,
            access_log=False,
        )
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
