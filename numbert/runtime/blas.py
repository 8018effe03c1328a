"""BLAS and row threads: the settings numbert's own processes start with, and `threads(n)` for a user's process.

OpenBLAS reads its environment once, when NumPy loads it. numbert's own processes (the `numbert`
command, the server it runs, the worker processes it starts) set it before NumPy loads: idle BLAS
threads go to sleep after a fraction of a millisecond instead of a tenth of a second (OPENBLAS_THREAD_TIMEOUT,
unless the environment sets it), and a worker gets its thread count. The thread count is never chosen by the
machine's load: on some BLAS kernels one thread and two sum in another order, and a command's vectors must not change
their last bits with what else runs; on a loaded machine set OPENBLAS_NUM_THREADS=1 (docs/usage.md's
Threads section and docs/performance.md have the figures). numbert's processes also share the element-wise
phases among as many row threads (numbert.runtime.row_threads) as they have BLAS threads, which pays only while idle
BLAS threads sleep. In a user's Python process numbert sets nothing unless asked: `numbert.threads(n)` limits
the BLAS threads through threadpoolctl (a dependency of numbert's);
`numbert.runtime.row_threads.use(n)` shares the element-wise work (with OPENBLAS_THREAD_TIMEOUT=20 set before NumPy
loads). This module imports no third-party module, so it can run before NumPy loads.

Batches side by side: a corpus's planned batches run n at once, each on a Python thread of its own with one BLAS
thread (`side_by_side`, numbert.runtime.side_by_side): the element-wise work (GELU, softmax, LayerNorm: one NumPy
pass each, on one core) then uses every core as the products do. n is the process's BLAS threads unless asked
(`numbert.threads(n)`; `numbert.threads(1)`: one batch after the other), and the BLAS limits are given back when
the call returns. The bits are those of a one-BLAS-thread run of the same plan.

The controlling thread: OpenBLAS's thread count is the process's (its pthreads build, the one NumPy's wheels
ship), and threadpoolctl (3.8 on) lets only one Python thread set it: the first to set it, until a `with` block of
threadpoolctl's on that thread ends; another thread's settings are dropped without a word. numbert's settings are
the process's, made by whichever thread runs the batches (a server's lanes run on its queue's thread, not on the one
that called `threads(n)`), so after each one numbert hands control back (`let_go_of_blas`): a plain `threads(n)`,
or one whose `with` block ended, would otherwise keep every other thread from holding BLAS to one thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from . import row_threads

THREAD_VARIABLES = (  # a thread count for every BLAS (and OpenMP) NumPy may be built on
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
_side_by_side: int | None = None  # planned batches of a corpus run at once (`side_by_side`); None: not asked
# Idle OpenBLAS threads spin 2^20 cycles (about 0.4 ms) before they sleep: long enough to span the gaps between a
# forward's products, so that a lone short forward does not wake a sleeping thread (on an idle core) for every
# product (docs/performance.md, "Serve, round five"); short enough that they sleep between requests and soon leave
# the row threads their core. OpenBLAS's default, 2^28, is ~0.1 s.
THREAD_TIMEOUT = "20"


def process_environment(environ: Mapping[str, str], threads: int | None = None) -> dict[str, str]:
    """`environ` with numbert's BLAS settings for a process of its own: OPENBLAS_THREAD_TIMEOUT unless
    `environ` has one, and `threads` in every thread variable if given (else BLAS's default, one per core)."""
    env = dict(environ)
    env.setdefault("OPENBLAS_THREAD_TIMEOUT", THREAD_TIMEOUT)
    if threads is not None:
        env.update({name: str(threads) for name in THREAD_VARIABLES})
    return env


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def configure_own_process(threads: int | None = None) -> None:
    """Put `process_environment` into os.environ and use as many row threads as BLAS threads when idle BLAS
    threads sleep (a timeout of at most numbert's; spinning ones leave the row threads no core, measured):
    called first thing by numbert's own processes, before NumPy loads (later it changes only the processes
    this one starts)."""
    os.environ.update(process_environment(os.environ, threads))
    timeout = os.environ["OPENBLAS_THREAD_TIMEOUT"].strip()
    sleeping = timeout.isdigit() and int(timeout) <= int(THREAD_TIMEOUT)
    row_threads.use(process_threads(os.environ) if sleeping else 1)
    use_side_by_side(process_threads(os.environ))


def batches_at_once() -> int:
    """How many planned batches of a corpus run at once, each on its own thread with one BLAS thread
    (numbert.runtime.side_by_side): `n` after `threads(n)` (1: one batch after the other, with the process's BLAS
    threads); unless asked, as many as the process's BLAS threads (its thread variables, else one per core)."""
    return process_threads(os.environ) if _side_by_side is None else _side_by_side


def use_side_by_side(n: int | None) -> None:
    """Run `n` planned batches at once from now on (1: one after the other; None: as if never asked)."""
    global _side_by_side
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"batches side by side must be an integer >= 1, got {n!r}")
    _side_by_side = n


class Threads:
    """What `threads(n)` returns: threadpoolctl's limiter, and the batches side by side to restore with it."""

    def __init__(self, limiter: Any, previous: int | None):
        self.limiter, self.previous = limiter, previous

    def __enter__(self) -> Threads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore_original_limits()

    def restore_original_limits(self) -> None:
        """The BLAS threads and the batches side by side as they were before `threads(n)`."""
        self.limiter.restore_original_limits()
        let_go_of_blas()
        use_side_by_side(self.previous)


def process_threads(environ: Mapping[str, str]) -> int:
    """The BLAS threads a process of `environ` runs: the first thread variable holding a positive integer (as
    OpenBLAS reads OPENBLAS_NUM_THREADS before OMP_NUM_THREADS), else one per core."""
    for name in THREAD_VARIABLES:
        value = environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return cores()


def threads(n: int) -> Threads:
    """Limit the BLAS threads of this process to `n` (one per Python thread that runs a model is the rule),
    through threadpoolctl, and run a corpus's planned batches `n` at once (`side_by_side`: `embed` of more than
    one batch, each batch on its own thread with one BLAS thread). `with numbert.threads(1): ...` restores the
    previous limits at the end of the block; a plain call keeps them until changed."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be an integer >= 1, got {n!r}")
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # (here: NumPy is loaded by now)

    previous = _side_by_side
    limiter = threadpool_limits(limits=n, user_api="blas")
    let_go_of_blas()
    use_side_by_side(n)
    return Threads(limiter, previous)


def let_go_of_blas() -> None:
    """Give up threadpoolctl's control of OpenBLAS's threads if this thread took it by setting them (the module's
    docstring: the controlling thread), so that the next thread to set them may: unless a `with` block of
    threadpoolctl's on this thread holds it (then its end gives it up). Nothing with a threadpoolctl before 3.8."""
    import threadpoolctl

    ownership = getattr(threadpoolctl, "CONTROLLING_THREAD_OWNERSHIP", None)
    if ownership is not None and ownership.count <= 0:
        threadpoolctl.OpenBLASController.clear_controlling_thread()


_controller: Any = None  # threadpoolctl's controller, made once (0.01 ms a switch against 0.25 ms for a fresh one)


def blas_controller() -> Any:
    """threadpoolctl's controller of the BLAS libraries this process has loaded, made at its first use (NumPy is
    loaded by then) and kept. Imported here: threadpoolctl sets KMP_DUPLICATE_LIB_OK when it loads, and `import
    numbert` changes nothing."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


def products_in_row_threads(work: Callable[[slice], object], rows: int, step: int, least: int) -> None:
    """`row_threads.each` for blocks that are small matrix products of their own (a decoder's attention, one
    sequence and key/value head a block): when the row threads share them, BLAS is held to one thread meanwhile,
    each thread's products on a core of its own (two BLAS threads meeting on every small product cost more than
    they save); else, the blocks one after the other on the process's BLAS threads. least: blocks a share at
    least (`row_threads.each`). The limit is the process's
    (the module's docstring: the controlling thread), given back when the blocks are done."""
    if row_threads.shares(rows, step, least) < 2:
        row_threads.each(work, rows, step, least)
        return
    limits = blas_controller().limit(limits=1, user_api="blas")
    let_go_of_blas()
    try:
        row_threads.each(work, rows, step, least)
    finally:
        limits.restore_original_limits()
        let_go_of_blas()


def own_process_threads(n: int) -> None:
    """A process of numbert's own, NumPy loaded: `n` BLAS threads (threadpoolctl), as many row threads, and as
    many batches side by side."""
    threads(n)
    row_threads.use(n)
