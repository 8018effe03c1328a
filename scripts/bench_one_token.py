#!/usr/bin/env python
"""The forward against its GEMM bound, the last layer for the first tokens (one_token="first"), and a fused QKV product.

    python scripts/bench_one_token.py                    # bert-base (random, seed 0) and MiniLM at 8x128
    python scripts/bench_one_token.py --rounds 15 --shape 32x128

In one process, interleaved rounds (a pause before each call so idle BLAS threads sleep): the whole forward, the
forward with one_token="first" (the last layer's query, attention output, feed-forward and norms for each row's [CLS]
alone), and each one's GEMM bound: its matrix products alone, np.matmul into preallocated outputs on numbert's own
weights, in the forward's order. Then the Q, K and V products of one layer as three products against one product
with the three weights side by side (a fused (hidden, 3 hidden) weight), the question being whether fusing pays.
Medians of the rounds; the share of the bound is bound / forward. The BLAS threads are the process's (set
OPENBLAS_NUM_THREADS before starting); the CPU and BLAS kernel are printed. Never a pass/fail.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from bench.harness import blas_info, cpu_name, markdown  # noqa: E402

import numbert  # noqa: E402


def products(model, batch: int, seq: int, first: bool) -> list:
    """The forward's matrix products as (a, b, out) triples: numbert's weights, random activations."""
    c = model.config
    rng = np.random.default_rng(0)
    rand = lambda *shape: rng.standard_normal(shape, dtype=np.float32)
    heads, tokens, d = c.num_attention_heads, batch * seq, c.hidden_size // c.num_attention_heads
    calls = []

    def product(a, b):
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        calls.append((a, b, np.empty(shape, np.float32)))

    x, up = rand(tokens, c.hidden_size), rand(tokens, c.intermediate_size)
    names = model.encoder.layers
    for i, layer in enumerate(names):
        last = first and i == len(names) - 1
        rows = batch if last else tokens  # the last layer's query side: one row per sequence
        product(x[:rows], layer.query.weight.T)
        product(x, layer.key.weight.T)
        product(x, layer.value.weight.T)
        product(rand(batch * heads, seq if not last else 1, d), rand(batch * heads, d, seq))  # scores
        product(rand(batch * heads, seq if not last else 1, seq), rand(batch * heads, seq, d))  # context
        product(x[:rows], layer.attention_output.weight.T)
        product(x[:rows], layer.up.weight.T)
        product(up[:rows], layer.down.weight.T)
    if model.encoder.pooler is not None:
        product(x[:batch], model.encoder.pooler.weight.T)
    return calls


def bound(calls: list) -> float:
    start = time.perf_counter()
    for a, b, out in calls:
        np.matmul(a, b, out=out)
    return time.perf_counter() - start


def timed(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def measure(model, name: str, batch: int, seq: int, rounds: int, gap: float) -> list[list[str]]:
    rng = np.random.default_rng(1)
    ids = rng.integers(1000, min(20000, model.config.vocab_size), (batch, seq))
    whole = model.forward(ids).hidden_states[-1][:, 0]
    first = model.forward(ids, one_token="first").hidden_states[-1][:, 0]
    difference = float(np.abs(whole - first).max())
    calls = {False: products(model, batch, seq, False), True: products(model, batch, seq, True)}
    layer = model.encoder.layers[0]
    x = rng.standard_normal((batch * seq, model.config.hidden_size), dtype=np.float32)
    fused_w = np.concatenate([layer.query.weight, layer.key.weight, layer.value.weight]).T.copy()
    three = [w.weight.T for w in (layer.query, layer.key, layer.value)]
    outs = [np.empty((len(x), w.shape[1]), np.float32) for w in three]
    fused_out = np.empty((len(x), fused_w.shape[1]), np.float32)
    runs: dict[str, list[float]] = {k: [] for k in ("forward", "first", "bound", "bound first", "qkv", "fused")}
    for _ in range(rounds):
        for key, f in (
            ("forward", lambda: model.forward(ids)),
            ("first", lambda: model.forward(ids, one_token="first")),
            ("bound", lambda: bound(calls[False])),
            ("bound first", lambda: bound(calls[True])),
            ("qkv", lambda: [np.matmul(x, w, out=o) for w, o in zip(three, outs)]),
            ("fused", lambda: np.matmul(x, fused_w, out=fused_out)),
        ):
            time.sleep(gap)
            runs[key].append(timed(f))
    med = {k: 1e3 * statistics.median(v) for k, v in runs.items()}
    spread = {k: f"{1e3 * min(v):.1f}-{1e3 * max(v):.1f}" for k, v in runs.items()}
    return [
        [name, f"{batch}x{seq}", "whole forward", f"{med['forward']:.1f} ({spread['forward']})", f"{med['bound']:.1f}",
         f"{100 * med['bound'] / med['forward']:.0f} %", ""],
        [name, f"{batch}x{seq}", "first", f"{med['first']:.1f} ({spread['first']})",
         f"{med['bound first']:.1f}", f"{100 * med['bound first'] / med['first']:.0f} %",
         f"{med['first'] / med['forward']:.2f}x the time; [CLS] within {difference:.1e}"],
        [name, f"{batch}x{seq}", "Q, K, V: 3 products / 1 fused", f"{med['qkv']:.2f} / {med['fused']:.2f}", "", "",
         f"fused {med['fused'] / med['qkv']:.2f}x the time"],
    ]  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--shape", default="8x128")
    p.add_argument("--gap", type=float, default=0.05, help="seconds of pause before each call")
    args = p.parse_args()
    batch, seq = map(int, args.shape.split("x"))
    info = blas_info()
    print(f"CPU: {cpu_name()}; NumPy {info['numpy']}, {info['library']} core {info['core']}")
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}; load average {os.getloadavg()}", flush=True)
    from bench.systems import bert_base_vocab, ensure_checkpoint

    from numbert.testing import packaged_minilm

    rows = []
    base = ensure_checkpoint(Path.home() / ".cache" / "numbert-bench" / "bert-base-random", bert_base_vocab())
    for name, directory in (("bert-base", base), ("MiniLM-L6", packaged_minilm())):
        rows += measure(numbert.load(directory), name, batch, seq, args.rounds, args.gap)
    print(f"medians of {args.rounds} interleaved rounds, ms (min-max); load average after {os.getloadavg()}")
    print(markdown(["model", "shape", "what", "ms", "GEMM bound ms", "share of bound", ""], rows))


if __name__ == "__main__":
    main()
