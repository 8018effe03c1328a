"""The routes' table (numbert.serve.routes): every route that works on inputs is answered by one coroutine, and each
traces its phases the same way: tokenize, then (when it runs the model) queue and a forward per batch, then render.

The server runs in-process (Starlette's TestClient) over MiniLM, the cross-encoder and BGE-M3 fixtures; the tracing is
a recorder standing in for OpenTelemetry's (tests/test_serve_deploy.py sends real spans to a collector)."""

from __future__ import annotations

import contextlib
import time

import pytest
from helpers import FIXTURES

from numbert.serve.routes import ROUTES

TEXTS = ["the quick brown fox", "a lazy dog"]
REQUESTS = {  # a valid request to each route of the table (the model it asks for by its /models/NAME/ prefix)
    "/v1/embeddings": ("/v1/embeddings", {"input": TEXTS, "model": "mini"}),
    "/embed": ("/models/mini/embed", {"inputs": TEXTS}),
    "/embed_all": ("/embed_all", {"inputs": TEXTS}),
    "/similarity": ("/similarity", {"inputs": {"source_sentence": "a cat", "sentences": TEXTS}}),
    "/embed_sparse": ("/models/m3/embed_sparse", {"inputs": TEXTS}),
    "/embed_multi": ("/models/m3/embed_multi", {"inputs": TEXTS}),
    "/tokenize": ("/tokenize", {"inputs": TEXTS}),
    "/decode": ("/decode", {"ids": [101, 2003, 102]}),
    "/rerank": ("/models/cross/rerank", {"query": "a cat", "texts": TEXTS}),
    "/v1/rerank": ("/v1/rerank", {"model": "cross", "query": "a cat", "documents": TEXTS}),
    "/predict": ("/models/cross/predict", {"inputs": TEXTS}),
    "/api/embed": ("/api/embed", {"model": "mini", "input": TEXTS}),
    "/api/embeddings": ("/api/embeddings", {"model": "mini", "prompt": "a cat"}),
    "/api/show": ("/api/show", {"model": "mini"}),
}


class Recorder:
    """Stands in for numbert.serve.tracing.Tracing: the phases of the requests, in order."""

    def __init__(self):
        self.names: list[str] = []

    @contextlib.contextmanager
    def phase(self, name: str):
        self.names.append(name)
        yield
        self.names.append(f"/{name}")

    def waited(self, queued: int, forwards: list) -> None:
        self.names += ["queue", *["forward"] * len(forwards)]

    def shutdown(self) -> None:
        pass


@pytest.fixture(scope="module")
def traced(minilm_dir):
    from starlette.testclient import TestClient

    from numbert.serve.app import create_app
    from numbert.serve.settings import Settings

    more = {"cross": str(FIXTURES / "cross_encoder"), "m3": str(FIXTURES / "bge_m3")}
    app = create_app(Settings(model=str(minilm_dir), served_model_name="mini", more_models=more))
    recorder = Recorder()
    app.state.server.tracing = recorder
    with TestClient(app) as client:
        deadline = time.monotonic() + 60
        while client.get("/health").status_code != 200:
            assert time.monotonic() < deadline, client.get("/health").text
            time.sleep(0.05)
        yield client, recorder


def test_every_route_of_the_table_is_tried_here():
    assert [route.path for route in ROUTES] == list(REQUESTS)


@pytest.mark.parametrize("route", ROUTES, ids=[route.path for route in ROUTES])
def test_the_phases_of_each_route_are_traced_the_same_way(traced, route):
    client, recorder = traced
    path, body = REQUESTS[route.path]
    recorder.names.clear()
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    names = recorder.names
    if route.readout is None:  # /tokenize, /decode, /api/show: no model run
        assert names == ["tokenize", "/tokenize", "render", "/render"]
    else:
        forwards = names.count("forward")
        assert forwards >= 1
        assert names == ["tokenize", "/tokenize", "queue", *["forward"] * forwards, "render", "/render"]


def test_answers_carry_the_numbers_nine_significant_digits_wrote():
    """orjson writes the answers' floats (serve/protocol `nine_digits`): each reads back as the very double "%.9g"
    wrote before, for every float32 (tiny, huge, near a rounding tie, subnormal, zero of either sign)."""
    import json

    import numpy as np

    from numbert.serve.protocol import arrays_json, nine_digits

    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.standard_normal(20_000).astype(np.float32) / 20,
            rng.integers(0, 2**31 - 1, 20_000).astype(np.uint32).view(np.float32),  # every exponent, NaN among them
            np.array([0.0, -0.0, 1.0, 1e-45, 3.4028235e38, 0.5, 123456789.0, 1e-20, 2.5e-5], np.float32),
        ]
    )
    values = values[np.isfinite(values)]
    want = np.array([float(f"{v:.9g}") for v in values.tolist()])
    assert np.array_equal(nine_digits(values), want)
    assert np.array_equal(np.array(json.loads(arrays_json(values[None])))[0], want)


def test_bodies_read_as_the_standard_library_reads_them():
    """orjson reads the bodies; what it refuses or would read otherwise (NaN, a lone surrogate, an integer beyond 64
    bits, a number beyond a double) falls back to the standard library, so it reads, and fails, as before."""
    import json

    import pytest

    from numbert.serve.protocol import ApiError, json_object

    for body in [b'{"a": [1, 2.5, "x"]}', b'{"a": 123456789012345678901234567890}', b'{"a": NaN}', b'{"a": 1e400}',
                 b'{"a": 1, "a": 2}', b'{"a": -9223372036854775809}']:  # fmt: skip
        assert repr(json_object(body)) == repr(json.loads(body))
    for body, says in [(b"{", "not valid JSON: Expecting property name"), (b'{"a": "\\ud800"}', "lone surrogate")]:
        with pytest.raises(ApiError, match=says):
            json_object(body)
