"""The server's counters, rendered as Prometheus text (exposition format 0.0.4) at GET /metrics.

Requests by endpoint and status, inputs and tokens embedded, inputs and padded tokens per forward
pass, the queue depth, requests in flight, and request latency. Updated from the event loop and the
model thread, hence the lock. With `--workers N`, each worker process counts its own requests and
publishes its counters (`state`, as JSON) to a file of its own in a directory the parent process made;
the worker answering /metrics sums every worker's file (`merged`), so the counts are the server's.
"""

from __future__ import annotations

import bisect
import json
import os
import threading
from collections import defaultdict
from pathlib import Path

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)  # seconds
BATCH_INPUT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
BATCH_TOKEN_BUCKETS = (64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


class Histogram:
    """Observations counted into cumulative `le` buckets, with their sum and count."""

    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value

    def lines(self, name: str, labels: str = "") -> list[str]:
        out, total = [], 0
        for bound, count in zip((*self.buckets, "+Inf"), self.counts):
            total += count
            out.append(f'{name}_bucket{{{labels}{"," if labels else ""}le="{bound}"}} {total}')
        braces = f"{{{labels}}}" if labels else ""
        return out + [f"{name}_sum{braces} {self.sum}", f"{name}_count{braces} {total}"]

    def add(self, state: dict) -> None:
        """Add another histogram's counts (its `state`) to these."""
        self.counts = [a + b for a, b in zip(self.counts, state["counts"])]
        self.sum += state["sum"]

    def state(self) -> dict:
        return {"counts": self.counts, "sum": self.sum}


class Metrics:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = defaultdict(int)  # (endpoint, status) -> count
        self.latency: dict[str, Histogram] = {}  # endpoint -> seconds
        self.inputs = self.tokens = 0  # embedded (answered) inputs and their tokens
        self.in_flight = 0  # requests admitted and not yet answered
        self.queue_depth = 0  # inputs waiting for the model
        self.dropped_inputs = 0  # inputs taken off the queue unrun: their client had gone
        self.batch_inputs = Histogram(BATCH_INPUT_BUCKETS)
        self.batch_tokens = Histogram(BATCH_TOKEN_BUCKETS)  # padded: rows x longest

    def answered(self, endpoint: str, status: int, seconds: float, inputs: int = 0, tokens: int = 0) -> None:
        with self.lock:
            self.requests[endpoint, status] += 1
            self.latency.setdefault(endpoint, Histogram(LATENCY_BUCKETS)).observe(seconds)
            self.inputs += inputs
            self.tokens += tokens

    def queued(self, inputs: int) -> None:
        with self.lock:
            self.queue_depth += inputs

    def dropped(self, inputs: int) -> None:
        """Inputs taken off the queue unrun: their request's client has gone."""
        with self.lock:
            self.queue_depth -= inputs
            self.dropped_inputs += inputs

    def ran_batch(self, inputs: int, padded_tokens: int) -> None:
        with self.lock:
            self.queue_depth -= inputs
            self.batch_inputs.observe(inputs)
            self.batch_tokens.observe(padded_tokens)

    def state(self) -> dict:
        """Every counter, as JSON values."""
        with self.lock:
            return {
                "requests": [[e, s, n] for (e, s), n in self.requests.items()],
                "latency": {e: h.state() for e, h in self.latency.items()},
                "inputs": self.inputs,
                "tokens": self.tokens,
                "in_flight": self.in_flight,
                "queue_depth": self.queue_depth,
                "dropped_inputs": self.dropped_inputs,
                "batch_inputs": self.batch_inputs.state(),
                "batch_tokens": self.batch_tokens.state(),
            }

    def add(self, state: dict) -> None:
        """Add another process's counters (its `state`) to these."""
        with self.lock:
            for e, s, n in state["requests"]:
                self.requests[e, s] += n
            for e, h in state["latency"].items():
                self.latency.setdefault(e, Histogram(LATENCY_BUCKETS)).add(h)
            for name in ("inputs", "tokens", "in_flight", "queue_depth", "dropped_inputs"):
                setattr(self, name, getattr(self, name) + state[name])
            self.batch_inputs.add(state["batch_inputs"])
            self.batch_tokens.add(state["batch_tokens"])

    def publish(self, directory: Path) -> None:
        """Write this process's counters to directory/<pid>.json, whole (written aside, then renamed)."""
        path = directory / f"{os.getpid()}.json"
        aside = path.with_suffix(".tmp")
        aside.write_text(json.dumps(self.state()))
        os.replace(aside, path)

    def merged(self, directory: Path) -> Metrics:
        """The sum of every process's counters in `directory`, this process's as they are now."""
        self.publish(directory)
        total = Metrics()
        for path in directory.glob("*.json"):
            total.add(json.loads(path.read_text()))
        return total

    def render(self) -> str:
        with self.lock:
            lines = [
                "# HELP numbert_requests_total HTTP requests answered, by endpoint and status.",
                "# TYPE numbert_requests_total counter",
            ]
            lines += [
                f'numbert_requests_total{{endpoint="{e}",status="{s}"}} {n}'
                for (e, s), n in sorted(self.requests.items())
            ]
            lines += [
                "# HELP numbert_request_duration_seconds Time from admission to answer.",
                "# TYPE numbert_request_duration_seconds histogram",
            ]
            for endpoint, histogram in sorted(self.latency.items()):
                lines += histogram.lines("numbert_request_duration_seconds", f'endpoint="{endpoint}"')
            lines += [
                "# HELP numbert_inputs_total Inputs embedded.",
                "# TYPE numbert_inputs_total counter",
                f"numbert_inputs_total {self.inputs}",
                "# HELP numbert_tokens_total Tokens of the inputs embedded, [CLS] and [SEP] included.",
                "# TYPE numbert_tokens_total counter",
                f"numbert_tokens_total {self.tokens}",
                "# HELP numbert_requests_in_flight Requests admitted and not yet answered.",
                "# TYPE numbert_requests_in_flight gauge",
                f"numbert_requests_in_flight {self.in_flight}",
                "# HELP numbert_queue_depth Inputs waiting for the model.",
                "# TYPE numbert_queue_depth gauge",
                f"numbert_queue_depth {self.queue_depth}",
                "# HELP numbert_dropped_inputs_total Inputs taken off the queue unrun, their client gone.",
                "# TYPE numbert_dropped_inputs_total counter",
                f"numbert_dropped_inputs_total {self.dropped_inputs}",
                "# HELP numbert_batch_inputs Inputs per forward pass.",
                "# TYPE numbert_batch_inputs histogram",
            ]
            lines += self.batch_inputs.lines("numbert_batch_inputs")
            lines += [
                "# HELP numbert_batch_tokens Padded tokens (rows x longest) per forward pass.",
                "# TYPE numbert_batch_tokens histogram",
            ]
            lines += self.batch_tokens.lines("numbert_batch_tokens")
        return "\n".join(lines) + "\n"
