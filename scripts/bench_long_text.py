"""A 100,000-token text through `numbert encode --long window` (issue #43, item 8): peak RSS and wall time of the
command, in a fresh process, on a ModernBERT-base-shaped model (22 layers, hidden 768, random weights; the
fixture's byte-level BPE tokenizer), 8,192-token windows sharing --stride tokens, mean pooling of the last layer.

    HF_HUB_OFFLINE=1 python scripts/bench_long_text.py                       # this checkout
    python scripts/bench_long_text.py --root /tmp/before --layers 6          # another checkout's numbert

Prints the CPU, the text's token count, the command's peak RSS (the child's ru_maxrss) and its time.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_long import cpu_name, save_model  # noqa: E402


def long_text(tokenizer_dir: Path, tokens: int) -> str:
    """Words of the fixture's vocabulary, as many as make `tokens` tokens with [CLS] and [SEP]."""
    import numbert.tokenizer

    tokenizer = numbert.tokenizer.Tokenizer.from_pretrained(tokenizer_dir)
    words = "the bank of the river was steep and the bank that holds money was closed on sunday".split()
    text = " ".join(words[i % len(words)] for i in range(tokens))
    while len(tokenizer.encode(text, truncation=False).ids) > tokens:
        text = text[: int(len(text) * 0.99)].rsplit(" ", 1)[0]
    count = lambda k: len(tokenizer.encode(text + " the" * k, truncation=False).ids)
    low, high = 0, 1  # the most " the"s that keep it within `tokens`: low fits, high does not
    while count(high) <= tokens:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if count(middle) <= tokens else (low, middle)
    return text + " the" * low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose numbert runs")
    parser.add_argument("--layers", type=int, default=22)
    parser.add_argument("--tokens", type=int, default=100_001)
    parser.add_argument("--stride", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores), load {os.getloadavg()[0]:.1f}; numbert from {args.root}")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "modernbert"
        save_model(directory, args.layers)
        shutil.copy(ROOT / "tests/fixtures/modernbert_bpe.json", directory / "tokenizer.json")
        text = long_text(directory, args.tokens)
        (Path(tmp) / "text.txt").write_text(text + "\n")
        env = dict(os.environ, PYTHONPATH=str(args.root), OPENBLAS_NUM_THREADS=str(args.threads))
        command = [sys.executable, "-m", "numbert", "encode", "--model", str(directory), "--long", "window"]
        command += ["--stride", str(args.stride), "--pooling", "mean", "--layers", "-1", "--file", "text.txt"]
        command += ["-o", "out.npy"]
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=tmp, env=env)
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(f"{args.tokens:,} tokens, {args.layers} layers: peak RSS {peak / 2**20:,.0f} MiB, {seconds:.1f} s")


if __name__ == "__main__":
    main()
