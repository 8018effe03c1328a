"""The installed `numbert` command, run in a subprocess on the local all-MiniLM-L6-v2 directory."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

COMMAND = Path(sys.executable).parent / "numbert"


def run(*args, stdin: bytes | None = None, model: Path | None = None) -> subprocess.CompletedProcess:
    assert COMMAND.exists(), f"{COMMAND} is missing: install numbert first (pip install -e . --no-deps)"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    if model is not None:
        env["NUMBERT_MODEL"] = str(model)
    return subprocess.run([str(COMMAND), *map(str, args)], input=stdin, capture_output=True, env=env, timeout=300)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The run failed with exactly one line on stderr; return it."""
    assert result.returncode != 0
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, result.stderr.decode()
    return lines[0]


@pytest.fixture(scope="module")
def lines() -> list[str]:
    """1,000 input lines of very different lengths (so length sorting really reorders), some empty or unicode."""
    rng = np.random.default_rng(0)
    words = "the bank river money vault robber fishing café naïve 東京 data vector model sentence".split()
    out = []
    for i in range(1000):
        n = int(rng.choice([0, 1, 3, 8, 20, 60]))
        out.append(" ".join([f"line{i}", *rng.choice(words, n)]) if i % 97 else "")
    return out


def test_1000_lines_give_1000_vectors_in_order(tmp_path, minilm_dir, model, lines):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "vectors.npy"
    result = run("encode", "--file", source, "--model", minilm_dir, "-o", out)
    assert result.returncode == 0, result.stderr.decode()
    vectors = np.load(out)
    assert vectors.shape == (1000, 384) and vectors.dtype == np.float32
    for i in [0, 1, 2, 97, 194, 500, 998, 999, *range(3, 1000, 83)]:  # each line alone, unbatched
        want = model.embed(lines[i])
        assert np.dot(vectors[i], want) / np.linalg.norm(want) / np.linalg.norm(vectors[i]) > 0.99999, i
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "vectors.npy"]  # no temporary file left


def test_stdin_arguments_npz_and_options(tmp_path, minilm_dir, model):
    texts = ["first line", "", "the third, longer line of the input", "ünïcödé"]
    npz = tmp_path / "v.npz"
    result = run("encode", "--format", "npz", "-o", npz, stdin="\n".join(texts).encode(), model=minilm_dir)
    assert result.returncode == 0, result.stderr.decode()
    from_stdin = np.load(npz)["vectors"]
    np.testing.assert_allclose(from_stdin, model.embed(texts), atol=1e-5)
    result = run(
        "encode",
        *texts,
        "--model",
        minilm_dir,
        "--layers",
        "-1,-2",
        "--combine",
        "concat",
        "--pooling",
        "max",
        "--no-normalize",
    )
    assert result.returncode == 0, result.stderr.decode()
    vectors = np.load(io.BytesIO(result.stdout))
    want = model.embed(texts, layers=[-1, -2], combine="concat", pooling="max", normalize=False)
    assert vectors.shape == (4, 768)
    np.testing.assert_allclose(vectors, want, atol=1e-5)


def test_features_are_the_extract_features_layout(minilm_dir, model):
    texts = ["Hello, world!", "", "Who was Jim Henson ? ||| Jim Henson was a puppeteer"]
    result = run("encode", "--format", "features", "--model", minilm_dir, stdin="\n".join(texts).encode())
    assert result.returncode == 0, result.stderr.decode()
    records = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2]
    outputs = [model("Hello, world!"), model(""), model("Who was Jim Henson ?", "Jim Henson was a puppeteer")]
    for record, out in zip(records, outputs):
        assert set(record) == {"linex_index", "features"}
        assert [f["token"] for f in record["features"]] == out.tokens
        for t, feature in enumerate(record["features"]):
            assert set(feature) == {"token", "layers"}
            assert [layer["index"] for layer in feature["layers"]] == [-1, -2, -3, -4]
            for layer in feature["layers"]:
                values = np.array(layer["values"])
                assert values.shape == (384,)
                np.testing.assert_allclose(values, out.hidden_states[layer["index"]][t], atol=2e-5)
                assert all(round(v, 6) == v for v in layer["values"][:20])
    assert records[2]["features"][6]["token"] == "[SEP]"  # the pair: [CLS] who was jim henson ? [SEP] jim ...
    one_layer = run("encode", "--format", "features", "--layers", "0", "--model", minilm_dir, "hi")
    assert [layer["index"] for layer in json.loads(one_layer.stdout)["features"][0]["layers"]] == [0]
    long = " ".join(["word"] * 300)  # over all-MiniLM-L6-v2's 256 tokens: windows give every token a vector
    windowed = run(
        "encode", "--format", "features", "--long", "window", "--stride", "32", "--model", minilm_dir, long, "short"
    )
    assert [len(json.loads(line)["features"]) for line in windowed.stdout.splitlines()] == [302, 3]


def test_a_bad_line_fails_cleanly_and_leaves_out_alone(tmp_path, minilm_dir):
    source = tmp_path / "in.txt"
    source.write_bytes(b"fine\n" * 300 + b"caf\xe9 in latin-1\nnever reached\n")  # features: after a first chunk
    for fmt, suffix in (("npy", "npy"), ("features", "jsonl")):
        out = tmp_path / f"out.{suffix}"
        out.write_bytes(b"previous results")
        result = run("encode", "--file", source, "--format", fmt, "--model", minilm_dir, "-o", out)
        assert "line 301 is not valid UTF-8" in one_error_line(result)
        assert out.read_bytes() == b"previous results"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.jsonl", "out.npy"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["encode", "--file", "/no/such/file.txt"], "cannot read /no/such/file.txt"),
        (["encode", "x", "--model", "/no/such/model"], "is not a model directory"),
        (["encode", "x", "--model", "no-such-org/no-such-model"], "cannot load model 'no-such-org/no-such-model'"),
        (["encode", "x", "--pooling", "avg"], "argument --pooling: invalid choice: 'avg'"),
        (["encode", "x", "--batch-size", "0"], "argument --batch-size: expected a positive integer"),
        (["encode", "x", "--layers", "-1,-9", "-o", "{tmp}/out.npy"], "layer -9 does not exist"),
        (
            ["encode", "x", "--max-length", "9999", "-o", "{tmp}/out.npy"],
            "max_length must be an integer between 3 and 512",
        ),
        (["encode", "x", "--format", "features", "--strategy", "last"], "--strategy applies to sentence vectors"),
        (["encode", "x", "-o", "/no/such/dir/out.npy"], "cannot write /no/such/dir/out.npy"),
        (["neighbors", "embeddings"], "'embeddings' is not one vocabulary entry"),
        (["neighbors", "bank", "-k", "-3"], "argument -k: expected a positive integer"),
        (["similarity", "only one text"], "the following arguments are required: TEXT_B"),
    ],
)
def test_errors_are_one_clear_line(tmp_path, minilm_dir, args, message):
    assert message in one_error_line(run(*[a.replace("{tmp}", str(tmp_path)) for a in args], model=minilm_dir))
    assert list(tmp_path.iterdir()) == []


def test_tokenize_neighbors_similarity(minilm_dir, model):
    table = run("tokenize", "Here is the sentence I want embeddings for.", model=minilm_dir)
    assert table.returncode == 0
    rows = [line.split() for line in table.stdout.decode().splitlines()]
    assert rows[0] == ["[CLS]", "101"] and rows[7] == ["em", "7861"] and rows[-1] == ["[SEP]", "102"]
    machine = json.loads(run("tokenize", "hello, world", "--json", model=minilm_dir).stdout)
    assert machine["tokens"] == ["[CLS]", "hello", ",", "world", "[SEP]"] and machine["ids"][3] == 2088
    assert machine["offsets"][3] == [7, 12] and machine["word_ids"] == [None, 0, 1, 2, None]
    near = json.loads(run("neighbors", "bank", "-k", "3", "--json", model=minilm_dir).stdout)
    assert [n["token"] for n in near] == [n.token for n in model.nearest_tokens("bank", k=3)]
    text = run("neighbors", "bank", "-k", "3", model=minilm_dir).stdout.decode().split()
    assert text[0] == near[0]["token"] and float(text[1]) == pytest.approx(near[0]["similarity"], abs=1e-4)
    similarity = run("similarity", "A man is eating food.", "A man is eating a meal.", model=minilm_dir)
    assert float(similarity.stdout) == pytest.approx(
        model.similarity("A man is eating food.", "A man is eating a meal."), abs=1e-5
    )


@pytest.mark.parametrize(
    "args, meant",
    [(["encdoe"], "encode"), (["plot", "histgram"], "histogram"), (["encode", "x", "--pooling", "maen"], "mean")],
)
def test_a_mistyped_choice_is_answered_with_the_closest_one(capsys, args, meant):
    from numbert.cli import main

    with pytest.raises(SystemExit) as exit:
        main(args)
    error = capsys.readouterr().err
    assert exit.value.code == 2 and len(error.splitlines()) == 1
    assert f"invalid choice: {args[-1]!r}; did you mean {meant!r}? (choose from " in error, error


@pytest.mark.parametrize("command", [[], ["tokenize"], ["encode"], ["neighbors"], ["similarity"]])
def test_help_on_every_command(command):
    result = run(*command, "--help")
    assert result.returncode == 0 and result.stdout.decode().startswith("usage: numbert")


def test_text_format_from_the_suffix_and_npy_into_a_pipe(tmp_path, minilm_dir, model):
    texts = ["Here is the sentence I want embeddings for.", "a second line"]
    out = tmp_path / "vectors.txt"
    result = run("encode", *texts, "--model", minilm_dir, "-o", out)
    assert result.returncode == 0, result.stderr.decode()
    rows = np.loadtxt(out, dtype=np.float32)
    assert rows.shape == (2, 384)
    np.testing.assert_allclose(rows, model.embed(texts), atol=1e-6)
    piped = run("encode", *texts, "--model", minilm_dir)  # stdout is a pipe here: .npy bytes
    np.testing.assert_allclose(np.load(io.BytesIO(piped.stdout)), model.embed(texts), atol=1e-6)


# --- the package: `python -m numbert`, and the CLI on top of the library ---------------------------------


def python(code_or_module: list[str]) -> subprocess.CompletedProcess:
    """A fresh interpreter, so sys.modules shows what an import really pulls in."""
    return subprocess.run(
        [sys.executable, *code_or_module],
        capture_output=True,
        text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
        timeout=120,
    )


def test_python_m_numbert(minilm_dir):
    result = python(["-m", "numbert", "--help"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: numbert")
    assert all(command in result.stdout for command in ("tokenize", "encode", "neighbors", "similarity", "plot"))
    result = python(["-m", "numbert", "tokenize", "hello, world", "--json", "--model", str(minilm_dir)])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tokens"] == ["[CLS]", "hello", ",", "world", "[SEP]"]
    result = python(["-m", "numbert", "tokenize", "--no-such-option"])
    assert result.returncode == 2
    assert "tokenize: error: unrecognized option --no-such-option (see numbert tokenize --help)" in result.stderr


def test_plot_does_not_import_the_cli():
    result = python(["-c", "import sys, numbert.plot; assert 'numbert.cli' not in sys.modules, 'imported numbert.cli'"])
    assert result.returncode == 0, result.stderr


def test_no_library_module_imports_the_cli():
    """Import every module of numbert except the CLI, one at a time: none of them brings numbert.cli in."""
    code = """if True:
        import importlib, pathlib, sys
        import numbert
        root = pathlib.Path(numbert.__file__).parent
        names = sorted(".".join(("numbert", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
                       for p in root.rglob("*.py"))
        library = [n for n in names if not n.startswith(("numbert.cli", "numbert.__main__"))]
        assert "numbert.plot" in library and "numbert.model.encoder" in library, library
        for name in library:
            importlib.import_module(name)
            assert "numbert.cli" not in sys.modules, f"importing {name} imports numbert.cli"
        print(len(library))
    """
    result = python(["-c", code])
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) >= 10
