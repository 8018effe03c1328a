"""`numbert encode` with --workers, --shard-lines and --scheduler: the same bits as one process, jobs that resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from numbert.engines.shards import read_shards


def command(*args) -> list[str]:
    return [sys.executable, "-m", "numbert", "encode", *map(str, args)]


# Every command here runs one BLAS thread in its own process, as each worker does: a BLAS kernel may sum in
# another order on two threads than on one (OpenBLAS's Haswell kernels do), which is not what these tests are about.
ENV = dict(os.environ, HF_HUB_OFFLINE="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def run(*args) -> subprocess.CompletedProcess:
    env = ENV
    return subprocess.run(command(*args), capture_output=True, env=env, timeout=300)


def ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr.decode()


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """600 lines of different lengths, a few empty."""
    rng = np.random.default_rng(4)
    words = "the bank river money vault café naïve 東京 data vector model sentence".split()
    lines = [
        " ".join([f"line{i}", *rng.choice(words, int(rng.choice([0, 2, 5, 12])))]) if i % 53 else "" for i in range(600)
    ]
    path = tmp_path_factory.mktemp("input") / "in.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def single(tmp_path_factory, source, minilm_dir) -> np.ndarray:
    out = tmp_path_factory.mktemp("single") / "vectors.npy"
    ok(run("--file", source, "--model", minilm_dir, "-o", out))
    return np.load(out)


def test_workers_write_the_single_process_vectors_bit_for_bit(tmp_path, source, minilm_dir, single):
    ok(run("--file", source, "--model", minilm_dir, "-o", tmp_path / "workers.npy", "--workers", "2"))
    assert np.array_equal(np.load(tmp_path / "workers.npy"), single)


def test_a_sharded_job_killed_mid_run_resumes_to_the_uninterrupted_result(tmp_path, source, minilm_dir):
    ok(run("--file", source, "--model", minilm_dir, "-o", f"{tmp_path}/whole/", "--shard-lines", 100))
    env = ENV
    job = subprocess.Popen(
        command(
            "--file", source, "--model", minilm_dir, "-o", f"{tmp_path}/job/", "--shard-lines", 100, "--workers", 2
        ),
        env=env,
        start_new_session=True,
        stderr=subprocess.DEVNULL,
    )
    manifest, deadline = tmp_path / "job" / "manifest.json", time.monotonic() + 240
    # The manifest is written when the job starts; its 600 lines are one chunk of 2048, whose shards are all
    # written within milliseconds of each other once it is embedded: kill it while that chunk is embedded.
    while not manifest.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(job.pid, signal.SIGKILL)  # the command and its workers
    job.wait()
    assert not json.loads(manifest.read_text())["complete"]
    ok(run("--file", source, "--model", minilm_dir, "-o", f"{tmp_path}/job/", "--shard-lines", 100))  # 1 process now
    assert np.array_equal(read_shards(tmp_path / "job"), read_shards(tmp_path / "whole"))
    assert [p.name for p in sorted((tmp_path / "job").glob("part-*.npy"))] == [f"part-{i:05d}.npy" for i in range(6)]

    changed = run(
        "--file", source, "--model", minilm_dir, "-o", f"{tmp_path}/job/", "--shard-lines", 100, "--pooling", "cls"
    )
    assert changed.returncode == 1
    assert "was written by another job: its job is options=" in changed.stderr.decode()
    assert "pooling" in changed.stderr.decode() and len(changed.stderr.decode().strip().splitlines()) == 1


def test_a_dask_cluster_writes_the_single_process_vectors(tmp_path, source, minilm_dir, single):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        ok(
            run(
                "--file",
                source,
                "--model",
                minilm_dir,
                "-o",
                tmp_path / "dask.npy",
                "--scheduler",
                cluster.scheduler_address,
            )
        )
    assert np.array_equal(np.load(tmp_path / "dask.npy"), single)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--workers", "2", "--format", "features"],
            "--workers computes sentence vectors (npy, npz, text, jsonl), not --format features",
        ),
        (
            ["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"],
            "--workers and --scheduler are two ways to run the job: choose one",
        ),
        *(
            (
                ["--shard-lines", "10", *out],
                "--shard-lines writes a directory of .npy shards and a manifest: give it as -o DIR/ (with a "
                "trailing /, or an existing directory)",
            )
            for out in ([], ["-o", "out.npy"], ["-o", "vectors"])
        ),
        (
            ["--shard-lines", "10", "-o", "out/", "--format", "npz"],
            "--shard-lines writes .npy shards, not --format npz",
        ),
    ],
)
def test_usage_errors_are_one_line(args, message, source, minilm_dir, tmp_path):
    result = run("--file", source, "--model", minilm_dir, *args)
    assert result.returncode == 1
    assert result.stderr.decode().strip().splitlines() == [f"numbert encode: error: {message}"]


def test_a_large_file_runs_in_worker_processes_by_default(tmp_path, capsys):
    """`numbert encode --file` picks one worker process per core for a file of AUTO_WORKERS_LINES lines or more,
    and says so on stderr; anything smaller, stdin, --format features or an explicit --workers runs as asked."""
    from numbert.cli import build_parser
    from numbert.cli.encode import AUTO_WORKERS_LINES, check_encode_options, workers_for

    big, small = tmp_path / "big.txt", tmp_path / "small.txt"
    big.write_text("a line\n" * (AUTO_WORKERS_LINES - 1) + "the last line has no line ending")
    small.write_text("a line\n" * (AUTO_WORKERS_LINES - 2) + "the last line")

    def choice(*args: str) -> int | None:
        parsed = build_parser().parse_args(["encode", *args, "-o", str(tmp_path / "v.npy")])
        check_encode_options(parsed)
        return workers_for(parsed)

    cores = len(os.sched_getaffinity(0))
    assert choice("--file", str(big)) == (min(cores, 8) if cores > 1 else None)
    assert ("worker processes of one BLAS thread" in capsys.readouterr().err) == (cores > 1)
    assert choice("--file", str(big), "--workers", "0") == 0
    assert choice("--file", str(small)) is None and choice("--file", "-") is None
    assert capsys.readouterr().err == ""
