"""Worker processes: one model per process, one BLAS thread each, every core of one machine busy.

    model = numbert.load("./all-MiniLM-L6-v2")
    with Pool("./all-MiniLM-L6-v2", workers=2) as pool:
        vectors = model.embed(texts, workers=pool)   # the same bits as model.embed(texts) on 1 BLAS thread
    vectors = numbert.engines.workers.embed(model, texts, workers=2)   # the same, with a pool for this call

Each worker is a fresh Python interpreter (running `numbert.engines.workers.main`) whose environment sets
OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS, ... to `threads` (and OpenBLAS's thread timeout,
numbert.runtime.blas) before NumPy loads; the
caller's own process and its BLAS settings are never touched. Each worker runs `numbert.load(model)`,
which memory-maps the safetensors weights read-only, so the page cache holds one copy of the weights
for all workers (`Pool.memory` reports each worker's RSS and PSS).

The parent tokenizes and plans (numbert.pipeline.planner), as TEI's router does, and hands each worker one
planned batch of token-id rows at a time with the recipe to run (`Pool.map`); a worker runs exactly
what the parent would (numbert.pipeline.planner.run, then the recipe's pooling and Dense layers) and the parent
yields the batches' vectors in order. So the vectors are those of one process by construction, bit
for bit given the same BLAS threads (a BLAS kernel may sum in another order on 2 threads than on 1).
A worker that dies (killed, out of memory) is reported with the inputs it held, a new worker takes its
place and the batch is run again; a batch that kills `retries + 1` workers raises WorkerDied naming
its inputs, after every batch before it has been yielded. A parent that dies (even by SIGKILL) takes its
workers with it within PARENT_CHECK_SECONDS, in the middle of a batch too (`exit_with_parent`).
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import warnings
import weakref
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from multiprocessing.connection import Connection, wait
from pathlib import Path

import numpy as np

from ..pipeline import Bert, Recipe, Row, load
from ..runtime.blas import configure_own_process, cores, process_environment

Planned = tuple[Sequence[int], list[Row]]  # a planned batch: (the inputs it holds, their rows)
PARENT_CHECK_SECONDS = 0.2  # how often a worker looks whether its parent is still alive
WORKERS_PER_CORE = 4  # at most: one BLAS thread each, more workers than cores only share them (~200 MiB each)


def most_workers() -> int:
    """The most worker processes numbert starts on this machine: WORKERS_PER_CORE per core it may run on."""
    return WORKERS_PER_CORE * cores()


def check_workers(workers: int, name: str = "workers") -> int:
    """`workers` if it is at most `most_workers()`, else a ValueError saying the limit and why."""
    if workers > most_workers():
        raise ValueError(
            f"{name} is {workers}, more than {most_workers()} ({WORKERS_PER_CORE} per core on this machine's "
            f"{cores()} cores): each worker process holds its own memory (~200 MiB) and more than one per core "
            f"only share the cores"
        )
    return workers


class WorkerDied(RuntimeError):
    """A worker process ended while it held a chunk, more often than the pool retries."""

    def __init__(self, message: str, lines: Sequence[int]):
        super().__init__(message)
        self.lines = lines


class Worker:
    """One child process running `serve`, and the batch it holds (None when idle)."""

    def __init__(self, model: str, load_options: dict, threads: int):
        child_reads, parent_writes = os.pipe()
        parent_reads, child_writes = os.pipe()
        env = process_environment(os.environ, threads)  # BLAS's thread count and timeout, before NumPy loads
        package_root = str(Path(__file__).resolve().parents[2])  # the child imports this very numbert
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; sys.path.insert(0, sys.argv[1]); "
                "from numbert.engines.workers import main; main(sys.argv[2:])",
                package_root,
                str(child_reads),
                str(child_writes),
                str(os.getpid()),
            ],
            pass_fds=(child_reads, child_writes),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        os.close(child_reads)
        os.close(child_writes)
        self.send_end = Connection(parent_writes, readable=False)
        self.receive_end = Connection(parent_reads, writable=False)
        self.loaded = False  # until it reports the model loaded, it reads no message: stopping it is a kill
        self.batch: tuple[int, Planned] | None = None
        self.recipe: tuple[Recipe, int] | None = None  # the recipe and window batch size it was last sent
        self.send(("load", model, load_options))

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, message) -> bool:
        """Send a message; False if the worker has gone (its death is noticed on the receiving end)."""
        try:
            self.send_end.send(message)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def receive(self):
        """The worker's next message, or None once it has died."""
        try:
            return self.receive_end.recv()
        except (EOFError, ConnectionResetError):
            return None

    def how_it_ended(self) -> str:
        code = self.process.wait()
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"

    def close(self, timeout: float = 10) -> None:
        """Stop the worker: at once if it is still loading or holds a batch nobody will take (an error, an
        early stop, an interrupt), else after it has read the stop message."""
        if self.send_end.closed:
            return
        if self.batch is not None or not self.loaded:
            self.process.kill()
        self.send(None)
        for end in (self.send_end, self.receive_end):
            end.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Pool:
    """Up to `workers` processes running planned batches with `numbert.load(model, **load_options)`.

    model: a local directory or hub name every worker can load (they load it themselves).
    workers: at most this many processes, and at most `most_workers()` (a ValueError beyond). One starts with
        the pool (a model that does not load fails there); the others when batches need them, never more
        than the batches handed to `map` at once (one line of input starts one worker, whatever `workers`).
    threads: BLAS threads per worker (1: the products and the element-wise work both scale by process).
    retries: how often a batch is run again after the worker holding it died.
    """

    def __init__(
        self,
        model: str | os.PathLike,
        workers: int,
        *,
        threads: int = 1,
        retries: int = 1,
        load_options: dict | None = None,
    ):
        for name, value, least in (("workers", workers, 1), ("threads", threads, 1), ("retries", retries, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        self.size = check_workers(workers)
        self.model, self.threads, self.retries = os.fspath(model), threads, retries
        self.load_options = dict(load_options or {})
        self.workers: list[Worker] = []  # those started
        self._finalizer = weakref.finalize(self, Pool._stop, self.workers)
        self.grow(1)

    def grow(self, wanted: int) -> None:
        """Start workers (together, then wait for each to load) until `wanted` run, at most the pool's size."""
        new = [self._start() for _ in range(min(wanted, self.size) - len(self.workers))]
        self.workers.extend(new)
        for worker in new:
            self._ready(worker)

    def _start(self) -> Worker:
        return Worker(self.model, self.load_options, self.threads)

    def _ready(self, worker: Worker) -> None:
        """Wait for a new worker to load the model; its error (a bad path) is raised here."""
        message = worker.receive()
        worker.loaded = message is not None and message[0] != "error"
        if not worker.loaded:
            self.close()
            if message is None:
                raise WorkerDied(
                    f"numbert worker {worker.pid} died while loading {self.model} ({worker.how_it_ended()})", ()
                )
            raise message[2]

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker (also done when the pool is garbage-collected or Python exits)."""
        self._finalizer()

    @staticmethod
    def _stop(workers: list[Worker]) -> None:
        for worker in workers:
            worker.close()
        workers.clear()

    def memory(self) -> list[dict[str, int]]:
        """Each worker's {"pid", "rss", "pss"} in bytes (PSS shares each shared page among the processes
        mapping it, so the weights count once in the sum); from /proc, so Linux only."""
        return [{"pid": w.pid, **process_memory(w.pid)} for w in self.workers]

    def map(
        self, recipe: Recipe, batches: Iterable[Planned], window_batch: int = 32
    ) -> Iterator[tuple[Sequence[int], np.ndarray]]:
        """Run each planned batch (inputs, rows); yield (inputs, their pooled vectors before recipe.finish), in order.

        A worker runs `Runner.run(rows, recipe.task, limit=recipe.max_length, ...)` and
        the recipe's `sentence_vectors`, as one process would. At most 2 x workers batches are read ahead of
        the one to yield next, so a stream of batches runs in bounded memory. An error in a batch is raised
        again here; after an error, or if the caller stops iterating early, the pool is closed.
        """
        if not self.workers:
            raise ValueError("this Pool is closed")
        numbered = enumerate(batches)
        first = list(islice(numbered, self.size))  # as many workers as these batches need, up to the pool's size
        self.grow(len(first))
        source = chain(first, numbered)
        retry: deque[tuple[int, Planned]] = deque()
        deaths: dict[int, int] = {}  # batch number -> workers that died holding it
        done: dict[int, tuple[Sequence[int], np.ndarray]] = {}
        taken, next_out, exhausted = 0, 0, False
        try:
            while True:
                # yield what is ready first: batches done but not yet yielded count against the read-ahead
                while next_out in done:
                    yield done.pop(next_out)
                    next_out += 1
                for worker in [w for w in self.workers if w.batch is None]:  # a batch for every idle worker
                    item = retry.popleft() if retry else None
                    if item is None and not exhausted and taken < next_out + 2 * len(self.workers):
                        item = next(source, None)
                        exhausted, taken = item is None, taken + (item is not None)
                    if item is None:
                        break
                    self._hand(worker, item, (recipe, window_batch))
                busy = [w for w in self.workers if w.batch is not None]
                if not busy:
                    return
                for end in wait([w.receive_end for w in busy]):
                    self._collect(next(w for w in busy if w.receive_end is end), done, retry, deaths)
        except BaseException:  # an error, or the caller stopped early: workers may still hold batches
            self.close()
            raise

    @staticmethod
    def _hand(worker: Worker, item: tuple[int, Planned], recipe: tuple[Recipe, int]) -> None:
        """Give a worker a batch, and first the recipe if it has not got this one (it keeps the last)."""
        worker.batch = item
        if worker.recipe is not recipe:
            worker.recipe = recipe
            worker.send(("recipe", *recipe))
        worker.send((item[0], item[1][1]))  # if it died, its pipe's end of file says so when collected

    def _collect(self, worker: Worker, done: dict, retry: deque, deaths: dict) -> None:
        """Take a worker's result, or replace it if it died and queue its batch again."""
        assert worker.batch is not None
        number, (inputs, rows) = worker.batch
        message = worker.receive()
        if message is not None:
            kind, _, payload = message
            worker.batch = None
            if kind == "error":
                raise payload
            done[number] = (inputs, payload)
            return
        how = worker.how_it_ended()
        deaths[number] = deaths.get(number, 0) + 1
        index = self.workers.index(worker)
        worker.batch = None
        worker.close()
        if deaths[number] > self.retries:
            raise WorkerDied(
                f"numbert worker {worker.pid} died ({how}) while embedding {describe(inputs)}; "
                f"{deaths[number]} workers died on these inputs",
                inputs,
            )
        warnings.warn(
            f"numbert worker {worker.pid} died ({how}) while embedding {describe(inputs)}; "
            f"running them again in a new worker",
            RuntimeWarning,
            stacklevel=3,
        )
        self.workers[index] = self._start()
        self._ready(self.workers[index])
        retry.append((number, (inputs, rows)))


def embed(model: Bert, texts: Sequence[str], workers: int, *, threads: int = 1, **options) -> np.ndarray:
    """`model.embed(texts, **options)` computed by a Pool of `workers` processes started for this call."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if model.directory is None:
        raise ValueError(
            "workers need a model loaded by numbert.load (from a directory or the hub): "
            "the worker processes load it from there"
        )
    with Pool(model.directory, workers, threads=threads) as pool:
        return model.embed(texts, workers=pool, **options)  # type: ignore[return-value]


def describe(lines: Sequence[int]) -> str:
    """'lines 4096-6143' for a contiguous range of input lines, else 'inputs 3, 17, ... (n texts)'."""
    if isinstance(lines, range) and lines.step == 1:
        return f"lines {lines.start}-{lines.stop - 1}" if len(lines) else "no lines"
    shown = ", ".join(map(str, lines[:4])) + (", ..." if len(lines) > 4 else "")
    return f"inputs {shown} ({len(lines)} texts)"


def process_memory(pid: int) -> dict[str, int]:
    """{"rss", "pss"} of a process in bytes, from /proc/PID/smaps_rollup (pss is 0 where unavailable)."""
    values = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in ("Rss", "Pss"):
                    values[name.lower()] = int(rest.split()[0]) * 1024
    except FileNotFoundError:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    values["rss"] = int(line.split()[1]) * 1024
    return {"rss": values.get("rss", 0), "pss": values.get("pss", 0)}


# --- the worker side ----------------------------------------------------------------------------


def serve(receive_end: Connection, send_end: Connection) -> None:
    """A worker's life: load the model, then run each batch received with the last recipe received, until
    told to stop (None).

    Messages in: ("load", model, load_options) first, then ("recipe", recipe, window_batch) and
    (batch number, rows). Messages back are (kind, batch number, payload): ("ready", None, None),
    ("ok", n, vectors) or ("error", n, exception), the exception being raised again in the parent.
    """
    _, model_name, load_options = receive_end.recv()
    try:
        pipeline = load(model_name, **load_options)
        send_end.send(("ready", None, None))
    except Exception as e:  # noqa: BLE001 - any failure to load is the parent's error to raise
        send_end.send(("error", None, picklable(e)))
        return
    recipe, window_batch = None, 32
    while (message := receive_end.recv()) is not None:
        if message[0] == "recipe":
            _, recipe, window_batch = message
            continue
        number, rows = message
        try:
            assert recipe is not None, "a batch came before its recipe"
            send_end.send(("ok", number, pipeline.runner.recipe_vectors(rows, recipe, window_batch)))
        except Exception as e:  # noqa: BLE001
            send_end.send(("error", number, picklable(e)))


def picklable(error: Exception) -> Exception:
    """The exception itself if it survives pickling, else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(error).__name__}: {error}")


def exit_with_parent(parent: int) -> None:
    """End this process as soon as `parent` has gone, even in the middle of a batch: a daemon thread looks
    every PARENT_CHECK_SECONDS whether this process has been handed to another parent.

    The closed pipe tells a worker waiting for its next message at once; but a worker running a batch reads
    the pipe only when it is done, and a batch of long rows on bert-base runs a minute or more for a
    result nobody will read (the parent killed by SIGKILL or the out-of-memory killer)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="numbert-parent-watch", daemon=True).start()


def main(argv: list[str]) -> None:
    """A worker process's entry point: serve on the two pipe file descriptors the parent passed, while the
    parent (its process id the third argument) lives; BLAS and row threads as the parent set them."""
    configure_own_process()
    exit_with_parent(int(argv[2]))
    with Connection(int(argv[0]), writable=False) as receive, Connection(int(argv[1]), readable=False) as send:
        try:
            serve(receive, send)
        except (EOFError, BrokenPipeError, KeyboardInterrupt):  # the parent has gone: nothing left to do
            pass
