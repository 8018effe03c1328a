#!/usr/bin/env python
"""Short inputs, the server's typical rows: where does a call of 1-32 texts of 5-30 tokens spend its time?

    python scripts/profile_short.py                      # MiniLM, 2 threads, batches of 1, 4, 8, 32
    python scripts/profile_short.py --threads 1 --calls 200

Texts are the first 3-25 words of real English sentences (the stdlib docstrings of scripts/bench), 5-30
tokens with [CLS] and [SEP]. For each batch size, in one process, numbert's interleaved call by call:

- numbert `model.embed(texts)`: the whole call (checks, tokenizing, planning, forward, pooling, normalize);
- numbert `model.forward(ids)` on the same texts' ids, padded: the encoder alone;
- the GEMM bound: the forward's matrix products alone (np.matmul on the model's own weights, packed tokens);
- sentence-transformers `encode(texts)` with the same threads, if installed, timed after numbert's (torch's
  idle threads spin for a while after each call and would slow the next system's call).

Then a cProfile of `embed` at batch 1 and 8: each numbert function's own time (less the numbert functions it
calls; NumPy's work counts in the function asking for it), so per-call overhead (temporaries, reshapes, mask
building) shows by name. Medians of --calls calls; the machine's CPU and BLAS kernel are printed first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]


def short_texts(tokenizer, count: int) -> list[str]:
    """`count` texts of 5-30 tokens ([CLS] and [SEP] included): the first words of stdlib sentences."""
    import random

    from bench.corpus import stdlib_sentences

    rng = random.Random(0)
    texts = []
    for sentence in stdlib_sentences():
        words = sentence.split()
        text = " ".join(words[: rng.randrange(3, 26)])
        if 5 <= len(tokenizer.encode(text).ids) <= 30:
            texts.append(text)
            if len(texts) == count:
                return texts
    raise RuntimeError(f"only {len(texts)} short texts found")


def gemm_bound(model, batch):
    """A function running the forward's matrix products alone on `batch`'s packed tokens (the dense layers)
    and its attention products per sequence, on the model's own weights."""
    import numpy as np

    c = model.config
    tokens = sum(len(e.ids) for e in batch)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((tokens, c.hidden_size), dtype=np.float32)
    up = rng.standard_normal((tokens, c.intermediate_size), dtype=np.float32)
    w = model.encoder.weights  # the checkpoint's tensors by BertModel name
    heads, d = c.num_attention_heads, c.hidden_size // c.num_attention_heads
    per_row = [rng.standard_normal((heads, len(e.ids), d), dtype=np.float32) for e in batch]

    def run():
        for layer in range(c.num_hidden_layers):
            p = f"encoder.layer.{layer}."
            for name in (
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
            ):
                np.matmul(x, w[p + name + ".weight"].T)
            np.matmul(x, w[p + "intermediate.dense.weight"].T)
            np.matmul(up, w[p + "output.dense.weight"].T)
            for q in per_row:
                np.matmul(np.matmul(q, q.transpose(0, 2, 1)), q)  # scores, then context

    return run


def median_ms(times: list[float]) -> float:
    return 1e3 * statistics.median(times)


def profile(model, texts: list[str], calls: int) -> list[tuple[str, float]]:
    """embed(texts) under cProfile: (numbert function, share of the call's time), largest first."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    for _ in range(calls):
        model.embed(texts, progress=False)
    profiler.disable()
    total = time.perf_counter() - start
    package = str(Path(sys.modules["numbert"].__file__).parent)
    ours = lambda key: key[0].startswith(package)
    name = lambda key: f"{Path(key[0]).relative_to(package).with_suffix('')}.{key[2]}".replace("/", ".")
    own: dict[str, float] = {}
    for key, (_, _, _, cumulative, callers) in pstats.Stats(profiler).stats.items():
        if ours(key):
            own[name(key)] = own.get(name(key), 0.0) + cumulative
            for caller, (_, _, _, via_caller) in callers.items():
                if ours(caller):
                    own[name(caller)] = own.get(name(caller), 0.0) - via_caller
    return sorted(((n, t / total) for n, t in own.items()), key=lambda kv: -kv[1])


def measure(model, st, batches: list[list[str]], calls: int) -> tuple[dict[str, float], float]:
    """Median ms per call of each system on `batches` (taken in turn, the systems interleaved call by call),
    and the mean tokens per text."""
    import numpy as np  # (after main has set the BLAS threads)

    encodings = [[model.tokenizer.encode(t) for t in b] for b in batches]
    padded = [model.tokenizer.pad(e) for e in encodings]
    bounds = [gemm_bound(model, e) for e in encodings]
    systems = {
        "embed": lambda k: model.embed(batches[k], progress=False),
        "forward": lambda k: model.forward(padded[k].input_ids, padded[k].token_type_ids, padded[k].attention_mask),
        "GEMM bound": lambda k: bounds[k](),
    }
    if st is not None:
        systems["sentence-transformers"] = lambda k: st.encode(batches[k], convert_to_numpy=True)
    times: dict[str, list[float]] = {name: [] for name in systems}
    # numbert's three interleaved call by call; sentence-transformers after them, on its own: torch's idle
    # threads keep spinning for a while after a call, which would slow whatever ran next
    for group in ([n for n in systems if n != "sentence-transformers"], ["sentence-transformers"]):
        for name in group:
            if name in systems:
                systems[name](0)  # warm-up
        for call in range(calls):
            for name in group:
                if name in systems:
                    start = time.perf_counter()
                    systems[name](call % len(batches))
                    times[name].append(time.perf_counter() - start)
    tokens = float(np.mean([sum(len(e.ids) for e in b) / len(b) for b in encodings]))
    return {name: median_ms(t) for name, t in times.items()}, tokens


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, default=None, help="model directory (default: the packaged MiniLM)")
    p.add_argument("--threads", type=int, default=2, help="BLAS and torch threads (default: 2)")
    p.add_argument("--calls", type=int, default=100, help="timed calls per batch size and system (default: 100)")
    p.add_argument("--batches", default="1,4,8,32", help="batch sizes (default: 1,4,8,32)")
    p.add_argument("--no-st", action="store_true", help="leave sentence-transformers out")
    args = p.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)

    from bench.harness import blas_info, cpu_name, markdown

    import numbert
    from numbert.testing import packaged_minilm

    directory = args.model or packaged_minilm()
    model = numbert.load(directory)
    st = None
    if not args.no_st:
        try:
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(args.threads)
            st = SentenceTransformer(str(directory), device="cpu")
        except ImportError:
            pass
    blas = blas_info()
    print(f"CPU: {cpu_name()}; BLAS: {blas['library']} core {blas['core']}, {blas['threads']} threads; {directory}")
    sizes = [int(b) for b in args.batches.split(",")]
    texts = short_texts(model.tokenizer, max(sizes) * 8)
    rows = []
    for size in sizes:
        batches = [texts[i : i + size] for i in range(0, len(texts), size)][:8]
        ms, tokens = measure(model, st, batches, args.calls)
        row = [size, f"{tokens:.1f}", *(f"{t:.2f}" for t in ms.values()), f"{ms['embed'] - ms['forward']:.2f}"]
        if st is not None:
            row.append(f"{ms['sentence-transformers'] / ms['embed']:.2f}x")
        rows.append(row)
    systems = ["embed", "forward", "GEMM bound"] + ([] if st is None else ["sentence-transformers"])
    head = ["texts", "tokens/text", *(f"{n} ms" for n in systems), "embed - forward ms"]
    if st is not None:
        head.append("numbert speed vs s-t")
    print(markdown(head, rows))
    for size in (1, 8):
        shares = profile(model, texts[:size], args.calls)
        print(f"\nembed of {size} text(s): each numbert function's own share of the call (top 15)")
        print(markdown(["function", "share %"], [[n, f"{100 * s:.1f}"] for n, s in shares[:15]]))


if __name__ == "__main__":
    main()
