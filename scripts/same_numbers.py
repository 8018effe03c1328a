#!/usr/bin/env python
"""Are the numbers the same? Two checkouts of numbert compared bit for bit at equal BLAS threads.

    python scripts/same_numbers.py 9c66394              # A: that revision (a temporary git worktree), B: this tree
    python scripts/same_numbers.py 9c66394 --size 500

In a fresh process per checkout (PYTHONPATH the checkout's, the same OMP/OPENBLAS/MKL_NUM_THREADS):
- corpus: `model.embed(corpus)` of --size real English sentences (scripts/bench), all-MiniLM-L6-v2 (packaged);
- bert-base: every hidden state of a random-weight bert-base (transformers' BertConfig defaults, seed 0) on a
  padded batch of four texts;
- served: `numbert serve` answering /v1/embeddings (float and base64), /embed, /embed_all, /similarity,
  and /tokenize; the answers' bodies compared as bytes, then as parsed values.
Prints one line per comparison: identical bytes, or the largest difference. Never a pass/fail exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench.corpus import build_corpus  # scripts/bench
from bench.harness import blas_info, cpu_name
from bench_ab import ROOT, checkout, environment
from bench_serve import Server, exchange

ROUTES = [
    ("/v1/embeddings", {"input": ["A sentence.", "Another, longer sentence here."], "model": "m"}),
    ("/v1/embeddings", {"input": ["A sentence."], "model": "m", "encoding_format": "base64"}),
    ("/embed", {"inputs": ["A sentence.", "Another one."]}),
    ("/embed_all", {"inputs": "A sentence."}),
    ("/similarity", {"inputs": {"source_sentence": "a cat", "sentences": ["a dog", "a car"]}}),
    ("/tokenize", {"inputs": "Hello world"}),
    ("/api/embed", {"model": "m", "input": ["A sentence.", "Two."]}),
]


def offline(tree: Path, corpus: list[str], threads: int, out: Path) -> None:
    code = Path(__file__).with_name("same_numbers_child.py")
    subprocess.run(
        [sys.executable, str(code), str(out)],
        input=json.dumps(corpus),
        text=True,
        env=environment(tree, threads),
        cwd=tree,
        check=True,
    )


def request(path: str, body: dict) -> bytes:
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
    return head.encode() + b"\r\n\r\n" + data


async def ask(port: int) -> list[bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers = [await exchange(reader, writer, request(path, body)) for path, body in ROUTES]
    writer.close()
    return answers


def served(tree: Path, model: str, threads: int) -> list[bytes]:
    server = Server(model, environment(tree, threads), ["--answer-any-model-name"])
    try:
        return asyncio.run(ask(server.port))
    finally:
        server.stop()


def compare_arrays(a: np.lib.npyio.NpzFile, b: np.lib.npyio.NpzFile) -> None:
    for key in sorted(set(a.files) | set(b.files)):
        if key not in a.files or key not in b.files:
            print(f"{key}: only in {'A' if key in a.files else 'B'}")
        elif a[key].shape != b[key].shape:
            print(f"{key}: shapes differ {a[key].shape} vs {b[key].shape}")
        elif a[key].tobytes() == b[key].tobytes():
            print(f"{key}: identical bits {a[key].shape} {a[key].dtype}")
        else:
            print(f"{key}: differ, max |A - B| = {float(np.max(np.abs(a[key] - b[key]))):.3g}")


def timeless(answer):
    """An answer without its timings (Ollama's *_duration fields)."""
    if isinstance(answer, dict):
        return {k: v for k, v in answer.items() if not k.endswith("duration")}
    return answer


def compare_answers(a: list[bytes], b: list[bytes]) -> None:
    for (path, body), x, y in zip(ROUTES, a, b, strict=True):
        name = f"{path} {json.dumps(body)[:40]}"
        if x == y:
            print(f"{name}: identical bytes")
        elif timeless(json.loads(x)) == timeless(json.loads(y)):
            print(f"{name}: identical values (timings aside)")
        else:
            print(f"{name}: DIFFER\n  A {x[:160]!r}\n  B {y[:160]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("revision")
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import numbert
    from numbert.testing import packaged_minilm

    model = str(packaged_minilm())
    corpus, _ = build_corpus(numbert.load(model).tokenizer, args.size)
    blas = blas_info()
    print(f"CPU: {cpu_name()}; BLAS: {blas.get('library')} core {blas.get('core')}, {args.threads} threads")
    with checkout(args.revision) as a, tempfile.TemporaryDirectory() as tmp:
        trees = {"A": a, "B": ROOT}
        for name, tree in trees.items():
            offline(tree, corpus, args.threads, Path(tmp) / f"{name}.npz")
        compare_arrays(np.load(Path(tmp) / "A.npz"), np.load(Path(tmp) / "B.npz"))
        compare_answers(served(a, model, args.threads), served(ROOT, model, args.threads))
    print(f"A: {args.revision}; B: this tree ({ROOT})")


if __name__ == "__main__":
    main()
