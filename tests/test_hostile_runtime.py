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
from helpers import FIXTURES, bounded
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


# --- multi-vector index files (numbert search --multi-index) ------------------------------------------------------


def npy_bytes(array: np.ndarray, shape: tuple | None = None) -> bytes:
    """`array` as a .npy file, its header claiming `shape` if given (a header that lies)."""
    import io

    header = {"descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False, "shape": shape or array.shape}
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue() + array.tobytes()


def npz(path: Path, compress: bool = False, **members: bytes) -> Path:
    import zipfile

    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(f"{name}.npy", data)
    return path


GOOD_VECTORS = np.arange(12, dtype=np.float32).reshape(6, 2)
GOOD_OFFSETS = np.array([0, 2, 6], np.int64)


def hostile_indexes(root: Path) -> dict[str, tuple[Path, str]]:
    """Each hostile or broken index, and what its one-line refusal must say."""
    good = npz(root / "good.npz", vectors=npy_bytes(GOOD_VECTORS), offsets=npy_bytes(GOOD_OFFSETS))
    truncated = root / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:200])
    zeros = np.zeros((1 << 20, 2), np.float32)  # 8 MB of zeros claiming 8 GB, compressed to a few kB
    bomb = npz(root / "bomb.npz", True, vectors=npy_bytes(zeros, (1 << 30, 2)), offsets=npy_bytes(GOOD_OFFSETS))
    honest_bomb = npz(root / "zeros.npz", True, vectors=npy_bytes(zeros), offsets=npy_bytes(GOOD_OFFSETS))
    lying = npz(root / "lying.npz", vectors=npy_bytes(GOOD_VECTORS, (1 << 40, 2)), offsets=npy_bytes(GOOD_OFFSETS))
    cases = {
        "truncated": (truncated, "cannot read the multi-vector index"),
        "bomb": (bomb, "'vectors' claims (1073741824, 2) float32"),
        "zeros": (honest_bomb, "'vectors' claims (1048576, 2) float32"),
        "lying": (lying, "'vectors' claims (1099511627776, 2) float32"),
    }
    for name, offsets in {
        "past_the_end": [0, 2, 9],
        "huge": [0, 2, 1 << 62],
        "negative": [0, -2, 6],
        "float": np.array([0.0, 2.0, 6.0]),
        "from_one": [1, 2, 6],
    }.items():
        path = npz(root / f"{name}.npz", vectors=npy_bytes(GOOD_VECTORS), offsets=npy_bytes(np.asarray(offsets)))
        cases[name] = (path, "offsets" if name in ("negative", "float", "from_one") else "its offsets say 9")
    cases["huge"] = (cases["huge"][0], "its offsets say 4611686018427387904")
    for dtype in ("int8", "complex64", "float64"):
        vectors = npy_bytes(GOOD_VECTORS.astype(dtype))
        cases[dtype] = (npz(root / f"{dtype}.npz", vectors=vectors, offsets=npy_bytes(GOOD_OFFSETS)), "float32")
    pickled = npy_bytes(np.array([None] * 12, object).reshape(6, 2))
    cases["object"] = (npz(root / "object.npz", vectors=pickled, offsets=npy_bytes(GOOD_OFFSETS)), "holds object")
    cases["missing"] = (npz(root / "missing.npz", offsets=npy_bytes(GOOD_OFFSETS)), "has no 'vectors'")
    return cases


def test_a_hostile_multi_vector_index_is_one_line_naming_it(tmp_path):
    """Each malformed .npz (truncated, a compression bomb, a header that lies, offsets past the end, huge, negative
    or of floats, vectors int8, complex or pickled) is a Failure naming the file and member: headers are read and
    bounded before any data, within 10 s and 30 MB."""
    from numbert.cli.common import Failure
    from numbert.cli.multi import MultiIndex

    for name, (path, says) in hostile_indexes(tmp_path).items():
        with bounded(seconds=10, memory=30e6), pytest.raises(Failure) as refused:
            MultiIndex(str(path))
        message = str(refused.value)
        assert str(path) in message and says in message and "\n" not in message, (name, message)
    index = MultiIndex(str(tmp_path / "good.npz"))
    np.testing.assert_array_equal(index[1], GOOD_VECTORS[2:])


def test_a_multi_vector_directory_entry_is_a_regular_npy_of_its_rows(tmp_path):
    """A directory index's text files are checked as they are read: a link (to /etc/passwd) is refused as not a
    regular file, a file of other rows, width or dtype named; within 10 s and 20 MB."""
    from numbert.cli.common import Failure
    from numbert.cli.multi import MultiIndex

    np.save(tmp_path / "offsets.npy", GOOD_OFFSETS)
    np.save(tmp_path / "000000000.npy", GOOD_VECTORS[:2])
    (tmp_path / "000000001.npy").symlink_to("/etc/passwd")
    with bounded(seconds=10, memory=20e6):
        index = MultiIndex(str(tmp_path))
        np.testing.assert_array_equal(index[0], GOOD_VECTORS[:2])
        with pytest.raises(Failure, match=r"000000001\.npy is not a regular file"):
            index[1]
        for wrong, says in (
            (GOOD_VECTORS[:3], "holds 3 x 2 vectors; its offsets say 4"),
            (GOOD_VECTORS[2:].astype(np.int8), "int8"),
        ):
            (tmp_path / "000000001.npy").unlink()
            np.save(tmp_path / "000000001.npy", wrong)
            with pytest.raises(Failure, match=says):
                index[1]


def test_search_never_ranks_a_text_whose_token_vectors_are_nan(tmp_path, minilm_dir):
    """`numbert search --multi-index`: a candidate whose token vectors hold NaN is dropped, as the dense search
    skips NaN rows; a compression bomb is one line naming the file; each within 60 s and 1.5 GB."""
    from helpers import run_limited
    from test_late_interaction import PYLATE_DIR

    texts = tmp_path / "texts.txt"
    texts.write_text("a violin\nthe piano\n")
    assert run_limited("encode", "--file", texts, "-o", tmp_path / "dense.npy", model=minilm_dir).returncode == 0
    vectors = np.random.default_rng(0).standard_normal((6, 16)).astype(np.float32)
    vectors[3, 5] = math.nan  # the second text's
    npz(tmp_path / "nan.npz", vectors=npy_bytes(vectors), offsets=npy_bytes(GOOD_OFFSETS))
    args = ("search", "violin", "--index", tmp_path / "dense.npy", "--texts", texts, "--json")
    done = run_limited(*args, "--multi-index", tmp_path / "nan.npz", "--multi-model", PYLATE_DIR, model=minilm_dir)
    assert done.returncode == 0, done.stderr
    assert [hit["corpus_id"] for hit in strict(done.stdout.decode())] == [0]
    bomb, says = hostile_indexes(tmp_path)["bomb"]
    done = run_limited(*args, "--multi-index", bomb, "--multi-model", PYLATE_DIR, model=minilm_dir)
    error = done.stderr.decode().strip()
    assert done.returncode != 0 and says in error and str(bomb) in error and "\n" not in error, error


# --- what a route or model cannot apply, and refusals in the served model's name ----------------------------------


@pytest.fixture(scope="module")
def m3_server(tmp_path_factory, vocab_path):
    """BGE-M3 (the committed fixture) as the default model, and a plain embedder ("plain") from a local directory."""
    plain = write_random_bert(tmp_path_factory.mktemp("local") / "plain", vocab_path, TINY)
    client = client_of(FIXTURES / "bge_m3", more_models={"plain": str(plain)})
    yield client, plain
    client.__exit__(None, None, None)


def test_a_task_a_route_cannot_apply_is_refused_naming_it(m3_server, tmp_path):
    """A "task" sent to /api/embed or /embed_multi is a 422 naming it (it was ignored: 200, base vectors); `encode
    --multi --task` is one line naming --task; within 10 s and 20 MB (served) / 60 s and 1.5 GB (the command)."""
    from helpers import run_limited

    client, _ = m3_server
    for route, body in (
        ("/api/embed", {"input": "x", "task": "retrieval.query"}),
        ("/embed_multi", {"inputs": "x", "task": "t"}),
    ):
        with bounded(seconds=10, memory=20e6):
            r = client.post(route, json=body)
        assert r.status_code == 422, r.text
        answer = strict(r.text)
        message = answer["error"] if route.startswith("/api/") else answer["error"]["message"]
        assert message.startswith("'task' is not applied here"), message
    done = run_limited(
        "encode", "--multi", "--task", "retrieval.query", "x", "-o", tmp_path / "t.npz", model=FIXTURES / "bge_m3"
    )
    error = done.stderr.decode().strip()
    assert done.returncode != 0 and "--task does not apply to --multi" in error and "\n" not in error, error
    assert not (tmp_path / "t.npz").exists()


def test_a_refusal_names_the_served_model_not_its_local_path(m3_server):
    """/rerank and /embed_multi on a model without the head: a 400 naming the served model, never the
    directory it was loaded from; within 10 s and 20 MB."""
    client, plain = m3_server
    for route, body in (
        ("/models/plain/rerank", {"query": "q", "texts": ["a"]}),
        ("/models/plain/embed_multi", {"inputs": "x"}),
        ("/rerank", {"query": "q", "texts": ["a"]}),
    ):
        with bounded(seconds=10, memory=20e6):
            r = client.post(route, json=body)
        assert r.status_code == 400, r.text[:300]
        message = strict(r.text)["error"]["message"]
        assert str(plain) not in message and str(FIXTURES) not in message and "tests/fixtures" not in message, message
        assert ("'plain'" if "/plain/" in route else "'bge_m3'") in message, message


def test_a_vector_a_token_answer_is_bounded_before_the_forward():
    """/embed_multi and /embed_all: an answer over --max-answer-values numbers (tokens x width) is a 413 naming the
    flag, checked from the token counts before the forward (a 6.9 KB body once became 229 MB at 1024 dims); within
    the budget, the answer; within 10 s and 20 MB."""
    client = client_of(FIXTURES / "bge_m3", max_answer_values=32 * 100)  # 100 tokens of BGE-M3's 32-wide vectors
    try:
        texts = ["word " * 20] * 20  # about 2 kB: 20 x 22 tokens
        for route in ("/embed_multi", "/embed_all"):
            with bounded(seconds=10, memory=20e6):
                r = client.post(route, json={"inputs": texts})
            error = strict(r.text)["error"]
            assert r.status_code == 413 and error["code"] == "answer_too_large", r.text[:300]
            assert f"{route} answers at most 3,200 a request (--max-answer-values)" in error["message"]
            with bounded(seconds=10, memory=20e6):
                r = client.post(route, json={"inputs": texts[:2]})
            assert r.status_code == 200 and len(strict(r.text)) == 2
    finally:
        client.__exit__(None, None, None)
