"""python -m numbert.serve --model PATH_OR_NAME [...]: the server without the `numbert` command."""

from __future__ import annotations

import argparse
import sys

from .main import add_arguments, run, settings_from


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="numbert serve", description="Serve sentence embeddings over HTTP "
                                "(OpenAI /v1/embeddings, text-embeddings-inference /embed).")
    p.add_argument("--model", "-m", required=True, help="a local model directory or a Hugging Face hub id")
    p.add_argument("--pooling", help="mean, max, cls, ... (default: the model's own recipe)")
    p.add_argument("--layers", help="a strategy name or comma-separated layer indices (default: the model's)")
    p.add_argument("--combine", help="how --layers are combined")
    p.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--max-length", type=int, help="tokens per input (default: the model's maximum)")
    add_arguments(p)
    args = p.parse_args(argv)
    layers = args.layers
    if layers is not None and layers.lstrip("-").replace(",", "").replace("-", "").isdigit():
        layers = [int(x) for x in layers.split(",")]
    model = {"model": args.model, "pooling": args.pooling, "layers": layers, "combine": args.combine,
             "normalize": args.normalize, "max_length": args.max_length}
    try:
        return run(settings_from(args, model), args.host, args.port, args.workers)
    except (ValueError, TypeError, OSError, ImportError) as e:
        print(f"numbert serve: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
