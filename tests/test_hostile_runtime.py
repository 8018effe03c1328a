"""What runs on hostile input, and what the server answers (issue 43): a model whose numbers are not finite is a 500
naming it in strict JSON, never a 200 with NaN; a route or model refuses what it cannot apply (a task), naming it;
/embed_multi's answers are bounded by a documented budget before the forward; refusals name the served model, never
its local path. Each test bounds its own time and memory (helpers.bounded).

The server runs in-process (Starlette's TestClient) over tiny random models made here."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import bounded
from safetensors.numpy import load_file, save_file

from numbert.model.config import BertConfig
from numbert.testing import write_random_bert, write_random_cross_encoder

TINY = BertConfig(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=128
)


def strict(text: str):
    """`text` parsed as strict JSON: NaN, Infinity and -Infinity refused, as JSON (and most clients) refuse them."""

    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def with_nan(directory: Path, tensor: str) -> Path:
    """The model in `directory` with the first value of `tensor` made NaN."""
    weights = load_file(str(directory / "model.safetensors"))
    weights[tensor].flat[0] = math.nan
    save_file(weights, str(directory / "model.safetensors"))
    return directory


def client_of(model: Path, **settings):
    """A TestClient of `numbert serve` over `model` (and settings' more_models), once every model is loaded."""
    from starlette.testclient import TestClient

    from numbert.serve import Settings
    from numbert.serve.app import create_app

    client = TestClient(create_app(Settings(model=str(model), **settings)))
    client.__enter__()
    deadline = time.monotonic() + 60
    while client.get("/health").status_code != 200:
        assert time.monotonic() < deadline, client.get("/health").text
        time.sleep(0.01)
    return client


@pytest.fixture(scope="module")
def nan_server(tmp_path_factory, vocab_path):
    """An embedder whose embeddings LayerNorm has a NaN weight, and a cross-encoder ("nan-ranker") whose classifier
    has one: every vector and score they give is NaN."""
    root = tmp_path_factory.mktemp("nan")
    embedder = with_nan(write_random_bert(root / "nan-embedder", vocab_path, TINY), "embeddings.LayerNorm.weight")
    ranker = with_nan(write_random_cross_encoder(root / "ranker-dir", vocab_path, TINY), "classifier.weight")
    client = client_of(embedder, more_models={"nan-ranker": str(ranker)})
    yield client
    client.__exit__(None, None, None)


NAN_REQUESTS = [
    ("/v1/embeddings", {"input": ["x", "y"]}, "nan-embedder"),
    ("/v1/embeddings", {"input": "x", "encoding_format": "base64"}, "nan-embedder"),
    ("/embed", {"inputs": "x"}, "nan-embedder"),
    ("/embed_all", {"inputs": "x"}, "nan-embedder"),
    ("/api/embed", {"input": "x"}, "nan-embedder"),
    ("/api/embeddings", {"prompt": "x"}, "nan-embedder"),
    ("/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b", "c"]}}, "nan-embedder"),
    ("/models/nan-ranker/rerank", {"query": "q", "texts": ["a", "b"]}, "nan-ranker"),
    ("/models/nan-ranker/rerank", {"query": "q", "texts": ["a"], "raw_scores": True}, "nan-ranker"),
    ("/models/nan-ranker/v1/rerank", {"query": "q", "documents": ["a", "b"]}, "nan-ranker"),
    ("/models/nan-ranker/predict", {"inputs": "x"}, "nan-ranker"),
]


@pytest.mark.parametrize(
    ("route", "body", "model"), NAN_REQUESTS, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(NAN_REQUESTS)]
)
def test_a_model_giving_nan_is_a_500_naming_it_in_strict_json(nan_server, route, body, model):
    """Every answer is strict JSON: a model whose numbers are not finite is the model's fault, a 500 naming it
    (`non_finite_output`), never a 200 with a bare NaN; within 10 s and 20 MB."""
    with bounded(seconds=10, memory=20e6):
        r = nan_server.post(route, json=body)
    answer = strict(r.text)
    assert r.status_code == 500, r.text
    message = answer["error"] if route.startswith("/api/") else answer["error"]["message"]
    assert f"the model '{model}' produced numbers that are not finite (NaN or infinity)" in message
    if not route.startswith("/api/"):
        assert answer["error"]["code"] == "non_finite_output" and answer["error"]["type"] == "server_error"


def test_the_renderers_cannot_write_nan_or_infinity():
    """protocol's renderers refuse a number that is not finite (NotFinite, a 500 in strict JSON) whatever reaches
    them: vectors (as numbers or base64), sparse weights, scores."""
    from numbert.serve import protocol

    for bad in (math.nan, math.inf, -math.inf):
        vectors = np.array([[0.5, bad]], np.float32)
        for render in (protocol.tei_response, lambda v: protocol.openai_response(v, "base64", "m", 1)):
            with pytest.raises(protocol.NotFinite):
                render(vectors)
        with pytest.raises(protocol.NotFinite):
            protocol.sparse_response([(np.array([3]), np.array([bad], np.float32))])
        with pytest.raises(protocol.NotFinite):
            protocol.predict_response(np.array([[bad]], np.float32), ["LABEL_0"], single=True)
        assert strict(protocol.NotFinite("m").body().decode())["error"]["code"] == "non_finite_output"
    big = np.array([[0.5, -3e38]], np.float32)  # finite, however large
    np.testing.assert_array_equal(np.array(strict(protocol.tei_response(big).decode()), np.float32), big)
