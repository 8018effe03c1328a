"""`numbert serve`: the model behind HTTP (OpenAI /v1/embeddings, text-embeddings-inference /embed), in numbert.serve.

    numbert serve --model ./all-MiniLM-L6-v2 --port 8000 --workers 2

The model options are encode's; the limits are numbert.serve.Settings' (text-embeddings-inference's
names). Nothing of the [serve] extra is imported until the server starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from .common import (
    Failure,
    add_model,
    add_prompt_options,
    add_sentence_options,
    add_vector_options,
    positive_int,
    sentence_options,
)

LIMITS = {
    "max_batch_tokens": "padded tokens per forward pass",
    "max_batch_size": "inputs per forward pass",
    "max_concurrent_requests": "requests admitted (bodies read whole) at once; 429 beyond",
    "max_client_batch_size": "inputs per request; 413 beyond",
    "payload_limit": "bytes per request body; 413 beyond",
    "max_connections": "open connections, requests being read included; a plain-text 503 beyond",
    "body_timeout": "seconds to send a request body; 408 beyond",
    "keep_alive_timeout": "seconds a connection may go without sending a whole request head (idle or slow)",
    "graceful_timeout": "seconds SIGTERM waits for the accepted requests before cancelling them",
}


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number in 0-65535, got {text!r}")
    return value


def serve(args: argparse.Namespace) -> None:
    """Serve until SIGTERM or Ctrl-C; exit 0 once every accepted request is answered."""
    from ..serve.main import run
    from ..serve.settings import Settings

    recipe = dict(sentence_options(args), max_length=args.max_length, prompt=args.prompt, prompt_name=args.prompt_name)
    settings = Settings(
        model=args.model,
        served_model_name=args.served_model_name,
        recipe={name: value for name, value in recipe.items() if value is not None},
        auto_truncate=args.auto_truncate,
        log_format=args.log_format,
        otlp_endpoint=args.otlp_endpoint,
        **{name: getattr(args, name) for name in LIMITS},
    )
    try:
        status = run(settings, args.host, args.port, args.workers)
    except ImportError as e:  # the [serve] extra is missing
        raise Failure(str(e)) from None
    if status:
        sys.exit(status)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert serve`."""
    from ..serve.settings import Settings

    p = commands.add_parser(
        "serve",
        help="serve sentence vectors over HTTP (OpenAI and TEI APIs)",
        description="Serve the model's sentence vectors over HTTP: OpenAI's POST /v1/embeddings "
        "and GET /v1/models, text-embeddings-inference's POST /embed, POST "
        "/tokenize, GET /health and GET /metrics. Answers equal `numbert encode` "
        "of the same texts. SIGTERM or Ctrl-C: stop taking connections, answer "
        "the accepted requests, exit 0. Needs the [serve] extra: "
        "pip install 'numbert[serve]'.",
    )
    add_model(p)
    add_sentence_options(p)
    add_vector_options(p)
    add_prompt_options(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    p.add_argument("--port", type=port, default=8000, help="port, 0 for any free one (default: %(default)s)")
    p.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="server processes sharing the port and the memory-mapped weights, each with its share "
        "of the cores as BLAS threads (default: 1)",
    )
    p.add_argument("--served-model-name", metavar="NAME", help="the model's name in answers (default: --model)")
    p.add_argument(
        "--auto-truncate",
        action="store_true",
        help="cut inputs over the model's length instead of answering 413 (/embed's 'truncate' "
        "overrides it per request)",
    )
    add_observability_options(p)
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    for name, help in LIMITS.items():
        p.add_argument(
            "--" + name.replace("_", "-"),
            type=positive_int,
            default=defaults[name],
            metavar="SECONDS" if name.endswith("timeout") else "N",
            help=f"{help} (default: %(default)s)",
        )
    p.set_defaults(run=serve)


def add_observability_options(p: argparse.ArgumentParser) -> None:
    """--log-format and --otlp-endpoint (docs/serving.md)."""
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text: uvicorn's lines; json: one JSON object a line, with an access line per request "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="send OpenTelemetry spans of each request (queue, tokenize, forward, render) to this OTLP/HTTP "
        "collector, e.g. http://127.0.0.1:4318; needs the [otel] extra",
    )
