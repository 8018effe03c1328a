"""Worker processes: one model per process, one BLAS thread each, every core of one machine busy.

    with Pool("./all-MiniLM-L6-v2", workers=2) as pool:
        for vectors in pool.map([(range(0, 3), ["a", "b", "c"]), (range(3, 5), ["d", "e"])]):
            ...                                  # (len(chunk), dim) float32, chunk by chunk, in order

Each worker is a fresh Python interpreter (running `numbert.workers.main`) whose environment sets
OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS, ... to `threads` before NumPy loads; the
caller's own process and its BLAS settings are never touched. Each worker runs `numbert.load(model)`,
which memory-maps the safetensors weights read-only, so the page cache holds one copy of the weights
for all workers (`Pool.memory` reports each worker's RSS and PSS).

The parent hands each worker one chunk of texts at a time and yields the chunks' vectors in input
order, each computed by `Bert.embed(texts, **options)` exactly as a single process would: the
vectors are bit-identical to running those chunks in one process. A worker that dies (killed, out
of memory) is reported with the input lines it held, a new worker takes its place and the chunk is
run again; a chunk that kills `retries + 1` workers raises WorkerDied naming its lines, after every
chunk before it has been yielded.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import cast

import numpy as np

BLAS_THREADS = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
Chunk = tuple[Sequence[int], Sequence[str]]  # (the input lines it holds, its texts)


class WorkerDied(RuntimeError):
    """A worker process ended while it held a chunk, more often than the pool retries."""

    def __init__(self, message: str, lines: Sequence[int]):
        super().__init__(message)
        self.lines = lines


class Worker:
    """One child process running `serve`, and the chunk it holds (None when idle)."""

    def __init__(self, model: str, load_options: dict, embed_options: dict, threads: int):
        child_reads, parent_writes = os.pipe()
        parent_reads, child_writes = os.pipe()
        env = dict(os.environ, **{name: str(threads) for name in BLAS_THREADS})
        package_root = str(Path(__file__).resolve().parent.parent)  # the child imports this very numbert
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; sys.path.insert(0, sys.argv[1]); from numbert.workers import main; main(sys.argv[2:])",
                package_root,
                str(child_reads),
                str(child_writes),
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
        self.chunk: tuple[int, Chunk] | None = None
        self.send(("load", model, load_options, embed_options))

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
        """Stop the worker: at once if it holds a chunk nobody will take (an error, an early stop), else
        after it has read the stop message."""
        if self.send_end.closed:
            return
        if self.chunk is not None:
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
    """`workers` processes embedding chunks of texts with `numbert.load(model, **load_options)`.

    model: a local directory or hub name every worker can load (they load it themselves).
    embed_options: keyword arguments of Bert.embed (pooling, layers, normalize, batch_size, ...).
    threads: BLAS threads per worker (1: the products and the element-wise work both scale by process).
    retries: how often a chunk is run again after the worker holding it died.
    """

    def __init__(
        self,
        model: str | os.PathLike,
        workers: int,
        *,
        threads: int = 1,
        retries: int = 1,
        load_options: dict | None = None,
        **embed_options,
    ):
        for name, value, least in (("workers", workers, 1), ("threads", threads, 1), ("retries", retries, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        self.model, self.threads, self.retries = os.fspath(model), threads, retries
        self.load_options, self.embed_options = dict(load_options or {}), dict(embed_options, progress=False)
        self.workers: list[Worker] = []
        self._finalizer = weakref.finalize(self, Pool._stop, self.workers)
        for _ in range(workers):
            self.workers.append(self._start())
        self.dim = max(self._ready(worker) for worker in self.workers)  # the width of the vectors (all the same)

    def _start(self) -> Worker:
        return Worker(self.model, self.load_options, self.embed_options, self.threads)

    def _ready(self, worker: Worker) -> int:
        """Wait for a new worker to load the model; its error (a bad path, bad options) is raised here."""
        message = worker.receive()
        if message is None or message[0] == "error":
            self.close()
            if message is None:
                raise WorkerDied(
                    f"numbert worker {worker.pid} died while loading {self.model} ({worker.how_it_ended()})", ()
                )
            raise message[2]
        return message[2]

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

    def map(self, chunks: Iterable[Chunk]) -> Iterator[np.ndarray]:
        """Embed each (lines, texts) chunk; yield its (len(texts), dim) vectors, in the order given.

        At most 2 x workers chunks are read ahead of the one to yield next, so a stream of chunks
        is embedded in bounded memory. An error in a chunk is raised again here; after an error, or
        if the caller stops iterating early, the pool is closed.
        """
        if not self.workers:
            raise ValueError("this Pool is closed")
        source = iter(enumerate(chunks))
        retry: deque[tuple[int, Chunk]] = deque()
        deaths: dict[int, int] = {}  # chunk number -> workers that died holding it
        done: dict[int, np.ndarray] = {}
        taken, next_out, exhausted = 0, 0, False
        try:
            while True:
                # yield what is ready first: chunks done but not yet yielded count against the read-ahead
                while next_out in done:
                    yield done.pop(next_out)
                    next_out += 1
                for worker in [w for w in self.workers if w.chunk is None]:  # a chunk for every idle worker
                    item = retry.popleft() if retry else None
                    if item is None and not exhausted and taken < next_out + 2 * len(self.workers):
                        item = next(source, None)
                        exhausted, taken = item is None, taken + (item is not None)
                    if item is None:
                        break
                    worker.chunk = item
                    worker.send((item[0], list(item[1][1])))  # if it died, its pipe's end of file says so below
                busy = [w for w in self.workers if w.chunk is not None]
                if not busy:
                    return
                for end in wait([w.receive_end for w in busy]):
                    self._collect(next(w for w in busy if w.receive_end is end), done, retry, deaths)
        except BaseException:  # an error, or the caller stopped early: workers may still hold chunks
            self.close()
            raise

    def _collect(self, worker: Worker, done: dict, retry: deque, deaths: dict) -> None:
        """Take a worker's result, or replace it if it died and queue its chunk again."""
        assert worker.chunk is not None
        number, (lines, texts) = worker.chunk
        message = worker.receive()
        if message is not None:
            kind, _, payload = message
            worker.chunk = None
            if kind == "error":
                raise payload
            done[number] = payload
            return
        how = worker.how_it_ended()
        deaths[number] = deaths.get(number, 0) + 1
        index = self.workers.index(worker)
        worker.chunk = None
        worker.close()
        if deaths[number] > self.retries:
            raise WorkerDied(
                f"numbert worker {worker.pid} died ({how}) while embedding {describe(lines)}; "
                f"{deaths[number]} workers died on these lines",
                lines,
            )
        warnings.warn(
            f"numbert worker {worker.pid} died ({how}) while embedding {describe(lines)}; "
            f"running them again in a new worker",
            RuntimeWarning,
            stacklevel=3,
        )
        self.workers[index] = self._start()
        self._ready(self.workers[index])
        retry.append((number, (lines, texts)))


def embed_batches(
    model: str | os.PathLike,
    texts: Sequence[str],
    batches: Sequence[Sequence[int]],
    dim: int,
    workers: int,
    *,
    progress: Callable[[int], object] | None = None,
    load_options: dict | None = None,
    **embed_options,
) -> np.ndarray:
    """Sentence vectors of `texts` from `workers` processes: (len(texts), dim) float32 in input order.

    batches: the positions of every batch in the order one process runs them (`Bert.batches`).
    Each batch is one chunk, and a worker's `embed` of a batch's texts makes that very batch again
    (same texts, same padding, same row order), so every vector is bit-identical to the
    single-process one.
    """
    chunks = [(list(batch), [texts[i] for i in batch]) for batch in batches]
    vectors = np.empty((len(texts), dim), np.float32)
    if not chunks:
        return vectors
    with Pool(model, min(workers, len(chunks)), load_options=load_options, **embed_options) as pool:
        for (positions, _), chunk_vectors in zip(chunks, pool.map(chunks), strict=True):
            vectors[positions] = chunk_vectors
            if progress is not None:
                progress(len(positions))
    return vectors


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
    """A worker's life: load the model, then embed each chunk received until told to stop (None).

    Messages back are (kind, chunk number, payload): ("ready", None, dim), ("ok", n, vectors) or
    ("error", n, exception), the exception being raised again in the parent.
    """
    _, model_name, load_options, embed_options = receive_end.recv()
    try:
        from numbert import load

        model = load(model_name, **load_options)
        send_end.send(("ready", None, cast(np.ndarray, model.embed([], **embed_options)).shape[1]))
    except Exception as e:  # noqa: BLE001 - any failure to load is the parent's error to raise
        send_end.send(("error", None, picklable(e)))
        return
    while (message := receive_end.recv()) is not None:
        number, texts = message
        try:
            send_end.send(("ok", number, model.embed(texts, **embed_options)))
        except Exception as e:  # noqa: BLE001
            send_end.send(("error", number, picklable(e)))


def picklable(error: Exception) -> Exception:
    """The exception itself if it survives pickling, else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(error).__name__}: {error}")


def main(argv: list[str]) -> None:
    """A worker process's entry point: serve on the two pipe file descriptors the parent passed."""
    with Connection(int(argv[0]), writable=False) as receive, Connection(int(argv[1]), readable=False) as send:
        try:
            serve(receive, send)
        except (EOFError, BrokenPipeError, KeyboardInterrupt):  # the parent has gone: nothing left to do
            pass
