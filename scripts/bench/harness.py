"""The timing harness: other processes' CPU use, waiting for an idle machine, the BLAS report, tables."""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("NUMBERT_BENCH_CACHE", Path.home() / ".cache" / "numbert-bench"))

SEED = 0

QUIET_ENV = {  # no hub look-ups, no progress bars, no advice in the measured output
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONWARNINGS": "ignore",
}

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def log(*args):
    """Progress goes to stderr; the report (Markdown) goes to stdout."""
    print(*args, file=sys.stderr, flush=True)


class OtherLoad:
    """CPU cores' worth of work that OTHER processes did while a block ran (Linux; None elsewhere).

    All CPU time the kernel counted as busy (/proc/stat), less this process's own (all its threads, its
    finished children and its live descendants), per second of wall time. Near 0 means the machine was
    ours; 1.0 means another process held a core all along.
    """

    def __enter__(self):
        self.start = self._sample()
        return self

    def __exit__(self, *exc):
        end = self._sample()
        self.cores = (
            None
            if end is None or self.start is None
            else max(0.0, (end[0] - self.start[0]) - (end[1] - self.start[1])) / (end[2] - self.start[2])
        )

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        import resource

        try:
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        busy = sum(fields[:3]) + sum(fields[5:7])  # user nice system (idle iowait) irq softirq
        own = sum(
            u.ru_utime + u.ru_stime for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        )
        tick = os.sysconf("SC_CLK_TCK")
        for pid in descendants(os.getpid()):  # live children (RUSAGE_CHILDREN counts the finished ones)
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            own += (int(stat[11]) + int(stat[12])) / tick  # utime, stime
        return busy / tick, own, time.perf_counter()


def descendants(pid: int) -> list[int]:
    """The process ids of `pid`'s children, theirs, and so on (Linux's /proc/PID/task/*/children)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


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


def blas_info() -> dict:
    """Which OpenBLAS NumPy loaded, and which kernels ("core") it runs, asked of the library itself."""
    import numpy as np

    info = {"numpy": np.__version__, "library": None, "core": "unknown", "threads": None, "config": None}
    maps = Path("/proc/self/maps")  # the shared libraries loaded into this process (Linux)
    paths = (
        sorted(
            {
                line.split()[-1]
                for line in maps.read_text().splitlines()
                if "openblas" in line.lower() and line.split()[-1].startswith("/")
            }
        )
        if maps.exists()
        else []
    )
    for path in paths:
        lib = ctypes.CDLL(path)
        # NumPy's wheels bundle scipy-openblas, whose symbols carry a prefix and, for 64-bit ints, a suffix.
        for prefix, suffix in [(p, s) for p in ("scipy_openblas", "openblas") for s in ("64_", "")]:
            if not hasattr(lib, f"{prefix}_get_corename{suffix}"):
                continue
            corename, config, threads = (
                getattr(lib, f"{prefix}_get_{what}{suffix}") for what in ("corename", "config", "num_threads")
            )
            corename.restype = config.restype = ctypes.c_char_p
            return info | {
                "library": Path(path).name,
                "core": corename().decode(),
                "config": config().decode(),
                "threads": threads(),
            }
    return info


def cpu_name() -> str:
    """The CPU's model name, with its family and model numbers (a VM may name only "AMD EPYC": the numbers
    tell its generation, e.g. family 25 model 17 is Zen 4, family 26 is Zen 5), its clock and L2 size."""
    cpuinfo = Path("/proc/cpuinfo")
    fields: dict[str, str] = {}
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "model name" not in fields:
        return platform.processor() or platform.machine()
    details = [f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"]
    if "cpu MHz" in fields:
        details.append(f"{float(fields['cpu MHz']) / 1000:.1f} GHz")
    if "cache size" in fields:
        details.append(f"{fields['cache size']} L2")
    return f"{fields['model name']} ({', '.join(details)})"


def markdown(head: list, body: list[list]) -> str:
    rows = [list(map(str, head))] + [list(map(str, r)) for r in body]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join([fmt(rows[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(fmt, rows[1:])])


def cores(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"
