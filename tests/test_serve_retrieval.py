"""Served outputs that fit an index, and text-embeddings-inference's /similarity: `numbert serve` of
all-MiniLM-L6-v2 in a subprocess on 127.0.0.1, its answers compared with numbert's Python API and with
sentence-transformers (quantize_embeddings, util.cos_sim)."""

from __future__ import annotations

import base64
import logging

import httpx
import numpy as np
import openai
import pytest
from helpers import ServerProcess, served_model

from numbert.pipeline.quantization import quantize
from numbert.serve.protocol import ApiError

TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A woman is playing violin.",
    "Paris is the capital of France.",
]
TYPES = ["int8", "uint8", "binary", "ubinary"]
MAX_LENGTH = 16  # the server's tokens per input: TEXTS fit, a long text is cut (or refused) cheaply


@pytest.fixture(scope="module")
def server(minilm_dir):
    s = ServerProcess(minilm_dir, "--max-client-batch-size", "8", "--max-length", str(MAX_LENGTH))
    yield s
    assert s.stop() == 0, "".join(s.lines)


@pytest.fixture(scope="module")
def floats(minilm) -> np.ndarray:
    return minilm.embed(TEXTS, progress=False)


@pytest.fixture(scope="module")
def st(torch):
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)  # "int8 buckets from few embeddings"
    return pytest.importorskip("sentence_transformers")


def post(server: ServerProcess, route: str, body) -> httpx.Response:
    return httpx.post(server.url + route, json=body, timeout=60)


def embeddings(server: ServerProcess, **body) -> np.ndarray:
    r = post(server, "/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": TEXTS, **body})
    assert r.status_code == 200, r.text
    return np.array([d["embedding"] for d in r.json()["data"]])


@pytest.mark.parity
@pytest.mark.parametrize("embedding_type", TYPES)
def test_embedding_type_is_quantize_embeddings_of_the_request(server, floats, st, embedding_type):
    """embedding_type quantizes the request's vectors together: numbert's quantize (what embed(texts,
    precision=...) runs) and sentence-transformers' quantize_embeddings of the float vectors, value for value
    (base64: their bytes)."""
    ours = quantize(floats, embedding_type)
    theirs = st.quantize_embeddings(floats, precision=embedding_type)
    got = embeddings(server, embedding_type=embedding_type, encoding_format="float")
    np.testing.assert_array_equal(got, ours)
    np.testing.assert_array_equal(got, theirs)
    packed = embeddings(server, embedding_type=embedding_type, encoding_format="base64")
    rows = [np.frombuffer(base64.b64decode(row), ours.dtype) for row in packed]
    np.testing.assert_array_equal(np.stack(rows), ours)


def test_dimensions_with_embedding_type_and_the_openai_client(server, minilm):
    """dimensions cuts and renormalizes before quantizing, as embed(truncate_dim=..., precision=...) does."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    answer = client.embeddings.create(
        model="all-MiniLM-L6-v2",
        input=TEXTS,
        dimensions=64,
        encoding_format="float",
        extra_body={"embedding_type": "int8"},
    )
    want = minilm.embed(TEXTS, truncate_dim=64, precision="int8", progress=False)
    np.testing.assert_array_equal(np.array([d.embedding for d in answer.data]), want)
    got = embeddings(server, dimensions=100, embedding_type="float")
    assert np.abs(got - minilm.embed(TEXTS, truncate_dim=100, progress=False)).max() <= 1e-6


def test_dimensions_of_vectors_not_normalized_are_cut_only(minilm_dir, floats):
    embedder = served_model(minilm_dir, recipe={"normalize": False})
    recipe = embedder.request_recipe(None, None, 64)
    np.testing.assert_array_equal(recipe.finish(floats * 3), floats[:, :64] * 3)


def test_a_served_recipe_with_ranges_quantizes_by_them(minilm_dir, floats):
    """Settings' recipe may carry int8 ranges: requests at that precision use them (one input is enough),
    float requests drop them, and dimensions other than their width are refused naming the field."""
    ranges = np.stack([floats.min(0), floats.max(0)]) * np.float32(0.5)
    embedder = served_model(minilm_dir, recipe={"precision": "int8", "ranges": ranges.tolist()})
    served = embedder.request_recipe(None, None, None)
    np.testing.assert_array_equal(served.finish(floats[:1]), quantize(floats[:1], "int8", ranges))
    assert embedder.request_recipe(None, None, None, "float32").finish(floats).dtype == np.float32
    with pytest.raises(ApiError, match="dimensions") as refused:
        embedder.request_recipe(None, None, 64)
    assert refused.value.param == "dimensions"


@pytest.mark.parity
def test_similarity_is_the_cosine_of_the_source_with_each_sentence(server, minilm, floats, st):
    body = {"inputs": {"source_sentence": TEXTS[0], "sentences": TEXTS[1:]}}
    r = post(server, "/similarity", body)
    assert r.status_code == 200, r.text
    want = st.util.cos_sim(floats[:1], floats[1:])[0].numpy()
    assert np.abs(np.array(r.json()) - want).max() <= 1e-6
    long = {"inputs": {"source_sentence": "word " * 30, "sentences": ["word"]}, "parameters": {"truncate": True}}
    r = post(server, "/similarity", long)
    assert r.status_code == 200, r.text
    vectors = minilm.embed(["word " * 30, "word"], max_length=MAX_LENGTH, progress=False)  # cut as embed cuts
    assert abs(r.json()[0] - float(vectors[0] @ vectors[1])) <= 1e-6


SIMILAR = {"source_sentence": "a", "sentences": ["b"]}


@pytest.mark.parametrize(
    "route, body, status, param",
    [
        ("/v1/embeddings", {"input": TEXTS, "embedding_type": "int4"}, 422, "embedding_type"),
        ("/v1/embeddings", {"input": TEXTS, "embedding_type": 8}, 422, "embedding_type"),
        ("/v1/embeddings", {"input": "one text", "embedding_type": "uint8"}, 422, "embedding_type"),
        ("/v1/embeddings", {"input": TEXTS, "dimensions": 385}, 400, "dimensions"),
        ("/v1/embeddings", {"input": TEXTS, "dimensions": 0}, 400, "dimensions"),
        ("/similarity", {"source_sentence": "a", "sentences": ["b"]}, 422, "inputs"),
        ("/similarity", {"inputs": ["a", "b"]}, 422, "inputs"),
        ("/similarity", {"inputs": {"sentences": ["b"]}}, 422, "inputs.source_sentence"),
        ("/similarity", {"inputs": {"source_sentence": 1, "sentences": ["b"]}}, 422, "inputs.source_sentence"),
        ("/similarity", {"inputs": {"source_sentence": "a", "sentences": []}}, 422, "inputs.sentences"),
        ("/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b", 2]}}, 422, "inputs.sentences[1]"),
        ("/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"] * 8}}, 413, "inputs.sentences"),
        ("/similarity", {"inputs": SIMILAR, "parameters": {"truncate": "yes"}}, 422, "parameters.truncate"),
        ("/similarity", {"inputs": SIMILAR, "parameters": 1}, 422, "parameters"),
        (
            "/similarity",
            {"inputs": SIMILAR, "parameters": {"truncation_direction": "Up"}},
            422,
            "parameters.truncation_direction",
        ),
        ("/similarity", {"inputs": SIMILAR, "parameters": {"prompt_name": "query"}}, 422, "prompt_name"),
        ("/similarity", {"inputs": {"source_sentence": "a " * 30, "sentences": ["b"]}}, 413, "inputs.source_sentence"),
        (
            "/similarity",
            {"inputs": {"source_sentence": "a", "sentences": ["b", "a " * 30]}},
            413,
            "inputs.sentences[1]",
        ),
    ],
)
def test_bad_fields_are_named_and_the_server_keeps_serving(server, minilm, route, body, status, param):
    r = post(server, route, body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param
    assert param.split("[")[0] in r.json()["error"]["message"]
    again = post(server, "/similarity", {"inputs": {"source_sentence": "a", "sentences": ["a"]}})
    assert again.status_code == 200 and abs(again.json()[0] - 1) <= 1e-6
