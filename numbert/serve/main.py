"""Running the server: its command-line options, uvicorn in one process or `--workers N`, and a graceful stop.

On SIGTERM or SIGINT uvicorn stops accepting connections, lets every accepted request finish, stops
the model thread once its queue is empty, and the process exits 0. With `--workers N`, N processes
share the listening socket and (memory-mapped) the weights' pages; each runs its own queue and
model thread with cores/N BLAS threads, set in that worker process only.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal

from .settings import Settings

DEFAULTS = Settings(model="")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The server's own options (the model options are `numbert encode`'s)."""
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on, 0 for any free one (default: %(default)s)")
    p.add_argument("--workers", type=_positive, default=1, metavar="N",
                   help="server processes sharing the port and the memory-mapped weights (default: 1)")
    p.add_argument("--served-model-name", metavar="NAME", help="the model's name in answers (default: --model)")
    p.add_argument("--auto-truncate", action="store_true",
                   help="cut inputs over the model's length instead of answering 413 (/embed's 'truncate' "
                        "overrides it per request)")
    for flag, help in (("--max-batch-tokens", "padded tokens per forward pass"),
                       ("--max-batch-size", "inputs per forward pass"),
                       ("--max-concurrent-requests", "requests admitted at once; 429 beyond"),
                       ("--max-client-batch-size", "inputs per request; 413 beyond"),
                       ("--payload-limit", "bytes per request body; 413 beyond")):
        name = flag[2:].replace("-", "_")
        p.add_argument(flag, type=_positive, default=getattr(DEFAULTS, name), metavar="N",
                       help=f"{help} (default: %(default)s)")


def settings_from(args: argparse.Namespace, model_options: dict) -> Settings:
    """Settings from the parsed server options and the model options (model, pooling, layers, ...)."""
    server = {f.name: getattr(args, f.name) for f in dataclasses.fields(Settings) if hasattr(args, f.name)}
    return Settings(**{**server, **model_options})


def run(settings: Settings, host: str = "127.0.0.1", port: int = 8000, workers: int = 1) -> int:
    """Serve until SIGTERM or SIGINT; 0 after a graceful stop. The model is checked before the port opens."""
    try:
        import uvicorn

        from .app import SETTINGS_VARIABLE, create_app, log_to_stderr
    except ImportError as e:
        raise ImportError(f"numbert serve needs the [serve] extra ({e.name} is missing): "
                          f"pip install 'numbert[serve]'") from None
    from .embedder import Embedder

    if settings.max_batch_tokens < (limit := Embedder(settings).max_length):  # loads the model: fails early and clearly
        raise ValueError(f"--max-batch-tokens ({settings.max_batch_tokens}) must hold one input of the model's "
                         f"maximum length ({limit})")
    log_to_stderr()
    if workers == 1:
        server = uvicorn.Server(uvicorn.Config(create_app(settings), host=host, port=port, access_log=False))
        with signals_end_quietly():
            server.run()
        return 0 if server.started else 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ[SETTINGS_VARIABLE] = dataclasses.replace(settings, blas_threads=max(1, cpus // workers)).to_json()
    uvicorn.run("numbert.serve.app:app_from_environment", factory=True, workers=workers, host=host, port=port,
                access_log=False)
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


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value
