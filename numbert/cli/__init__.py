"""The `numbert` command: tokenize, encode, neighbors, similarity, search, the tasks, rerank, plot, serve and download.

    numbert tokenize "Here is the sentence I want embeddings for."
    numbert encode --file sentences.txt --model ./all-MiniLM-L6-v2 -o vectors.npy
    numbert encode --format features --layers -1,-2,-3,-4 < input.txt > features.jsonl
    numbert neighbors bank -k 5
    numbert similarity "A man is eating food." "A man is eating a meal."
    numbert search "Who painted the Mona Lisa?" --index vectors.npy --texts corpus.txt
    numbert fill-mask "The man worked as a [MASK]."
    numbert rerank "How many people live in Berlin?" --file passages.txt --top-k 3
    numbert plot histogram "The cat sat on the mat." --layer 6 --token cat -o cat.png
    numbert serve --model ./all-MiniLM-L6-v2 --port 8000
    numbert download sentence-transformers/all-MiniLM-L6-v2 ./all-MiniLM-L6-v2

One module per family of commands, each with `add_commands(commands)`, which adds its subparsers
and sets `run` to the function that carries the command out; COMMANDS lists them in the order
`numbert --help` shows. Options several commands take (--model, the sentence-vector options) and
the option types live in common.py; streamed input and atomically written output in files.py.
A new command is a module with `add_commands` and one more entry in COMMANDS.

Errors are one line on stderr and a non-zero exit status (1 for a failed run, 2 for bad usage).
The model and the tokenizer are imported inside the commands, so `numbert --help` stays fast.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading

from . import download, encode, plot, rerank, search, serve, similarity, tasks, tokenize
from .common import Failure, Parser, model_source, one_line
from .files import SIGNALS, Terminated

COMMANDS = (tokenize, encode, similarity, search, tasks, rerank, plot, serve, download)


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    try:
        numbert_version = version("numbert")
    except PackageNotFoundError:
        numbert_version = "unknown"
    parser = Parser(prog="numbert", description="BERT in NumPy: tokens, vectors and similarities from the shell.")
    parser.add_argument("--version", action="version", version=f"numbert {numbert_version}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for module in COMMANDS:
        module.add_commands(commands)
    return parser


def join_negative_values(argv: list[str]) -> list[str]:
    """argparse reads `--layers -1,-2` as two options; pass it on as `--layers=-1,-2`."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] == "--layers" and re.match(r"-\d", arg):
            out[-1] = f"--layers={arg}"
        else:
            out.append(arg)
    return out


def terminate(signum: int, frame) -> None:
    """SIGINT, SIGTERM or SIGHUP: noted first (Python swallows an exception raised while a finalizer runs,
    so output_file checks the note before it names OUT), then raised where the command is."""
    SIGNALS.append(signum)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    """Run `numbert ARGV...` (default: the process's arguments); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(join_negative_values(sys.argv[1:] if argv is None else list(argv)))
    signals = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        signals = []
    SIGNALS.clear()
    previous = {s: signal.signal(s, terminate) for s in signals}
    try:
        return run(args)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run(args: argparse.Namespace) -> int:
    """Carry out the parsed command; errors become one line on stderr and the exit status."""
    try:
        args.run(args)
    except BrokenPipeError:  # e.g. `numbert encode --format features ... | head`: the reader has gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (Failure, OSError, ValueError, TypeError) as e:
        print(f"numbert {args.command}: error: {one_line(model_source(args, str(e)))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"numbert {args.command}: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except Terminated as e:
        said = "interrupted" if e.args[0] == signal.SIGINT else "terminated"
        print(f"numbert {args.command}: {said}", file=sys.stderr)
        return 128 + e.args[0]
    return 0
