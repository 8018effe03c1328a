#!/usr/bin/env python
"""A corpus on every core: numbert's worker processes against one process and against torch's stacks.

    python scripts/bench_workers.py                   # MiniLM (the packaged all-MiniLM-L6-v2), 2,000 sentences
    python scripts/bench_workers.py --model bert-base --size 500 --repeats 1
    python scripts/bench_workers.py --memory-lines 10000,1000000   # peak RSS of sharded CLI jobs, flat?

The corpus is the bench's 2,000 real English sentences (scripts/bench, seeded). Each system runs in a
fresh process whose BLAS / OpenMP / torch thread counts are set before NumPy or torch load, so that
every row uses the same 2 cores, split differently:

- numbert 1 x 2: `Bert.embed` in one process with 2 BLAS threads (the default way)
- numbert 1 x 1 and 2 x 1: `workers.embed(model, texts, N)`: N worker processes of 1 BLAS thread (scaling 1 -> 2)
- transformers: `BertModel` on batches of sentences sorted by length (its best recipe: little padding),
  each padded to its longest sentence, 2 torch threads
- sentence-transformers: `encode` in one process with 2 threads (it sorts by length itself), and its
  multi-process pool (2 x 1)
- ONNX Runtime, when installed (`--onnx`): the same length-sorted batches through the exported model,
  2 threads, in float32 and dynamically quantized to int8 (its min cosine to numbert's float32 vectors
  is in the table: the price of its speed)
- fastembed and fastembed int8, when named in --systems: fastembed's `TextEmbedding.embed` on the same ONNX files,
  in a venv of its own (scripts/bench/peer_fastembed.py), on the corpus the parent built

Each row prints the padding it ran with: tokens computed in the dense layers per real token (numbert
packs a batch's real tokens, so 1.00; the others pad each batch to its longest sentence).

Every system computes the mean of the last layer over real tokens (numbert: pooling="mean", layers=-1,
normalize=False) and is checked against numbert's vectors (smallest cosine printed). The time counts the
whole corpus after a warm-up of 64 sentences (for worker processes: after the pool has started; the
start is printed apart). Per-process memory: peak RSS and PSS of the measuring process and of each
process it starts, sampled every 50 ms from /proc (PSS counts shared pages, the memory-mapped weights,
once across the processes). On a machine others are using, every figure is noisy: repeat and compare
ratios within one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))  # `bench` (scripts/bench/) imports as a package

from bench.harness import QUIET_ENV, OtherLoad, blas_info, cpu_name, descendants, markdown  # noqa: E402
from bench.peer_fastembed import quantized  # noqa: E402
from bench.systems import model_dir  # noqa: E402

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# name -> (processes, threads per process)
SYSTEMS = {
    "numbert 1x2": (1, 2),
    "numbert 1x2 as its command": (1, 2),
    "numbert 1x2 threads(2)": (1, 2),
    "numbert 1x2 one batch at a time": (1, 2),
    "numbert 1x1 worker": (1, 1),
    "numbert 2x1 workers": (2, 1),
    "transformers": (1, 2),
    "sentence-transformers": (1, 2),
    "sentence-transformers pool 2x1": (2, 1),
    "onnxruntime": (1, 2),
    "onnxruntime int8": (1, 2),
    "fastembed": (1, 2),  # in a venv of its own (scripts/bench/peer_fastembed.py)
    "fastembed int8": (1, 2),
}


class MemorySampler(threading.Thread):
    """Peak RSS and PSS of this process and of its descendants, sampled from /proc every 50 ms."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peaks: dict[int, dict[str, int]] = {}
        self.running = True

    def run(self):
        from numbert.engines.workers import process_memory

        while self.running:
            for pid in [os.getpid(), *descendants(os.getpid())]:
                try:
                    memory = process_memory(pid)
                except OSError:
                    continue
                peak = self.peaks.setdefault(pid, {"rss": 0, "pss": 0})
                for key in peak:
                    peak[key] = max(peak[key], memory[key])
            time.sleep(0.05)

    def stop(self) -> list[dict[str, int]]:
        self.running = False
        self.join()
        me = self.peaks.pop(os.getpid(), {"rss": 0, "pss": 0})
        return [me, *self.peaks.values()]


# --- one system, in its own process ---------------------------------------------------------------


def child(system: str, directory: Path, size: int, repeats: int, batch_size: int, reference_path: Path) -> dict:
    import numpy as np

    import numbert

    bert = numbert.load(directory)
    from bench.corpus import build_corpus

    corpus, lengths = build_corpus(bert.tokenizer, size)
    embed, start = systems(system, bert, directory, batch_size)
    padding = padding_ratio(system, corpus, lengths, batch_size)
    started = time.perf_counter()
    embed = start() if start else embed
    start_seconds = time.perf_counter() - started
    warm = embed(corpus[:64])
    sampler = MemorySampler()  # the timed passes' processes only (workers.embed starts a pool per call)
    sampler.start()
    seconds, others = [], []
    for _ in range(repeats):
        with OtherLoad() as load:
            t = time.perf_counter()
            vectors = embed(corpus)
            seconds.append(time.perf_counter() - t)
        others.append(load.cores)
    memory = sampler.stop()
    if not reference_path.exists():  # the first system (numbert 1x2) leaves its vectors for the others
        np.save(reference_path, vectors)
    reference = np.load(reference_path)
    cosine = np.sum(vectors * reference, 1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(reference, axis=1)
    return {
        "system": system,
        "seconds": seconds,
        "start_seconds": start_seconds,
        "memory": memory,
        "others": others,
        "sentences": len(corpus),
        "tokens": sum(lengths),
        "padding": padding,
        "min_cosine": float(cosine.min()),
        "warm_shape": list(warm.shape),
        "blas": blas_info(),
        "bit_identical": bool(np.array_equal(vectors, reference)),
    }


def systems(system: str, bert, directory: Path, batch_size: int):
    """(embed function, or None with a start function that starts a pool and returns the embed function)."""
    import numpy as np

    import numbert

    options = {"pooling": "mean", "layers": -1, "normalize": False, "batch_size": batch_size, "progress": False}
    if system == "numbert 1x2":
        return (lambda texts: bert.embed(texts, **options)), None
    if system == "numbert 1x2 as its command":  # its process set up as numbert's own (run_system's environment)
        from numbert.runtime import row_threads
        from numbert.runtime.blas import process_threads, use_side_by_side

        row_threads.use(process_threads(os.environ))  # the row threads configure_own_process would choose
        use_side_by_side(process_threads(os.environ))  # and its batches side by side
        return (lambda texts: bert.embed(texts, **options)), None
    if system == "numbert 1x2 one batch at a time":  # before the fast path by default: 2 BLAS threads, one batch
        from numbert.runtime.blas import use_side_by_side

        use_side_by_side(1)
        return (lambda texts: bert.embed(texts, **options)), None
    if system == "numbert 1x2 threads(2)":  # a user's process that asked for threads: batches side by side
        numbert.threads(2)
        return (lambda texts: bert.embed(texts, **options)), None
    if system.startswith("numbert"):
        from numbert.engines import workers

        count = 2 if "2x1" in system else 1
        return (lambda texts: workers.embed(bert, texts, count, **options)), None
    if system in ("sentence-transformers", "sentence-transformers pool 2x1"):
        from sentence_transformers import SentenceTransformer, models

        transformer = models.Transformer(str(directory))
        pooling = models.Pooling(transformer.get_word_embedding_dimension(), pooling_mode="mean")
        st = SentenceTransformer(modules=[transformer, pooling], device="cpu")
        if system == "sentence-transformers":
            return (lambda texts: st.encode(texts, batch_size=batch_size, show_progress_bar=False)), None

        def start():
            pool = st.start_multi_process_pool(["cpu", "cpu"])
            return lambda texts: st.encode(texts, pool=pool, batch_size=batch_size, show_progress_bar=False)

        return None, start
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    if system.startswith("onnxruntime"):
        import onnxruntime
        from bench.peer_fastembed import export_directory

        onnx_path = export_directory(directory) / "onnx" / "model.onnx"  # out of site-packages; fastembed's too
        if system == "onnxruntime int8":
            onnx_path = quantized(onnx_path)
        options_ort = onnxruntime.SessionOptions()
        options_ort.intra_op_num_threads, options_ort.inter_op_num_threads = 2, 1
        session = onnxruntime.InferenceSession(str(onnx_path), options_ort, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]

        def run(enc):
            return session.run(None, {n: enc[n].astype(np.int64) for n in names})[0]
    else:
        import torch
        from transformers import BertModel

        torch.set_num_threads(2)
        model = BertModel.from_pretrained(directory).eval()

        def run(enc):
            with torch.inference_mode():
                return model(**{k: torch.from_numpy(v) for k, v in enc.items()}).last_hidden_state.numpy()

    def by_length(texts):  # batches of like length (its best recipe), vectors returned in input order
        encoded = tokenizer(texts, truncation=True, max_length=512)  # one batch call, no padding
        rows = encoded["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: len(rows[i]))
        vectors = np.empty((len(texts), bert.config.hidden_size), np.float32)
        for i in range(0, len(texts), batch_size):
            part = order[i : i + batch_size]
            width = max(len(rows[j]) for j in part)
            enc = {k: np.zeros((len(part), width), np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
            for b, j in enumerate(part):  # right-padded with 0, [PAD]'s id in BERT vocabularies
                enc["input_ids"][b, : len(rows[j])] = rows[j]
                enc["attention_mask"][b, : len(rows[j])] = 1
            hidden, mask = run(enc), enc["attention_mask"][..., None].astype(np.float32)
            vectors[part] = (hidden * mask).sum(1) / mask.sum(1)
        return vectors

    return by_length, None


def padding_ratio(system: str, corpus: list[str], lengths: list[int], batch_size: int) -> float:
    """Tokens the system computes in its dense layers per real token, for the batches it runs."""
    if system.startswith("numbert"):
        return 1.0  # numbert.model.packing: the layers run on the real tokens only
    if system.startswith("sentence-transformers"):  # it sorts by text length (characters), longest first
        order = sorted(range(len(corpus)), key=lambda i: -len(corpus[i]))
    else:  # transformers and ONNX Runtime: sorted by token count (by_length above)
        order = sorted(range(len(corpus)), key=lambda i: lengths[i])
    batches = [[lengths[j] for j in order[i : i + batch_size]] for i in range(0, len(order), batch_size)]
    return sum(len(b) * max(b) for b in batches) / sum(lengths)


# --- the parent: one fresh process per system, then the table -------------------------------------


def run_system(system: str, args) -> dict | None:
    if system.startswith("fastembed"):
        return run_fastembed(system, args)
    processes, threads = SYSTEMS[system]
    env = dict(os.environ, **QUIET_ENV, **{v: str(threads) for v in THREAD_VARS})  # inherited by started processes
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SCRIPTS.parent), os.environ.get("PYTHONPATH")]))
    if system == "numbert 1x2 as its command":  # numbert's own processes' BLAS settings, before NumPy loads
        from numbert.runtime.blas import process_environment

        env = process_environment(env)
    command = [
        sys.executable,
        __file__,
        "--child",
        system,
        "--model",
        args.model,
        "--size",
        str(args.size),
        "--repeats",
        str(args.repeats),
        "--batch-size",
        str(args.batch_size),
        "--reference",
        args.reference,
    ]
    print(f"  {system} ...", file=sys.stderr, flush=True)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    if result.returncode != 0:
        print(f"  {system} failed:\n{result.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(result.stdout.splitlines()[-1])


def run_fastembed(system: str, args) -> dict | None:
    """A fastembed system in its own venv on the same corpus (None, with the reason printed, if it cannot run)."""
    from bench import peer_fastembed

    if getattr(args, "corpus", None) is None:  # built once per run, as every child builds it
        from bench.corpus import build_corpus

        import numbert

        args.corpus = build_corpus(numbert.load(model_dir(args.model)).tokenizer, args.size)
    print(f"  {system} ...", file=sys.stderr, flush=True)
    try:
        result = peer_fastembed.run(system, args, args.corpus[0], Path(args.reference))
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        print(f"  {error}", file=sys.stderr)
        return None
    if "skipped" in result:
        print(f"  {system} skipped: {result['skipped']}", file=sys.stderr)
        return None
    lengths, batch_size = args.corpus[1], peer_fastembed.RECIPES[system][1]
    batches = [lengths[i : i + batch_size] for i in range(0, len(lengths), batch_size)]  # input order, as it runs
    padding = sum(len(b) * max(b) for b in batches) / sum(lengths)
    return {**result, "tokens": sum(lengths), "padding": padding, "blas": {}, "bit_identical": False}


def table(results: list[dict]) -> str:
    base = next((r for r in results if r["system"] == "numbert 1x2"), results[0])
    base_rate = base["sentences"] / statistics.median(base["seconds"])
    one_worker = next((r for r in results if r["system"] == "numbert 1x1 worker"), None)
    rows = []
    for r in results:
        rate = r["sentences"] / statistics.median(r["seconds"])
        processes, threads = SYSTEMS[r["system"]]
        workers = r["memory"][1:]
        others = [c for c in r["others"] if c is not None]
        rows.append(
            [
                r["system"],
                f"{processes} x {threads}",
                f"{rate:.1f}",
                f"{rate / base_rate:.2f}x",
                f"{max(others):.2f}" if others else "?",
                f"{r['start_seconds']:.1f}" if r["start_seconds"] > 0.05 else "-",
                f"{r['memory'][0]['rss'] / 2**20:.0f}",
                ", ".join(f"{m['rss'] / 2**20:.0f}/{m['pss'] / 2**20:.0f}" for m in workers) or "-",
                f"{r['min_cosine']:.6f}",
                f"{r['padding']:.2f}",
            ]
        )
    text = markdown(
        [
            "system",
            "processes x threads",
            "sentences/s (median)",
            "vs numbert 1x2",
            "others' cores",
            "pool start s",
            "main RSS MiB",
            "started processes RSS/PSS MiB",
            "min cosine vs numbert",
            "padded tokens per real token",
        ],
        rows,
    )
    two = next((r for r in results if r["system"] == "numbert 2x1 workers"), None)
    if one_worker and two:
        scaling = statistics.median(one_worker["seconds"]) / statistics.median(two["seconds"])
        text += f"\n\nScaling 1 -> 2 worker processes (1 BLAS thread each): {scaling:.2f}x."
        text += f" Worker vectors bit-identical to one process: {two['bit_identical'] and one_worker['bit_identical']}."
    return text


def memory_bench(args) -> str:
    """Peak RSS of `numbert encode --shard-lines` jobs on corpora of different sizes (flat = bounded)."""
    import tempfile

    directory = model_dir("minilm")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in map(int, args.memory_lines.split(",")):
            source = Path(tmp) / f"{n}.txt"
            with open(source, "w", encoding="utf-8") as f:
                for i in range(n):
                    f.write(f"line {i} is short\n")
            command = [
                "/usr/bin/time",
                "-f",
                "%M %e",
                sys.executable,
                "-m",
                "numbert",
                "encode",
                "--file",
                str(source),
                "--model",
                str(directory),
                "-o",
                f"{tmp}/out{n}/",
                "--shard-lines",
                "100000",
            ]
            if args.memory_workers:
                command += ["--workers", str(args.memory_workers)]
            env = dict(os.environ, **QUIET_ENV, PYTHONPATH=str(SCRIPTS.parent))
            result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
            if result.returncode != 0:
                sys.exit(f"{' '.join(command)} failed:\n{result.stderr}")
            peak_kib, seconds = result.stderr.split()[-2:]
            rows.append([f"{n:,}", f"{int(peak_kib) / 1024:.0f}", seconds])
    return markdown(["lines", "peak RSS MiB (main process)", "seconds"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("minilm", "bert-base"), default="minilm")
    parser.add_argument("--size", type=int, default=2000, help="sentences in the corpus (default 2000)")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes over the corpus per system")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--systems",
        default=",".join(s for s in SYSTEMS if not s.startswith(("onnxruntime", "fastembed"))),
        help="comma-separated, from: " + ", ".join(SYSTEMS) + " (numbert 1x2 always runs first)",
    )
    parser.add_argument("--onnx", action="store_true", help="add ONNX Runtime fp32 and int8 (exports the model once)")
    parser.add_argument("--memory-lines", help="instead: peak RSS of sharded CLI jobs of these line counts")
    parser.add_argument("--memory-workers", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--reference", help=argparse.SUPPRESS)  # numbert 1x2's vectors, which the others match
    args = parser.parse_args()
    if args.child:
        print(
            json.dumps(
                child(args.child, model_dir(args.model), args.size, args.repeats, args.batch_size, Path(args.reference))
            )
        )
        return
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores visible; Python {sys.version.split()[0]}")
    if args.memory_lines:
        print(memory_bench(args))
        return
    names = args.systems.split(",") + (["onnxruntime", "onnxruntime int8"] if args.onnx else [])
    print(
        f"model: {args.model}, corpus: {args.size} sentences, batch size {args.batch_size}, "
        f"{args.repeats} timed passes per system (median)",
        file=sys.stderr,
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        args.reference = str(Path(tmp) / "numbert-1x2.npy")
        order = ["numbert 1x2", *(n for n in names if n != "numbert 1x2")]
        results = [r for r in (run_system(name, args) for name in order) if r]
    if results:
        blas = results[0]["blas"]
        print(f"BLAS: {blas['library']} {blas['core']} kernels, NumPy {blas['numpy']}")
        print(f"model {args.model}, {results[0]['sentences']} sentences ({results[0]['tokens']} tokens)\n")
        print(table(results))


if __name__ == "__main__":
    main()
