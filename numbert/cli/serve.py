"""`numbert serve`: models behind HTTP (OpenAI /v1/embeddings, text-embeddings-inference /embed), in numbert.serve.

    numbert serve --model ./all-MiniLM-L6-v2 --port 8000 --workers 2
    numbert serve --model ./all-MiniLM-L6-v2 --model rerank=./ms-marco-MiniLM-L6-v2 --api-key-file keys.txt

The model options are encode's; the limits are numbert.serve.Settings' (text-embeddings-inference's
names). Nothing of the [serve] extra is imported until the server starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from .common import (
    Failure,
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
    "max_sparse_weights": "non-zero weights per /embed_sparse answer; 413 beyond",
    "max_answer_values": "numbers per /embed_all or /embed_multi answer (tokens x width), checked before the "
    "forward; 413 beyond",
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


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def named_model(text: str) -> tuple[str | None, str]:
    """--model [NAME=]M: (the served name given, or None; the directory or hub id). An existing path with
    "=" in it is a path."""
    name, given, model = text.partition("=")
    if given and name and model and "/" not in name and not Path(text).exists():
        return name, model
    return None, text


def served_models(args: argparse.Namespace) -> dict[str, str]:
    """Served name -> directory or hub id, the first --model first; a Failure when two share a name."""
    from ..checkpoint.hub import default_model, model_name

    given = [named_model(text) for text in args.model or [default_model()]]
    if args.served_model_name is not None:
        if len(given) > 1:
            raise Failure("--served-model-name names the one model served; with several, use --model NAME=PATH")
        given[0] = (args.served_model_name, given[0][1])
    models: dict[str, str] = {}
    for name, model in given:
        name = name or model_name(model)
        if name in models:
            raise Failure(
                f"two models would be served as {name!r} ({models[name]} and {model}): name them with --model NAME=PATH"
            )
        models[name] = model
    return models


def api_keys(args: argparse.Namespace) -> list[str]:
    """The keys of --api-key and --api-key-file (a Failure naming a bad one's source, never the key)."""
    from ..serve.auth import checked_key, read_keys

    try:
        keys = [checked_key(key, "--api-key") for key in args.api_key or []]
        for path in args.api_key_file or []:
            keys += read_keys(path)
    except ValueError as e:
        raise Failure(str(e)) from None
    return keys


def serve(args: argparse.Namespace) -> None:
    """Serve until SIGTERM or Ctrl-C; exit 0 once every accepted request is answered."""
    from ..serve.main import run
    from ..serve.settings import Settings

    recipe = dict(
        sentence_options(args),
        max_length=args.max_length,
        truncation_side=args.truncation_side,
        prompt=args.prompt,
        prompt_name=args.prompt_name,
    )
    from ..engines.workers import check_workers

    try:
        check_workers(args.workers, "--workers")
    except ValueError as e:
        raise Failure(str(e)) from None
    (name, model), *more = served_models(args).items()
    settings = Settings(
        model=model,
        served_model_name=name,
        more_models=dict(more),
        recipe={name: value for name, value in recipe.items() if value is not None},
        auto_truncate=args.auto_truncate,
        answer_any_model_name=args.answer_any_model_name,
        lane_processes=not args.no_lane_processes,
        request_timeout=args.request_timeout,
        api_keys=api_keys(args),
        protect_health=args.protect_health,
        cors_allow_origins=args.cors_allow_origin or [],
        log_format=args.log_format,
        otlp_endpoint=args.otlp_endpoint,
        **{name: getattr(args, name) for name in LIMITS},
    )
    if settings.protect_health and not settings.api_keys:
        raise Failure("--protect-health needs --api-key or --api-key-file")
    try:
        status = run(settings, args.host, args.port, args.workers)
    except ImportError as e:  # the [serve] extra is missing
        raise Failure(str(e)) from None
    if status:
        sys.exit(status)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert serve`."""
    p = commands.add_parser(
        "serve",
        help="serve sentence vectors over HTTP (OpenAI and TEI APIs)",
        description="Serve models' sentence vectors over HTTP: OpenAI's POST /v1/embeddings "
        "and GET /v1/models, text-embeddings-inference's POST /embed, /embed_all, /tokenize, /decode, "
        "GET /info, /health and /metrics (and /rerank, /v1/rerank, /predict for a cross-encoder). "
        "Answers equal `numbert encode` of the same texts. SIGTERM or Ctrl-C: stop taking connections, "
        "answer the accepted requests, exit 0. Needs the [serve] extra: pip install '.[serve]' in numbert's "
        "checkout.",
    )
    p.add_argument(
        "--model",
        "-m",
        action="append",
        metavar="[NAME=]M",
        help="a local model directory or a Hugging Face hub id, served as NAME (default: the directory's last "
        "component, or the hub id); repeat it to serve several, the first being the default of requests that "
        "name none (default: $NUMBERT_MODEL, else bert-base-uncased)",
    )
    add_sentence_options(p)
    add_vector_options(p)
    add_prompt_options(p)
    add_server_options(p)
    add_observability_options(p)
    add_limit_options(p)
    add_access_options(p)
    p.set_defaults(run=serve)


def add_server_options(p: argparse.ArgumentParser) -> None:
    """`numbert serve`'s address, processes, served names and truncation."""
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
    p.add_argument(
        "--no-lane-processes",
        action="store_true",
        help="run the batches in the server's own process, not two side by side in lane processes of their own "
        "(saves their memory, ~50 MiB each for a small model; the forwards then share the server's Python lock)",
    )
    p.add_argument(
        "--served-model-name",
        metavar="NAME",
        help="the model's name in answers, with one --model (default: its directory's last component or hub id)",
    )
    p.add_argument(
        "--answer-any-model-name",
        action="store_true",
        help="answer a request whose 'model' names no served model with the default model (for clients that "
        "hard-code a name) instead of a 404; answers still carry the served model's name",
    )
    p.add_argument(
        "--auto-truncate",
        action="store_true",
        help="cut inputs over the model's length instead of answering 413 (/embed's 'truncate' "
        "overrides it per request)",
    )


def add_limit_options(p: argparse.ArgumentParser) -> None:
    """`numbert serve`'s limits (LIMITS, their defaults the Settings') and the request timeout."""
    from ..serve.settings import Settings

    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    for name, help in LIMITS.items():
        p.add_argument(
            "--" + name.replace("_", "-"),
            *(["--max-client-body"] if name == "payload_limit" else []),
            type=positive_int,
            default=defaults[name],
            metavar="SECONDS" if name.endswith("timeout") else "N",
            help=f"{help} (default: %(default)s)",
        )
    p.add_argument(
        "--request-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="answer a request within SECONDS of its body's arrival, else a 504 and its inputs dropped unrun "
        "(default: no limit)",
    )


def add_access_options(p: argparse.ArgumentParser) -> None:
    """`numbert serve`'s API keys and CORS origins."""
    p.add_argument(
        "--api-key",
        action="append",
        metavar="KEY",
        help="accept requests with 'Authorization: Bearer KEY' only (repeatable; a 401 otherwise)",
    )
    p.add_argument(
        "--api-key-file", action="append", metavar="FILE", help="accept the keys in FILE too, one a line (repeatable)"
    )
    p.add_argument("--protect-health", action="store_true", help="/health and /metrics need a key too (default: open)")
    p.add_argument(
        "--cors-allow-origin",
        action="append",
        metavar="ORIGIN",
        help="let browser pages from ORIGIN (e.g. https://app.example.com, or * for any) call the server: "
        "CORS headers and preflights (repeatable; default: none)",
    )


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
