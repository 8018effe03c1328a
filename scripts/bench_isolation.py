#!/usr/bin/env python
"""How long does a one-sentence request wait behind another client's long one? `numbert serve`'s turns.

    HF_HUB_OFFLINE=1 python scripts/bench_isolation.py                 # 6 layers, 3 texts of 8,192 tokens, 2 rounds
    python scripts/bench_isolation.py --layers 3 --long-texts 1 --rounds 1 --source /path/to/other/numbert

A ModernBERT-base-shaped model (hidden 768, 12 heads, intermediate 1,152, window 128, as scripts/bench_long.py; random
weights, saved by transformers, with the small byte-level BPE of tests/fixtures/modernbert_bpe.json, so 8,192 tokens
are a few thousand words) is served on 127.0.0.1 (one model, two threads: its two lanes). Each round:

- alone: the short request (/v1/embeddings, one sentence) sent 5 times on its own, the median kept;
- behind a long one: a client sends --long-texts texts of 8,192 tokens (one request, cut by --auto-truncate), and
  --delay seconds later (1 s: its texts tokenized, its forwards running) another client sends the short request;
  the short one's wait and the long one's are printed.

The short answers are compared with `model.embed` (max |diff|, to be within 1e-6). Prints the CPU, the load and the
BLAS kernels (threadpoolctl). The machine may be shared: the load is printed at the start and the end. Bounded: every
request times out after --timeout seconds, the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "tests" / "fixtures" / "modernbert_bpe.json"
SIZES = dict(hidden_size=768, num_attention_heads=12, intermediate_size=1152, local_attention=128)
SHORT = "A man is eating food."
WORDS = "the quick brown fox jumps over a lazy dog while people read long reports about distant places".split()


def cpu_name() -> str:
    done = subprocess.run(["lscpu"], capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("Model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def blas_kernels() -> str:
    code = "import json, numpy, threadpoolctl; print(json.dumps(threadpoolctl.threadpool_info()))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode:
        return "unknown (threadpoolctl missing)"
    return ", ".join(
        f"{i['internal_api']} {i.get('version')} {i.get('architecture')}, {i['num_threads']} threads"
        for i in json.loads(done.stdout)
    )


def save_model(directory: Path, layers: int) -> None:
    """A random ModernBERT of base sizes whose vocabulary is the fixture tokenizer's, with that tokenizer."""
    import torch
    import transformers
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    ids = {name: tokenizer.token_to_id(token) for name, token in (("cls", "[CLS]"), ("sep", "[SEP]"), ("pad", "[PAD]"))}
    config = transformers.ModernBertConfig(
        num_hidden_layers=layers,
        vocab_size=tokenizer.get_vocab_size(),
        pad_token_id=ids["pad"],
        cls_token_id=ids["cls"],
        sep_token_id=ids["sep"],
        bos_token_id=ids["cls"],
        eos_token_id=ids["sep"],
        **SIZES,
    )
    torch.manual_seed(0)
    transformers.ModernBertModel(config).save_pretrained(directory)
    (directory / "tokenizer.json").write_text(TOKENIZER.read_text(encoding="utf-8"), encoding="utf-8")


class Server:
    """`numbert serve` of `source`'s numbert on 127.0.0.1, a free port."""

    def __init__(self, model: Path, source: Path, timeout: float):
        env = dict(os.environ, PYTHONPATH=str(source), HF_HUB_OFFLINE="1")
        command = [sys.executable, "-m", "numbert", "serve", "--model", str(model), "--port", "0", "--auto-truncate"]
        self.proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=source)  # -m: cwd first
        self.port = None
        deadline = time.monotonic() + timeout
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if m := re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line):
                self.port = int(m.group(1))
            if "ready" in line and "numbert serve" in line or time.monotonic() > deadline:
                break
        if self.port is None:
            self.stop()
            sys.exit("bench_isolation.py: the server did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr or ()], daemon=True).start()  # drain its log

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def embed(port: int, texts: list[str], timeout: float) -> tuple[float, list[list[float]]]:
    """Seconds until /v1/embeddings answered `texts`, and the vectors."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    body = json.dumps({"model": "m", "input": texts})
    start = time.perf_counter()
    connection.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    seconds = time.perf_counter() - start
    connection.close()
    if response.status != 200:
        sys.exit(f"bench_isolation.py: {response.status} {data[:200]!r}")
    return seconds, [item["embedding"] for item in json.loads(data)["data"]]


def long_texts(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, 2900)) for _ in range(n)]  # about 8,300 tokens: cut to 8,192


def round_behind(port: int, texts: list[str], delay: float, timeout: float) -> tuple[float, float, list[float]]:
    """(the short request's seconds, the long one's, the short vector): the short sent `delay` s after the long."""
    long_result: list = []
    client = threading.Thread(target=lambda: long_result.append(embed(port, texts, timeout)))
    client.start()
    time.sleep(delay)
    short_seconds, short_vectors = embed(port, [SHORT], timeout)
    client.join(timeout)
    if not long_result:
        sys.exit("bench_isolation.py: the long request did not finish")
    return short_seconds, long_result[0][0], short_vectors[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--long-texts", type=int, default=3, help="texts of 8,192 tokens in the long request")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds between the long request and the short")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a request may take")
    parser.add_argument("--source", type=Path, default=ROOT, help="the numbert checkout to serve (default: this one)")
    args = parser.parse_args()
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores), load {os.getloadavg()[0]:.1f}")
    print(f"BLAS: {blas_kernels()}")
    print(f"numbert: {args.source}; ModernBERT-base sizes, {args.layers} layers, random weights")
    sys.path.insert(0, str(args.source))
    import numbert

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "modernbert"
        save_model(directory, args.layers)
        expected = numbert.load(directory).embed([SHORT])[0]
        server = Server(directory, args.source, args.timeout)
        try:
            alone, behind, longs, diffs = [], [], [], []
            texts = long_texts(args.long_texts)
            for round_ in range(args.rounds):
                times = [embed(server.port, [SHORT], args.timeout)[0] for _ in range(5)]
                alone.append(statistics.median(times))
                short_seconds, long_seconds, vector = round_behind(server.port, texts, args.delay, args.timeout)
                behind.append(short_seconds)
                longs.append(long_seconds)
                diffs.append(float(np.abs(np.asarray(vector, np.float32) - expected).max()))
                print(
                    f"  round {round_ + 1}: short alone {alone[-1] * 1000:.1f} ms; {args.delay} s after "
                    f"{args.long_texts} x 8,192 tokens: short {short_seconds:.2f} s (long {long_seconds:.1f} s), "
                    f"max |diff| {diffs[-1]:.1e}",
                    flush=True,
                )
        finally:
            server.stop()
    print(f"load at the end: {os.getloadavg()[0]:.1f}")
    print(
        f"short request alone {statistics.median(alone) * 1000:.1f} ms; sent {args.delay} s after "
        f"{args.long_texts} x 8,192 tokens: {statistics.median(behind):.2f} s (worst {max(behind):.2f} s), "
        f"the long request {statistics.median(longs):.1f} s; short answer vs embed: max |diff| {max(diffs):.1e}"
    )


if __name__ == "__main__":
    main()
