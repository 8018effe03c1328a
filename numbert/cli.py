"""The `numbert` command: tokenize, encode, neighbors, similarity (and plot, in numbert.plot), from the shell.

    numbert tokenize "Here is the sentence I want embeddings for."
    numbert encode --file sentences.txt --model ./all-MiniLM-L6-v2 -o vectors.npy
    numbert encode --format jsonl --layers -1,-2,-3,-4 < input.txt > features.jsonl
    numbert neighbors bank -k 5
    numbert similarity "A man is eating food." "A man is eating a meal."

`encode` streams: it reads the input a chunk of lines at a time, so memory stays flat on a file of
any length, and it writes to a temporary file renamed to OUT only when every line succeeded.
Errors are one line on stderr and a non-zero exit status (1 for a failed run, 2 for bad usage).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

DEFAULT_MODEL = os.environ.get("NUMBERT_MODEL", "bert-base-uncased")
CHUNK_LINES = {"npy": 2048, "npz": 2048, "text": 2048, "jsonl": 256}  # lines embedded at a time (bounds the memory)
PAIR = re.compile(r"^(.*) \|\|\| (.*)$")  # extract_features.py's "text_a ||| text_b"


class Failure(Exception):
    """An error to report as one line on stderr."""


# --- the commands ---------------------------------------------------------------------------------

def tokenize(args: argparse.Namespace) -> None:
    """Print the tokens and their ids, one per line, as the tutorials do (or JSON with --json)."""
    from .tokenizer import Tokenizer

    tokenizer = Tokenizer.from_pretrained(args.model)
    enc = tokenizer.encode(args.text, args.pair)
    if args.json:
        print(json.dumps({"tokens": enc.tokens, "ids": enc.ids, "type_ids": enc.type_ids,
                          "offsets": enc.offsets, "word_ids": enc.word_ids}, ensure_ascii=False))
        return
    for token, id_ in zip(enc.tokens, enc.ids):
        print(f"{token:<12} {id_:>6,}")


def encode(args: argparse.Namespace) -> None:
    """Embed every input line: sentence vectors to .npy / .npz, or per-token features to JSON lines."""
    check_encode_options(args)
    lines = input_lines(args)  # opens the input now, so a missing file fails before the model loads
    model = load_model(args.model)
    chunks = chunked(lines, CHUNK_LINES[args.format])
    with progress_bar(args) as bar, output_file(args.output, args.format) as out:
        if args.format == "jsonl":
            write_features(model, chunks, out, args, bar)
        elif args.format == "text":
            write_text_vectors(model, chunks, out, args, bar)
        else:
            write_sentence_vectors(model, chunks, out, args, bar)


def neighbors(args: argparse.Namespace) -> None:
    """Print the vocabulary entries nearest to WORD by cosine of the token embeddings."""
    found = load_model(args.model).nearest_tokens(args.word, k=args.k)
    if args.json:
        print(json.dumps([n._asdict() for n in found], ensure_ascii=False))
        return
    for n in found:
        print(f"{n.token:<16} {n.similarity:.4f}")


def similarity(args: argparse.Namespace) -> None:
    """Print the cosine similarity of the two texts' sentence vectors."""
    print(f"{load_model(args.model).similarity(args.text_a, args.text_b, **sentence_options(args)):.6f}")


# --- encode: input --------------------------------------------------------------------------------

FORMAT_OF_SUFFIX = {".npy": "npy", ".npz": "npz", ".jsonl": "jsonl", ".txt": "text", ".tsv": "text"}


def check_encode_options(args: argparse.Namespace) -> None:
    if args.format is None:  # from OUT's suffix; readable text on a terminal; else .npy
        suffix = Path(args.output).suffix.lower() if args.output not in (None, "-") else ""
        args.format = FORMAT_OF_SUFFIX.get(suffix) or ("text" if args.output is None and sys.stdout.isatty() else "npy")
    if args.text and args.file is not None:
        raise Failure("give texts as arguments or --file, not both")
    if args.format == "jsonl":
        for name in ("strategy", "pooling", "combine"):
            if getattr(args, name) is not None:
                raise Failure(f"--{name} applies to sentence vectors (npy, npz); --format jsonl writes "
                              f"the layers listed by --layers, as extract_features.py does")
        if args.normalize is not None:
            raise Failure("--normalize applies to sentence vectors (npy, npz), not to --format jsonl")
    if args.output is None and args.format in ("npy", "npz") and sys.stdout.isatty():
        raise Failure(f"refusing to write binary .{args.format} data to a terminal; use -o OUT or a redirect")


def input_lines(args: argparse.Namespace) -> Iterator[str]:
    """The input texts, one per line, read lazily; invalid UTF-8 is a Failure naming the line."""
    if args.text:
        return iter(args.text)
    if args.file is None or args.file == "-":
        return decoded_lines(sys.stdin.buffer, "stdin")
    try:
        f = open(args.file, "rb")
    except OSError as e:
        raise Failure(f"cannot read {args.file}: {e.strerror}") from None
    return decoded_lines(f, args.file)


def decoded_lines(f, name: str) -> Iterator[str]:
    """Each line of a binary file as str without its line ending (a UTF-8 BOM on line 1 is dropped)."""
    with f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise Failure(f"{name}: line {number} is not valid UTF-8 (byte {raw[e.start]:#04x} at "
                              f"column {e.start + 1})") from None
            if number == 1:
                line = line.removeprefix("\ufeff")
            yield line.removesuffix("\n").removesuffix("\r")


def chunked(lines: Iterator[str], size: int) -> Iterator[list[str]]:
    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def count_lines(args: argparse.Namespace) -> int | None:
    """The number of input lines when it is cheap to know (arguments or a regular file), for the bar."""
    if args.text:
        return len(args.text)
    if args.file in (None, "-") or not os.path.isfile(args.file):
        return None
    with open(args.file, "rb") as f:
        count, last = 0, b"\n"
        for block in iter(lambda: f.read(1 << 20), b""):
            count, last = count + block.count(b"\n"), block[-1:]
    return count + (last != b"\n")


@contextlib.contextmanager
def progress_bar(args: argparse.Namespace):
    """A tqdm bar over input lines on stderr, only when stderr is a terminal."""
    from tqdm.auto import tqdm

    show = sys.stderr.isatty()
    with tqdm(total=count_lines(args) if show else None, unit="line", disable=not show, file=sys.stderr) as bar:
        yield bar


# --- encode: output -------------------------------------------------------------------------------

@contextlib.contextmanager
def output_file(path: str | None, format: str):
    """A binary file to write into, which becomes `path` only if the block succeeds.

    With a path, a temporary file in the same directory is renamed over it at the end (a failed run
    leaves nothing at OUT). To stdout or a special file (/dev/null, a pipe), .npy/.npz are staged in a
    temporary file (their header needs the row count) and copied at the end; JSON lines stream.
    """
    target = None if path in (None, "-") else Path(path)
    if target is not None and target.is_dir():
        raise Failure(f"cannot write {path}: it is a directory")
    if target is None or (target.exists() and not target.is_file()):
        try:
            sink = sys.stdout.buffer if target is None else open(target, "wb")
        except OSError as e:
            raise Failure(f"cannot write {path}: {e.strerror}") from None
        with contextlib.ExitStack() as stack:
            if target is not None:
                stack.enter_context(sink)
            if format == "jsonl":
                yield sink
            else:
                with tempfile.TemporaryFile() as tmp:
                    yield tmp
                    tmp.seek(0)
                    shutil.copyfileobj(tmp, sink, 1 << 20)
            sink.flush()
        return
    try:
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as e:
        raise Failure(f"cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w+b") as tmp:
            yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_name, 0o666 & ~umask)  # mkstemp makes 0600; give OUT the usual permissions
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


class NpyRows:
    """Float32 rows streamed into a .npy file whose header, holding the row count, is written last.

    The header is padded to a fixed 128 bytes, so the final one (written over the placeholder)
    has the same length whatever the count.
    """

    HEADER_BYTES = 128

    def __init__(self, f, dim: int):
        self.f, self.dim, self.rows = f, dim, 0
        f.write(self.header())

    def header(self) -> bytes:
        text = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({self.rows}, {self.dim}), }}"
        text = text.ljust(self.HEADER_BYTES - 10 - 1) + "\n"  # magic 6 + version 2 + length 2, then text
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")

    def write(self, rows: np.ndarray) -> None:
        self.f.write(np.ascontiguousarray(rows, dtype="<f4").tobytes())
        self.rows += len(rows)

    def finish(self) -> None:
        self.f.seek(0)
        self.f.write(self.header())
        self.f.seek(0, os.SEEK_END)


def embed_options(model, args: argparse.Namespace) -> tuple[dict, int]:
    """The keyword arguments of model.embed for these options, checked before any work is done, and
    the width of the vectors they give."""
    options = dict(sentence_options(args), batch_size=args.batch_size, max_length=args.max_length, long=args.long,
                   stride=args.stride, progress=False)
    return options, model.embed([], **options).shape[1]


def write_text_vectors(model, chunks, out, args: argparse.Namespace, bar) -> None:
    """One line of space-separated values (6 decimals) per input line, in input order."""
    options, _ = embed_options(model, args)
    for chunk in chunks:
        np.savetxt(out, model.embed(chunk, **options), fmt="%.6f")
        bar.update(len(chunk))


def write_sentence_vectors(model, chunks, out, args: argparse.Namespace, bar) -> None:
    """One float32 row per line, in input order: OUT.npy, or OUT.npz holding `vectors`."""
    options, dim = embed_options(model, args)
    with contextlib.ExitStack() as stack:
        npy = out if args.format == "npy" else stack.enter_context(tempfile.TemporaryFile())
        rows = NpyRows(npy, dim)
        for chunk in chunks:
            rows.write(model.embed(chunk, **options))
            bar.update(len(chunk))
        rows.finish()
        if args.format == "npz":  # the layout of np.savez: an uncompressed zip of vectors.npy
            npy.seek(0)
            with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as zf, \
                    zf.open("vectors.npy", "w", force_zip64=True) as member:
                shutil.copyfileobj(npy, member, 1 << 20)


def write_features(model, chunks, out, args: argparse.Namespace, bar) -> None:
    """One JSON line per input line in the layout of google-research/bert's extract_features.py."""
    layers = args.layers or [-1, -2, -3, -4]
    from .recipes import layer_selection

    layer_selection(layers, None, model.config.num_hidden_layers)  # a bad layer fails before any work
    index = 0
    for chunk in chunks:
        pairs = [PAIR.match(line) for line in chunk]
        texts = [m.group(1) if m else line for m, line in zip(pairs, chunk)]
        seconds = [m.group(2) if m else None for m in pairs]
        lines = [None] * len(chunk)
        for positions, output in model.batches(texts, seconds, batch_size=args.batch_size, max_length=args.max_length,
                                               long=args.long, stride=args.stride):
            batched = output.attention_mask.ndim == 2
            for row, i in enumerate(positions):
                encoding = output.encodings[row if batched else 0]
                states = output.hidden_states[:, row] if batched else output.hidden_states
                lines[i] = features_line(index + i, encoding.tokens, states[layers, :len(encoding)], layers)
        out.write("".join(lines).encode("utf-8"))
        index += len(chunk)
        bar.update(len(chunk))


def features_line(index: int, tokens: list[str], states: np.ndarray, layers: list[int]) -> str:
    """{"linex_index": i, "features": [{"token": t, "layers": [{"index": l, "values": [...]}]}]}, values
    rounded to 6 decimals. states: (len(layers), seq, hidden)"""
    values = np.round(states.astype(np.float64).transpose(1, 0, 2), 6).tolist()  # (seq, layers, hidden)
    features = [{"token": token, "layers": [{"index": layer, "values": v} for layer, v in zip(layers, token_values)]}
                for token, token_values in zip(tokens, values)]
    return json.dumps({"linex_index": index, "features": features}, ensure_ascii=False) + "\n"


# --- shared ---------------------------------------------------------------------------------------

def load_model(name: str):
    from .bert import load

    return load(name)


def sentence_options(args: argparse.Namespace) -> dict:
    """The sentence-vector choices given on the command line (absent ones take the model's defaults)."""
    options = {"pooling": args.pooling, "layers": args.strategy or args.layers, "combine": args.combine}
    if getattr(args, "normalize", None) is not None:
        options["normalize"] = args.normalize
    return options


# --- the parser -----------------------------------------------------------------------------------

def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def layer_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer indices such as -1,-2,-3,-4, "
                                         f"got {text!r}") from None


class Parser(argparse.ArgumentParser):
    """argparse, with errors on one line."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", "-m", default=DEFAULT_MODEL, metavar="M",
                   help="a local model directory or a Hugging Face hub id (default: %(default)s; "
                        "set NUMBERT_MODEL to change it)")


def add_sentence_options(p: argparse.ArgumentParser) -> None:
    from .recipes import COMBINES, POOLINGS, STRATEGIES

    which = p.add_mutually_exclusive_group()
    which.add_argument("--strategy", choices=list(STRATEGIES),
                       help="the layers to pool, by the BERT paper's names (default: the model's own recipe "
                            "for a sentence-transformers model, else second_to_last)")
    which.add_argument("--layers", type=layer_list, metavar="L",
                       help="comma-separated layer indices, -1 = last, 0 = embeddings (e.g. -1,-2,-3,-4)")
    p.add_argument("--combine", choices=COMBINES, help="how --layers are combined (default: sum)")
    p.add_argument("--pooling", choices=POOLINGS,
                   help="how token vectors become one sentence vector (default: the sentence-transformers "
                        "model's pooling, else mean); padding never counts")


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    try:
        numbert_version = version("numbert")
    except PackageNotFoundError:
        numbert_version = "unknown"
    parser = Parser(prog="numbert", description="BERT in NumPy: tokens, vectors and similarities from the shell.")
    parser.add_argument("--version", action="version", version=f"numbert {numbert_version}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)

    p = commands.add_parser("tokenize", help="print the WordPiece tokens and ids of a text",
                            description="Print the WordPiece tokens of TEXT with their vocabulary ids.")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--pair", metavar="TEXT_B", help="a second segment: [CLS] TEXT [SEP] TEXT_B [SEP]")
    p.add_argument("--json", action="store_true", help="print tokens, ids, type ids, offsets and word ids as JSON")
    add_model(p)
    p.set_defaults(run=tokenize)

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
    p.add_argument("text", nargs="*", metavar="TEXT", help="texts to embed (default: the lines of --file or stdin)")
    p.add_argument("--file", "-f", metavar="F", help="read one text per line from F ('-' for stdin)")
    p.add_argument("--format", choices=("npy", "npz", "text", "jsonl"),
                   help="output format (default: from OUT's suffix, text on a terminal, else npy)")
    p.add_argument("--output", "-o", metavar="OUT", help="output file (default: stdout)")
    add_model(p)
    add_sentence_options(p)
    p.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                   help="scale sentence vectors to unit length (default: as the model's Normalize module says)")
    p.add_argument("--max-length", type=positive_int, metavar="N",
                   help="tokens per input, [CLS] and [SEP] included (default: the model's maximum)")
    p.add_argument("--long", choices=("truncate", "window"), default="truncate",
                   help="longer inputs: cut them, or run overlapping windows and average each token over "
                        "them (default: truncate)")
    p.add_argument("--stride", type=non_negative_int, default=128, metavar="N",
                   help="tokens shared by neighbouring windows with --long window (default: 128)")
    p.add_argument("--batch-size", type=positive_int, default=32, metavar="N",
                   help="texts per forward pass (default: 32)")
    p.set_defaults(run=encode)

    p = commands.add_parser("neighbors", help="the vocabulary entries nearest to a word",
                            description="Print the k vocabulary entries whose token embeddings (the raw "
                                        "embedding rows, no context) are closest to WORD's by cosine.")
    p.add_argument("word", metavar="WORD")
    p.add_argument("-k", type=positive_int, default=10, metavar="N", help="how many (default: 10)")
    p.add_argument("--json", action="store_true", help="print a JSON list of {token, id, similarity}")
    add_model(p)
    p.set_defaults(run=neighbors)

    p = commands.add_parser("similarity", help="the cosine similarity of two texts",
                            description="Print the cosine similarity of the sentence vectors of TEXT_A and TEXT_B.")
    p.add_argument("text_a", metavar="TEXT_A")
    p.add_argument("text_b", metavar="TEXT_B")
    add_model(p)
    add_sentence_options(p)
    p.set_defaults(run=similarity)

    from . import plot

    plot.add_commands(commands)  # numbert plot histogram | attention | pca (matplotlib, the [plot] extra)
    return parser


def join_negative_values(argv: list[str]) -> list[str]:
    """argparse reads `--layers -1,-2` as two options; pass it on as `--layers=-1,-2`."""
    out = []
    for arg in argv:
        if out and out[-1] == "--layers" and re.match(r"-\d", arg):
            out[-1] = f"--layers={arg}"
        else:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(join_negative_values(sys.argv[1:] if argv is None else list(argv)))
    try:
        args.run(args)
    except BrokenPipeError:  # e.g. `numbert encode --format jsonl ... | head`: the reader has gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (Failure, OSError, ValueError, TypeError) as e:
        print(f"numbert {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"numbert {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
