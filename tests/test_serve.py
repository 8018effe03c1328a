"""numbert serve: the real server in a subprocess on 127.0.0.1 (an ephemeral port), called with the official
openai client and with httpx; every answer is compared with offline `Bert.embed` on all-MiniLM-L6-v2.

Load loops are bounded in count and in time. Timing is never asserted (scripts/bench_serve.py measures it).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import time
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
from helpers import ServerProcess, served_model

import numbert
from numbert.pipeline.batcher import Item
from numbert.pipeline.planner import next_batch
from numbert.runtime.blas import process_threads

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "retrieval",
    "augmented",
    "generation",
    "needs",
    "dense",
    "sentence",
    "embeddings",
    "from",
    "small",
    "encoder",
    "running",
    "on",
    "two",
    "cores",
    "Zürich",
    "café",
    "naïve",
    "3.14",
    "ok",
]


def mixed_texts(n: int, seed: int, longest: int = 40) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(0, longest))) for _ in range(n)]


@pytest.fixture(scope="module")
def model(minilm_dir):
    return numbert.load(minilm_dir)


@pytest.fixture(scope="module")
def server(minilm_dir):
    s = ServerProcess(
        minilm_dir, "--max-concurrent-requests", "64", "--max-client-batch-size", "64", lane_processes=True
    )
    yield s
    if s.proc.poll() is None:
        assert s.stop() == 0, "".join(s.lines)


def assert_close(got, want):
    got = np.asarray(got, np.float32)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-6


def error_of(response: httpx.Response, status: int, param: str | None = None) -> str:
    """The message of an OpenAI-shaped error answer, after checking its status, shape and param."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["param"] == param
    return error["message"]


def still_serving(server: ServerProcess, model) -> None:
    r = httpx.post(server.url + "/v1/embeddings", json={"input": "still here", "model": "all-MiniLM-L6-v2"})
    assert r.status_code == 200
    assert_close(r.json()["data"][0]["embedding"], model.embed("still here", progress=False))


# --- the official openai client and httpx ------------------------------------------------------------


def test_openai_client_both_encoding_formats(server, model):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    texts = mixed_texts(12, seed=1) + ["", "Café naïve résumé", "The quick brown fox jumps over the lazy dog. " * 10]
    want = model.embed(texts, progress=False)
    default = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts)  # the client asks for base64
    assert [d.index for d in default.data] == list(range(len(texts)))
    assert_close([d.embedding for d in default.data], want)
    assert default.model == server.model_name == "all-MiniLM-L6-v2"  # the packaged model/ directory, by its card
    tokens = sum(len(model.tokenizer.encode(t, max_length=256)) for t in texts)
    assert default.usage.prompt_tokens == default.usage.total_tokens == tokens
    floats = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts, encoding_format="float")
    assert_close([d.embedding for d in floats.data], want)
    raw = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts[:3], encoding_format="base64")  # left encoded
    assert_close([np.frombuffer(base64.b64decode(d.embedding), "<f4") for d in raw.data], want[:3])
    one = client.embeddings.create(model="all-MiniLM-L6-v2", input="a single string")
    assert_close([one.data[0].embedding], model.embed(["a single string"], progress=False))
    short = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts[:4], dimensions=64, encoding_format="float")
    cut = want[:4, :64] / np.linalg.norm(want[:4, :64], axis=1, keepdims=True)
    assert_close([d.embedding for d in short.data], cut)
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        client.embeddings.create(model="all-MiniLM-L6-v2", input="x", dimensions=385)
    assert [m.id for m in client.models.list()] == [server.model_name]


@pytest.fixture(scope="module")
def SentenceTransformer(torch):
    return pytest.importorskip("sentence_transformers").SentenceTransformer


@pytest.mark.parity
def test_openai_client_matches_sentence_transformers(server, minilm_dir, SentenceTransformer):
    texts = mixed_texts(16, seed=2) + ["Москва — столица России.", "東京は日本の首都です。"]
    want = SentenceTransformer(str(minilm_dir), device="cpu").encode(texts)
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    got = np.array(
        [d.embedding for d in client.embeddings.create(model="all-MiniLM-L6-v2", input=texts).data], np.float32
    )
    cosines = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cosines.min() >= 0.99999


def test_tei_routes_and_token_ids(server, model):
    texts = ["Hello world!", "Token ids work too.", "x"]
    r = httpx.post(server.url + "/embed", json={"inputs": texts})
    assert_close(r.json(), model.embed(texts, progress=False))
    r = httpx.post(server.url + "/embed", json={"inputs": texts[0], "normalize": False})
    assert_close(r.json(), model.embed(texts[:1], normalize=False, progress=False))
    tokens = httpx.post(server.url + "/tokenize", json={"inputs": texts}).json()
    assert [[t["id"] for t in row] for row in tokens] == [model.tokenizer.encode(t).ids for t in texts]
    assert tokens[0][1] == {"id": 7592, "text": "Hello", "special": False, "start": 0, "stop": 5}
    assert tokens[0][0]["special"] and tokens[0][0]["start"] is None
    ids = [[t["id"] for t in row] for row in tokens]  # ids as /tokenize gives them embed as their text does
    r = httpx.post(
        server.url + "/v1/embeddings", json={"input": ids, "model": "all-MiniLM-L6-v2", "encoding_format": "float"}
    )
    assert_close([d["embedding"] for d in r.json()["data"]], model.embed(texts, progress=False))
    r = httpx.post(server.url + "/v1/embeddings", json={"input": ids[0]})  # one input as a list of ids
    assert_close([r.json()["data"][0]["embedding"]], model.embed(texts[:1], progress=False))
    assert httpx.get(server.url + "/health").json() == {"status": "ready"}
    metrics = httpx.get(server.url + "/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    for name in (
        "numbert_requests_total{",
        "numbert_inputs_total ",
        "numbert_tokens_total ",
        "numbert_queue_depth ",
        "numbert_batch_inputs_bucket{",
        "numbert_request_duration_seconds_bucket{",
    ):
        assert name in metrics.text
    assert 'numbert_requests_total{endpoint="/embed",status="200"} 2' in metrics.text
    r = httpx.post(server.url + "/embed", json={"inputs": texts, "prompt_name": 3})
    assert "must be a string" in error_of(r, 422, "prompt_name")


# --- load: many clients, overload, shutdown ------------------------------------------------------------


async def client_loop(url: str, texts: list[str], requests: int, seed: int, results: list, deadline: float) -> None:
    """One client: `requests` requests of 1 or 2 texts, one after the other, each answer kept with its texts."""
    rng = np.random.default_rng(seed)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for _ in range(requests):
            if time.monotonic() > deadline:
                return
            picked = [int(i) for i in rng.integers(0, len(texts), rng.integers(1, 3))]
            body = {"input": [texts[i] for i in picked], "model": "all-MiniLM-L6-v2", "encoding_format": "base64"}
            try:
                r = await client.post("/v1/embeddings", json=body)
            except httpx.TransportError as e:
                results.append((picked, e))
                return
            results.append((picked, r))


def check_answers(results: list, want: np.ndarray) -> int:
    """Every answer is complete and equal to offline embed; returns how many there were."""
    for picked, r in results:
        assert r.status_code == 200, r.text
        data = r.json()["data"]
        assert [d["index"] for d in data] == list(range(len(picked)))
        got = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), "<f4") for d in data])
        assert np.abs(got - want[picked]).max() <= 1e-6
    return len(results)


def test_64_concurrent_clients_get_every_answer_right(server, model):
    texts = mixed_texts(200, seed=3, longest=10)
    want = model.embed(texts, progress=False)
    results: list = []
    deadline = time.monotonic() + 300  # a bound against hangs: it takes far less

    async def main():
        await asyncio.gather(*(client_loop(server.url, texts, 20, seed, results, deadline) for seed in range(64)))

    asyncio.run(main())
    assert check_answers(results, want) == 64 * 20


def children(pid: int) -> list[str]:
    """The command lines of a process's children (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError, IndexError):  # a process that ended meanwhile
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the server's children in /proc")
def test_a_server_of_one_model_runs_two_lane_processes(server):
    """Its side-by-side batches run in lane processes (numbert.serve.lanes), the children of the server: one a
    lane, as many as its batches side by side (two on two cores), none if it runs one at a time."""
    lanes = process_threads(dict(os.environ))
    assert sum("numbert.serve.lanes" in line for line in children(server.proc.pid)) == (lanes if lanes > 1 else 0)


def test_overload_answers_429_then_recovers(server, model):
    texts = mixed_texts(2, seed=4, longest=12)
    want = model.embed(texts, progress=False)
    body = {"input": texts, "model": "all-MiniLM-L6-v2"}

    async def burst(n):
        async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=httpx.Limits(max_connections=n)) as client:
            return await asyncio.gather(*(client.post("/v1/embeddings", json=body) for _ in range(n)))

    answers = asyncio.run(burst(160))  # 2.5 x --max-concurrent-requests
    busy = [r for r in answers if r.status_code == 429]
    assert busy and all(r.status_code == 200 for r in answers if r not in busy)
    assert busy[0].headers["Retry-After"] == "1"
    assert error_of(busy[0], 429) and busy[0].json()["error"]["code"] == "rate_limit_exceeded"
    for r in answers:
        if r.status_code == 200:
            assert_close([d["embedding"] for d in r.json()["data"]], want)
    again = asyncio.run(burst(16))  # within the limit: all answered
    assert [r.status_code for r in again] == [200] * 16


def test_sigterm_mid_load_loses_no_accepted_request(minilm_dir, model):
    s = ServerProcess(minilm_dir)
    texts = mixed_texts(100, seed=5, longest=24)
    want = model.embed(texts, progress=False)
    results: list = []

    async def main():
        clients = [
            asyncio.create_task(client_loop(s.url, texts, 200, seed, results, time.monotonic() + 30))
            for seed in range(16)
        ]
        while len(results) < 40:  # the server is busy; now stop it
            await asyncio.sleep(0.01)
        s.proc.send_signal(signal.SIGTERM)
        await asyncio.gather(*clients)

    asyncio.run(main())
    assert s.proc.wait(60) == 0, "".join(s.lines)
    answered = [(p, r) for p, r in results if isinstance(r, httpx.Response)]
    refused = [r for p, r in results if not isinstance(r, httpx.Response)]  # never accepted: the port had closed
    assert check_answers(answered, want) == s.answered() >= 40
    assert len(refused) == 16  # each client ended on a closed connection, not on a lost answer


def test_workers_share_the_port(minilm_dir, model):
    s = ServerProcess(minilm_dir, "--workers", "2")
    try:
        deadline = time.monotonic() + 60  # /health answered by one worker; the other may still be loading (503)
        while sum(" ready (" in line for line in s.lines) < 2:
            assert time.monotonic() < deadline and s.proc.poll() is None, "".join(s.lines)
            time.sleep(0.05)
        texts = mixed_texts(6, seed=6)
        for _ in range(4):  # connections land on either worker
            r = httpx.post(s.url + "/v1/embeddings", json={"input": texts, "encoding_format": "float"})
            assert_close([d["embedding"] for d in r.json()["data"]], model.embed(texts, progress=False))
        deadline = time.monotonic() + 30  # /metrics sums both workers' counters, each at most a second old
        while 'numbert_requests_total{endpoint="/v1/embeddings",status="200"} 4' not in (
            metrics := httpx.get(s.url + "/metrics").text
        ):
            assert time.monotonic() < deadline, metrics
            time.sleep(0.1)
        assert "numbert_inputs_total 24" in metrics and "numbert_requests_in_flight 0" in metrics
    finally:
        assert s.stop(signal.SIGINT) == 0, "".join(s.lines)  # Ctrl-C: a graceful stop too


# --- slow, idle and malformed clients -------------------------------------------------------------------


def connect(server: ServerProcess, sends: bytes = b"") -> socket.socket:
    c = socket.create_connection(("127.0.0.1", server.port))
    c.sendall(sends)
    return c


def half_a_body(server: ServerProcess) -> socket.socket:
    """A connection whose request the app is reading (it asked for the body: 100 Continue), half sent."""
    c = connect(
        server,
        b"POST /v1/embeddings HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 40\r\n"
        b"Expect: 100-continue\r\n\r\n",
    )
    c.settimeout(30)
    assert c.recv(64).startswith(b"HTTP/1.1 100 ")
    c.sendall(b'{"input": ')
    return c


def until_closed(c: socket.socket, within: float) -> bytes:
    """Everything the server sends on c until it closes c; fails if it has not within `within` seconds."""
    c.settimeout(within)
    got = b""
    while chunk := c.recv(65536):
        got += chunk
    c.close()
    return got


def answer_once_not_503(server: ServerProcess) -> httpx.Response:
    """The answer to a good request once the server has seen closed connections go (at most 10 s)."""
    for _ in range(100):
        r = httpx.post(server.url + "/v1/embeddings", json={"input": "still here", "model": "all-MiniLM-L6-v2"})
        if r.status_code != 503:
            return r
        time.sleep(0.1)
    return r


def test_slow_bodies_hold_connections_not_admission(minilm_dir, model):
    s = ServerProcess(minilm_dir, "--max-concurrent-requests", "2", "--max-connections", "32")
    try:
        slow = [half_a_body(s) for _ in range(31)]  # 31 bodies being read, none admitted
        r = httpx.post(s.url + "/v1/embeddings", json={"input": "one connection too many"})
        assert r.status_code == 503 and r.text == "Service Unavailable"  # --max-connections: uvicorn's, plain text
        for c in slow[20:]:
            c.close()
        assert answer_once_not_503(s).status_code == 200  # 20 bodies being read (> 2) do not make it a 429
        for c in slow[:20]:
            c.close()
        still_serving(s, model)
    finally:
        assert s.stop() == 0, "".join(s.lines)


def test_slow_idle_and_malformed_clients_are_closed(minilm_dir, model):
    s = ServerProcess(minilm_dir, "--keep-alive-timeout", "1", "--body-timeout", "1")
    try:
        head, _, body = until_closed(half_a_body(s), 20).partition(b"\r\n\r\n")  # a 408 after --body-timeout
        assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head.lower()
        assert json.loads(body)["error"]["code"] == "request_timeout"
        assert until_closed(connect(s), 20) == b""  # says nothing: closed after --keep-alive-timeout
        answered = connect(s, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")  # idle after an answer: closed
        assert until_closed(answered, 20).startswith(b"HTTP/1.1 200 ")
        trickling = connect(s, b"GET /health HTTP/1.1\r\n")  # a head that never ends: closed
        with pytest.raises(OSError):  # (broken pipe or reset, once closed)
            for _ in range(200):  # 20 s
                trickling.sendall(b"X-Slow: 1\r\n")
                time.sleep(0.1)
        garbage = until_closed(connect(s, b"NOT HTTP AT ALL\r\n\r\n"), 20)  # malformed HTTP: 400 in JSON
        head, _, body = garbage.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ") and b"application/json" in head
        assert set(json.loads(body)["error"]) == {"message", "type", "param", "code"}
        still_serving(s, model)
    finally:
        assert s.stop() == 0, "".join(s.lines)


@pytest.mark.parametrize("bound", ["--body-timeout", "--graceful-timeout"])
def test_sigterm_with_a_body_half_sent_stops_within_the_bound(minilm_dir, bound):
    s = ServerProcess(minilm_dir, "--body-timeout", "60", "--graceful-timeout", "60", bound, "1")
    half = half_a_body(s)
    assert s.stop(timeout=30) == 0, "".join(s.lines)
    answer = until_closed(half, 5)  # a 408 (body timeout) or uvicorn's plain-text 500 (the request cancelled)
    assert answer.startswith(b"HTTP/1.1 408 " if bound == "--body-timeout" else b"HTTP/1.1 500 ")


def test_ports_outside_0_to_65535_are_refused(capsys):
    from numbert.cli import build_parser

    for wrong in ("99999", "-1", "http"):
        with pytest.raises(SystemExit) as exit:
            build_parser().parse_args(["serve", "--port", wrong])
        assert exit.value.code == 2 and "0-65535" in capsys.readouterr().err
    assert build_parser().parse_args(["serve", "--port", "0"]).port == 0


# --- bad requests ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, status, param, says",
    [
        (b'{"input": ', 400, None, "not valid JSON"),
        (b"\xff\xfe", 400, None, "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, 400, None, "not valid JSON"),
        (b'["a"]', 422, None, "JSON object"),
        (b'{"model": "all-MiniLM-L6-v2"}', 422, "input", "required"),
        (b'{"input": 5}', 422, "input", "not a number"),
        (b'{"input": []}', 422, "input", "not be empty"),
        (b'{"input": ["a", 3]}', 422, "input[1]", "must be a string"),
        (b'{"input": [[1, 2], []]}', 422, "input[1]", "non-empty list"),
        (b'{"input": [101, "a"]}', 422, "input[1]", "token id"),
        (b'{"input": [101, 1.5, 102]}', 422, "input[1]", "token id"),
        (b'{"input": [[101, 30522, 102]]}', 422, "input[0][1]", "30522"),
        (b'{"input": [101, -1, 102]}', 422, "input[0][1]", "vocabulary"),
        (b'{"input": [101, 100000000000000000000000, 102]}', 422, "input[0][1]", "vocabulary"),
        (b'{"input": "a", "model": 3}', 422, "model", "string"),
        (b'{"input": "a", "encoding_format": "hex"}', 422, "encoding_format", "'float' or 'base64'"),
        (b'{"input": "a", "dimensions": "64"}', 422, "dimensions", "integer"),
        (b'{"input": "a", "dimensions": true}', 422, "dimensions", "integer"),
        (b'{"input": "a", "dimensions": 0}', 400, "dimensions", "positive"),
        (b'{"input": "a", "dimensions": 1000}', 400, "dimensions", "384"),
        (b'{"input": "caf\\ud800e"}', 400, "input", "lone surrogate (U+D800 at character 3)"),  # issue 35
        (b'{"input": ["ok", "\\uDFFF"]}', 400, "input[1]", "lone surrogate"),
        (b'{"input": "a", "user": {"x": ["\\ude00\\ud83d"]}}', 400, "user.x[0]", "lone surrogate"),  # a pair reversed
    ],
)
def test_malformed_requests_get_openai_errors(server, model, body, status, param, says):
    r = httpx.post(server.url + "/v1/embeddings", content=body, headers={"content-type": "application/json"})
    assert says in error_of(r, status, param)
    still_serving(server, model)


def test_a_surrogate_pair_is_one_character_not_refused(server, model):
    """JSON's escaped pair for a character beyond U+FFFF (an emoji) is that character, as UTF-8 would send it."""
    escaped = httpx.post(server.url + "/embed", content=b'{"inputs": "hi \\ud83d\\ude00"}', timeout=30)
    raw = httpx.post(server.url + "/embed", json={"inputs": "hi \U0001f600"}, timeout=30)
    assert escaped.status_code == raw.status_code == 200 and escaped.json() == raw.json()


def test_too_many_too_long_and_too_big(server, model):
    r = httpx.post(server.url + "/v1/embeddings", json={"input": ["a"] * 10_000}, timeout=60)
    assert "10000 inputs" in error_of(r, 413, "input")
    huge = "word " * 200_000  # 1 MB, 200,002 tokens: refused after its first 820 words (16 x 256 chars, to a space)
    r = httpx.post(server.url + "/v1/embeddings", json={"input": ["ok", huge]}, timeout=60)
    assert "is at least 257 tokens long" in error_of(r, 413, "input[1]")
    r = httpx.post(server.url + "/embed", json={"inputs": [huge], "truncate": True}, timeout=60)
    assert_close(r.json(), model.embed([huge], progress=False))  # cut to max_seq_length, as embed cuts it
    r = httpx.post(server.url + "/v1/embeddings", json={"input": [[101] * 300]})
    assert "300 tokens" in error_of(r, 413, "input[0]")
    r = httpx.post(server.url + "/v1/embeddings", json={"input": "x" * 3_000_000}, timeout=60)
    assert "2000000 bytes" in error_of(r, 413)
    assert "normalize" in error_of(
        httpx.post(server.url + "/embed", json={"inputs": "a", "normalize": 1}), 422, "normalize"
    )
    assert "token ids" in error_of(httpx.post(server.url + "/tokenize", json={"inputs": [1, 2]}), 422, "inputs")
    error_of(httpx.get(server.url + "/v1/embeddings"), 405)
    error_of(httpx.get(server.url + "/v2/nothing"), 404)
    still_serving(server, model)


def test_a_long_text_is_judged_by_the_tokens_that_decide(minilm_dir):
    """A server's rows: a text within max_length tokens as embed tokenizes it, a longer one cut as embed cuts it
    (truncate) or refused naming the input, its count read only as far as the limit (the tokenizer tokenizes only
    what decides it)."""
    from numbert.pipeline import InputTooLong

    model = numbert.load(minilm_dir)
    recipe = model.recipe()  # max_length 256
    texts = [" ".join(mixed_texts(2000, seed=3)), "a\x1cb " * 2000, "a " * 100 + "\n" * 5000 + "a " * 200, "a " * 200]
    for text in texts:
        want = model.tokenizer.encode(text.lower(), max_length=None, truncation=False).ids
        cut = want if len(want) <= 256 else want[:255] + want[-1:]  # as embed cuts it
        assert list(model.rows([text], recipe, truncate=True)[0].ids) == cut
        if len(want) <= 256:
            assert list(model.rows([text], recipe, truncate=False)[0].ids) == want
        else:
            with pytest.raises(InputTooLong, match=r"input 0 is at least 257 tokens long") as refused:
                model.rows([text], recipe, truncate=False)
            assert (refused.value.index, refused.value.limit) == (0, 256)
    with pytest.raises(InputTooLong, match="at least 257"):  # a long run of spaces: fast
        model.rows(["a " * 100 + " " * 100_000 + "a " * 200], recipe, truncate=False)


def test_not_ready_until_loaded_and_a_failed_load_says_why(tmp_path):
    from starlette.testclient import TestClient

    from numbert.serve import Settings
    from numbert.serve.app import create_app

    app = create_app(Settings(model=str(tmp_path)))  # an empty directory: no config.json
    client = TestClient(app)  # the app has not started, so the model is not loaded
    assert client.get("/health").status_code == 503 and client.get("/health").json()["status"] == "loading"
    r = client.post("/v1/embeddings", json={"input": "a"})
    assert "loading" in error_of(r, 503) and r.headers["Retry-After"] == "1"
    with client:  # start: the load fails, and /health says why
        deadline = time.monotonic() + 30
        while client.get("/health").json()["status"] == "loading" and time.monotonic() < deadline:
            time.sleep(0.01)
        health = client.get("/health")
        assert health.status_code == 503 and "has no weight file" in health.json()["error"]
        assert "has no weight file" in error_of(client.post("/embed", json={"inputs": "a"}), 503)


# --- the batching rule --------------------------------------------------------------------------------


def test_next_batch_runs_the_oldest_input_with_neighbours_by_length():
    def items(lengths):
        return [Item(arrival, length, None, arrival) for arrival, length in enumerate(lengths)]

    def arrivals(waiting, max_tokens, max_rows):
        return [i.arrival for i in next_batch(waiting, max_tokens, max_rows)]

    waiting = items([10, 50, 12, 11, 9, 49, 3])  # longest first: 50 49 12 11 [10] 9 3; the oldest is 10
    # the encoder runs real tokens only: a forward costs 32 + its real tokens + 2 a distinct length (planner.next_batch)
    assert arrivals(waiting, 10_000, 8) == [1, 5, 2, 3, 0, 4]  # (32 + 141 + 2 x 6) / 141; the 3 adds 3 + 2 for 3
    assert arrivals(waiting, 40, 8) == [2, 3, 0]  # 4 x 12 > 40 tokens: 12 11 10, (32 + 33 + 2 x 3) / 33
    assert arrivals(waiting, 10_000, 2) == [3, 0]
    assert arrivals(items([600]), 100, 4) == [0]  # the oldest input always runs
    assert arrivals(items([8] * 40), 10_000, 32) == list(range(32))  # like lengths: a full batch


def test_a_huge_input_is_refused_or_cut_by_its_first_tokens_and_tokenize_is_bounded(minilm_dir, server, model):
    """1.9 MB of "!" (1.9 million tokens) once cost /v1/embeddings a whole tokenization to count it (672 MB)
    and /tokenize a 148 MB answer; now the tokenizer reads only the tokens that decide (numbert.tokenizer), and
    /tokenize answers at most max_length tokens an input, max_batch_tokens a request."""
    from numbert.pipeline import InputTooLong, TooManyTokens
    from numbert.serve.protocol import ApiError
    from numbert.serve.routes import Work, tokenize_rows
    from numbert.serve.settings import Settings

    pipeline = numbert.load(minilm_dir)
    recipe = pipeline.recipe()  # max_length 256
    hostile = "!" * 1_900_000
    with pytest.raises(InputTooLong, match=r"input 0 is at least 257 tokens long"):
        pipeline.rows([hostile], recipe, truncate=False)
    (row,) = pipeline.rows([hostile], recipe, truncate=True)
    assert list(row.ids) == pipeline.tokenizer.encode("!" * 300, max_length=256, truncation=True).ids
    text = "A   river\n\n\n bank,  [MASK] " + "word " * 2000 + "中文" * 3000  # spaces, a special token, CJK
    for truncate in (True, False):
        want = pipeline.tokenizer.encode(text, max_length=256 if truncate else None, truncation=truncate).ids
        if len(want) <= 256:
            assert list(pipeline.rows([text], recipe, truncate=truncate)[0].ids) == want
        else:
            with pytest.raises(InputTooLong, match="is at least"):
                pipeline.rows([text], recipe, truncate=truncate)
    with pytest.raises(InputTooLong, match=r"input 1 is at least \d+ tokens long"):
        pipeline.tokenize(["fine", hostile], recipe, special=True, max_tokens=16384)
    with pytest.raises(TooManyTokens, match=r"up to input 64 are 4160 tokens; at most 4096"):
        pipeline.tokenize(["word " * 62] * 100, recipe, special=True, max_tokens=4096)
    spaced = "A   river\n\n\n bank,\t\t[MASK]  x"
    (encoding,) = pipeline.tokenize([spaced], recipe, special=False, max_tokens=4096)
    assert [spaced[a:b] for a, b in encoding.offsets] == ["A", "river", "bank", ",", "[MASK]", "x"]
    r = httpx.post(server.url + "/tokenize", json={"inputs": ["fine", hostile]}, timeout=60)
    assert "at least" in error_of(r, 413, "inputs[1]")
    with pytest.raises(ApiError, match=r"up to 'inputs\[64\]' are 4160 tokens; /tokenize answers at most 4096"):
        work = Work(served_model(minilm_dir), (["word " * 62] * 100, True))
        tokenize_rows(Settings(model=str(minilm_dir), max_batch_tokens=4096), work)
    still_serving(server, model)


def test_a_request_whose_client_disconnects_is_dropped_before_its_forward(minilm_dir):
    """A request queued behind a long one, whose client then closes its connection, never runs: its inputs
    are counted as dropped in /metrics, not as embedded, and the server goes on answering."""
    server = ServerProcess(minilm_dir)
    try:
        long_texts = [" ".join(["word"] * 250)] * 128  # seconds of forwards ahead of it, on a fast machine too
        blocker = socket.create_connection(("127.0.0.1", server.port))
        blocker.sendall(raw_post("/v1/embeddings", {"input": long_texts}))
        time.sleep(0.3)
        leaver = socket.create_connection(("127.0.0.1", server.port))
        leaver.sendall(raw_post("/v1/embeddings", {"input": ["short text"] * 20}))
        time.sleep(0.3)  # read and queued behind the long request
        leaver.close()
        blocker.settimeout(180)  # generous: a loaded machine runs the long request's forwards slowly
        assert blocker.recv(12) == b"HTTP/1.1 200"
        blocker.close()
        deadline = time.monotonic() + 30
        while "numbert_dropped_inputs_total 20" not in (metrics := httpx.get(server.url + "/metrics").text):
            assert time.monotonic() < deadline, metrics
            time.sleep(0.05)
        assert "numbert_inputs_total 128" in metrics and "numbert_queue_depth 0" in metrics
        assert httpx.post(server.url + "/embed", json={"inputs": "still serving"}).status_code == 200
    finally:
        assert server.stop() == 0, "".join(server.lines)


def raw_post(path: str, body: dict) -> bytes:
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
    return head.encode() + b"\r\n\r\n" + data
