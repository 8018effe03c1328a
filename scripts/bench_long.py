"""Long texts on a ModernBERT-shaped model (ModernBERT-base's sizes: 22 layers, hidden 768, 12 heads, intermediate
1152, vocabulary 50,368, window 128; random weights): time and peak RSS of one forward at 512, 2,048 and 8,192
tokens, numbert against transformers' ModernBertModel (sdpa attention), each run in a fresh process, the systems
interleaved round by round, on the same threads. Prints the CPU, the BLAS kernels, and the table of
docs/performance.md (medians over the rounds; peak RSS is the process's VmHWM, the model loaded included).

    HF_HUB_OFFLINE=1 python scripts/bench_long.py                     # 2 threads, 3 rounds (about an hour)
    python scripts/bench_long.py --threads 1 --lengths 512 2048 --rounds 2 --layers 6
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from numbert.runtime.blas import THREAD_TIMEOUT

ROOT = Path(__file__).resolve().parent.parent
SIZES = dict(hidden_size=768, num_attention_heads=12, intermediate_size=1152, vocab_size=50368, local_attention=128)
IDS = dict(pad_token_id=50283, bos_token_id=50281, eos_token_id=50282, cls_token_id=50281, sep_token_id=50282)

RUN = """
import json, os, sys, time
import numpy as np
system, directory = sys.argv[1], sys.argv[2]
length, calls, threads = (int(a) for a in sys.argv[3:6])
ids = np.random.default_rng(0).integers(5, 50000, (1, length))
if system == "numbert":
    import numbert
    from numbert.runtime import row_threads
    row_threads.use(threads)
    model = numbert.load(directory)
    run = lambda: model.forward(ids)
else:
    import torch, transformers
    torch.set_num_threads(threads)
    model = transformers.ModernBertModel.from_pretrained(directory, attn_implementation="sdpa").eval()
    tensor = torch.tensor(ids)
    def run():
        with torch.inference_mode():
            return model(tensor)
times = []
for _ in range(calls):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
status = open("/proc/self/status").read()
print(json.dumps({"seconds": min(times), "peak": int(status.split("VmHWM:")[1].split()[0]) * 1024}))
"""


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def blas_kernels() -> str:
    code = "import json, numpy, threadpoolctl; print(json.dumps(threadpoolctl.threadpool_info()))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode:
        return "unknown (threadpoolctl missing)"
    return ", ".join(f"{i['internal_api']} {i.get('version')} {i.get('architecture')}" for i in json.loads(done.stdout))


def save_model(directory: Path, layers: int) -> None:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.ModernBertConfig(num_hidden_layers=layers, **SIZES, **IDS)
    transformers.ModernBertModel(config).save_pretrained(directory)


def measure(system: str, directory: Path, length: int, calls: int, threads: int) -> dict:
    env = dict(
        os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads)
    )
    env.setdefault("OPENBLAS_THREAD_TIMEOUT", THREAD_TIMEOUT)  # as numbert's own processes set it
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    command = [sys.executable, "-c", RUN, system, str(directory), str(length), str(calls), str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{system} at {length} tokens failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 2048, 8192])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layers", type=int, default=22)
    parser.add_argument("--calls", type=int, default=2, help="calls per process, the fastest kept (1 at 8,192 tokens)")
    args = parser.parse_args()
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores), load {os.getloadavg()[0]:.1f}")
    print(f"BLAS: {blas_kernels()}")
    print(f"threads: {args.threads}; ModernBERT-base sizes, {args.layers} layers, random weights; {args.rounds} rounds")
    results: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "modernbert"
        save_model(directory, args.layers)
        for round_ in range(args.rounds):
            for length in args.lengths:
                for system in ("numbert", "torch") if round_ % 2 == 0 else ("torch", "numbert"):
                    calls = 1 if length > 4096 else args.calls
                    result = measure(system, directory, length, calls, args.threads)
                    results.setdefault((system, length), []).append(result)
                    print(
                        f"  round {round_ + 1}: {system:8s} {length:5d} tokens {result['seconds']:7.2f} s "
                        f"{result['peak'] / 2**20:6.0f} MiB",
                        flush=True,
                    )
    print()
    print("| tokens | numbert s | transformers sdpa s | time ratio | numbert peak RSS | transformers peak RSS |")
    print("|---|---|---|---|---|---|")
    for length in args.lengths:
        ours, theirs = results["numbert", length], results["torch", length]
        t_ours = statistics.median(r["seconds"] for r in ours)
        t_theirs = statistics.median(r["seconds"] for r in theirs)
        m_ours = statistics.median(r["peak"] for r in ours) / 2**20
        m_theirs = statistics.median(r["peak"] for r in theirs) / 2**20
        spread = max(r["seconds"] for r in ours) / min(r["seconds"] for r in ours)
        print(
            f"| {length} | {t_ours:.2f} (spread {spread:.2f}x) | {t_theirs:.2f} | {t_ours / t_theirs:.2f}x "
            f"| {m_ours:.0f} MiB | {m_theirs:.0f} MiB |"
        )


if __name__ == "__main__":
    main()
