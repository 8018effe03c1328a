"""`numbert plot histogram|attention|pca`: the figures of numbert.plot, drawn from the shell as PNG.

numbert plot histogram "The cat sat on the mat." --layer 6 --token cat -o cat.png
numbert plot attention "The cat sat on the mat." --layer 0 --head 3 -o head.png
numbert plot pca "A man is eating food." "A man is eating a meal." "The stock market fell." -o pca.png
"""

from __future__ import annotations

import argparse

import numpy as np

from ..plot import INSTALL_HINT, attention_map, histogram, pca_scatter, save_png
from .common import Failure, add_model, load_model, non_negative_int, utf8_text
from .files import decoded_lines, output_file


def saved(fig, args: argparse.Namespace) -> None:
    """Write the figure to --output (whole or not at all, as encode's output) and say so, with its size."""
    with output_file(args.output, "png") as f:
        save_png(fig, f)
    width, height = (round(v) for v in fig.get_size_inches() * fig.dpi)
    print(f"wrote {args.output} ({width} x {height} PNG)")


def needs_matplotlib() -> None:
    """Fail before loading a model when matplotlib is missing: one line, exit status 1."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(f"numbert plot: error: {INSTALL_HINT}") from None


def plot_histogram(args: argparse.Namespace) -> None:
    needs_matplotlib()
    out = load_model(args.model)(args.text)
    token = int(args.token) if args.token.lstrip("-").isdigit() else args.token
    saved(histogram(out, args.layer, token, bins=args.bins), args)


def plot_attention(args: argparse.Namespace) -> None:
    needs_matplotlib()
    out = load_model(args.model)(args.text, output_attentions=True)
    saved(attention_map(out, args.layer, args.head), args)


def plot_pca(args: argparse.Namespace) -> None:
    needs_matplotlib()
    texts = list(args.text)
    if args.file is not None:
        try:
            f = open(args.file, "rb")
        except OSError as e:
            raise Failure(f"cannot read {args.file}: {e.strerror}") from None
        texts += [line for line in decoded_lines(f, args.file) if line.strip()]
    if not texts:
        raise ValueError("give texts as arguments or with --file")
    model = load_model(args.model)
    if args.words:
        words = [w for text in texts for w in model.word_vectors(text)]
        vectors, labels = np.stack([w.vector for w in words]), [w.text for w in words]
        title = f"{len(words)} word vectors (sum of the last four layers), PCA"
    else:
        vectors, labels = model.embed(texts, progress=False), texts
        title = f"{len(texts)} sentence vectors, PCA"
    saved(pca_scatter(vectors, labels, title=title, max_labels=args.labels), args)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert plot histogram|attention|pca` (matplotlib, the [plot] extra)."""
    p = commands.add_parser(
        "plot",
        help="draw a histogram, an attention map or a PCA scatter as PNG",
        description="Draw what BERT computes as a PNG (needs matplotlib: pip install matplotlib, or "
        "pip install '.[plot]' in numbert's checkout).",
    )
    kinds = p.add_subparsers(dest="plot", required=True, metavar="PLOT")

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--output", "-o", required=True, metavar="OUT", help="the PNG file to write")
        add_model(q)

    q = kinds.add_parser(
        "histogram",
        help="the values of one token at one layer",
        description="Histogram of hidden_states[LAYER][TOKEN]: one token's values at one layer.",
    )
    q.add_argument("text", type=utf8_text, metavar="TEXT")
    q.add_argument(
        "--layer",
        type=int,
        default=-1,
        metavar="L",
        help="index into hidden_states: 0 = embedding layer, -1 = last (default: -1)",
    )
    q.add_argument(
        "--token",
        default="1",
        metavar="T",
        help="a token position (0 = [CLS]) or a token string such as bank (default: 1)",
    )
    q.add_argument("--bins", type=int, default=50, metavar="N", help="histogram bins (default: 50)")
    common(q)
    q.set_defaults(run=plot_histogram)

    q = kinds.add_parser(
        "attention",
        help="one head's attention map, tokens on both axes",
        description="Heatmap of attentions[LAYER][HEAD]: row i is how token i attends to each token.",
    )
    q.add_argument("text", type=utf8_text, metavar="TEXT")
    q.add_argument("--layer", type=int, default=0, metavar="L", help="encoder layer, from 0 (default: 0)")
    q.add_argument("--head", type=int, default=0, metavar="H", help="attention head, from 0 (default: 0)")
    common(q)
    q.set_defaults(run=plot_attention)

    q = kinds.add_parser(
        "pca",
        help="sentence (or word) vectors projected on two principal axes",
        description="Scatter of the texts' sentence vectors (or, with --words, of every word's "
        "vector) on their first two principal axes, labelled.",
    )
    q.add_argument("text", nargs="*", type=utf8_text, metavar="TEXT")
    q.add_argument("--file", "-f", metavar="F", help="also read one text per line from F")
    q.add_argument(
        "--words",
        action="store_true",
        help="plot each word's vector (sum of the last four layers) instead of one vector per text",
    )
    q.add_argument(
        "--labels",
        type=non_negative_int,
        default=30,
        metavar="N",
        help="label at most N points, spread over the plot (default: 30; 0: no labels)",
    )
    common(q)
    q.set_defaults(run=plot_pca)
