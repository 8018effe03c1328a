"""Section 1: the forward pass against transformers and ONNX Runtime, the GEMM bound, and a cProfile breakdown."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from bench.harness import SEED, Patience, clean_run, cores, log, markdown

ROWS = "1x8,1x128,1x512,8x128,32x128"


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

        c, w = bert.config, bert.encoder.weights
        rng = np.random.default_rng(SEED)
        rand = lambda *shape: rng.standard_normal(shape, dtype=np.float32)
        heads, tokens = c.num_attention_heads, batch * seq
        x, up = rand(tokens, c.hidden_size), rand(tokens, c.intermediate_size)
        q, k, v = (rand(batch * heads, seq, c.hidden_size // heads) for _ in range(3))
        probs = rand(batch * heads, seq, seq)
        buffers = {}

        def product(group, a, b):
            out = buffers.setdefault(
                ("out", a.shape, b.shape),
                np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.float32),
            )
            self.calls.append((group, lambda: np.matmul(a, b, out=out)))

        self.calls = []
        for i in range(c.num_hidden_layers):
            layer = lambda name, i=i: w[f"encoder.layer.{i}.{name}.weight"].T  # x @ W.T, W (out, in) as torch stores it
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
        "batch": batch,
        "seq": seq,
        "rounds": rounds,
        "ms": {n: 1e3 * m for n, m in median.items()},
        "ms_spread": {n: [1e3 * min(times[n]), 1e3 * max(times[n])] for n in names},
        "gemm_bound_ms": 1e3 * bound,
        "gemm_ms": gemm_ms,
        "gflop": flops / 1e9,
        "numbert_gflops": flops / median["numbert"] / 1e9,
        "gemm_gflops": flops / bound / 1e9,
        "ratio_torch": median["numbert"] / torch_best,
        "torch_best": "eager" if median["torch eager"] <= median["torch sdpa"] else "sdpa",
        "ratio_ort": median["numbert"] / median["ORT"] if "ORT" in median else None,
        "share_of_bound": bound / median["numbert"],
        "max_abs_diff_vs_sdpa": max_diff,
        "others_cores": None if None in others else statistics.mean(others),
    }


def forward_table(rows: list[dict]) -> str:
    has_ort = rows and "ORT" in rows[0]["ms"]
    head = ["batch x seq", "rounds", "numbert ms", "torch eager ms", "torch sdpa ms"] + (["ORT ms"] if has_ort else [])
    head += [
        "GEMM bound ms",
        "numbert / torch best",
        *(["numbert / ORT"] if has_ort else []),
        "numbert GFLOP/s",
        "share of GEMM bound",
        "others' CPU",
    ]
    body = []
    for r in rows:
        ms = r["ms"]
        line = [
            f"{r['batch']}x{r['seq']}",
            r["rounds"],
            f"{ms['numbert']:.1f}",
            f"{ms['torch eager']:.1f}",
            f"{ms['torch sdpa']:.1f}",
        ] + ([f"{ms['ORT']:.1f}"] if has_ort else [])
        line += [f"{r['gemm_bound_ms']:.1f}", f"{r['ratio_torch']:.2f} ({r['torch_best']})"]
        line += [f"{r['ratio_ort']:.2f}"] if has_ort else []
        line += [f"{r['numbert_gflops']:.0f}", f"{100 * r['share_of_bound']:.0f} %", cores(r["others_cores"])]
        body.append(line)
    return markdown(head, body) + (
        "\n\nothers' CPU: cores used by other processes during the row's rounds, "
        "on average (0.00 = the machine was ours)."
    )


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
    return {
        "batch": batch,
        "seq": seq,
        "forward_ms": 1e3 * total,
        "others_cores": others,
        "share": {n: t / repeats / total for n, t in sorted(own.items(), key=lambda kv: -kv[1])},
    }


def profile_table(profiles: list[dict], columns: int = 9) -> str:
    totals = {}
    for p in profiles:
        for n, share in p["share"].items():
            totals[n] = totals.get(n, 0.0) + share
    top = sorted(totals, key=lambda n: -totals[n])[:columns]
    body = []
    for p in profiles:
        rest = 1 - sum(p["share"].get(n, 0.0) for n in top)
        body.append(
            [f"{p['batch']}x{p['seq']}", f"{p['forward_ms']:.1f}"]
            + [f"{100 * p['share'].get(n, 0.0):.1f}" for n in top]
            + [f"{100 * rest:.1f}", cores(p["others_cores"])]
        )
    return (
        markdown(["batch x seq", "forward ms"] + top + ["rest", "others' CPU"], body)
        + "\n\nEach numbert function's time less the numbert functions it calls; NumPy work counts where it "
        "is asked for (matmul_weight = the linear layers' matrix products, linear = their bias additions, "
        "attention = its two batched products and the mask). Compare with the share of the GEMM bound above."
    )
