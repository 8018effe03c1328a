"""Pictures of what BERT computes: a layer's values, an attention map, vectors in 2-D.

An optional extra: `pip install ".[plot]"` in numbert's checkout (or `pip install matplotlib`) brings
matplotlib, which only this module uses, and only inside its functions, so `import numbert` never needs it.
Each function returns a matplotlib `Figure` (Jupyter shows it) and writes a PNG when given `save=PATH`:

    out = model("The cat sat on the mat.", output_attentions=True)
    histogram(out, layer=6, token="cat", save="cat.png")     # the 384 (768) values of one token
    attention_map(out, layer=0, head=3, save="head.png")     # who attends to whom
    pca_scatter(vectors, labels, save="pca.png")             # vectors projected on 2 principal axes

Figures are plain `matplotlib.figure.Figure` objects, not pyplot's, so nothing needs a display.
A PNG is exactly figsize × dpi pixels: 640 × 400 for a histogram, 640 × 640 for an attention map,
640 × 480 for a PCA scatter at the default sizes and dpi 100 (FIGSIZE, DPI below).

The same pictures from the shell (`numbert plot --help`, in numbert/cli/plot.py):

    numbert plot histogram "The cat sat on the mat." --layer 6 --token cat -o cat.png
    numbert plot attention "The cat sat on the mat." --layer 0 --head 3 -o head.png
    numbert plot pca "A man is eating food." "A man is eating a meal." "The stock market fell." -o pca.png
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO

import numpy as np

INSTALL_HINT = (
    "numbert plots need matplotlib: pip install matplotlib (numbert's [plot] extra: pip install '.[plot]' "
    "in numbert's checkout)"
)
DPI = 100
FIGSIZE = {"histogram": (6.4, 4.0), "attention": (6.4, 6.4), "pca": (6.4, 4.8)}  # inches; × DPI = pixels


def _figure(kind: str, figsize: tuple[float, float] | None, dpi: int | None):
    """A new matplotlib Figure (no pyplot, no display needed), or the one-line install hint."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return Figure(figsize=figsize or FIGSIZE[kind], dpi=dpi or DPI, layout="constrained")


def save_png(fig, path: str | os.PathLike | IO[bytes]) -> str | IO[bytes]:
    """Write the figure as a PNG of exactly figsize × dpi pixels to a path or a binary file; returns it."""
    target = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
    fig.savefig(target, format="png", dpi=fig.dpi)
    return target


def _token_position(output, token: int | str, row: int | None) -> tuple[list[str], int]:
    """The tokens of the (row of the) output and the position of `token`: an index, or the first
    position holding that token string."""
    tokens = output.tokens
    if tokens is None:
        tokens = [str(i) for i in np.asarray(output.input_ids).reshape(-1, output.input_ids.shape[-1])[row or 0]]
    elif tokens and isinstance(tokens[0], list):
        tokens = tokens[row or 0]
    if isinstance(token, str):
        if token not in tokens:
            raise ValueError(f"token {token!r} is not in the input; its tokens are {tokens}")
        return tokens, tokens.index(token)
    if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
        raise TypeError(f"token must be a position (int) or a token (str), not {type(token).__name__}")
    if not -len(tokens) <= token < len(tokens):
        raise ValueError(f"token position {token} is outside the input's {len(tokens)} tokens")
    return tokens, int(token) % len(tokens)


def _row(array: np.ndarray, batched: bool, row: int | None) -> np.ndarray:
    """One input's slice of a per-layer array: (layers, [batch,] ...) -> (layers, ...)."""
    if not batched:
        return array
    if row is None:
        raise ValueError("this output holds a batch: pass row=... to choose the input")
    return array[:, row]


def histogram(
    output,
    layer: int,
    token: int | str,
    *,
    bins: int = 50,
    row: int | None = None,
    save: str | os.PathLike | None = None,
    figsize=None,
    dpi: int | None = None,
):
    """The distribution of one token's hidden_size values at one layer: hidden_states[layer][token].

    `layer` indexes hidden_states (0 = the embedding layer's output, -1 = the last layer); `token` is
    a position or a token string (its first occurrence); `row` chooses the input of a batch.
    """
    batched = output.batched
    states = _row(output.hidden_states, batched, row)  # (layers + 1, seq, hidden)
    if not -len(states) <= layer < len(states):
        raise ValueError(f"layer {layer} does not exist: hidden_states has layers 0 .. {len(states) - 1}")
    tokens, position = _token_position(output, token, row)
    values = states[layer, position]
    fig = _figure("histogram", figsize, dpi)
    ax = fig.add_subplot()
    ax.hist(values, bins=bins, color="tab:blue")
    ax.set_title(
        f"layer {layer % len(states)}, token {position} {tokens[position]!r}: "
        f"{values.size} values, mean {values.mean():.2f}, std {values.std():.2f}"
    )
    ax.set_xlabel("value")
    ax.set_ylabel("count")
    if save is not None:
        save_png(fig, save)
    return fig


def attention_map(
    output,
    layer: int,
    head: int,
    *,
    row: int | None = None,
    save: str | os.PathLike | None = None,
    figsize=None,
    dpi: int | None = None,
):
    """One head's attention probabilities, attentions[layer][head]: row i is how token i spreads its
    attention over the tokens (each row sums to 1). Needs `model(text, output_attentions=True)`.

    `layer` counts encoder layers from 0 (attentions[0] is the first layer's, whose output is
    hidden_states[1]); padding columns of a batch row get (almost exactly) zero.
    """
    if output.attentions is None:
        raise ValueError("this output has no attentions: call the model with output_attentions=True")
    batched = output.batched
    probs = _row(output.attentions, batched, row)  # (layers, heads, seq, seq)
    layers, heads = probs.shape[:2]
    if not -layers <= layer < layers:
        raise ValueError(f"layer {layer} does not exist: attentions has layers 0 .. {layers - 1}")
    if not -heads <= head < heads:
        raise ValueError(f"head {head} does not exist: this model has heads 0 .. {heads - 1}")
    tokens, _ = _token_position(output, 0, row)
    fig = _figure("attention", figsize, dpi)
    ax = fig.add_subplot()
    image = ax.imshow(probs[layer, head], cmap="viridis", vmin=0, vmax=1)
    ticks = range(len(tokens))
    size = 9 if len(tokens) <= 24 else max(3, 9 * 24 // len(tokens))
    ax.set_xticks(ticks, tokens, rotation=90, fontsize=size)
    ax.set_yticks(ticks, tokens, fontsize=size)
    ax.set_xlabel("attends to (key)")
    ax.set_ylabel("token (query)")
    ax.set_title(f"layer {layer % layers}, head {head % heads}")
    fig.colorbar(image, ax=ax, shrink=0.8)
    if save is not None:
        save_png(fig, save)
    return fig


def pca(vectors: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Project vectors on their first k principal axes, by the SVD of the centred matrix.

    X - mean = U S V^T; the projections are (X - mean) V[:k]^T = U[:, :k] S[:k]. Returns the
    coordinates (n, k) and the share of the variance each axis explains (k,).
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"PCA needs at least 2 vectors in an (n, dim) array, got shape {x.shape}")
    x = x - x.mean(axis=0)
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    # An axis's sign is arbitrary: fix it so the largest loading is positive, for repeatable pictures.
    signs = np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(axis=1)])
    signs[signs == 0] = 1
    coords = u[:, :k] * (s[:k] * signs[:k])
    variance = s**2
    share = variance[:k] / variance.sum() if variance.sum() > 0 else np.zeros(min(k, len(s)))
    if coords.shape[1] < k:  # fewer vectors (or dimensions) than axes: pad with zeros
        coords = np.pad(coords, ((0, 0), (0, k - coords.shape[1])))
        share = np.pad(share, (0, k - len(share)))
    return coords, share


def spread_out(points: np.ndarray, k: int) -> list[int]:
    """Indices of k of the points (n, 2), far from each other: farthest-point sampling from the one
    farthest from the centre, in input order. All of them when there are at most k."""
    if len(points) <= k:
        return list(range(len(points)))
    if k < 1:
        return []
    scale = np.ptp(points, axis=0)
    p = (points - points.mean(axis=0)) / np.where(scale > 0, scale, 1)  # both axes count alike
    chosen = [int(np.argmax((p**2).sum(axis=1)))]
    nearest = ((p - p[chosen[0]]) ** 2).sum(axis=1)  # (n,) squared distance to the nearest chosen point
    for _ in range(k - 1):
        chosen.append(int(np.argmax(nearest)))
        nearest = np.minimum(nearest, ((p - p[chosen[-1]]) ** 2).sum(axis=1))
    return sorted(chosen)


def pca_scatter(
    vectors: np.ndarray,
    labels: Sequence[str] | None = None,
    *,
    title: str | None = None,
    max_labels: int = 30,
    save: str | os.PathLike | None = None,
    figsize=None,
    dpi: int | None = None,
):
    """Word or sentence vectors (n, dim) as points on their first two principal axes.

    With many points, only `max_labels` of the labels are drawn (0: none), on points spread over
    the plot (`spread_out`), so the picture stays readable with hundreds of texts.
    """
    vectors = np.asarray(vectors)
    labels = [] if labels is None else [str(label) for label in labels]
    if labels and len(labels) != len(vectors):
        raise ValueError(f"got {len(vectors)} vectors but {len(labels)} labels")
    coords, share = pca(vectors)
    fig = _figure("pca", figsize, dpi)
    ax = fig.add_subplot()
    ax.scatter(coords[:, 0], coords[:, 1], color="tab:blue", s=max(4.0, min(36.0, 3600 / len(coords))))
    shown = spread_out(coords, max_labels) if labels else []
    for i in shown:
        label = labels[i]
        ax.annotate(
            label if len(label) <= 40 else label[:39] + "…",
            tuple(coords[i]),
            xytext=(4, 4),
            textcoords="offset points",
            fontsize=9,
        )
    ax.set_xlabel(f"PC1 ({share[0]:.0%} of the variance)")
    ax.set_ylabel(f"PC2 ({share[1]:.0%} of the variance)")
    some = f", {len(shown)} labelled" if labels and len(shown) < len(labels) else ""
    ax.set_title(title or f"{len(vectors)} vectors of {vectors.shape[1]} dimensions, PCA{some}")
    ax.margins(0.15)
    if save is not None:
        save_png(fig, save)
    return fig
