"""Section 3: cold start and memory, each system in a fresh process."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness import Patience, clean_run, cores, log, markdown

COLD_TEXT = "The quick brown fox jumps over the lazy dog."

TRANSFORMERS_COLD = """
import sys
import numpy as np, torch
from transformers import AutoTokenizer, BertModel
model_dir, text, out = sys.argv[1:4]
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = BertModel.from_pretrained(model_dir).eval()
with torch.inference_mode():
    hidden = model(**tokenizer([text], return_tensors="pt")).last_hidden_state
np.save(out, hidden.mean(axis=1).numpy())  # (1, hidden): the last layer's mean, as numbert encode below
"""

# Linux starts a process's peak-RSS record at the size of the process that spawned it, so a large
# benchmark process cannot measure a small child itself: this tiny launcher spawns and measures it.
LAUNCHER = """
import json, os, sys, time
start = time.perf_counter()
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ,
                      file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
_, status, usage = os.wait4(pid, 0)
print(json.dumps({"wall": time.perf_counter() - start, "maxrss_kb": usage.ru_maxrss,
                  "exit": os.waitstatus_to_exitcode(status)}))
"""


def run_measured(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds from process start to exit, and the process's peak RSS in MB."""
    proc = subprocess.run([sys.executable, "-c", LAUNCHER, *cmd], env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"launching {cmd} failed:\n{proc.stderr}")
    measured = json.loads(proc.stdout.splitlines()[-1])
    if measured["exit"]:
        raise RuntimeError(f"{cmd} failed (exit {measured['exit']}):\n{proc.stderr}")
    return measured["wall"], measured["maxrss_kb"] / 1024  # Linux reports kilobytes


def cold_start(model_dir: Path, args) -> dict:
    """`numbert encode` vs transformers in fresh processes: one warm-up each (page cache), then interleaved runs."""
    numbert_cli = Path(sys.executable).with_name("numbert")
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        commands = {
            "numbert encode": [
                str(numbert_cli),
                "encode",
                "--model",
                str(model_dir),
                "--strategy",
                "last",
                "--pooling",
                "mean",
                COLD_TEXT,
                "-o",
                f"{tmp}/numbert.engines.npy",
            ],
            "transformers": [
                sys.executable,
                "-c",
                TRANSFORMERS_COLD,
                str(model_dir),
                COLD_TEXT,
                f"{tmp}/transformers.npy",
            ],
        }
        log(f"  cold start: 1 warm-up + {args.cold_runs} runs each of {', '.join(commands)}")
        for cmd in commands.values():
            run_measured(cmd, env)
        runs, others, patience = {n: [] for n in commands}, [], Patience(args.wait_idle)
        for _ in range(args.cold_runs):
            for n, cmd in commands.items():
                measured, cores = clean_run(lambda cmd=cmd: run_measured(cmd, env), patience, f"cold start, {n}")
                runs[n].append(measured)
                others.append(cores)
        import numpy as np

        vectors = [np.load(f"{tmp}/{n}.npy") for n in ("numbert", "transformers")]
        if vectors[0].shape != vectors[1].shape or np.abs(vectors[0] - vectors[1]).max() > 1e-3:
            raise RuntimeError(f"numbert encode and transformers wrote different vectors: {vectors}")
    wall = {n: statistics.median(w for w, _ in r) for n, r in runs.items()}
    rss = {n: statistics.median(m for _, m in r) for n, r in runs.items()}
    return {
        "runs": args.cold_runs,
        "wall_s": wall,
        "peak_rss_mb": rss,
        "output_shape": list(vectors[0].shape),
        "others_cores": None if None in others else statistics.mean(others),
        "ratio_wall": wall["numbert encode"] / wall["transformers"],
        "ratio_rss": rss["numbert encode"] / rss["transformers"],
    }


def memory_mapped(bert) -> tuple[int, int]:
    """How many of the model's weight arrays are views of the memory-mapped checkpoint file."""
    import mmap

    import numpy as np

    def mapped(a):
        while a is not None:
            if isinstance(a, (np.memmap, mmap.mmap)):
                return True
            a = getattr(a, "base", None) if not isinstance(a, memoryview) else a.obj
        return False

    return sum(map(mapped, bert.encoder.weights.values())), len(bert.encoder.weights)


def cold_table(c: dict) -> str:
    body = [[n, f"{c['wall_s'][n]:.2f}", f"{c['peak_rss_mb'][n]:.0f}"] for n in c["wall_s"]]
    body.append(["numbert / transformers", f"{c['ratio_wall']:.2f}", f"{c['ratio_rss']:.2f}"])
    return (
        markdown(["process start -> vectors written", "wall s", "peak RSS MB"], body)
        + f"\n\nMedian of {c['runs']} runs each after one warm-up; weights memory-mapped by numbert.load: "
        f"{c['mapped'][0]} of {c['mapped'][1]} arrays. Other processes used {cores(c['others_cores'])} "
        f"cores on average meanwhile."
    )
