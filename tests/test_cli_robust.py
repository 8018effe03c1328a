"""The `numbert` command under stress: broken checkpoints, signals, bad bytes, and the habits users bring."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_checkpoint_errors import Call, real_bin, rewritten, tensor, write_bin
from test_cli import COMMAND, one_error_line, run

from numbert.model.config import BertConfig

SMALL = BertConfig(
    vocab_size=30522,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=16,
)


def watchdog(process: subprocess.Popen, seconds: float = 120) -> threading.Timer:
    """Kill `process` after `seconds`, so a test blocked reading its output fails instead of hanging."""
    timer = threading.Timer(seconds, process.kill)
    timer.daemon = True
    timer.start()
    return timer


# --- a checkpoint that does not load: one line naming the file ---------------------------------------


def broken_model(directory, minilm_dir, damage):
    """A model directory with MiniLM's vocabulary and a small pytorch_model.bin damaged by `damage(path)`."""
    path, _ = real_bin(directory)
    shutil.copyfile(minilm_dir / "vocab.txt", directory / "vocab.txt")
    damage(path)
    return directory, path


def truncate_pickle(path):
    rewritten(path, lambda data: data[: len(data) // 2])


def flip_a_pickle_byte(path):
    raw = bytearray(path.read_bytes())
    raw[raw.index(b"OrderedDict")] ^= 0x20
    path.write_bytes(bytes(raw))


def refused_global(path):
    write_bin(path, {"w": Call("os", "system", "echo hello")}, {})


def bad_storage_argument(path):
    write_bin(path, {"embeddings.word_embeddings.weight": tensor("0", (2, 3), numel="six")}, {"0": bytes(24)})


@pytest.mark.parametrize(
    "damage, words",
    [
        (refused_global, "refusing to unpickle global 'os.system'"),
        (truncate_pickle, "truncated or corrupt"),
        (flip_a_pickle_byte, "Bad CRC-32"),
        (bad_storage_argument, "unsupported storage reference"),
    ],
)
def test_a_checkpoint_that_fails_to_load_is_one_line_naming_the_file(tmp_path, minilm_dir, damage, words):
    directory, path = broken_model(tmp_path / "model", minilm_dir, damage)
    for command in (["encode", "hello"], ["similarity", "a", "b"], ["neighbors", "bank"]):
        line = one_error_line(run(*command, "--model", directory))
        assert line.startswith(f"numbert {command[0]}: error: {path}") and words in line, line


# --- signals: no hidden temporary file left behind ------------------------------------------------------


def holds_a_file_in(pid: int, directory) -> bool:
    """Whether process `pid` has a file of `directory` open, named or not (an unnamed one reads '#123 (deleted)')."""
    targets = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):  # closed meanwhile
            targets.append(os.readlink(fd))
    return any(target.startswith(f"{directory}/") for target in targets)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_a_signal_leaves_no_temporary_output(tmp_path, minilm_dir, signum):
    """Caught signals remove the temporary file; SIGKILL cannot be caught, and finds a file without a name."""
    out = tmp_path / "vectors.npy"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    process = subprocess.Popen(
        [str(COMMAND), "encode", "--file", "-", "--model", str(minilm_dir), "-o", str(out)],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        process.stdin.write(b"a first line\n")
        process.stdin.flush()
        deadline = time.monotonic() + 120
        while not holds_a_file_in(process.pid, tmp_path):  # the model is loaded, OUT's temporary file is open
            assert time.monotonic() < deadline and process.poll() is None, process.stderr.read()
            time.sleep(0.05)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert list(tmp_path.iterdir()) == []
    if signum == signal.SIGKILL:
        assert process.returncode == -signum
    else:
        assert process.returncode == 128 + signum
        said = "interrupted" if signum == signal.SIGINT else "terminated"
        assert stderr.decode().strip() == f"numbert encode: {said}"


# --- invalid UTF-8 on the command line ------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["encode", "fine", b"caf\xe9"], ["tokenize", b"caf\xe9"], ["similarity", "fine", b"caf\xe9"]]
)
def test_invalid_utf8_in_a_text_argument_is_an_error(minilm_dir, command):
    result = subprocess.run(
        [str(COMMAND), *command, "--model", str(minilm_dir)],
        capture_output=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
        timeout=120,
    )
    assert result.returncode == 2
    line = one_error_line(result)
    assert "not valid UTF-8 (byte 0xe9 at column 4)" in line, line


# --- tokenize reads files and stdin like encode ---------------------------------------------------------


def test_tokenize_reads_a_file_and_stdin_one_line_per_input_line(tmp_path, minilm_dir, model):
    texts = ["Here is the sentence I want embeddings for.", "", "ünïcödé 東京", "an unbelievably long sentence " * 3]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    from_file = run("tokenize", "--file", source, "--model", minilm_dir)
    from_stdin = run("tokenize", "-", "--model", minilm_dir, stdin=source.read_bytes())
    from_stdin_no_args = run("tokenize", "--model", minilm_dir, stdin=source.read_bytes())
    assert from_file.returncode == 0, from_file.stderr.decode()
    assert from_file.stdout == from_stdin.stdout == from_stdin_no_args.stdout
    rows = from_file.stdout.decode().splitlines()
    assert len(rows) == len(texts)
    for row, text in zip(rows, texts):
        tokens, ids = row.split("\t")
        enc = model.tokenizer.encode(text)
        assert tokens.split() == enc.tokens and [int(i) for i in ids.split()] == enc.ids
    as_json = run("tokenize", "--file", source, "--json", "--model", minilm_dir)
    records = [json.loads(line) for line in as_json.stdout.decode().splitlines()]
    assert [r["ids"] for r in records] == [model.tokenizer.encode(t).ids for t in texts]


def test_tokenize_prints_ids_without_thousands_separators(minilm_dir):
    table = run("tokenize", "Here is the sentence I want embeddings for.", model=minilm_dir)
    rows = [line.split() for line in table.stdout.decode().splitlines()]
    assert rows[7] == ["em", "7861"]


def test_tokenize_bad_utf8_in_a_file_is_the_same_error_as_encode(tmp_path, minilm_dir):
    source = tmp_path / "in.txt"
    source.write_bytes(b"fine\ncaf\xe9\n")
    for command in ("tokenize", "encode"):
        assert f"{source}: line 2 is not valid UTF-8 (byte 0xe9 at column 4)" in one_error_line(
            run(command, "--file", source, "--model", minilm_dir, "--format", "text")
            if command == "encode"
            else run(command, "--file", source, "--model", minilm_dir)
        )


def test_reading_stdin_on_a_terminal_says_so(minilm_dir):
    import pty

    for command in ("encode", "tokenize"):
        controller, terminal = pty.openpty()
        process = subprocess.Popen(
            [str(COMMAND), command, "--model", str(minilm_dir), "-o", os.devnull]
            if command == "encode"
            else [str(COMMAND), command, "--model", str(minilm_dir)],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ, HF_HUB_OFFLINE="1"),
        )
        os.close(terminal)
        watchdog(process)
        first = process.stderr.readline().decode()
        os.write(controller, b"\x04")  # Ctrl-D: end of input
        process.communicate(timeout=120)
        os.close(controller)
        assert "reading texts from stdin, one per line" in first and "Ctrl-D" in first, first


# --- encode's output ------------------------------------------------------------------------------------


def test_format_txt_is_an_alias_of_text(minilm_dir, model):
    result = run("encode", "hello", "world", "--format", "txt", "--model", minilm_dir)
    assert result.returncode == 0, result.stderr.decode()
    np.testing.assert_allclose(
        np.loadtxt(io.StringIO(result.stdout.decode()), dtype=np.float32), model.embed(["hello", "world"]), atol=1e-6
    )


def test_text_output_streams_batch_by_batch(minilm_dir):
    """The first line arrives while later batches are still waiting for input."""
    process = subprocess.Popen(
        [str(COMMAND), "encode", "--format", "text", "--batch-size", "2", "--model", str(minilm_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    watchdog(process)
    try:
        process.stdin.write(b"one\ntwo\n")  # one batch; the input stays open
        process.stdin.flush()
        first = process.stdout.readline()
        second = process.stdout.readline()
        assert len(first.split()) == len(second.split()) == 384
        process.stdin.write(b"three\n")
        process.stdin.close()
        assert len(process.stdout.read().splitlines()) == 1
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()


def test_npz_and_jsonl_to_a_pipe_are_unchanged(minilm_dir):
    result = run("encode", "a", "b", "--format", "npz", "--model", minilm_dir)
    with zipfile.ZipFile(io.BytesIO(result.stdout)) as z:
        assert z.namelist() == ["vectors.npy"]


def test_plot_pca_of_hundreds_of_texts_labels_a_few(tmp_path, minilm_dir):
    pytest.importorskip("matplotlib")
    source = tmp_path / "texts.txt"
    source.write_text(
        "\n".join(f"sentence number {i} about {w}" for i, w in enumerate(["cats", "stocks"] * 100)), encoding="utf-8"
    )
    out = tmp_path / "pca.png"
    result = run("plot", "pca", "--file", source, "--labels", "5", "-o", out, "--model", minilm_dir)
    assert result.returncode == 0, result.stderr.decode()
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class Bar:
    """Stands in for the CLI's tqdm bar: records each update."""

    def __init__(self):
        self.updates: list[int] = []

    def update(self, n: int) -> None:
        self.updates.append(n)


@pytest.mark.parametrize("fmt", ["npy", "text", "jsonl", "features"])
def test_the_progress_bar_moves_per_batch(model, fmt):
    from numbert.cli import build_parser
    from numbert.cli.encode import check_encode_options, write_features, write_sentence_vectors, write_text_vectors
    from numbert.cli.files import chunked

    args = build_parser().parse_args(["encode", "--format", fmt, "--batch-size", "4", "-o", os.devnull])
    check_encode_options(args)
    texts = [f"line {i} " + "word " * (i % 5) for i in range(19)]
    chunk_lines = {"npy": 2048, "text": args.batch_size, "jsonl": args.batch_size, "features": 256}[fmt]
    writer = {"npy": write_sentence_vectors, "features": write_features}.get(fmt, write_text_vectors)
    bar = Bar()
    writer(model, chunked(iter(texts), chunk_lines), io.BytesIO(), args, bar)
    assert sum(bar.updates) == 19 and len(bar.updates) == 5  # 4 + 4 + 4 + 4 + 3: one update per batch


def test_off_a_terminal_the_progress_bar_is_one_final_line(model, capfd):
    """model.embed(texts, progress=True) with stderr in a log file or a pipe: one line, drawn when the job is done
    (tqdm's redraws, each a line there, gave the final bar twice)."""
    model.embed(["a text"] * 40, progress=True, batch_size=8)
    err = capfd.readouterr().err
    assert err.count("40/40") == 1 and err.count("\r") == 0 and err.endswith("\n") and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--shard-lines", "10", "-o", "out.npy"], "--shard-lines writes a directory of .npy shards and a manifest"),
        (["-o", "vectors.csv"], "cannot tell the format of -o vectors.csv from its suffix .csv: name it .npy, .npz, "),
        (["--format", "npz", "-o", "x.npy"], "-o x.npy is named as npy output, but --format is npz: make them agree"),
        (["--format", "jsonl", "-o", "x.TXT"], "-o x.TXT is named as text output, but --format is jsonl"),
        (["--format", "features", "-o", "x.npy"], "-o x.npy is named as npy output, but --format is features"),
    ],
)
def test_an_output_name_that_contradicts_the_format_is_refused(tmp_path, monkeypatch, capsys, args, message):
    """`-o out.npy --shard-lines 10` made a directory named out.npy; `-o vectors.csv` wrote .npy bytes."""
    from numbert.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["encode", "a text", *args]) == 1
    assert capsys.readouterr().err.startswith(f"numbert encode: error: {message}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, fmt",
    [
        (["-o", "x.tsv"], "text"),
        (["-o", "x.NPZ"], "npz"),
        (["--format", "npy", "-o", "vectors.bin"], "npy"),
        (["--format", "txt", "-o", "x.txt"], "text"),
        (["-o", os.devnull], "npy"),
    ],
)
def test_the_format_follows_the_output_name_or_format(args, fmt):
    from numbert.cli import build_parser
    from numbert.cli.encode import check_encode_options

    parsed = build_parser().parse_args(["encode", "a text", *args])
    check_encode_options(parsed)
    assert parsed.format == fmt


def test_a_signal_python_swallowed_still_keeps_out_unwritten(tmp_path, monkeypatch):
    """An exception raised while a finalizer runs is swallowed by Python ("Exception ignored in"), so the
    handler's KeyboardInterrupt can be lost; the note it makes first keeps OUT from being named."""
    from numbert.cli import files

    monkeypatch.setattr(files, "SIGNALS", [signal.SIGINT])
    with pytest.raises(files.Terminated):
        with files.output_file(str(tmp_path / "vectors.npy"), "npy") as out:
            out.write(b"whole")
    assert list(tmp_path.iterdir()) == []
