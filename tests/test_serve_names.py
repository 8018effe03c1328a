"""Model names that never lie: a request naming a model the server does not serve is answered as that API's own
server answers it (Ollama's 404 `model "X" not found, try pulling it first`, OpenAI's 404 model_not_found), unless
the operator asks the one model to answer every name (--answer-any-model-name); a route's /models/NAME/ and a body
naming another model is a 400; every answer's model field names the model that computed it; a long name asked is
never echoed back whole. Through the official `ollama` and `openai` clients, as their users meet it."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from helpers import ServerProcess
from test_late_interaction import PYLATE_DIR


@pytest.fixture(scope="module")
def server(minilm_dir):
    s = ServerProcess(minilm_dir, "--model", f"colbert={PYLATE_DIR}")
    yield s
    assert s.stop() == 0, "".join(s.lines)


@pytest.fixture(scope="module")
def any_name(minilm_dir):
    s = ServerProcess(minilm_dir, "--answer-any-model-name")
    yield s
    assert s.stop() == 0, "".join(s.lines)


def test_the_ollama_client_gets_ollamas_404_for_a_model_not_served(server):
    ollama = pytest.importorskip("ollama")
    client = ollama.Client(host=server.url)
    for call in (
        lambda: client.embed(model="nomic-embed-text", input="hi"),
        lambda: client.embeddings(model="nomic-embed-text", prompt="hi"),
    ):
        with pytest.raises(ollama.ResponseError) as missing:
            call()
        assert missing.value.status_code == 404
        assert missing.value.error == 'model "nomic-embed-text" not found, try pulling it first'
    answer = client.embed(model=server.model_name, input="hi")
    assert answer.model == server.model_name and np.shape(answer.embeddings) == (1, 384)


def test_the_openai_client_gets_model_not_found(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none")
    with pytest.raises(openai.NotFoundError) as missing:
        client.embeddings.create(model="text-embedding-3-small", input="hi")
    error = missing.value.body
    assert (
        error["code"] == "model_not_found"
        and error["param"] == "model"
        and "text-embedding-3-small" in error["message"]
    )
    answer = client.embeddings.create(model=server.model_name, input="hi")
    assert answer.model == server.model_name and len(answer.data[0].embedding) == 384


def test_a_model_answers_to_its_names_and_answers_carry_its_served_name(server):
    """A hub id's last part and any case name the model; the answer names it as the server serves it."""
    names = (server.model_name, server.model_name.upper(), f"sentence-transformers/{server.model_name}")
    for asked in (*names, f"{server.model_name}:latest"):  # Ollama's clients may add its default tag
        r = httpx.post(server.url + "/v1/embeddings", json={"input": "hi", "model": asked}, timeout=60)
        assert r.status_code == 200 and r.json()["model"] == server.model_name, r.text
        r = httpx.post(server.url + "/api/embed", json={"input": "hi", "model": asked}, timeout=60)
        assert r.status_code == 200 and r.json()["model"] == server.model_name, r.text


def test_a_route_and_a_body_naming_two_models_is_a_400(server):
    r = httpx.post(server.url + "/models/colbert/api/embed", json={"input": "hi", "model": "mb"}, timeout=60)
    assert r.status_code == 400 and "'colbert'" in r.json()["error"] and "'mb'" in r.json()["error"]
    r = httpx.post(
        server.url + f"/models/{server.model_name}/v1/embeddings", json={"input": "hi", "model": "colbert"}, timeout=60
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "model_mismatch"
    r = httpx.post(
        server.url + f"/models/{server.model_name}/v1/embeddings",
        json={"input": "hi", "model": server.model_name},
        timeout=60,
    )
    assert r.status_code == 200 and r.json()["model"] == server.model_name


def test_a_long_name_is_not_echoed_back_whole(server):
    name = "x" * 100_000
    r = httpx.post(server.url + "/v1/embeddings", json={"input": "hi", "model": name}, timeout=60)
    assert r.status_code == 404 and len(r.content) < 1_000, len(r.content)
    r = httpx.post(server.url + "/api/embed", json={"input": "hi", "model": name}, timeout=60)
    assert r.status_code == 404 and len(r.content) < 1_000, len(r.content)


def test_the_operator_may_let_the_one_model_answer_every_name(any_name):
    """--answer-any-model-name: for clients that hard-code a name; the answer still names the model that computed
    it, never the name asked."""
    ollama = pytest.importorskip("ollama")
    answer = ollama.Client(host=any_name.url).embed(model="nomic-embed-text", input="hi")
    assert answer.model == any_name.model_name and np.shape(answer.embeddings) == (1, 384)
    r = httpx.post(any_name.url + "/v1/embeddings", json={"input": "hi", "model": "text-embedding-3-small"})
    assert r.status_code == 200 and r.json()["model"] == any_name.model_name


def test_text_logs_have_an_access_line_per_request(server):
    """--log-format text (the default): one access line a request, method, path, status, duration and request id."""
    import time

    httpx.post(server.url + "/embed", json={"inputs": "hi"}, headers={"X-Request-Id": "text-log-1"}, timeout=60)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        lines = [line for line in server.lines if "text-log-1" in line]
        if lines:
            break
        time.sleep(0.05)
    assert len(lines) == 1 and "POST /embed 200" in lines[0] and " ms text-log-1" in lines[0], lines


def test_teis_dimensions_and_a_prompt_name_tokenize_cannot_apply(server):
    """TEI 1.9's /embed `dimensions` cuts the vectors (renormalized); its /tokenize `prompt_name` is refused, not
    ignored (the text is tokenized as sent)."""
    full = httpx.post(server.url + "/embed", json={"inputs": ["hi there"]}, timeout=60).json()[0]
    cut = httpx.post(server.url + "/embed", json={"inputs": ["hi there"], "dimensions": 64}, timeout=60).json()[0]
    want = np.asarray(full[:64]) / np.linalg.norm(full[:64])
    assert len(cut) == 64 and np.allclose(cut, want, atol=1e-6)
    for bad in (0, -1, "64", 10**6):
        r = httpx.post(server.url + "/embed", json={"inputs": "hi", "dimensions": bad}, timeout=60)
        assert r.status_code in (400, 422) and "dimensions" in r.text, (bad, r.text)
    r = httpx.post(server.url + "/tokenize", json={"inputs": "hi", "prompt_name": "query"}, timeout=60)
    assert r.status_code == 422 and "'prompt_name' is not applied here" in r.json()["error"]["message"]
    ok = httpx.post(server.url + "/tokenize", json={"inputs": "hi", "prompt_name": None}, timeout=60)
    assert ok.status_code == 200
