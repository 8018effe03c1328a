#!/usr/bin/env python
"""A corpus, every system at its best recipe: numbert's default corpus path and one-process `embed` against
sentence-transformers and ONNX Runtime fp32, in interleaved rounds of fresh processes.

    python scripts/bench_corpus.py                        # MiniLM (packaged), 2,000 sentences, 3 rounds
    python scripts/bench_corpus.py --rounds 5 --size 1000 --systems "numbert 1x2,onnxruntime"

The systems and their processes are scripts/bench_workers.py's (the same child, the same corpus of real
sentences from the stdlib's docstrings, mean of the last layer, batches of 32, every process on 2 threads):

- numbert 1x2 as its command: the default corpus path of numbert's own processes (`numbert encode`: OpenBLAS's
  thread timeout, row threads, and two planned batches side by side on one BLAS thread each);
- numbert 1x2: `Bert.embed` in a user's process that asked for nothing (two planned batches side by side, one
  BLAS thread each, by default);
- numbert 1x2 threads(2): the same after `numbert.threads(2)` (batches side by side: the same path);
- numbert 1x2 one batch at a time (not a default system): the path before the fast path was the default, 2 BLAS
  threads on one batch after the other;
- sentence-transformers `encode` (it sorts by length itself), ONNX Runtime fp32 on length-sorted batches of
  transformers' export (needs onnxruntime), and optionally transformers on length-sorted batches;
- fastembed and fastembed int8: fastembed's `TextEmbedding.embed` on the same export (and its int8 dynamic
  quantization) loaded as a custom model, in a venv of its own made on first use under the bench cache
  (scripts/bench/peer_fastembed.py: its recipe, and why it has its own venv); skipped, with the reason printed,
  where that venv cannot be made.

Every system's vectors are checked against the first system's (numbert's in the default order): the smallest
cosine over the corpus is in the table (fp32 systems ~1.0; int8 lower, the price of its speed).

Each round runs every system once, in a fresh process, in an order rotated from round to round; a process embeds
the corpus --repeats times after a warm-up and its fastest pass counts. Reported: the CPU, NumPy's BLAS kernel,
each system's median sentences/s and its min-max over the rounds, and the median of the per-round ratios to ONNX
Runtime and to sentence-transformers (paired within a round). Never a pass/fail.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import bench_workers  # noqa: E402
from bench.harness import blas_info, cpu_name, markdown  # noqa: E402

DEFAULT_SYSTEMS = (
    "numbert 1x2 as its command",
    "numbert 1x2",
    "numbert 1x2 threads(2)",
    "sentence-transformers",
    "onnxruntime",
    "fastembed",
    "fastembed int8",
)


def package_versions(names: tuple[str, ...]) -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in names:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="minilm", help="minilm (the packaged all-MiniLM-L6-v2) or bert-base")
    p.add_argument("--size", type=int, default=2000, help="sentences (default: 2,000)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=2, help="timed passes per process, the fastest counts")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    info = blas_info()
    print(f"CPU: {cpu_name()}; NumPy {info['numpy']}, {info['library']} core {info['core']}")
    print(f"versions here: {package_versions(('onnxruntime', 'torch', 'sentence-transformers', 'transformers'))}")
    print(f"load average before: {os.getloadavg()}", flush=True)
    rates: dict[str, list[float]] = {s: [] for s in systems}
    cosines: dict[str, list[float]] = {s: [] for s in systems}
    notes: dict[str, str] = {}
    others: dict[str, list[float]] = {s: [] for s in systems}
    with tempfile.TemporaryDirectory(prefix="numbert-corpus-") as tmp:
        args.reference = str(Path(tmp) / "reference.npy")
        for r in range(args.rounds):
            order = systems[r % len(systems) :] + systems[: r % len(systems)]
            print(f"round {r + 1}: {', '.join(order)}", file=sys.stderr, flush=True)
            for system in order:
                result = bench_workers.run_system(system, args)
                if result is None:
                    rates[system].append(float("nan"))
                    continue
                rates[system].append(result["sentences"] / min(result["seconds"]))
                others[system] += [c for c in result["others"] if c is not None]
                cosines[system].append(result["min_cosine"])
                if "versions" in result:
                    versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items())
                    notes[system] = f"{system}: {versions}; {result['recipe']}"
                print(f"  {system}: {rates[system][-1]:.1f}/s", file=sys.stderr, flush=True)
    rows = []
    for system in systems:
        got = [x for x in rates[system] if x == x]
        if not got:
            continue
        row = [system, f"{statistics.median(got):.1f}", f"{min(got):.1f}-{max(got):.1f}"]
        for peer in ("onnxruntime", "sentence-transformers"):
            pairs = [a / b for a, b in zip(rates[system], rates.get(peer, [])) if a == a and b == b]
            row.append(f"{statistics.median(pairs):.2f}x ({min(pairs):.2f}-{max(pairs):.2f})" if pairs else "-")
        row.append(f"{max(others[system]):.2f}" if others[system] else "?")
        row.append(f"{min(cosines[system]):.6f}")
        rows.append(row)
    print()
    print(
        f"{args.model}, {args.size} sentences, {args.rounds} interleaved rounds, fastest of {args.repeats} passes per"
    )
    print(f"process; load average after: {os.getloadavg()}")
    head = ["system", "sentences/s (median)", "min-max", "vs ONNX Runtime (per round)", "vs s-t (per round)"]
    print(markdown([*head, "others' cores (max)", "min cosine vs the first system"], rows))
    for note in notes.values():
        print(f"- {note}")


if __name__ == "__main__":
    main()
