"""The Markdown report of one BLAS setting, and the targets it is checked against."""

from __future__ import annotations

import sys

from bench.cold import cold_table
from bench.corpus import corpus_table
from bench.forward import forward_table, profile_table
from bench.harness import IDLE, markdown


def print_section(result: dict, section: str) -> None:
    """Print one section of one BLAS setting's results as Markdown (also used by --from-json)."""
    if section == "header":
        blas, load = result["blas"], result["load_average"][0]
        print(f"\n## {result['label']}\n")
        print(
            f"NumPy {blas['numpy']} with {blas['library']}: OpenBLAS kernels **{blas['core']}**, "
            f"{blas['threads']} threads (torch {result.get('torch', '')} uses {result['torch_blas']} kernels, "
            f"ORT its own "
            f"MLAS kernels: the BLAS setting changes numbert and the GEMM bound only). Load average at start: "
            f"{' '.join(f'{x:.2f}' for x in load)}."
        )
        if result.get("other_openblas_variables"):
            print(
                "Other OpenBLAS variables in the environment: "
                + ", ".join(f"{k}={v}" for k, v in result["other_openblas_variables"].items())
                + "."
            )
        busy = result.get("others_cores_at_start")
        if busy is not None and busy >= IDLE:
            print(
                f"\n**Warning**: other processes were using {busy:.2f} cores at the start; timings from a busy "
                f"machine are unreliable (OpenBLAS's spinning threads suffer most): see the others' CPU columns."
            )
    elif section == "forward":
        rows = result["forward"]
        print("\n### Forward pass (median ms per call)\n")
        print(forward_table(rows))
        diffs = {n: max(r["max_abs_diff_vs_sdpa"][n] for r in rows) for n in rows[0]["max_abs_diff_vs_sdpa"]}
        print(
            f"\nLargest |difference| from torch sdpa's last hidden state: "
            f"{', '.join(f'{n} {d:.1e}' for n, d in diffs.items())}."
        )
    elif section == "profile":
        print("\n### Where numbert's forward spends its time (cProfile, % of the forward)\n")
        print(profile_table(result["profile"]))
    elif section == "corpus":
        print("\n### Corpus: sentences per second (tokenizer included, mean pooling)\n")
        print(corpus_table(result["corpus"]))
        print(
            f"\nSmallest cosine to transformers' vectors: "
            f"{', '.join(f'{n} {v:.6f}' for n, v in result['corpus']['min_cosine_vs_transformers'].items())}."
        )
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
    """[target, measured, verdict] for the issues' targets, each under the BLAS setting it names.

    The forward, under every BLAS setting (issue #17): >= 90 % of numbert's own GEMM bound, and <= 0.9x
    transformers wherever the bound itself is below 0.9x transformers. With OpenBLAS choosing its
    kernels, also the corpus and cold-start targets (issue #6).
    """
    lines = []

    def check(target: str, met: bool, measured: str):
        lines.append([f"[{kernels}] {target}", measured, "met" if met else "**missed**"])

    for res in results:
        own, kernels = res["openblas_coretype"] is None, res["blas"]["core"]
        for row in res.get("forward", []):
            shape, share = f"{row['batch']}x{row['seq']}", row["share_of_bound"]
            check(f"{shape}: >= 90 % of the GEMM bound", share >= 0.9, f"{100 * share:.0f} %")
            bound_vs_torch = row["ratio_torch"] * share  # (bound / numbert) x (numbert / torch)
            if bound_vs_torch < 0.9:
                check(
                    f"{shape}: numbert <= 0.9x transformers (the bound is {bound_vs_torch:.2f}x)",
                    row["ratio_torch"] <= 0.9,
                    f"{row['ratio_torch']:.2f}x ({row['torch_best']})",
                )
        if own and "corpus" in res:
            c = res["corpus"]
            if c.get("ratio_onnxruntime") is not None:
                ratio = c["ratio_onnxruntime"]
                check("corpus: >= 1.0x ONNX Runtime fp32, sorted batches", ratio >= 1.0, f"{ratio:.2f}x")
            if c["ratio_st"] is not None:
                check("corpus: >= 1.5x sentence-transformers", c["ratio_st"] >= 1.5, f"{c['ratio_st']:.2f}x")
        if own and "cold" in res:
            wall, rss = res["cold"]["wall_s"], res["cold"]["peak_rss_mb"]
            check(
                "cold start: <= 1/10 of transformers' wall time",
                res["cold"]["ratio_wall"] <= 0.1,
                f"{wall['numbert encode']:.2f} s vs {wall['transformers']:.2f} s = {res['cold']['ratio_wall']:.2f}x",
            )
            check(
                "cold start: peak RSS <= 0.6x transformers'",
                res["cold"]["ratio_rss"] <= 0.6,
                f"{rss['numbert encode']:.0f} MB vs {rss['transformers']:.0f} MB = {res['cold']['ratio_rss']:.2f}x",
            )
    return lines
