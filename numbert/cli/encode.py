"""`numbert encode`: sentence vectors to .npy / .npz / text, or per-token features to JSON lines.

    numbert encode --file sentences.txt --model ./all-MiniLM-L6-v2 -o vectors.npy
    numbert encode --format jsonl --layers -1,-2,-3,-4 < input.txt > features.jsonl

The input is read and embedded a chunk of lines at a time (files.py), so memory stays flat on a
file of any length, and OUT appears only when every line succeeded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from .common import (
    Failure,
    add_model,
    add_sentence_options,
    add_vector_options,
    load_model,
    non_negative_int,
    positive_int,
    sentence_options,
    utf8_text,
)
from .files import NpyRows, chunked, input_lines, output_file, progress_bar

CHUNK_LINES = {"npy": 2048, "npz": 2048, "jsonl": 256}  # lines embedded at a time (bounds the memory); text: a batch
FORMAT_OF_SUFFIX = {".npy": "npy", ".npz": "npz", ".jsonl": "jsonl", ".txt": "text", ".tsv": "text"}
PAIR = re.compile(r"^(.*) \|\|\| (.*)$")  # extract_features.py's "text_a ||| text_b"


def encode(args: argparse.Namespace) -> None:
    """Embed every input line: sentence vectors to .npy / .npz, or per-token features to JSON lines."""
    check_encode_options(args)
    lines = input_lines(args)  # opens the input now, so a missing file fails before the model loads
    model = load_model(args.model)
    chunks = chunked(lines, CHUNK_LINES.get(args.format, args.batch_size))
    with progress_bar(args) as bar, output_file(args.output, args.format) as out:
        if args.format == "jsonl":
            write_features(model, chunks, out, args, bar)
        elif args.format == "text":
            write_text_vectors(model, chunks, out, args, bar)
        else:
            write_sentence_vectors(model, chunks, out, args, bar)


def check_encode_options(args: argparse.Namespace) -> None:
    if args.format is None:  # from OUT's suffix; readable text on a terminal; else .npy
        suffix = Path(args.output).suffix.lower() if args.output not in (None, "-") else ""
        args.format = FORMAT_OF_SUFFIX.get(suffix) or ("text" if args.output is None and sys.stdout.isatty() else "npy")
    if args.format == "jsonl":
        for name in ("strategy", "pooling", "combine"):
            if getattr(args, name) is not None:
                raise Failure(f"--{name} applies to sentence vectors (npy, npz); --format jsonl writes "
                              f"the layers listed by --layers, as extract_features.py does")
        if args.normalize is not None:
            raise Failure("--normalize applies to sentence vectors (npy, npz), not to --format jsonl")
        if args.prompt is not None or args.prompt_name is not None:
            raise Failure("--prompt and --prompt-name apply to sentence vectors (npy, npz), not to --format jsonl")
    if args.output is None and args.format in ("npy", "npz") and sys.stdout.isatty():
        raise Failure(f"refusing to write binary .{args.format} data to a terminal; use -o OUT or a redirect")


# --- the writers: one per format ------------------------------------------------------------------

def embed_options(model, args: argparse.Namespace, bar: Any) -> tuple[dict, int]:
    """The keyword arguments of model.embed for these options, checked before any work is done, and
    the width of the vectors they give. Each batch embedded advances `bar`."""
    options = dict(sentence_options(args), batch_size=args.batch_size, max_length=args.max_length, long=args.long,
                   stride=args.stride, progress=bar, prompt=args.prompt, prompt_name=args.prompt_name)
    return options, model.embed([], **options).shape[1]


def write_text_vectors(model, chunks: Iterator[list[str]], out: IO[bytes], args: argparse.Namespace,
                       bar: Any) -> None:
    """One line of space-separated values (6 decimals) per input line, in input order, written (and
    flushed) a batch at a time, so a reader such as `head -1` gets its lines as soon as they exist."""
    options, _ = embed_options(model, args, bar)
    for chunk in chunks:
        np.savetxt(out, model.embed(chunk, **options), fmt="%.6f")
        out.flush()


def write_sentence_vectors(model, chunks: Iterator[list[str]], out: IO[bytes], args: argparse.Namespace,
                           bar: Any) -> None:
    """One float32 row per line, in input order: OUT.npy, or OUT.npz holding `vectors`."""
    options, dim = embed_options(model, args, bar)
    with contextlib.ExitStack() as stack:
        npy = out if args.format == "npy" else stack.enter_context(tempfile.TemporaryFile())
        rows = NpyRows(npy, dim)
        for chunk in chunks:
            rows.write(model.embed(chunk, **options))
        rows.finish()
        if args.format == "npz":  # the layout of np.savez: an uncompressed zip of vectors.npy
            npy.seek(0)
            with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as zf, \
                    zf.open("vectors.npy", "w", force_zip64=True) as member:
                shutil.copyfileobj(npy, member, 1 << 20)


def write_features(model, chunks: Iterator[list[str]], out: IO[bytes], args: argparse.Namespace,
                   bar: Any) -> None:
    """One JSON line per input line in the layout of google-research/bert's extract_features.py."""
    layers = args.layers or [-1, -2, -3, -4]
    from ..recipes import layer_selection

    layer_selection(layers, None, model.config.num_hidden_layers)  # a bad layer fails before any work
    index = 0
    for chunk in chunks:
        pairs = [PAIR.match(line) for line in chunk]
        texts = [m.group(1) if m else line for m, line in zip(pairs, chunk)]
        seconds = [m.group(2) if m else None for m in pairs]
        lines: list = [None] * len(chunk)  # every position is filled below
        for positions, output in model.batches(texts, seconds, batch_size=args.batch_size, max_length=args.max_length,
                                               long=args.long, stride=args.stride):
            batched = output.batched
            for row, i in enumerate(positions):
                encoding = output.encodings[row if batched else 0]
                states = output.hidden_states[:, row] if batched else output.hidden_states
                lines[i] = features_line(index + i, encoding.tokens, states[layers, :len(encoding)], layers)
            bar.update(len(positions))
        out.write("".join(lines).encode("utf-8"))
        index += len(chunk)


def features_line(index: int, tokens: list[str], states: np.ndarray, layers: list[int]) -> str:
    """{"linex_index": i, "features": [{"token": t, "layers": [{"index": l, "values": [...]}]}]}, values
    rounded to 6 decimals. states: (len(layers), seq, hidden)"""
    values = np.round(states.astype(np.float64).transpose(1, 0, 2), 6).tolist()  # (seq, layers, hidden)
    features = [{"token": token, "layers": [{"index": layer, "values": v} for layer, v in zip(layers, token_values)]}
                for token, token_values in zip(tokens, values)]
    return json.dumps({"linex_index": index, "features": features}, ensure_ascii=False) + "\n"


# --- the command line -----------------------------------------------------------------------------

def output_format(text: str) -> str:
    """--format's value, "txt" read as "text" (the suffix and the habit)."""
    return "text" if text == "txt" else text


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert encode`."""
    p = commands.add_parser(
        "encode", help="embed texts: sentence vectors (npy/npz) or per-token features (jsonl)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Embed texts, one per input line, keeping their order and count exactly.\n\n"
                    "npy/npz: one float32 sentence vector per line, shape (lines, dim); npz holds it as 'vectors'.\n"
                    "text: one line of values per input line (the default on a terminal).\n"
                    "jsonl: per-token hidden states in the layout of google-research/bert's extract_features.py\n"
                    "(linex_index, features -> token, layers -> index, values); a line 'A ||| B' is a pair.\n\n"
                    "Input is read and embedded a chunk at a time, so memory stays flat on any file.\n"
                    "With -o OUT the output is written to a temporary file renamed to OUT at the end:\n"
                    "a failed run never leaves a half-written OUT.")
    p.add_argument("text", nargs="*", type=utf8_text, metavar="TEXT",
                   help="texts to embed (default: the lines of --file or stdin)")
    p.add_argument("--file", "-f", metavar="F", help="read one text per line from F ('-' for stdin)")
    p.add_argument("--format", type=output_format, choices=("npy", "npz", "text", "jsonl"),
                   help="output format (txt = text; default: from OUT's suffix, text on a terminal, else npy: "
                        "piped or redirected output is .npy unless --format text)")
    p.add_argument("--output", "-o", metavar="OUT", help="output file (default: stdout)")
    add_model(p)
    add_sentence_options(p)
    add_vector_options(p)
    p.add_argument("--long", choices=("truncate", "window"), default="truncate",
                   help="longer inputs: cut them, or run overlapping windows and average each token over "
                        "them (default: truncate)")
    p.add_argument("--stride", type=non_negative_int, default=128, metavar="N",
                   help="tokens shared by neighbouring windows with --long window (default: 128)")
    p.add_argument("--batch-size", type=positive_int, default=32, metavar="N",
                   help="texts per forward pass (default: 32)")
    p.add_argument("--prompt", metavar="TEXT", help="prepend TEXT to every input (e.g. 'query: ')")
    p.add_argument("--prompt-name", metavar="NAME",
                   help="prepend the model's prompt NAME (sentence-transformers prompts, e.g. query; "
                        "default: the model's default_prompt_name, if any)")
    p.set_defaults(run=encode)
