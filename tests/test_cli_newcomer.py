"""What a newcomer met on a fresh clone (issue 33), held: the output formats say what they are, binary output into
a pipe or a text file is said on stderr, the extras install from the checkout, a mistyped option or a command's
other name gets a suggestion and the subcommand's help, the packaged model is named by its model card, and
`numbert.encode(text)` is what `numbert encode TEXT` prints."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import numbert

ROOT = Path(__file__).resolve().parent.parent
COMMAND = Path(sys.executable).parent / "numbert"
TEXT = "Here is the sentence I want embeddings for."


def run(*args, stdout=subprocess.PIPE, model: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    if model is not None:
        env["NUMBERT_MODEL"] = str(model)
    return subprocess.run(
        [str(COMMAND), *map(str, args)], stdout=stdout, stderr=subprocess.PIPE, env=env, timeout=300, text=False
    )


# --- the formats say what they are ----------------------------------------------------------------------------


def test_jsonl_is_one_json_vector_a_line_and_features_are_extract_features(tmp_path, minilm_dir, model):
    texts = [TEXT, "a second line", ""]
    out = tmp_path / "vectors.jsonl"
    result = run("encode", *texts, "-o", out, model=minilm_dir)
    assert result.returncode == 0 and result.stderr == b"", result.stderr.decode()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and all(isinstance(row, list) and len(row) == 384 for row in rows)
    np.testing.assert_allclose(np.array(rows, np.float32), model.embed(texts), atol=1e-6, rtol=0)
    features = tmp_path / "features.jsonl"
    result = run("encode", "hi", "--format", "features", "-o", features, model=minilm_dir)
    assert result.returncode == 0, result.stderr.decode()
    record = json.loads(features.read_text())
    assert set(record) == {"linex_index", "features"} and record["features"][0]["token"] == "[CLS]"


def test_json_vector_reads_back_as_the_same_float32_bits():
    from numbert.cli.encode import json_vector

    vector = np.random.default_rng(0).standard_normal(384).astype(np.float32) * np.float32(1e-3)
    line = json_vector(vector)
    assert line.endswith("]\n") and "\n" not in line[:-1]
    assert np.array_equal(np.array(json.loads(line), np.float32), vector)


@pytest.mark.parametrize(
    "args, said",
    [
        ([], "to a pipe"),  # `numbert encode TEXT | ...`
        (["--format", "npy"], None),  # asked for: nothing to say
        (["--format", "text"], None),
    ],
)
def test_binary_into_a_pipe_is_said_on_stderr(minilm_dir, args, said):
    result = run("encode", TEXT, *args, model=minilm_dir)
    assert result.returncode == 0, result.stderr.decode()
    if said is None:
        assert result.stderr == b""
        return
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and said in lines[0] and "--format text" in lines[0], lines
    assert np.load(io.BytesIO(result.stdout)).shape == (1, 384)


def test_a_redirect_writes_what_the_file_is_named(tmp_path, minilm_dir):
    """`numbert encode TEXT > vectors.txt` writes text (the redirect's name read as -o's would be), `> vectors.npy`
    .npy bytes, silently; `> vectors` (no suffix) gets .npy bytes and says so on stderr."""
    for name in ["vectors.txt", "vectors.npy", "vectors"]:
        with open(tmp_path / name, "wb") as f:
            result = run("encode", TEXT, stdout=f, model=minilm_dir)
        assert result.returncode == 0, result.stderr.decode()
        if name == "vectors.txt":
            assert np.loadtxt(tmp_path / name).shape == (384,) and result.stderr == b""
            assert b"-0.000000" not in (tmp_path / name).read_bytes()
        else:
            assert np.load(tmp_path / name).shape == (1, 384)
        if name == "vectors":
            (line,) = result.stderr.decode().splitlines()
            assert f"to stdout ({tmp_path / name})" in line and "--format text" in line, line
        else:
            assert result.stderr == b""


def test_no_option_is_taken_by_a_prefix_of_another():
    """`numbert serve --prot 8000` was --protect-health 8000; a prefix is now an unknown option, answered with the
    closest one."""
    result = run("serve", "--prot", "8000")
    assert result.returncode == 2
    assert "unrecognized option --prot: did you mean --port?" in result.stderr.decode()


def test_an_error_names_numbert_model_when_the_model_came_from_it(tmp_path):
    result = run("encode", "hi", model=tmp_path / "nope")
    (line,) = result.stderr.decode().splitlines()
    assert result.returncode == 1 and "came from NUMBERT_MODEL" in line, line
    result = run("encode", "hi", "--model", str(tmp_path / "nope"))
    assert "NUMBERT_MODEL" not in result.stderr.decode()


def test_fixed_never_writes_minus_zero():
    from numbert.cli.common import fixed

    assert fixed(-1e-9) == "0.000000" and fixed(-0.0) == "0.000000" and fixed(-0.5) == "-0.500000"
    assert fixed(-4e-5, 4) == "0.0000" and fixed(-6e-5, 4) == "-0.0001" and fixed(0.25) == "0.250000"


# --- numbert.encode(text) is `numbert encode TEXT` ----------------------------------------------------------


def test_numbert_encode_gives_what_the_command_prints(tmp_path, minilm_dir):
    vector = numbert.encode(TEXT, model=minilm_dir)
    assert vector.shape == (384,) and vector.dtype == np.float32
    printed = run("encode", TEXT, "--format", "text", model=minilm_dir)
    assert printed.returncode == 0, printed.stderr.decode()
    values = np.array(printed.stdout.split(), np.float64)
    assert values.shape == (384,) and np.abs(values - vector).max() <= 5e-7 + 1e-6  # 6 decimals, then the last bits
    result = run("encode", TEXT, "-o", tmp_path / "v.npy", model=minilm_dir)
    assert result.returncode == 0, result.stderr.decode()
    np.testing.assert_allclose(np.load(tmp_path / "v.npy")[0], vector, atol=1e-6, rtol=0)


# --- typos and other names ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ["encode", "--fromat", "text", "hello"],
            "numbert encode: error: unrecognized option --fromat: did you mean --format? (see numbert encode --help)",
        ),
        (
            ["encode", "--fromat=text", "hello"],
            "numbert encode: error: unrecognized option --fromat: did you mean --format? (see numbert encode --help)",
        ),
        (
            ["plot", "attention", "x", "--layer", "0", "--haed", "1", "-o", "x.png"],
            "numbert plot attention: error: unrecognized option --haed: did you mean --head? "
            "(see numbert plot attention --help)",
        ),
        (
            ["similarity", "a", "b", "c"],
            "numbert similarity: error: unrecognized arguments: c (see numbert similarity --help)",
        ),
    ],
)
def test_a_mistyped_option_gets_the_closest_one_and_the_subcommands_help(capsys, args, said):
    from numbert.cli import main

    with pytest.raises(SystemExit) as exit:
        main(args)
    assert exit.value.code == 2
    assert capsys.readouterr().err.splitlines() == [said]


@pytest.mark.parametrize("word", ["embed", "embeddings", "vectors"])
def test_the_other_names_of_encode_point_at_it(capsys, word):
    from numbert.cli import main

    with pytest.raises(SystemExit):
        main([word, "hello"])
    (error,) = capsys.readouterr().err.splitlines()
    assert f"invalid choice: {word!r}; did you mean 'encode'?" in error and error.endswith("(see numbert --help)")


# --- the extras install from the checkout ------------------------------------------------------------------

PUBLISHED_EXTRA = re.compile(r"""pip install (-e )?['"]?numbert\[""")  # works only once numbert is on an index


def test_no_doc_or_message_installs_an_extra_from_an_index():
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "numbert").rglob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PUBLISHED_EXTRA.search(line)
    ]
    assert not found, found


# --- the packaged model has its name -----------------------------------------------------------------------


def test_a_model_is_named_by_its_directory_its_card_or_its_hub_id(tmp_path, minilm_dir):
    from numbert.checkpoint.hub import model_name

    assert minilm_dir.name == "model" and model_name(minilm_dir) == "all-MiniLM-L6-v2"  # its README's title
    assert model_name("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    (tmp_path / "my-bert").mkdir()
    assert model_name(tmp_path / "my-bert") == "my-bert"
    carded = tmp_path / "exported" / "model"
    carded.mkdir(parents=True)
    assert model_name(carded) == "model"  # no card: the directory's name all the same
    (carded / "README.md").write_text("---\nlicense: mit\nmodel_name: e5-tiny\n---\n# A model card\n")
    assert model_name(carded) == "e5-tiny"
    (carded / "README.md").write_text("# SentenceTransformer based on bert-base-uncased\n")
    assert model_name(carded) == "model"  # a title that is a sentence names no model
    snapshot = tmp_path / "hub" / "models--org--name" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    assert model_name(snapshot) == "org/name"
    (tmp_path / "uncased_L-12_H-768_A-12.tar.gz").write_bytes(b"")
    assert model_name(tmp_path / "uncased_L-12_H-768_A-12.tar.gz") == "uncased_L-12_H-768_A-12"
    (tmp_path / "my-bert" / "bert_model.ckpt.index").write_bytes(b"")
    assert model_name(tmp_path / "my-bert" / "bert_model.ckpt") == "my-bert"  # never a path


def test_the_server_serves_the_packaged_model_by_its_name(minilm_dir):
    from numbert.cli import build_parser
    from numbert.cli.serve import served_models

    args = build_parser().parse_args(["serve", "--model", str(minilm_dir)])
    assert served_models(args) == {"all-MiniLM-L6-v2": str(minilm_dir)}
