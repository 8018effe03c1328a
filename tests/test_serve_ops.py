"""numbert serve in production: several models by name, API keys, CORS, /info, /embed_all, /decode, the request
timeout, the argument checks, and every TEI route's answer validated against TEI's own OpenAPI schemas.

One real server in a subprocess on 127.0.0.1 (an ephemeral port) serves two tiny random models: an embedder (the
default) and a cross-encoder named with --model NAME=PATH, behind two API keys (one given with --api-key, one
in --api-key-file), one CORS origin and a two-second --request-timeout.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import time
from pathlib import Path

import httpx
import jsonschema
import numpy as np
import openai
import pytest
from helpers import ServerProcess, bounded
from safetensors.numpy import load_file, save_file

import numbert
from numbert.model.config import BertConfig
from numbert.testing import write_random_bert

KEYS = ("sk-numbert-test-key-given-on-the-command-line", "sk-numbert-test-key-read-from-the-key-file")
WRONG = "sk-numbert-test-key-that-is-wrong"
ORIGIN = "https://app.example"
TINY = BertConfig(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=128
)
SCHEMAS = json.loads((Path(__file__).parent / "fixtures" / "tei_openapi_schemas.json").read_text())
TEXTS = ["What is Deep Learning?", "Hello, world!", "x"]


def write_cross_encoder(directory: Path, vocab_path: Path) -> Path:
    """A random BertForSequenceClassification with one label: a reranker."""
    write_random_bert(directory, vocab_path, TINY, seed=2)
    weights = load_file(str(directory / "model.safetensors"))
    weights["classifier.weight"] = np.random.default_rng(3).standard_normal((1, TINY.hidden_size), dtype=np.float32)
    weights["classifier.bias"] = np.zeros(1, np.float32)
    save_file(weights, str(directory / "model.safetensors"))
    config = json.loads((directory / "config.json").read_text())
    config |= {"architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0"}}
    (directory / "config.json").write_text(json.dumps(config))
    return directory


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, vocab_path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("served")
    return {
        "tiny-embedder": write_random_bert(root / "tiny-embedder", vocab_path, TINY, seed=1),
        "ranker": write_cross_encoder(root / "cross-encoder-directory", vocab_path),
    }


@pytest.fixture(scope="module")
def models(dirs) -> dict[str, numbert.Bert]:
    return {name: numbert.load(path) for name, path in dirs.items()}


@pytest.fixture(scope="module")
def server(dirs, tmp_path_factory):
    key_file = tmp_path_factory.mktemp("keys") / "keys.txt"
    key_file.write_text(f"# one key a line\n\n{KEYS[1]}\n")
    s = ServerProcess(
        dirs["tiny-embedder"],
        *("--model", f"ranker={dirs['ranker']}", "--api-key", KEYS[0], "--api-key-file", str(key_file)),
        *("--cors-allow-origin", ORIGIN, "--request-timeout", "2", "--max-batch-tokens", "4096"),
    )
    yield s
    if s.proc.poll() is None:
        assert s.stop() == 0, "".join(s.lines)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEYS[0]}"}, timeout=60) as client:
        yield client


def error_of(response: httpx.Response, status: int) -> dict:
    """The error of an OpenAI-shaped answer, after checking its status and shape."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


def assert_close(got, want, tolerance: float = 1e-6):
    got = np.asarray(got, np.float32)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= tolerance


# --- several models -----------------------------------------------------------------------------------


def test_two_models_chosen_by_name(server, http, models, dirs):
    tiny, ranker = models["tiny-embedder"], models["ranker"]
    listed = http.get("/v1/models").json()
    assert [m["id"] for m in listed["data"]] == ["tiny-embedder", "ranker"] and listed["object"] == "list"
    for name, model in models.items():  # OpenAI's model field
        r = http.post("/v1/embeddings", json={"input": TEXTS, "model": name, "encoding_format": "float"})
        assert r.json()["model"] == name
        assert_close([d["embedding"] for d in r.json()["data"]], model.embed(TEXTS, progress=False))
        r = http.post(f"/models/{name}/embed", json={"inputs": TEXTS, "normalize": False})  # the route prefix
        assert_close(r.json(), model.embed(TEXTS, progress=False))
    default = http.post("/embed", json={"inputs": TEXTS, "normalize": False}).json()  # no model named: the first
    assert_close(default, tiny.embed(TEXTS, progress=False))
    assert_close(
        http.post("/models/ranker/v1/embeddings", json={"input": TEXTS, "encoding_format": "float"}).json()["data"][0][
            "embedding"
        ],
        ranker.embed(TEXTS[:1], progress=False)[0],
    )
    ranked = http.post("/v1/rerank", json={"model": "ranker", "query": "deep learning", "documents": TEXTS}).json()
    assert ranked["model"] == "ranker" and sorted(r["index"] for r in ranked["results"]) == [0, 1, 2]
    assert len(http.post("/models/ranker/rerank", json={"query": "q", "texts": TEXTS}).json()) == 3
    refused = http.post("/v1/rerank", json={"model": "tiny-embedder", "query": "q", "documents": ["d"]})
    assert error_of(refused, 400)["code"] == "model_not_a_classifier"
    unknown = error_of(http.post("/v1/embeddings", json={"input": "x", "model": "nope"}), 404)
    assert unknown["param"] == "model" and unknown["code"] == "model_not_found"
    assert "'nope'" in unknown["message"] and "'tiny-embedder', 'ranker'" in unknown["message"]
    assert "'nope'" in error_of(http.post("/models/nope/embed", json={"inputs": "x"}), 404)["message"]
    root = str(dirs["ranker"].parent)
    assert root not in http.get("/v1/models").text and root not in http.get("/models/ranker/info").text  # no paths


def test_a_hub_id_with_a_slash_is_a_route_prefix_too(dirs, models):
    from starlette.testclient import TestClient

    from numbert.serve import Settings
    from numbert.serve.app import create_app

    settings = Settings(model=str(dirs["tiny-embedder"]), more_models={"org/ranker": str(dirs["ranker"])})
    with TestClient(create_app(settings)) as client:
        deadline = time.monotonic() + 60
        while client.get("/health").status_code != 200:
            assert time.monotonic() < deadline, client.get("/health").text
            time.sleep(0.01)
        r = client.post("/models/org/ranker/embed", json={"inputs": TEXTS, "normalize": False})
        assert_close(r.json(), models["ranker"].embed(TEXTS, progress=False))
        r = client.post("/models/org/ranker/v1/embeddings", json={"input": "x", "encoding_format": "float"})
        assert r.json()["model"] == "org/ranker"
        assert [m["id"] for m in client.get("/v1/models").json()["data"]] == ["tiny-embedder", "org/ranker"]


# --- API keys -------------------------------------------------------------------------------------------


def test_api_keys(server, models):
    body = {"input": "x", "model": "tiny-embedder"}
    missing = httpx.post(server.url + "/v1/embeddings", json=body)
    assert error_of(missing, 401)["code"] == "invalid_api_key" and missing.headers["WWW-Authenticate"] == "Bearer"
    wrong = httpx.post(server.url + "/v1/embeddings", json=body, headers={"Authorization": f"Bearer {WRONG}"})
    assert WRONG not in wrong.text and "not one this server accepts" in error_of(wrong, 401)["message"]
    basic = httpx.post(server.url + "/embed", json={"inputs": "x"}, headers={"Authorization": f"Basic {KEYS[0]}"})
    error_of(basic, 401)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.url + "/v1", api_key=WRONG, max_retries=0).embeddings.create(**body)
    for key in KEYS:  # the --api-key one, and the --api-key-file one
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)
        answer = client.embeddings.create(model="tiny-embedder", input=TEXTS)
        assert_close([d.embedding for d in answer.data], models["tiny-embedder"].embed(TEXTS, progress=False))
        assert [m.id for m in client.models.list()] == ["tiny-embedder", "ranker"]
    assert httpx.get(server.url + "/health").status_code == 200  # open by default
    assert httpx.get(server.url + "/metrics").status_code == 200


def test_protect_health_needs_a_key_for_health_and_metrics(tmp_path):
    from starlette.testclient import TestClient

    from numbert.serve import Settings
    from numbert.serve.app import create_app

    client = TestClient(create_app(Settings(model=str(tmp_path), api_keys=["k1"], protect_health=True)))
    for path in ("/health", "/metrics"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"Authorization": "Bearer k1"}).status_code in (200, 503)  # not started


# --- CORS -----------------------------------------------------------------------------------------------


def test_cors_preflight_and_simple_requests(server, http):
    asks = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
    preflight = httpx.options(server.url + "/v1/embeddings", headers={"Origin": ORIGIN, **asks})  # carries no key
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
    elsewhere = httpx.options(server.url + "/v1/embeddings", headers={"Origin": "https://evil.example", **asks})
    assert elsewhere.status_code == 400 and "access-control-allow-origin" not in elsewhere.headers
    simple = http.post("/embed", json={"inputs": "x"}, headers={"Origin": ORIGIN})
    assert simple.status_code == 200 and simple.headers["access-control-allow-origin"] == ORIGIN
    refused = httpx.post(server.url + "/embed", json={"inputs": "x"}, headers={"Origin": ORIGIN})
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == ORIGIN  # readable
    other = http.post("/embed", json={"inputs": "x"}, headers={"Origin": "https://evil.example"})
    assert other.status_code == 200 and "access-control-allow-origin" not in other.headers


# --- TEI's /info, /embed_all and /decode ---------------------------------------------------------------------


def test_info(http):
    info = http.get("/info").json()
    assert info["model_id"] == "tiny-embedder" and info["model_dtype"] == "float32"
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert info["max_input_length"] == 128 and info["max_batch_tokens"] == 4096
    assert info["max_client_batch_size"] == 2048 and info["version"] == numbert.__version__
    assert info["tokenization_workers"] >= 1 and info["auto_truncate"] is False
    ranker = http.get("/models/ranker/info").json()
    assert ranker["model_id"] == "ranker"
    assert ranker["model_type"] == {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}}


def test_embed_all_is_the_last_hidden_state(http, models):
    for name, model in models.items():
        got = http.post(f"/models/{name}/embed_all", json={"inputs": TEXTS}).json()
        out = model(TEXTS)
        for i, vectors in enumerate(got):
            length = int(out.attention_mask[i].sum())
            assert_close(vectors, out.last_hidden_state[i, :length], 1e-5)
    ids = models["tiny-embedder"].tokenizer.encode("Hello, world!").ids
    (one,) = http.post("/embed_all", json={"inputs": ids}).json()  # token ids, as /embed takes them
    assert_close(one, models["tiny-embedder"]("Hello, world!").last_hidden_state, 1e-5)
    too_long = error_of(http.post("/embed_all", json={"inputs": "word " * 200}), 413)
    assert too_long["param"] == "inputs[0]"
    cut = http.post("/embed_all", json={"inputs": "word " * 200, "truncate": True})
    assert len(cut.json()[0]) == 128, cut.text
    many = error_of(http.post("/embed_all", json={"inputs": ["word " * 100] * 41}), 413)  # 41 x 102 tokens
    assert "4182 tokens" in many["message"] and "at most 4096" in many["message"] and many["param"] == "inputs"


def test_decode(http, models):
    tokenizer = models["tiny-embedder"].tokenizer
    ids = [tokenizer.encode(text).ids for text in TEXTS]
    assert http.post("/decode", json={"ids": ids}).json() == [tokenizer.decode(row) for row in ids]
    assert http.post("/decode", json={"ids": ids[1]}).json() == ["hello, world!"]
    kept = http.post("/decode", json={"ids": ids[1], "skip_special_tokens": False}).json()
    assert kept == ["[CLS] hello, world! [SEP]"]
    assert error_of(http.post("/decode", json={"ids": [101, 30522]}), 422)["param"] == "ids[0][1]"
    assert error_of(http.post("/decode", json={"ids": [[1], "a"]}), 422)["param"] == "ids[1]"
    assert error_of(http.post("/decode", json={"ids": []}), 422)["param"] == "ids"


# --- TEI's OpenAPI document ---------------------------------------------------------------------------------

EXAMPLES = {  # a request per TEI path, written from its request schema: (model route prefix, body)
    "/embed": ("", {"inputs": ["What is Deep Learning?", "x"], "normalize": True, "truncate": False}),
    "/embed_all": ("", {"inputs": "What is Deep Learning?", "truncate": True}),
    "/embed_sparse": ("", {"inputs": ["What is Deep Learning?", "x"], "truncate": True}),  # its masked-LM head
    "/tokenize": ("", {"inputs": ["What is Deep Learning?"], "add_special_tokens": True}),
    "/decode": ("", {"ids": [[101, 2054, 2003, 102]], "skip_special_tokens": True}),
    "/v1/embeddings": ("", {"input": ["What is Deep Learning?"], "model": "tiny-embedder", "encoding_format": "float"}),
    "/similarity": ("", {"inputs": {"source_sentence": "What is Deep Learning?", "sentences": ["a", "b"]}}),
    "/rerank": ("/models/ranker", {"query": "What is Deep Learning?", "texts": ["Deep", "b"], "return_text": True}),
    "/predict": ("/models/ranker", {"inputs": [["What is Deep Learning?", "Deep learning is"], ["one text"]]}),
    "/info": ("", None),
    "/health": ("", None),
    "/metrics": ("", None),
}


def served_paths() -> set[str]:
    from numbert.serve import Settings
    from numbert.serve.app import create_app

    return {route.path for route in create_app(Settings(model="unused")).routes}  # type: ignore[attr-defined]


def test_every_tei_path_served_answers_as_teis_openapi_says(http):
    with pytest.raises(jsonschema.ValidationError):  # the schemas do refuse what TEI does not answer
        validate([["0.5"]], "EmbedResponse")
    tei_paths = set(SCHEMAS["paths"])
    served = tei_paths & served_paths()
    assert served >= {"/embed", "/embed_all", "/tokenize", "/decode", "/v1/embeddings", "/rerank", "/predict", "/info"}
    assert served <= set(EXAMPLES), f"add a request to EXAMPLES for {sorted(served - set(EXAMPLES))}"
    for path in sorted(served):
        operation = SCHEMAS["paths"][path]
        prefix, body = EXAMPLES[path]
        if operation["request"] is not None:
            validate(body, operation["request"])
        if operation["method"] == "get":
            r = http.get(prefix + path)
        else:
            r = http.post(prefix + path, json=body)
        assert r.status_code == 200, (path, r.text)
        if operation["response"] is not None:
            validate(r.json(), operation["response"])
    if "/predict" in served:  # a single input: PredictResponse's other form
        validate(http.post("/models/ranker/predict", json={"inputs": "one text"}).json(), "PredictResponse")


def validate(value, schema: str) -> None:
    """`value` valid against the named schema of TEI's document, else a jsonschema.ValidationError."""
    jsonschema.Draft202012Validator({"$ref": f"#/$defs/{schema}", "$defs": SCHEMAS["$defs"]}).validate(value)


# --- arguments ------------------------------------------------------------------------------------------


def test_numeric_arguments_are_checked(capsys):
    from numbert.cli import build_parser

    parser = build_parser()
    for option, wrong, says in [
        ("--request-timeout", "0", "positive number of seconds"),
        ("--request-timeout", "-1", "positive number of seconds"),
        ("--request-timeout", "nan", "positive number of seconds"),
        ("--workers", "-2", "positive integer"),
        ("--body-timeout", "0", "positive integer"),
        ("--max-client-body", "-5", "positive integer"),
        ("--port", "99999", "0-65535"),
    ]:
        with pytest.raises(SystemExit) as exit:
            parser.parse_args(["serve", option, wrong])
        assert exit.value.code == 2 and says in capsys.readouterr().err
    args = parser.parse_args(["serve", "--max-client-body", "1000", "--request-timeout", "2.5"])
    assert args.payload_limit == 1000 and args.request_timeout == 2.5


def test_models_and_keys_from_the_command_line(tmp_path, monkeypatch):
    from numbert.cli.common import Failure
    from numbert.cli.serve import api_keys, named_model, serve, served_models

    (tmp_path / "a=b").mkdir()
    assert named_model("rank=org/model") == ("rank", "org/model")
    assert named_model("org/model") == (None, "org/model")
    assert named_model(str(tmp_path / "a=b")) == (None, str(tmp_path / "a=b"))  # a path with "=" in it
    (tmp_path / "one" / "model").mkdir(parents=True)
    (tmp_path / "two" / "model").mkdir(parents=True)

    def args(**given) -> argparse.Namespace:
        defaults = {"model": None, "served_model_name": None, "api_key": None, "api_key_file": None}
        return argparse.Namespace(**(defaults | given))

    monkeypatch.chdir(tmp_path)
    assert served_models(args(model=["one/model", "b=two/model", "org/hub-model"])) == {
        "model": "one/model",
        "b": "two/model",
        "org/hub-model": "org/hub-model",
    }
    with pytest.raises(Failure, match="two models would be served as 'model'.*NAME=PATH"):
        served_models(args(model=["one/model", "two/model"]))
    with pytest.raises(Failure, match="--served-model-name names the one model"):
        served_models(args(model=["one/model", "b=two/model"], served_model_name="x"))
    missing = tmp_path / "missing.txt"
    with pytest.raises(Failure, match=f"--api-key-file {re.escape(str(missing))}: cannot read it"):
        api_keys(args(api_key_file=[str(missing)]))
    (tmp_path / "empty.txt").write_text("# nothing\n\n")
    with pytest.raises(Failure, match="empty.txt: holds no key"):
        api_keys(args(api_key_file=[str(tmp_path / "empty.txt")]))
    (tmp_path / "spaced.txt").write_text("good-key\nsecret with space\n")
    with pytest.raises(Failure, match=r"spaced.txt, line 2: an API key must be non-empty") as refused:
        api_keys(args(api_key_file=[str(tmp_path / "spaced.txt")]))
    assert "secret" not in str(refused.value)
    with pytest.raises(Failure, match="--protect-health needs --api-key"):
        from numbert.cli import build_parser

        serve(build_parser().parse_args(["serve", "--model", "one/model", "--protect-health"]))


def test_a_key_file_saved_with_a_byte_order_mark_serves_the_key_without_it(tmp_path):
    """Issue 35: a key file a Windows editor saved (UTF-8 with a BOM) kept U+FEFF in its first key, which then
    failed closed: every request answered 401. The mark is dropped; a key holding one elsewhere (or any other
    character no Bearer token carries) is refused at start, naming the line, never the key."""
    from numbert.cli.common import Failure
    from numbert.cli.serve import api_keys
    from numbert.serve.auth import BearerAuth, read_keys

    with bounded(seconds=5, memory=1e6):
        (tmp_path / "keys.txt").write_bytes(b"\xef\xbb\xbfsk-first-key\r\nsk-second-key\r\n")
        keys = read_keys(tmp_path / "keys.txt")
        assert keys == ["sk-first-key", "sk-second-key"]
        assert BearerAuth(None, keys).allowed(b"sk-first-key")  # type: ignore[arg-type]
        (tmp_path / "odd.txt").write_text("sk-good\nsk-\ufeffhidden\n", encoding="utf-8")
        with pytest.raises(ValueError, match=r"odd.txt, line 2: an API key must be printable ASCII.*U\+FEFF") as odd:
            read_keys(tmp_path / "odd.txt")
        assert "hidden" not in str(odd.value)
        with pytest.raises(Failure, match="--api-key: an API key must be printable ASCII"):
            api_keys(argparse.Namespace(api_key=["\u200bsk-zero-width"], api_key_file=None))


# --- the request timeout (last: it keeps the model thread busy for a moment) ----------------------------------


def test_request_timeout_answers_504_and_drops_the_inputs(server, http, models):
    """Sixteen requests at once of 2048 inputs of 128 tokens each (1,024 forwards of 32 inputs: many times what
    the tiny model runs in two seconds on any of our machines) with --request-timeout 2. How many finish in time
    depends on the machine (the first one or two do on a fast Xeon), so the test asserts the contract, not a
    count: every answer is either a whole 200 or a 504 naming --request-timeout, most are 504s, the metrics count
    exactly those, and the inputs still queued at a deadline are dropped unrun (numbert_dropped_inputs_total)."""
    ids = [[101] + [2054] * 126 + [102]] * 2048
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: http.post("/embed", json={"inputs": ids}), range(16)))
    late = [r for r in answers if r.status_code == 504]
    for r in late:
        error = error_of(r, 504)
        assert error["code"] == "timeout" and "--request-timeout" in error["message"]
    for r in answers:
        if r.status_code != 504:
            assert r.status_code == 200 and np.asarray(r.json()).shape == (2048, TINY.hidden_size), r.text[:300]
    assert len(late) >= 8, [r.status_code for r in answers]
    deadline = time.monotonic() + 60
    while "numbert_queue_depth 0\n" not in (metrics := http.get("/metrics").text):
        assert time.monotonic() < deadline, metrics
        time.sleep(0.05)
    dropped = int(re.search(r"numbert_dropped_inputs_total (\d+)", metrics).group(1))
    assert 0 < dropped <= len(late) * 2048
    assert f'numbert_requests_total{{endpoint="/embed",status="504"}} {len(late)}' in metrics
    again = http.post("/embed", json={"inputs": TEXTS, "normalize": False}).json()
    assert_close(again, models["tiny-embedder"].embed(TEXTS, progress=False))


def test_no_key_reaches_the_log(server):
    log = "".join(server.lines)
    assert " ready (" in log
    for key in (*KEYS, WRONG):
        assert key not in log
