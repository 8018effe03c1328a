"""What every command shares: the parser, the option types, --model, the sentence-vector options, the model."""

from __future__ import annotations

import argparse
import difflib
import os
from typing import NoReturn


class Failure(Exception):
    """An error to report as one line on stderr."""


# words people type for a command, and the command that does it (`numbert embed` -> `numbert encode`)
MEANT = {
    "embed": "encode",
    "embedding": "encode",
    "embeddings": "encode",
    "vector": "encode",
    "vectors": "encode",
    "vectorize": "encode",
    "features": "encode",
    "extract-features": "encode",
    "tokens": "tokenize",
    "tokenise": "tokenize",
    "neighbours": "neighbors",
    "nearest": "neighbors",
    "similar": "similarity",
    "cosine": "similarity",
    "rank": "rerank",
    "server": "serve",
    "mask": "fill-mask",
}


def one_line(message: str) -> str:
    """An error message as one printable line: a newline, a control character or a lone surrogate (of a file name or
    text the message quotes) written as its escape, as repr writes it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


class Parser(argparse.ArgumentParser):
    """argparse, with errors on one line that point at this (sub)command's --help, a mistyped choice (a command,
    --format...) or option (--fromat) answered with the closest one, and a command's usual other name
    (`numbert embed`) with the command that does it (MEANT). No option is taken by a prefix of its name
    (argparse's allow_abbrev): `numbert serve --prot 8000` would silently be --protect-health, not --port; an
    unknown option is refused with the closest known one instead."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, but arguments this parser does not know are an error here, where the (sub)command that was
        given them can name the option probably meant and its own --help (argparse would leave them to the top
        parser, which says `numbert: error: unrecognized arguments` and points at `numbert --help`)."""
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self.unrecognized(extras))
        return namespace, extras

    def unrecognized(self, extras: list[str]) -> str:
        """What to say of arguments not understood: the first unknown option with the closest known one."""
        options = [option for action in self._actions for option in action.option_strings]
        for extra in extras:
            if extra.startswith("-") and len(extra) > 1:
                given = extra.split("=", 1)[0]
                close = difflib.get_close_matches(given, options, n=5, cutoff=0.6)
                if close:  # the fewest typing slips away (--prot: --port, one swap, before --prompt, two letters)
                    return f"unrecognized option {given}: did you mean {min(close, key=lambda o: slips(given, o))}?"
                return f"unrecognized option {given}"
        return f"unrecognized arguments: {' '.join(extras)}"

    def _check_value(self, action: argparse.Action, value) -> None:
        """argparse's own check of a choice (the hook it offers), saying which choice was probably meant."""
        choices = [str(c) for c in action.choices or ()]
        close = (
            difflib.get_close_matches(value, choices, n=1) if isinstance(value, str) and value not in choices else []
        )
        if isinstance(value, str) and MEANT.get(value.lower()) in choices:
            close = [MEANT[value.lower()]]
        if close:
            listed = ", ".join(map(repr, choices))
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}; did you mean {close[0]!r}? (choose from {listed})"
            )
        super()._check_value(action, value)


# --- option types ---------------------------------------------------------------------------------


def slips(a: str, b: str) -> int:
    """How many typing slips turn a into b: letters left out, added or changed, and two neighbours swapped
    (the optimal-string-alignment distance)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


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


def utf8_text(text: str) -> str:
    """A text argument, refused if the command line held bytes that are not UTF-8 (Python keeps them as
    lone surrogates, which the tokenizer would silently drop)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        byte = text.encode("utf-8", "surrogateescape")[len(text[: e.start].encode("utf-8", "surrogateescape"))]
        raise argparse.ArgumentTypeError(
            f"{text!r} is not valid UTF-8 (byte {byte:#04x} at column {e.start + 1})"
        ) from None
    return text


def layer_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated layer indices such as -1,-2,-3,-4, got {text!r}"
        ) from None


# --- options more than one command takes -----------------------------------------------------------


def add_model(p: argparse.ArgumentParser) -> None:
    from ..checkpoint.hub import default_model

    p.add_argument(
        "--model",
        "-m",
        default=default_model(),
        metavar="M",
        help="a local model directory or a Hugging Face hub id (default: %(default)s; set NUMBERT_MODEL to change it)",
    )


def add_sentence_options(p: argparse.ArgumentParser) -> None:
    from ..pipeline import COMBINES, POOLINGS, STRATEGIES

    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--strategy",
        choices=list(STRATEGIES),
        help="the layers to pool, by the BERT paper's names (default: the model's own recipe "
        "for a sentence-transformers model, else second_to_last)",
    )
    which.add_argument(
        "--layers",
        type=layer_list,
        metavar="L",
        help="comma-separated layer indices, -1 = last, 0 = embeddings (e.g. -1,-2,-3,-4)",
    )
    p.add_argument("--combine", choices=COMBINES, help="how --layers are combined (default: sum)")
    p.add_argument(
        "--pooling",
        choices=POOLINGS,
        help="how token vectors become one sentence vector (default: the sentence-transformers "
        "model's pooling, else mean); padding never counts",
    )


def add_vector_options(p: argparse.ArgumentParser) -> None:
    """--normalize and --max-length: how sentence vectors are finished and how long their inputs may be."""
    p.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="scale sentence vectors to unit length (default: as the model's Normalize module says)",
    )
    p.add_argument(
        "--max-length",
        type=positive_int,
        metavar="N",
        help="tokens per input, [CLS] and [SEP] included (default: the model's maximum)",
    )
    p.add_argument(
        "--truncation-side",
        choices=("right", "left"),
        help="where a longer input is cut: at its end (right), or at its start, keeping its last tokens (left); "
        "default: the tokenizer's truncation_side (tokenizer_config.json), else right",
    )


def add_dimensions(p: argparse.ArgumentParser) -> None:
    """--dimensions: keep the first D values of each sentence vector (Matryoshka; renormalized if normalized)."""
    p.add_argument(
        "--dimensions",
        type=positive_int,
        metavar="D",
        help="keep the first D values of each sentence vector, renormalized when the vectors are normalized "
        "(sentence-transformers' truncate_dim, for Matryoshka models)",
    )


def add_prompt_options(p: argparse.ArgumentParser) -> None:
    """--prompt and --prompt-name: the text prepended to every input, as sentence-transformers prompts it; --task:
    jina-embeddings-v3's task adapters."""
    p.add_argument("--prompt", metavar="TEXT", help="prepend TEXT to every input (e.g. 'query: ')")
    p.add_argument(
        "--prompt-name",
        metavar="NAME",
        help="prepend the model's prompt NAME (sentence-transformers prompts, e.g. query; "
        "default: the model's default_prompt_name, if any)",
    )
    p.add_argument(
        "--task",
        metavar="NAME",
        help="run the model's task adapters NAME (jina-embeddings-v3: retrieval.query, retrieval.passage, "
        "separation, classification, text-matching), its task instruction prepended unless a prompt is given",
    )


def sentence_options(args: argparse.Namespace) -> dict:
    """The sentence-vector choices given on the command line (absent ones take the model's defaults)."""
    options = {"pooling": args.pooling, "layers": args.strategy or args.layers, "combine": args.combine}
    if getattr(args, "normalize", None) is not None:
        options["normalize"] = args.normalize
    if getattr(args, "task", None) is not None:
        options["task"] = args.task
    return options


def fixed(value: float, places: int = 6) -> str:
    """A number with `places` decimals, as %.6f writes it but never "-0.000000" (a tiny negative score)."""
    text = f"{value:.{places}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def model_source(args: argparse.Namespace, message: str) -> str:
    """An error's message, saying where --model's value came from when it was $NUMBERT_MODEL's (no --model given)."""
    name = getattr(args, "model", None)
    if isinstance(name, str) and name == os.environ.get("NUMBERT_MODEL") and name in message:
        return f"{message} (the model {name!r} came from NUMBERT_MODEL: unset it or give --model)"
    return message


def load_model(name: str):
    """The model named by --model (imported here, so `numbert --help` never waits for it)."""
    from .. import load

    return load(name)
