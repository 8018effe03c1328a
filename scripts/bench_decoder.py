"""A Qwen3-Embedding-0.6B-shaped model (hidden 1,024, 28 layers, 16 query / 8 key-value heads of 128, intermediate
3,072; random weights, a vocabulary of 2,048) against transformers' Qwen3Model (sdpa) on the same threads: time per
text at 8 x 128 tokens, the largest difference; then, in a process of its own, the same model saved in bf16 loaded
and run on a 512-token text: peak RSS against its float32 weights (docs/performance.md).

    HF_HUB_OFFLINE=1 python scripts/bench_decoder.py [--threads 1] [--rounds 7] [--directory /tmp/qwen3-06b-shape]

Interleaved, as the machine is shared: after a warm-up of each, every round times one forward of each system, the
systems in turn (transformers last in even rounds, first in odd ones), and the figure is the median of the rounds'
paired ratios numbert / transformers (with their least and largest), beside each system's median time. Each run
starts after a pause of PAUSE seconds, so that neither system's threads still spin from the other's run (torch's
OpenMP threads spin for milliseconds after a call, and slow a NumPy product started at once by a quarter).
numbert is timed three times: its forward keeping every hidden state; keeping the last alone (`last_layers=1`), what
transformers' Qwen3Model returns; and what `embed` runs for a last-token model (Qwen3-Embedding), the last layer
for each row's last token alone (`one_token="last"`), whose vector sentence-transformers reads from Qwen3Model's.
numbert runs as its own processes do (numbert.runtime.blas.configure_own_process, before NumPy loads: OpenBLAS's
thread timeout, as many row threads as BLAS threads); transformers on torch.set_num_threads(threads).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOCAB = 2048
PAUSE = 0.2  # seconds before each timed run


def make(directory: Path) -> None:
    """The float32 and bf16 checkpoints, once."""
    import torch
    import transformers

    if (directory / "f32" / "config.json").is_file():
        return
    torch.manual_seed(0)
    config = transformers.Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=1024,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=3072,
        tie_word_embeddings=True,
    )
    model = transformers.Qwen3Model(config)
    model.save_pretrained(directory / "f32")
    model.to(torch.bfloat16).save_pretrained(directory / "bf16")


def seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def spread(values: list[float], digits: int) -> str:
    """The median (least-largest)."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def speed(directory: Path, threads: int, rounds: int) -> None:
    import numpy as np
    import torch
    import transformers

    import numbert

    torch.set_num_threads(threads)
    numbert.threads(threads)
    theirs = transformers.Qwen3Model.from_pretrained(directory / "f32", attn_implementation="sdpa").eval()
    ours = numbert.load(directory / "f32")
    ids = np.random.default_rng(0).integers(5, VOCAB, (8, 128))
    mask = np.ones_like(ids)
    inputs = dict(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
    with torch.no_grad():
        want = theirs(**inputs).last_hidden_state.numpy()  # also the warm-up
        got = ours.forward(ids, attention_mask=mask).last_hidden_state
        runs = {  # numbert's forward keeps every hidden state; embed keeps the last (Qwen3Model's one output)
            "transformers": lambda: theirs(**inputs),
            "numbert": lambda: ours.forward(ids, attention_mask=mask),
            "numbert last state": lambda: ours.encoder.forward(ids, attention_mask=mask, last_layers=1),
            "numbert embed": lambda: ours.encoder.forward(ids, attention_mask=mask, last_layers=1, one_token="last"),
        }
        times: dict[str, list[float]] = {name: [] for name in runs}
        for r in range(rounds):
            for name in sorted(runs, reverse=r % 2 == 1):  # transformers last in even rounds, first in odd ones
                time.sleep(PAUSE)
                times[name].append(seconds(runs[name]) / len(ids) * 1e3)
            print(f"round {r}: " + ", ".join(f"{name} {t[-1]:.0f}" for name, t in times.items()), file=sys.stderr)
    print(
        f"threads {threads}, {rounds} rounds (medians, least-largest), largest difference "
        f"{np.abs(got - want).max():.1e}: transformers {spread(times['transformers'], 0)} ms/text"
    )
    last = ours.encoder.forward(ids, attention_mask=mask, last_layers=1, one_token="last").hidden_states[-1, :, 0]
    print(f"  embed's last tokens within {np.abs(last - want[:, -1]).max():.1e} of transformers' last positions")
    for name in ("numbert", "numbert last state", "numbert embed"):
        ratios = [ours_ / theirs_ for ours_, theirs_ in zip(times[name], times["transformers"])]
        print(f"  {name} {spread(times[name], 0)} ms/text, paired ratio to transformers {spread(ratios, 3)}x")


def memory(directory: Path) -> None:
    import numpy as np

    import numbert

    model = numbert.load(directory / "bf16")
    weights = sum(w.nbytes for w in model.encoder.weights.values())
    model.forward(np.random.default_rng(0).integers(5, VOCAB, (1, 512)))
    status = Path("/proc/self/status").read_text()  # VmHWM: this process's own peak (ru_maxrss keeps a parent's)
    peak = int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]) * 1024
    print(
        f"bf16 checkpoint: float32 weights {weights / 1e9:.2f} GB, peak RSS {peak / 1e9:.2f} GB ({peak / weights:.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--directory", type=Path, default=Path("/tmp/qwen3-06b-shape"))
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_only:
        memory(args.directory)
        return
    from numbert.runtime.blas import configure_own_process

    configure_own_process(args.threads)  # before NumPy loads: as numbert's own processes run
    make(args.directory)
    speed(args.directory, args.threads, args.rounds)
    command = [sys.executable, __file__, "--directory", str(args.directory), "--memory-only"]
    path = os.environ.get("PYTHONPATH", str(ROOT))  # the numbert measured above
    subprocess.run(command, check=True, env={"PYTHONPATH": path, "HF_HUB_OFFLINE": "1"})


if __name__ == "__main__":
    main()
