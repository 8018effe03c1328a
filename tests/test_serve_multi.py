"""`numbert serve` of a multi-vector model (/embed_multi), of BGE-M3 (/embed, /embed_sparse and /embed_multi from
one model) and Ollama's embedding API: the official `ollama` client and langchain-ollama's OllamaEmbeddings embed
through it, equal to model.embed. One server on 127.0.0.1 serves all-MiniLM-L6-v2 (the default), the committed
PyLate ColBERT and the committed BGE-M3."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from helpers import ServerProcess
from test_late_interaction import DOCUMENTS, PYLATE_DIR, QUERIES
from test_m3 import M3_DIR, TEXTS

import numbert

SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."]


@pytest.fixture(scope="module")
def server(minilm_dir):
    s = ServerProcess(
        minilm_dir,
        *("--model", f"colbert={PYLATE_DIR}", "--model", f"m3={M3_DIR}", "--max-batch-tokens", "256"),
        *("--max-client-batch-size", "32"),
    )
    yield s
    assert s.stop() == 0, "".join(s.lines)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text[:300]
    return response.json()["error"]


def assert_close(got, want: list[np.ndarray] | np.ndarray, tolerance: float = 1e-5) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        a = np.asarray(a, np.float32)
        assert a.shape == b.shape
        assert np.abs(a - b).max() <= tolerance


# --- /embed_multi ----------------------------------------------------------------------------------------------


def test_embed_multi_is_embed_multi(http):
    colbert = numbert.load(PYLATE_DIR)
    for is_query, texts in ((True, QUERIES), (False, DOCUMENTS)):
        got = http.post("/models/colbert/embed_multi", json={"inputs": texts, "is_query": is_query})
        assert got.status_code == 200, got.text
        assert_close(got.json(), colbert.embed_multi(texts, is_query=is_query))
    one = http.post("/models/colbert/embed_multi", json={"inputs": "Paris"}).json()
    assert np.shape(one) == (1, 4, 16)  # [CLS] [D] paris [SEP]


def test_embed_multi_is_bounded_and_refuses_what_it_cannot_answer(http):
    many = error_of(http.post("/models/colbert/embed_multi", json={"inputs": QUERIES * 10, "is_query": True}), 413)
    assert "360 tokens" in many["message"] and "at most 256" in many["message"] and many["code"] == "input_too_long"
    plain = error_of(http.post("/embed_multi", json={"inputs": "a text"}), 400)
    assert plain["code"] == "model_not_multi_vector" and "is not a multi-vector model" in plain["message"]
    ids = error_of(http.post("/models/colbert/embed_multi", json={"inputs": [101, 102]}), 422)
    assert ids["param"] == "inputs"
    dense = error_of(http.post("/models/colbert/embed", json={"inputs": "a text"}), 400)
    assert dense["code"] == "model_is_multi_vector" and "/embed_multi" in dense["message"]


def test_bge_m3_answers_its_three_outputs_from_one_model(http):
    m3 = numbert.load(M3_DIR)
    out = m3.embed_m3(TEXTS)
    assert_close(http.post("/models/m3/embed", json={"inputs": TEXTS}).json(), out.dense)
    sparse = http.post("/models/m3/embed_sparse", json={"inputs": TEXTS}).json()
    for got, want in zip(sparse, out.sparse):
        assert [v["index"] for v in got] == want.ids.tolist()
        np.testing.assert_allclose([v["value"] for v in got], want.weights, atol=1e-5)
    assert_close(http.post("/models/m3/embed_multi", json={"inputs": TEXTS}).json(), out.multi)
    info = http.get("/models/m3/info").json()
    assert info["served_model_name"] == "m3" and info["model_type"] == {"embedding": {"pooling": "cls"}}


# --- Ollama's API -----------------------------------------------------------------------------------------------


@pytest.mark.parity
def test_the_ollama_client_embeds_through_numbert(server, minilm):
    ollama = pytest.importorskip("ollama")
    client = ollama.Client(host=server.url)
    want = minilm.embed(SENTENCES, progress=False)
    answer = client.embed(model=server.model_name, input=SENTENCES)
    assert answer.model == server.model_name and answer.prompt_eval_count == sum(
        len(minilm.tokenizer.encode(t)) for t in SENTENCES
    )
    assert answer.total_duration > 0 and answer.load_duration == 0
    assert_close(answer.embeddings, want, 1e-6)
    assert_close(client.embed(model=f"{server.model_name}:latest", input=SENTENCES[0]).embeddings, want[:1], 1e-6)
    assert_close([client.embeddings(model=server.model_name, prompt=SENTENCES[1]).embedding], want[1:2], 1e-6)
    assert client.embeddings(model=server.model_name, prompt="").embedding == []
    cut = client.embed(model=server.model_name, input="word " * 600, dimensions=64)
    assert np.shape(cut.embeddings) == (1, 64)
    with pytest.raises(ollama.ResponseError) as refused:
        client.embed(model=server.model_name, input="word " * 600, truncate=False)
    assert refused.value.status_code == 413 and "input[0]" in refused.value.error
    listed = {m.model: m for m in client.list().models}
    assert set(listed) == {f"{server.model_name}:latest", "colbert:latest", "m3:latest"}
    tag = listed[f"{server.model_name}:latest"]
    assert len(tag.digest) == 64 and tag.size > 80_000_000 and tag.details.family == "bert"
    shown = client.show(server.model_name)
    assert "embedding" in shown.capabilities and shown.modelinfo["bert.embedding_length"] == 384
    with pytest.raises(ollama.ResponseError) as missing:
        client.show("no-such-model")
    assert missing.value.status_code == 404 and "no-such-model" in missing.value.error


@pytest.mark.parity
def test_langchain_ollama_embeds_through_numbert(server, minilm):
    langchain_ollama = pytest.importorskip("langchain_ollama")
    embeddings = langchain_ollama.OllamaEmbeddings(model=server.model_name, base_url=server.url)
    want = minilm.embed(SENTENCES, progress=False)
    assert_close(embeddings.embed_documents(SENTENCES), want, 1e-6)
    assert_close([embeddings.embed_query(SENTENCES[2])], want[2:], 1e-6)


def test_ollama_errors_come_in_ollamas_shape(http):
    r = http.post("/api/embed", json={"model": "m", "input": 3})
    assert r.status_code == 422 and isinstance(r.json()["error"], str) and "'input'" in r.json()["error"]
    assert http.post("/api/embed", content=b"{").json()["error"].startswith("the request body is not valid JSON")
    assert http.get("/api/version").json() == {"version": numbert.__version__}


def test_one_served_model_runs_two_lanes_and_several_models_one_each():
    """A server of one model runs its batches on as many lanes as numbert's own process runs batches side by side;
    a server of several runs one lane a model (the lanes' BLAS limit is the process's, not a model's)."""
    from numbert.runtime import blas
    from numbert.serve.models import lanes
    from numbert.serve.settings import Settings

    previous = blas.batches_at_once()
    blas.use_side_by_side(2)  # as in `numbert serve`'s own process on 2 cores
    try:
        assert lanes(Settings(model="a")) == 2
        assert lanes(Settings(model="a", more_models={"b": "b"})) == 1
    finally:
        blas.use_side_by_side(previous)
