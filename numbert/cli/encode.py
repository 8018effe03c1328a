"""`numbert encode`: sentence vectors to .npy / .npz / text / JSON lines, or per-token features to JSON lines.

    numbert encode --file sentences.txt --model ./all-MiniLM-L6-v2 -o vectors.npy
    numbert encode --file sentences.txt -o vectors.jsonl                 # one JSON array (a vector) per line
    numbert encode --format features --layers -1,-2,-3,-4 < input.txt > features.jsonl   # extract_features.py
    numbert encode --sparse --model ./splade --top-k 64 < passages.txt > sparse.jsonl

The input is read and embedded a chunk of lines at a time (files.py), so memory stays flat on a
file of any length, and OUT appears only when every line succeeded. Sentence vectors can be computed
in --workers processes (numbert.engines.workers) or on a Dask cluster (--scheduler, --dask: numbert.engines.dask), and
written as resumable shards (--shard-lines: numbert.engines.shards); every way embeds the same chunks of
CHUNK_LINES lines, so the vectors are the same bits every way. --precision quantizes the vectors of a
.npy / .npz (numbert.pipeline.quantization) as embed(texts, precision=...) does with all the lines as its texts: int8
and uint8 are scaled by the whole file's min and max, so the float vectors wait in a temporary file.
--sparse writes SPLADE vectors (numbert.pipeline.sparse), a JSON line per input line, a chunk at a time.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..engines.npy import NpyRows
from ..pipeline import CALIBRATED, DTYPES, PRECISIONS, Recipe, quantize, width
from ..runtime import blas
from .common import (
    Failure,
    add_dimensions,
    add_model,
    add_prompt_options,
    add_sentence_options,
    add_vector_options,
    load_model,
    non_negative_int,
    positive_int,
    sentence_options,
    utf8_text,
)
from .files import chunked, has_lines, input_lines, output_file, progress_bar
from .multi import CHUNK_TEXTS, check_multi_options, write_multi

# lines embedded at a time (bounds the memory); text and jsonl: a batch, so a reader gets each batch's lines at once
CHUNK_LINES = {"npy": 2048, "npz": 2048, "features": 256, "sparse": 256}
FORMAT_OF_SUFFIX = {".npy": "npy", ".npz": "npz", ".jsonl": "jsonl", ".txt": "text", ".tsv": "text"}
FORMATS = ("npy", "npz", "text", "jsonl", "features")
BINARY = ("npy", "npz")
PAIR = re.compile(r"^(.*) \|\|\| (.*)$")  # extract_features.py's "text_a ||| text_b"


def encode(args: argparse.Namespace) -> None:
    """Embed every input line: sentence vectors to .npy / .npz, or per-token features to JSON lines."""
    if args.multi:
        check_multi_options(args)
    else:
        check_encode_options(args)
    lines = input_lines(args)  # opens the input now, so a missing file fails before the model loads
    args.workers = None if args.multi else workers_for(args)
    model = load_model(args.model)
    if args.multi:
        with progress_bar(args) as bar:
            write_multi(model, chunked(lines, CHUNK_TEXTS), args, bar)
        return
    if args.sparse is not None:
        with progress_bar(args) as bar, output_file(args.output, args.format) as out:
            write_sparse_vectors(model, chunked(lines, CHUNK_LINES["sparse"]), out, args, bar)
        return
    if args.shard_lines is not None:
        write_shard_directory(model, lines, args)
        return
    chunks = chunked(lines, CHUNK_LINES.get(args.format, args.batch_size))
    with progress_bar(args) as bar, output_file(args.output, args.format) as out:
        if args.format == "features":
            write_features(model, chunks, out, args, bar)
        elif args.format in ("text", "jsonl"):
            write_text_vectors(model, chunks, out, args, bar)
        else:
            write_sentence_vectors(model, chunks, out, args, bar)


def check_encode_options(args: argparse.Namespace) -> None:
    args.format_given = args.format is not None  # else the format is the output's: say_where_binary_goes
    if args.sparse is not None:
        check_sparse_options(args)
        return
    if args.top_k is not None:
        raise Failure("--top-k keeps the largest weights of --sparse vectors; add --sparse")
    if args.shard_lines is not None:
        if args.output in (None, "-") or not (args.output.endswith("/") or Path(args.output).is_dir()):
            raise Failure(
                "--shard-lines writes a directory of .npy shards and a manifest: give it as -o DIR/ "
                "(with a trailing /, or an existing directory)"
            )
        if args.format not in (None, "npy"):
            raise Failure(f"--shard-lines writes .npy shards, not --format {args.format}")
        args.format = "npy"
    else:
        args.format = output_format_of(args.output, args.format)
    if args.precision is not None and (args.format not in ("npy", "npz") or args.shard_lines is not None):
        where = "--shard-lines" if args.shard_lines is not None else f"--format {args.format}"
        raise Failure(f"--precision quantizes the vectors of one .npy or .npz, not {where}")
    if args.format == "features":
        for name in ("strategy", "pooling", "combine", "dimensions"):
            if getattr(args, name) is not None:
                raise Failure(
                    f"--{name} applies to sentence vectors (npy, npz, text, jsonl); --format features writes "
                    f"the layers listed by --layers, as extract_features.py does"
                )
        if args.normalize is not None:
            raise Failure("--normalize applies to sentence vectors (npy, npz, text, jsonl), not to --format features")
        if args.prompt is not None or args.prompt_name is not None:
            raise Failure(
                "--prompt and --prompt-name apply to sentence vectors (npy, npz, text, jsonl), not to --format features"
            )
    if args.output in (None, "-") and args.format in BINARY and sys.stdout.isatty():
        raise Failure(f"refusing to write binary .{args.format} data to a terminal; use -o OUT or a redirect")
    parallel = [name for name in ("workers", "scheduler", "dask") if getattr(args, name)]
    if args.workers:
        from ..engines.workers import check_workers

        try:
            check_workers(args.workers, "--workers")
        except ValueError as e:
            raise Failure(str(e)) from None
    if len(parallel) > 1 and parallel != ["workers", "dask"]:
        raise Failure(f"--{parallel[0]} and --{parallel[1]} are two ways to run the job: choose one")
    if parallel and args.format == "features":
        raise Failure(f"--{parallel[0]} computes sentence vectors (npy, npz, text, jsonl), not --format features")


AUTO_WORKERS_LINES = 5000  # a --file of this many lines runs in worker processes by default (see workers_for)
AUTO_WORKERS_MAX = 8  # processes: each holds its own ~200 MiB besides the shared weights


def workers_for(args: argparse.Namespace) -> int | None:
    """--workers, else the fastest way this machine has for the input, said on stderr when it is workers.

    Sentence vectors of a --file of AUTO_WORKERS_LINES lines or more, on more than one core: one worker
    process of one BLAS thread per core (up to AUTO_WORKERS_MAX): workers embed faster than one process
    of as many BLAS threads and, on a machine others load, do not collapse as BLAS threads do; the pool's
    start is paid back past a few thousand lines (docs/performance.md). Anything else (stdin, texts as
    arguments, --format features, a cluster) runs as asked, in this process with BLAS's threads unless
    --workers says otherwise.
    """
    cores = blas.cores()
    if args.workers is not None or args.scheduler or args.dask or args.format == "features" or cores < 2:
        return args.workers
    if args.file in (None, "-") or not has_lines(args.file, AUTO_WORKERS_LINES):
        return None
    workers = min(cores, AUTO_WORKERS_MAX)
    print(
        f"numbert {args.command}: {args.file} has {AUTO_WORKERS_LINES:,} lines or more and this machine "
        f"{cores} cores: embedding in {workers} worker processes of one BLAS thread each "
        f"(--workers N chooses, --workers 0 runs in this process)",
        file=sys.stderr,
    )
    return workers


def check_sparse_options(args: argparse.Namespace) -> None:
    """--sparse writes JSON lines of SPLADE vectors: options of sentence vectors and parallel runs are refused."""
    suffix = Path(args.output).suffix.lower() if args.output not in (None, "-") else ""
    if args.format not in (None, "jsonl") or FORMAT_OF_SUFFIX.get(suffix, "jsonl") != "jsonl":
        raise Failure(f"--sparse writes JSON lines: -o OUT.jsonl or stdout, not {args.output or args.format}")
    args.format = "jsonl"
    dense = ("strategy", "layers", "combine", "pooling", "normalize", "dimensions", "precision", "shard_lines")
    parallel = ("workers", "scheduler", "dask")
    for name in (*dense, *parallel):
        if getattr(args, name) not in (None, False):
            what = "sentence vectors" if name in dense else "sentence vectors in parallel"
            raise Failure(f"--{name.replace('_', '-')} applies to {what}, not to --sparse")
    if args.long != "truncate":
        raise Failure("--sparse cuts long inputs to --max-length (SparseEncoder's way); --long window is not for it")


def output_format_of(output: str | None, format: str | None) -> str:
    """--format, which OUT's suffix must not contradict, else the format the suffix names (an unknown suffix is
    a Failure); with neither, readable text on a terminal, else .npy."""
    suffix = Path(output).suffix.lower() if output not in (None, "-") else ""
    named = FORMAT_OF_SUFFIX.get(suffix)
    if format is None and suffix and named is None:
        raise Failure(
            f"cannot tell the format of -o {output} from its suffix {suffix}: name it "
            f"{', '.join(FORMAT_OF_SUFFIX)}, or give --format {', '.join(FORMATS[:-1])} or {FORMATS[-1]}"
        )
    if format is not None and named not in (None, format) and (named, format) != ("jsonl", "features"):
        raise Failure(f"-o {output} is named as {named} output, but --format is {format}: make them agree")
    if format or named:
        return format or named  # type: ignore[return-value]
    redirected = FORMAT_OF_SUFFIX.get(Path(stdout_file() or "").suffix.lower())  # `> vectors.txt`: text
    return redirected or ("text" if output in (None, "-") and sys.stdout.isatty() else "npy")


def stdout_file() -> str | None:
    """The name of the regular file stdout is redirected to (`numbert encode hi > x.txt`), where the system says
    (Linux's /proc), else None: a terminal, a pipe, a device."""
    try:
        if not stat.S_ISREG(os.fstat(sys.stdout.fileno()).st_mode):
            return None
        return os.readlink(f"/proc/self/fd/{sys.stdout.fileno()}")
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


# --- the writers: one per format ------------------------------------------------------------------


def sentence_recipe(model, args: argparse.Namespace) -> Recipe:
    """The sentence recipe these options ask for (numbert.pipeline.recipe), checked before any work is done."""
    return model.recipe(
        **sentence_options(args),
        max_length=args.max_length,
        long=args.long,
        stride=args.stride,
        truncation_side=args.truncation_side,
        prompt=args.prompt,
        prompt_name=args.prompt_name,
        dimensions=args.dimensions,
    )


Chunk = tuple[range, list[str]]  # (its input lines, their texts)
Embed = Callable[[Iterable[Chunk]], Iterable[np.ndarray]]  # chunks -> their vectors, in order


@contextlib.contextmanager
def embedder(model, args: argparse.Namespace, recipe: Recipe, bar: Any = None) -> Iterator[Embed]:
    """How chunks of lines become vectors: in this process, in --workers processes, or on a Dask cluster.
    Every way runs `Bert.embed` with the recipe on each chunk (worker processes run the batches it plans),
    so the vectors are the same bits. `bar` moves as the work is done: per batch, or per chunk from Dask."""

    def advancing(vectors_of_chunks: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
        for vectors in vectors_of_chunks:
            if bar is not None:
                bar.update(len(vectors))
            yield vectors

    if args.scheduler or args.dask:
        with dask_client(args) as client:
            from ..engines.dask import BatchEmbedder, map_chunks

            model_path = Path(args.model)
            where = model_path.resolve() if model_path.exists() else args.model
            encoder = BatchEmbedder(where, recipe=recipe, batch_size=args.batch_size)
            yield lambda chunks: advancing(map_chunks(client, encoder, chunks))
        return
    here = {"recipe": recipe, "batch_size": args.batch_size, "progress": False if bar is None else bar}
    if not args.workers:
        yield lambda chunks: (model.embed(texts, **here) for _, texts in chunks)
        return
    from ..engines.workers import Pool, WorkerDied, describe

    def in_workers(chunks: Iterable[Chunk]) -> Iterator[np.ndarray]:
        for lines, texts in chunks:
            try:
                yield model.embed(texts, workers=pool, **here)
            except WorkerDied as e:
                raise Failure(f"{e} (input {describe([lines[i] for i in e.lines])})") from None

    with Pool(args.model, args.workers) as pool:
        yield in_workers


@contextlib.contextmanager
def dask_client(args: argparse.Namespace) -> Iterator[Any]:
    """A client of the cluster at --scheduler, or of a local cluster (--dask) of --workers (default: all cores)
    processes with one thread each."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise Failure("--scheduler and --dask need Dask: pip install '.[dask]' in numbert's checkout") from None
    if args.scheduler:
        try:
            client = Client(args.scheduler, timeout=30)
        except OSError as e:
            raise Failure(f"cannot reach the Dask scheduler at {args.scheduler}: {e}") from None
        with client:
            yield client
        return
    with (
        LocalCluster(
            n_workers=args.workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def numbered(chunks: Iterable[list[str]]) -> Iterator[Chunk]:
    """Each chunk of lines with the range of line numbers it holds."""
    start = 0
    for chunk in chunks:
        yield range(start, start + len(chunk)), chunk
        start += len(chunk)


def write_text_vectors(model, chunks: Iterator[list[str]], out: IO[bytes], args: argparse.Namespace, bar: Any) -> None:
    """One line per input line, in input order: space-separated values with 6 decimals (--format text), or a
    JSON array of the float32 values, each written as the shortest decimal that reads back as the same float32
    (--format jsonl). Written (and flushed) a batch at a time, so a reader such as `head -1` gets its lines as
    soon as they exist."""
    with embedder(model, args, sentence_recipe(model, args), bar) as embed:
        for vectors in embed(numbered(chunks)):
            if args.format == "jsonl":
                out.write("".join(json_vector(v) for v in vectors).encode("ascii"))
            else:
                np.savetxt(
                    out, np.where(np.abs(vectors) <= np.float32(5e-7), np.float32(0), vectors), fmt="%.6f"
                )  # no -0.000000
            out.flush()


def json_vector(vector: np.ndarray) -> str:
    """A float32 vector as one line of JSON: [v0, v1, ...], each value the shortest decimal that reads back as
    the same float32 (NumPy's str of a float32), so np.float32(json.loads(line)) gives back the vector's bits."""
    return "[" + ", ".join(map(str, vector.astype(np.float32, copy=False))) + "]\n"


def say_where_binary_goes(args: argparse.Namespace) -> None:
    """One line on stderr when .npy/.npz bytes go to stdout that is a pipe or a file whose name says no format
    (`numbert encode x > vectors` would otherwise fill it with binary silently), saying how to get text instead."""
    if args.output not in (None, "-") or args.format_given:
        return
    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (OSError, ValueError, io.UnsupportedOperation):
        return
    if stat.S_ISREG(mode):
        name = stdout_file() or "a file"
        if name.lower().endswith((".npy", ".npz")):
            return
        where = f"stdout ({name})"
    elif stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        where = "a pipe"
    else:
        return  # a terminal is refused earlier; /dev/null and other devices need no word
    print(
        f"numbert {args.command}: writing float32 vectors as .{args.format} bytes to {where}; for text, one vector "
        "a line, add --format text (or --format jsonl: a JSON array a line), or name the file with -o vectors.txt",
        file=sys.stderr,
    )


def write_sentence_vectors(
    model, chunks: Iterator[list[str]], out: IO[bytes], args: argparse.Namespace, bar: Any
) -> None:
    """One row per line, in input order: OUT.npy, or OUT.npz holding `vectors`; float32, or quantized to
    --precision (int8 and uint8 by the ranges of every line's vector)."""
    recipe = sentence_recipe(model, args)
    say_where_binary_goes(args)
    precision = args.precision or "float32"
    with contextlib.ExitStack() as stack:
        npy = out if args.format == "npy" else stack.enter_context(tempfile.TemporaryFile())
        rows = NpyRows(npy, width(recipe.dim, precision), DTYPES[precision])
        with embedder(model, args, recipe, bar) as embed:
            vectors = embed(numbered(chunks))
            ranges = None
            if precision in CALIBRATED:
                vectors, ranges = spooled(vectors, stack.enter_context(tempfile.TemporaryFile()), recipe.dim)
            for chunk in vectors:
                rows.write(quantize(chunk, precision, ranges))
        rows.finish()
        if args.format == "npz":  # the layout of np.savez: an uncompressed zip of vectors.npy
            npy.seek(0)
            with (
                zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as zf,
                zf.open("vectors.npy", "w", force_zip64=True) as member,
            ):
                shutil.copyfileobj(npy, member, 1 << 20)


def spooled(vectors: Iterable[np.ndarray], f: IO[bytes], dim: int) -> tuple[Iterator[np.ndarray], np.ndarray]:
    """Every chunk of float32 vectors written to the temporary file f, then read back a chunk at a time,
    with their ranges: each dimension's minimum and maximum over all of them, (2, dim)."""
    lo, hi = np.full(dim, np.inf, np.float32), np.full(dim, -np.inf, np.float32)
    sizes = []
    for chunk in vectors:
        f.write(np.ascontiguousarray(chunk, dtype="<f4").tobytes())
        lo, hi = np.minimum(lo, chunk.min(axis=0)), np.maximum(hi, chunk.max(axis=0))
        sizes.append(len(chunk))
    if sum(sizes) == 1:
        raise Failure("int8 and uint8 are scaled by the min and max of every line's vector: one line is not enough")
    f.seek(0)
    return (np.frombuffer(f.read(n * dim * 4), "<f4").reshape(n, dim) for n in sizes), np.stack([lo, hi])


def write_features(model, chunks: Iterator[list[str]], out: IO[bytes], args: argparse.Namespace, bar: Any) -> None:
    """One JSON line per input line in the layout of google-research/bert's extract_features.py."""
    layers = args.layers or [-1, -2, -3, -4]
    model.recipe(pooling="mean", layers=layers)  # a bad layer fails before any work
    index = 0
    for chunk in chunks:
        pairs = [PAIR.match(line) for line in chunk]
        texts = [m.group(1) if m else line for m, line in zip(pairs, chunk)]
        seconds = [m.group(2) if m else None for m in pairs]
        lines: list = [None] * len(chunk)  # every position is filled below
        for positions, output in model.batches(
            texts,
            seconds,
            batch_size=args.batch_size,
            max_length=args.max_length,
            long=args.long,
            stride=args.stride,
            truncation_side=args.truncation_side,
        ):
            batched = output.batched
            for row, i in enumerate(positions):
                encoding = output.encodings[row if batched else 0]
                states = output.hidden_states[:, row] if batched else output.hidden_states
                lines[i] = features_line(index + i, encoding.tokens, states[layers, : len(encoding)], layers)
            bar.update(len(positions))
        out.write("".join(lines).encode("utf-8"))
        index += len(chunk)


def write_sparse_vectors(
    model, chunks: Iterator[list[str]], out: IO[bytes], args: argparse.Namespace, bar: Any
) -> None:
    """One JSON line per input line, in input order: {token: weight} largest first (--sparse tokens), or
    {"ids": [...], "values": [...]}, ids ascending (--sparse ids); the --top-k largest weights, or the model's
    max_active_dims, else all."""
    for chunk in chunks:
        vectors = model.embed_sparse(
            chunk,
            args.top_k,
            batch_size=args.batch_size,
            max_length=args.max_length,
            prompt=args.prompt,
            prompt_name=args.prompt_name,
            truncation_side=args.truncation_side,
        )
        lines = [
            json.dumps(
                model.sparse_tokens(v)
                if args.sparse == "tokens"
                else {"ids": v.ids.tolist(), "values": v.weights.tolist()},
                ensure_ascii=False,
            )
            + "\n"
            for v in vectors
        ]
        out.write("".join(lines).encode("utf-8"))
        bar.update(len(chunk))


def write_shard_directory(model, lines: Iterator[str], args: argparse.Namespace) -> None:
    """Sentence vectors as shards of --shard-lines lines plus a manifest in the directory -o; a rerun resumes,
    saying how many shards it skipped. The chunks are those of `-o vectors.npy`, so are the vectors' bits."""
    from ..checkpoint.fingerprint import model_fingerprint
    from ..engines.shards import write_shards

    recipe = sentence_recipe(model, args)
    job = {
        "model": args.model,
        **model_fingerprint(args.model),
        "options": {**recipe.describe(), "batch_size": args.batch_size},
    }
    skipped: list[dict] = []
    with progress_bar(args) as bar, embedder(model, args, recipe) as embed:
        manifest = write_shards(
            args.output,
            lines,
            embed,
            job,
            shard_lines=args.shard_lines,
            chunk_lines=CHUNK_LINES["npy"],
            dim=recipe.dim,
            progress=bar.update,
            skipped=skipped.append,
        )
    if skipped:
        print(
            f"numbert encode: resuming: {len(skipped)} of {len(manifest['shards'])} shards already done, skipped",
            file=sys.stderr,
        )


def features_line(index: int, tokens: list[str], states: np.ndarray, layers: list[int]) -> str:
    """{"linex_index": i, "features": [{"token": t, "layers": [{"index": l, "values": [...]}]}]}, values
    rounded to 6 decimals. states: (len(layers), seq, hidden)"""
    values = np.round(states.astype(np.float64).transpose(1, 0, 2), 6).tolist()  # (seq, layers, hidden)
    features = [
        {"token": token, "layers": [{"index": layer, "values": v} for layer, v in zip(layers, token_values)]}
        for token, token_values in zip(tokens, values)
    ]
    return json.dumps({"linex_index": index, "features": features}, ensure_ascii=False) + "\n"


# --- the command line -----------------------------------------------------------------------------


def output_format(text: str) -> str:
    """--format's value, "txt" read as "text" (the suffix and the habit)."""
    return "text" if text == "txt" else text


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert encode`."""
    p = commands.add_parser(
        "encode",
        help="embed texts: sentence vectors (npy, npz, text, jsonl) or per-token features (features)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Embed texts, one per input line, keeping their order and count exactly.\n\n"
        "npy/npz: one float32 sentence vector per line, shape (lines, dim); npz holds it as 'vectors'.\n"
        "  The default when stdout is a pipe, or a file whose suffix names no format (said on stderr).\n"
        "text: one line of space-separated values per input line (the default on a terminal, or > x.txt).\n"
        "jsonl: one JSON array per input line, the float32 values exactly (shortest decimals).\n"
        "features: per-token hidden states, a JSON object per input line, in the layout of\n"
        "google-research/bert's extract_features.py (linex_index, features -> token, layers -> index,\n"
        "values); a line 'A ||| B' is a pair. Write it with -o features.jsonl --format features.\n\n"
        "Input is read and embedded a chunk at a time, so memory stays flat on any file.\n"
        "With -o OUT the output is written to a temporary file renamed to OUT at the end:\n"
        "a failed run never leaves a half-written OUT.",
    )
    p.add_argument(
        "text", nargs="*", type=utf8_text, metavar="TEXT", help="texts to embed (default: the lines of --file or stdin)"
    )
    p.add_argument("--file", "-f", metavar="F", help="read one text per line from F ('-' for stdin)")
    p.add_argument(
        "--format",
        type=output_format,
        choices=FORMATS,
        help="output format (txt = text; default: from OUT's suffix .npy .npz .jsonl .txt .tsv, which must "
        "agree with it; stdout redirected to a file: that file's suffix likewise; text on a terminal, else npy: "
        "piped output is .npy unless --format says otherwise); features: extract_features.py's per-token JSON lines",
    )
    p.add_argument("--output", "-o", metavar="OUT", help="output file (default: stdout)")
    add_model(p)
    add_sentence_options(p)
    add_vector_options(p)
    add_dimensions(p)
    add_length_options(p)
    add_parallel_options(p)
    add_kind_options(p)
    add_prompt_options(p)
    p.set_defaults(run=encode)


def add_length_options(p: argparse.ArgumentParser) -> None:
    """`numbert encode`'s precision, long inputs and batch size."""
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="npy/npz: the vectors quantized as sentence-transformers' quantize_embeddings (int8/uint8 scaled "
        "by each dimension's min and max over all the lines; binary/ubinary: the signs, 8 to a byte; "
        "default: float32)",
    )
    p.add_argument(
        "--long",
        choices=("truncate", "window"),
        default="truncate",
        help="longer inputs: cut them, or run overlapping windows and average each token over them (default: truncate)",
    )
    p.add_argument(
        "--stride",
        type=non_negative_int,
        metavar="N",
        help="tokens shared by neighbouring windows with --long window (default: 128, or half a window that holds "
        "no more)",
    )
    p.add_argument(
        "--batch-size", type=positive_int, default=32, metavar="N", help="texts per forward pass (default: 32)"
    )


def add_parallel_options(p: argparse.ArgumentParser) -> None:
    """`numbert encode`'s worker processes, resumable shards and Dask."""
    p.add_argument(
        "--workers",
        type=non_negative_int,
        metavar="N",
        help="embed in N worker processes of one BLAS thread each (sentence vectors; the same bits); "
        f"default: one per core for a --file of {AUTO_WORKERS_LINES:,} lines or more, else 0 (this process)",
    )
    p.add_argument(
        "--shard-lines",
        type=positive_int,
        metavar="K",
        help="write -o DIR/ as .npy shards of K lines plus manifest.json; the same command run "
        "again skips finished shards and resumes",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on the Dask cluster at ADDRESS (tcp://HOST:8786); the model must be a path or hub "
        "name every worker can load (needs Dask: pip install '.[dask]' in numbert's checkout)",
    )
    p.add_argument(
        "--dask", action="store_true", help="run on a local Dask cluster of --workers (default: all cores) processes"
    )


def add_kind_options(p: argparse.ArgumentParser) -> None:
    """`numbert encode`'s other kinds of vectors: sparse (SPLADE) and multi-vector (ColBERT, BGE-M3)."""
    p.add_argument(
        "--sparse",
        nargs="?",
        const="tokens",
        choices=("tokens", "ids"),
        help="write SPLADE sparse vectors (a masked-LM or SparseEncoder model) as JSON lines: {token: weight} "
        'largest first, or with --sparse ids {"ids": [...], "values": [...]} ids ascending',
    )
    p.add_argument(
        "--top-k",
        type=positive_int,
        metavar="K",
        help="--sparse: keep each vector's K largest weights (default: the model's max_active_dims, else all)",
    )
    p.add_argument(
        "--multi",
        action="store_true",
        help="write each text's token vectors (a ColBERT or BGE-M3 model) to -o OUT.npz (vectors + offsets) or "
        "-o DIR/ (one .npy per text, numbered from 0); numbert.cli.multi",
    )
    p.add_argument("--query", action="store_true", help="--multi: the texts are queries (marked, [MASK]-expanded)")
