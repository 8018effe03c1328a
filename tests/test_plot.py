"""numbert.plot: each figure rendered headless to PNG and checked as an image; the `numbert plot` commands."""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from numbert import plot
from numbert.cli import plot as plot_commands
from numbert.testing import BANK as SENTENCE

pytest.importorskip("matplotlib")  # the [plot] extra; scripts/test installs it, and CI fails on a skip

TEXTS = ["A man is eating food.", "A man is eating a meal.", "The stock market fell.", "Shares dropped sharply."]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", MPLBACKEND="Agg")


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, after checking the signature."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def assert_picture(path: Path, width: int, height: int) -> None:
    """A valid PNG of exactly width x height pixels that is not blank."""
    assert png_size(path) == (width, height)
    from matplotlib.image import imread

    pixels = imread(path)
    assert pixels.shape[:2] == (height, width)
    colours = np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)
    assert len(colours) > 10 and pixels.std() > 0.01
    not_white = (pixels[..., :3] < 0.9).any(axis=-1).mean()
    assert not_white > 0.01, f"only {not_white:.2%} of the pixels are drawn"


@pytest.fixture(scope="module")
def output(model):
    return model(SENTENCE, output_attentions=True)


def test_histogram(output, tmp_path):
    fig = plot.histogram(output, layer=3, token="bank", save=tmp_path / "h.png")
    assert_picture(tmp_path / "h.png", 640, 400)
    ax = fig.axes[0]
    assert "token 6 'bank'" in ax.get_title() and "384 values" in ax.get_title()
    heights = [p.get_height() for p in ax.patches]
    assert len(heights) == 50 and sum(heights) == 384  # every value of hidden_states[3][6] is counted
    plot.histogram(output, layer=-1, token=-1, bins=10, save=tmp_path / "h2.png", dpi=50)
    assert_picture(tmp_path / "h2.png", 320, 200)


def test_attention_map(output, tmp_path):
    fig = plot.attention_map(output, layer=2, head=5, save=tmp_path / "a.png")
    assert_picture(tmp_path / "a.png", 640, 640)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == output.tokens
    assert [t.get_text() for t in ax.get_yticklabels()] == output.tokens
    np.testing.assert_array_equal(ax.images[0].get_array(), output.attentions[2, 5])
    assert ax.get_title() == "layer 2, head 5"


def test_pca_scatter(model, tmp_path):
    vectors = model.embed(TEXTS, progress=False)
    fig = plot.pca_scatter(vectors, TEXTS, save=tmp_path / "p.png")
    assert_picture(tmp_path / "p.png", 640, 480)
    assert [t.get_text() for t in fig.axes[0].texts] == TEXTS
    words = model.word_vectors(SENTENCE)
    plot.pca_scatter(
        np.stack([w.vector for w in words]), [w.text for w in words], save=tmp_path / "w.png", figsize=(8, 6)
    )
    assert_picture(tmp_path / "w.png", 800, 600)


def test_pca_scatter_stays_readable_with_hundreds_of_points(tmp_path):
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((400, 16)).astype(np.float32)
    labels = [f"text number {i}" for i in range(400)]
    fig = plot.pca_scatter(vectors, labels, save=tmp_path / "many.png")
    texts = fig.axes[0].texts
    assert len(texts) == 30 and "30 labelled" in fig.axes[0].get_title()
    coords, _ = plot.pca(vectors)
    shown = np.array([coords[labels.index(t.get_text())] for t in texts])
    gaps = np.linalg.norm(shown[:, None] - shown[None], axis=-1) + np.eye(30) * 1e9
    assert gaps.min() > 0.1 * np.ptp(coords[:, 0])  # spread out, not piled on each other
    assert len(plot.pca_scatter(vectors, labels, max_labels=0).axes[0].texts) == 0
    assert len(plot.pca_scatter(vectors).axes[0].texts) == 0  # labels are optional
    assert len(plot.pca_scatter(vectors[:12], labels[:12]).axes[0].texts) == 12  # few points: every label


def test_pca_is_the_svd_of_the_centred_vectors():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((30, 5)) @ np.diag([5.0, 3.0, 1.0, 0.5, 0.1]) + 7.0
    coords, share = plot.pca(x)
    centred = x - x.mean(axis=0)
    eigenvalues, eigenvectors = np.linalg.eigh(np.cov(centred.T, bias=True))
    top = eigenvectors[:, ::-1][:, :2]  # the two largest
    np.testing.assert_allclose(np.abs(coords), np.abs(centred @ top), atol=1e-10)
    np.testing.assert_allclose(share, eigenvalues[::-1][:2] / eigenvalues.sum())
    np.testing.assert_allclose(np.cov(coords.T, bias=True), np.diag(eigenvalues[::-1][:2]), atol=1e-10)
    flipped, _ = plot.pca(-x)  # each axis's sign is fixed by its largest loading, not by chance
    np.testing.assert_allclose(flipped, -coords, atol=1e-10)
    two, share2 = plot.pca(x[:2])  # two points: one axis, the second is zero
    assert two.shape == (2, 2) and share2[1] == pytest.approx(0)


def test_bad_arguments(model, output, tmp_path):
    with pytest.raises(ValueError, match="output_attentions=True"):
        plot.attention_map(model("no attentions here"), 0, 0)
    with pytest.raises(ValueError, match="layer 6 does not exist: attentions has layers 0 .. 5"):
        plot.attention_map(output, 6, 0)
    with pytest.raises(ValueError, match="head 12 does not exist"):
        plot.attention_map(output, 0, 12)
    with pytest.raises(ValueError, match="layer 7 does not exist: hidden_states has layers 0 .. 6"):
        plot.histogram(output, 7, 0)
    with pytest.raises(ValueError, match="token 'river bank' is not in the input"):
        plot.histogram(output, 0, "river bank")
    with pytest.raises(ValueError, match="this output holds a batch: pass row="):
        plot.histogram(model(TEXTS), 0, 0)
    batch = model(TEXTS, output_attentions=True)
    plot.attention_map(batch, 0, 0, row=2, save=tmp_path / "row.png")
    assert_picture(tmp_path / "row.png", 640, 640)
    with pytest.raises(ValueError, match="got 2 vectors but 1 labels"):
        plot.pca_scatter(np.ones((2, 3)), ["one"])


def test_missing_matplotlib_is_one_line(monkeypatch, output):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError) as e:
        plot.histogram(output, 0, 0)
    assert str(e.value) == plot.INSTALL_HINT
    assert "pip install matplotlib" in plot.INSTALL_HINT and "checkout" in plot.INSTALL_HINT


def test_the_core_never_imports_matplotlib():
    code = (
        "import sys, numbert, numbert.plot, numbert.cli; assert 'matplotlib' not in sys.modules, 'imported matplotlib'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120)
    assert result.returncode == 0, result.stderr


# --- the commands (numbert.cli.plot), through add_commands and a parser of our own ------------------------


def parse(*argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="numbert")
    plot_commands.add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args([str(a) for a in argv])


def test_plot_handlers(minilm_dir, tmp_path, capsys):
    out = tmp_path / "hist.png"
    args = parse("plot", "histogram", SENTENCE, "--layer", "-1", "--token", "bank", "-o", out, "--model", minilm_dir)
    args.run(args)
    assert capsys.readouterr().out == f"wrote {out} (640 x 400 PNG)\n"
    assert_picture(out, 640, 400)

    args = parse(
        "plot", "attention", SENTENCE, "--layer", "5", "--head", "11", "-o", tmp_path / "att.png", "--model", minilm_dir
    )
    args.run(args)
    assert_picture(tmp_path / "att.png", 640, 640)

    listing = tmp_path / "texts.txt"
    listing.write_text("\n".join(TEXTS[2:]) + "\n\n", encoding="utf-8")
    args = parse("plot", "pca", *TEXTS[:2], "--file", listing, "-o", tmp_path / "pca.png", "--model", minilm_dir)
    args.run(args)
    assert_picture(tmp_path / "pca.png", 640, 480)

    args = parse("plot", "pca", "--words", SENTENCE, "-o", tmp_path / "words.png", "--model", minilm_dir)
    args.run(args)
    assert_picture(tmp_path / "words.png", 640, 480)
    assert args.plot == "pca" and args.words


def test_plot_handler_without_matplotlib_fails_before_loading(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    args = parse("plot", "histogram", "text", "-o", tmp_path / "x.png", "--model", tmp_path / "no-such-model")
    with pytest.raises(SystemExit) as e:
        args.run(args)
    assert str(e.value) == f"numbert plot: error: {plot.INSTALL_HINT}"
    assert not (tmp_path / "x.png").exists()


# --- the command's main: numbert.cli.main(['plot', ...]) -----------------------------------------------


def cli(*argv, prelude: str = "") -> subprocess.CompletedProcess:
    code = f"import sys; {prelude}from numbert.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True, env=ENV, timeout=300
    )


def test_cli_plot_commands(minilm_dir, tmp_path):
    result = cli("plot", "--help")
    assert result.returncode == 0 and all(k in result.stdout for k in ("histogram", "attention", "pca")), (
        result.stderr or result.stdout
    )
    for kind, args, size in [
        ("histogram", [SENTENCE, "--layer", "2", "--token", "7"], (640, 400)),
        ("attention", [SENTENCE, "--layer", "0", "--head", "3"], (640, 640)),
        ("pca", TEXTS, (640, 480)),
    ]:
        out = tmp_path / f"{kind}.png"
        result = cli("plot", kind, *args, "-o", out, "--model", minilm_dir)
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"wrote {out} ({size[0]} x {size[1]} PNG)\n"
        assert_picture(out, *size)


def test_cli_plot_errors_are_one_line(minilm_dir, tmp_path):
    result = cli(
        "plot",
        "histogram",
        "text",
        "-o",
        tmp_path / "x.png",
        "--model",
        minilm_dir,
        prelude="sys.modules['matplotlib'] = None; ",
    )
    assert result.returncode == 1
    assert result.stderr == f"numbert plot: error: {plot.INSTALL_HINT}\n"
    result = cli("plot", "attention", "text", "--layer", "9", "-o", tmp_path / "x.png", "--model", minilm_dir)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "numbert plot: error: layer 9 does not exist: attentions has layers 0 .. 5"
    ]
    assert not (tmp_path / "x.png").exists()
