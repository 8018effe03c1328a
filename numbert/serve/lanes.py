"""Lane processes: the forwards of a served model's side-by-side batches, run in processes of their own.

A server's event loop (HTTP, routing, JSON) and its lanes' forwards (numbert.runtime.side_by_side.Lanes) share one
Python lock in one process: each lane waits for it between the NumPy calls of its forward, while the event loop and
the other lane hold it (28-29 % of a lane's time at 64 clients, docs/performance.md). So while the queue
(numbert.pipeline.batcher) runs two batches side by side, each lane hands its batch to a process of its own, one
per lane: a fresh interpreter that memory-maps the same weights (one copy in the page cache), runs on one BLAS
thread and one row thread, as a side-by-side lane does, and answers with the readout's arrays through a pipe:

    away = LaneProcesses("./all-MiniLM-L6-v2", 2)
    away.open()                                         # they load the model in the background
    answers = away.answers(rows, readout)               # in a lane process; None: run it here
    away.close()                                        # after the queue's last batch

The process runs what the lane would (Pipeline.forward_rows with the readout's task, one_token and last_layers,
then the readout), with the same threads, so the answers are the same bits. What stays in the server's own lanes:
a batch alone (it runs with every thread of the process: a lone request is as fast as it was), a long batch (it
takes turns at the points of its forward, numbert.pipeline.batcher), a readout whose pickle is over MOST_PICKLED
bytes (a masked-LM head: /embed_sparse) or that does not pickle, every batch while no lane process is ready
(the first second or so after the server is ready, or after one died), and every batch of a model whose weights are
in the process's own memory over MOST_OWN_BYTES (a bf16 checkpoint widened: each lane process would hold it again;
`ServedModel.lanes_away`).

The processes start in the background once the server's own warm-up is done (Batcher.start). A lane process that
dies (killed, out of memory) fails the batch it held (the Batcher answers its requests with a 500) and a new one
is started in its place, in the background; one that cannot load the model is said in one log line, and its
lane's batches run in the server's process from then on. A process ends when the server closes its pipe: on
`close`, or when the server itself has gone (its pipe's end of file); it ignores SIGINT and SIGTERM, which
stop the server gracefully (its accepted requests are still answered, by the lane processes too).
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from ..pipeline import Readout, Row, load
from ..runtime.blas import configure_own_process, process_environment

log = logging.getLogger("numbert.serve")

MOST_OWN_BYTES = 64 << 20  # a model whose weights hold more of the process's own memory keeps its batches at home
MOST_PICKLED = 4 << 20  # bytes: a readout heavier than this stays in the server (a masked-LM head is ~47 MB)
CLOSE_WITHIN = 10.0  # seconds a lane process has to end after its pipe is closed, before it is killed


class LaneDied(RuntimeError):
    """A lane process ended while it held a batch."""


class LaneProcess:
    """One child process running `serve` on the model, and the readouts it has been sent (by key)."""

    def __init__(self, model: str):
        child_reads, parent_writes = os.pipe()
        parent_reads, child_writes = os.pipe()
        package_root = str(Path(__file__).resolve().parents[2])  # the child imports this very numbert
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; sys.path.insert(0, sys.argv[1]); from numbert.serve.lanes import main; main(sys.argv[2:])",
                package_root,
                str(child_reads),
                str(child_writes),
                model,
            ],
            pass_fds=(child_reads, child_writes),
            env=process_environment(os.environ, 1),  # one BLAS thread, set before the child's NumPy loads
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        os.close(child_reads)
        os.close(child_writes)
        self.send_end = Connection(parent_writes, readable=False)
        self.receive_end = Connection(parent_reads, writable=False)
        self.known: set[int] = set()  # the keys of the readouts it holds

    def ready(self) -> str | None:
        """Wait until the model is loaded: None, or why it is not (its error, or how the process ended)."""
        message = self.receive()
        if message is None:
            return self.how_it_ended()
        return None if message[0] == "ready" else str(message[1])

    def run(self, key: int, pickled: bytes, rows: list[Row]) -> list:
        """The readout's answers for the rows (its pickle sent once, then named by `key`); LaneDied if the process
        ended meanwhile; the child's error raised again here."""
        try:
            self.send_end.send((key, None if key in self.known else pickled, rows))
        except (BrokenPipeError, ConnectionResetError):
            pass  # it has gone: the receiving end says so
        self.known.add(key)
        message = self.receive()
        if message is None:
            raise LaneDied(f"the lane process {self.process.pid} died ({self.how_it_ended()}) running a batch")
        kind, payload = message
        if kind == "error":
            raise payload
        return payload

    def receive(self):
        """The process's next message, or None once it has ended."""
        try:
            return self.receive_end.recv()
        except (EOFError, ConnectionResetError, OSError):
            return None

    def how_it_ended(self) -> str:
        code = self.process.wait()
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"

    def close(self) -> None:
        """End the process: its pipe closed (it ends on the end of file), killed if it has not within CLOSE_WITHIN."""
        for end in (self.send_end, self.receive_end):
            end.close()
        try:
            self.process.wait(CLOSE_WITHIN)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class LaneProcesses:
    """Up to `n` lane processes of the model `model` (a directory or hub id the children load), one per lane:
    `answers` runs a batch in an idle one (numbert.pipeline.batcher's Elsewhere)."""

    def __init__(self, model: str, n: int):
        self.model, self.n = model, n
        self.idle: queue.SimpleQueue[LaneProcess] = queue.SimpleQueue()
        self.processes: list[LaneProcess] = []  # every process started and not yet closed
        self.pickles: dict[int, tuple[Readout, bytes | None]] = {}  # id(readout) -> (readout kept, pickle or None)
        self.lock = threading.RLock()
        self.closed = False

    def answers(self, rows: list[Row], readout: Readout) -> list | None:
        """The rows' answers from an idle lane process, or None when the batch is to run here (no process ready,
        or a readout that stays in the server). LaneDied if its process died (a new one is started)."""
        pickled = self.pickle_of(readout)
        if pickled is None:
            return None
        try:
            process = self.idle.get_nowait()
        except queue.Empty:
            return None
        try:
            answers = process.run(id(readout), pickled, rows)
        except LaneDied as e:
            log.warning("numbert serve: %s; its requests are answered 500, and a new lane process starts", e)
            self.retire(process)
            self.start()
            raise
        except BaseException:
            self.idle.put(process)
            raise
        self.idle.put(process)
        return answers

    def open(self) -> None:
        """Start the lane processes, in the background: until one is ready, `answers` leaves its batches here."""
        for _ in range(self.n):
            self.start()

    def pickle_of(self, readout: Readout) -> bytes | None:
        """The readout's pickle (made once), or None if it stays in the server: too heavy, or not picklable."""
        key = id(readout)
        if key not in self.pickles:
            try:
                pickled: bytes | None = pickle.dumps(readout, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 (it runs in the server's lanes, as it always did)
                pickled = None
            if pickled is not None and len(pickled) > MOST_PICKLED:
                pickled = None
            self.pickles[key] = (readout, pickled)  # the readout kept, so that its id names it alone
        return self.pickles[key][1]

    def start(self) -> None:
        """Start a lane process in the background; it joins the idle ones once its model is loaded."""
        threading.Thread(target=self.bring_up, name="numbert-lane-start", daemon=True).start()

    def bring_up(self) -> None:
        with self.lock:
            if self.closed:
                return
            process = LaneProcess(self.model)
            self.processes.append(process)
        error = process.ready()
        with self.lock:
            if error is not None:
                log.error("numbert serve: a lane process cannot serve %s (%s); its batches run here", self.model, error)
                self.retire(process)
            elif not self.closed:
                self.idle.put(process)

    def retire(self, process: LaneProcess) -> None:
        """Close a process and forget it."""
        with self.lock:
            if process in self.processes:
                self.processes.remove(process)
        process.close()

    def close(self) -> None:
        """End every lane process (after the queue's last batch: none holds a batch)."""
        with self.lock:
            self.closed = True
            processes, self.processes = self.processes, []
        for process in processes:
            process.close()


def serve(receive_end: Connection, send_end: Connection, model: str) -> None:
    """A lane process's life: load the model and warm it up, say ("ready", None) (or ("error", why)), then answer
    each (key, readout's pickle or None, rows) with ("ok", answers) or ("error", exception) until the end of file."""
    try:
        pipeline = load(model)
        pipeline.warm_up()
    except Exception as e:  # noqa: BLE001 (the server says why, and runs the batches itself)
        send_end.send(("error", f"{type(e).__name__}: {e}"))
        return
    send_end.send(("ready", None))
    readouts: dict[int, Readout] = {}
    while True:
        key, pickled, rows = receive_end.recv()
        if pickled is not None:
            readouts[key] = pickle.loads(pickled)
        readout = readouts[key]
        try:
            out = pipeline.forward_rows(
                rows, readout.task, one_token=readout.one_token, last_layers=readout.last_layers
            )
            send_end.send(("ok", readout(out)))
        except Exception as e:  # noqa: BLE001 (the server answers the batch's requests with a 500)
            send_end.send(("error", picklable(e)))


def picklable(error: Exception) -> Exception:
    """The exception itself if it survives pickling, else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(error).__name__}: {error}")


def main(argv: list[str]) -> None:
    """A lane process's entry point: serve the model argv[2] on the two pipe file descriptors argv[0], argv[1],
    on one BLAS thread and one row thread, until the server closes the pipe (or has gone)."""
    configure_own_process(1)
    for stop in (signal.SIGINT, signal.SIGTERM):  # the server stops gracefully, and closes the pipe when it has
        signal.signal(stop, signal.SIG_IGN)
    with Connection(int(argv[0]), writable=False) as receive, Connection(int(argv[1]), readable=False) as send:
        try:
            serve(receive, send, argv[2])
        except (EOFError, BrokenPipeError, KeyboardInterrupt):  # the server closed the pipe, or has gone
            pass
