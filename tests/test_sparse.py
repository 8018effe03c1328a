"""SPLADE sparse vectors against sentence-transformers' SparseEncoder: embed_sparse, SparseEncoder directories and
their settings, max_active_dims / top_k, the token blocks, bad input; the command line and the server's
/embed_sparse; and a committed fixture (scripts/make_sparse_fixture.py) checked without torch."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
from helpers import served_model
from test_cli import run

import numbert
from numbert.pipeline import readouts
from numbert.testing import write_random_splade

ATOL = 1e-5
FIXTURE = Path(__file__).parent / "fixtures" / "sparse_expected.json"
TEXTS = [
    "The capital of France is Paris.",
    "hello",
    "",
    "Sparse vectors weigh every vocabulary entry; most weights are zero. " * 12,  # cut to 64 positions
    "naïve café, 東京!",
]
SMALL = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=37)
FIXTURE_SETTINGS = {"max": dict(max_active_dims=16), "sum-log1p_relu": dict(max_active_dims=16)}


def small_config(**settings) -> numbert.BertConfig:
    return numbert.BertConfig(**SMALL, max_position_embeddings=64, **settings)


def fixture_model(directory: Path, vocab_path: Path, setting: str) -> Path:
    """The fixture's SPLADE directory: a small random BERT (numbert.testing, seed 0, written without torch) as a
    SparseEncoder saves it, with the pooling and activation `setting` names."""
    strategy, _, activation = setting.partition("-")
    return write_random_splade(
        directory / setting,
        vocab_path,
        small_config(),
        pooling_strategy=strategy,
        activation_function=activation or "relu",
        **FIXTURE_SETTINGS[setting],
    )


def as_pairs(vectors) -> list[tuple[list[int], list[float]]]:
    return [(v.ids.tolist(), v.weights.tolist()) for v in vectors]


def sparse_encoder_vectors(encoder, texts, **options) -> list[tuple[list[int], list[float]]]:
    """SparseEncoder.encode's vectors as (ids ascending, weights)."""
    out = []
    for tensor in encoder.encode(texts, convert_to_tensor=False, batch_size=3, **options):
        tensor = tensor.coalesce()
        out.append((tensor.indices()[0].tolist(), tensor.values().tolist()))
    return out


def assert_same_vectors(ours, theirs, top_k: int | None = None) -> None:
    """The same sparse vectors within ATOL. A vector depends on its batch-mates in its last bits (and on the
    library), so an id may be active in one vector and not in the other only where its weight is within ATOL
    of the other's cut: 0, or with top_k the smallest weight a full vector kept (a near-tie at the cut)."""
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        weights = [dict(zip(ids, values)) for ids, values in (a, b)]
        cuts = [min(w.values()) if top_k is not None and len(w) == top_k else 0.0 for w in weights]
        for j in weights[0].keys() | weights[1].keys():
            if j in weights[0] and j in weights[1]:
                assert abs(weights[0][j] - weights[1][j]) <= ATOL, f"text {i}, id {j}: {weights[0][j]} {weights[1][j]}"
            else:
                has, lacks = (0, 1) if j in weights[0] else (1, 0)
                assert weights[has][j] <= cuts[lacks] + ATOL, f"text {i}: id {j} ({weights[has][j]}) active once"


@pytest.fixture(scope="module")
def splade_dir(tmp_path_factory, head_checkpoint, torch):
    """A factory: splade_dir(strategy, activation, max_active_dims) -> (a directory SparseEncoder saved, that
    SparseEncoder), made from a BertForMaskedLM that transformers saved (random weights, seed 0): MLMTransformer +
    SpladePooling. The BERT module is loaded once and shared."""
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

    made: dict = {}
    mlm = MLMTransformer(str(head_checkpoint("BertForMaskedLM", max_position_embeddings=64)[0]))

    def make(strategy: str = "max", activation: str = "relu", max_active_dims: int | None = None):
        key = (strategy, activation, max_active_dims)
        if key not in made:
            modules = [mlm, SpladePooling(strategy, activation)]
            encoder = st.SparseEncoder(modules=modules, max_active_dims=max_active_dims, device="cpu")
            directory = tmp_path_factory.mktemp(f"splade-{strategy}-{activation}")
            encoder.save(str(directory), create_model_card=False)
            made[key] = directory, encoder
        return made[key]

    return make


@pytest.fixture(scope="module")
def splade(splade_dir) -> numbert.Bert:
    return numbert.load(splade_dir()[0])


# --- against SparseEncoder -----------------------------------------------------------------------------------


@pytest.mark.parity
@pytest.mark.parametrize("strategy,activation", [("max", "relu"), ("sum", "log1p_relu")])
def test_embed_sparse_matches_sparse_encoder(splade_dir, strategy, activation):
    directory, encoder = splade_dir(strategy, activation)
    theirs = sparse_encoder_vectors(encoder, TEXTS)
    ours = numbert.load(directory).embed_sparse(TEXTS, batch_size=3)
    assert all(v.ids.dtype == np.int32 and v.weights.dtype == np.float32 for v in ours)
    assert_same_vectors(as_pairs(ours), theirs)
    assert 100 < min(len(ids) for ids, _ in theirs)  # a random head activates many entries: a real comparison


@pytest.mark.parity
def test_max_active_dims_and_top_k_match_sparse_encoder(splade_dir):
    directory, encoder = splade_dir(max_active_dims=7)
    model = numbert.load(directory)
    assert model.sentence_config.max_active_dims == 7
    saved = model.embed_sparse(TEXTS)  # the directory's max_active_dims
    assert [len(v.ids) for v in saved] == [7] * len(TEXTS)
    assert_same_vectors(as_pairs(saved), sparse_encoder_vectors(encoder, TEXTS), top_k=7)
    top = model.embed_sparse(TEXTS, 30)
    assert_same_vectors(as_pairs(top), sparse_encoder_vectors(encoder, TEXTS, max_active_dims=30), top_k=30)


def test_token_blocks_span_rows(splade, monkeypatch):
    """Scored a few tokens at a time (blocks ending inside rows, rows inside blocks), the vectors are the same."""
    whole = splade.embed_sparse(TEXTS, batch_size=5)
    monkeypatch.setattr(readouts, "BLOCK_TOKENS", 3)
    assert_same_vectors(as_pairs(splade.embed_sparse(TEXTS, batch_size=5)), as_pairs(whole))


def test_top_k_keeps_the_largest_weights_and_of_equal_ones_the_lower_ids():
    weights = np.zeros(10, np.float32)
    weights[[1, 3, 4, 8, 9]] = [0.5, 0.9, 0.5, 0.5, 0.2]
    pruned = numbert.pipeline.readouts.prune(
        weights, top_k=3
    )  # torch.topk leaves the choice among the 0.5s unspecified
    assert pruned.ids.tolist() == [1, 3, 4] and pruned.weights.tolist() == [0.5, 0.8999999761581421, 0.5]
    assert numbert.pipeline.readouts.prune(weights).ids.tolist() == [1, 3, 4, 8, 9]
    assert numbert.pipeline.sparse.dot(pruned, numbert.pipeline.readouts.prune(weights)) == pytest.approx(
        0.25 + 0.81 + 0.25
    )


def test_one_text_and_token_weights(splade):
    vector = splade.embed_sparse("The capital of France is Paris.", top_k=5)
    assert isinstance(vector, numbert.pipeline.readouts.SparseVector) and list(vector.ids) == sorted(vector.ids)
    named = splade.sparse_tokens(vector)
    assert list(named.values()) == sorted(vector.weights.tolist(), reverse=True)
    assert set(named) == set(splade.tokenizer.convert_ids_to_tokens(vector.ids.tolist()))


# --- bad input --------------------------------------------------------------------------------------------


def test_a_model_without_the_masked_lm_head_is_refused_naming_the_tensors(minilm):
    with pytest.raises(ValueError) as e:
        minilm.embed_sparse(["a text"])
    message = str(e.value)
    assert "cls.predictions.transform.dense.weight" in message
    assert "BertForMaskedLM" in message and "SparseEncoder (SPLADE)" in message


def test_bad_texts_and_top_k_are_named(splade):
    with pytest.raises(ValueError, match="texts is empty"):
        splade.embed_sparse([])
    with pytest.raises(TypeError, match=r"texts\[1\] is a int, not a str"):
        splade.embed_sparse(["fine", 3])
    with pytest.raises(ValueError, match="top_k must be a positive integer, got 0"):
        splade.embed_sparse(["fine"], top_k=0)


def test_a_splade_directory_refuses_dense_vectors_and_unknown_settings(splade, tmp_path, vocab_path):
    with pytest.raises(ValueError, match=r"SparseEncoder \(SPLADE\) model.*embed_sparse"):
        splade.embed(["a text"])
    directory = write_random_splade(tmp_path / "mean", vocab_path, small_config(), pooling_strategy="mean")
    with pytest.raises(ValueError, match=r"1_SpladePooling/config.json: unsupported pooling_strategy 'mean'"):
        numbert.load(directory)


# --- the committed fixture, without torch -------------------------------------------------------------------


def numbert_fixture_vectors(directory: Path, vocab_path: Path) -> dict:
    return {
        setting: as_pairs(numbert.load(fixture_model(directory, vocab_path, setting)).embed_sparse(TEXTS))
        for setting in FIXTURE_SETTINGS
    }


def sparse_encoder_fixture_vectors(directory: Path, vocab_path: Path) -> dict:
    """SparseEncoder.encode's vectors of TEXTS on each fixture model (scripts/make_sparse_fixture.py writes them).
    The models share their weights, so one SparseEncoder loads the first and checks it read its SpladePooling's
    settings; each other setting is its SpladePooling's settings switched."""
    from sentence_transformers import SparseEncoder

    vectors = {}
    for i, setting in enumerate(FIXTURE_SETTINGS):
        written = fixture_model(directory, vocab_path, setting)
        if i == 0:
            encoder = SparseEncoder(str(written), device="cpu")
        strategy, _, activation = setting.partition("-")
        if i == 0:
            assert (encoder[1].pooling_strategy, encoder[1].activation_function) == (strategy, activation or "relu")
        encoder[1].pooling_strategy, encoder[1].activation_function = strategy, activation or "relu"
        vectors[setting] = sparse_encoder_vectors(encoder, TEXTS)
    return vectors


def test_embed_sparse_matches_the_committed_fixture(tmp_path, vocab_path):
    expected = json.loads(FIXTURE.read_text("utf-8"))
    ours = numbert_fixture_vectors(tmp_path, vocab_path)
    for setting in FIXTURE_SETTINGS:
        assert_same_vectors(ours[setting], [tuple(v) for v in expected[setting]], top_k=16)


@pytest.mark.parity
def test_the_fixture_is_sparse_encoders(torch, tmp_path, vocab_path):
    pytest.importorskip("sentence_transformers")
    expected = json.loads(FIXTURE.read_text("utf-8"))
    theirs = sparse_encoder_fixture_vectors(tmp_path, vocab_path)
    for setting in FIXTURE_SETTINGS:
        assert_same_vectors(theirs[setting], [tuple(v) for v in expected[setting]], top_k=16)


# --- the command line and the server ------------------------------------------------------------------------


def test_encode_sparse_writes_a_json_line_per_input_line(splade, splade_dir, tmp_path, capsysbinary):
    from numbert.cli import main

    lines = ["The capital of France is Paris.", "", "naïve café, 東京!"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, directory = tmp_path / "sparse.jsonl", splade_dir()[0]
    result = run("encode", "--sparse", "ids", "--top-k", "9", "--file", tmp_path / "in.txt", "-o", out, model=directory)
    assert result.returncode == 0, result.stderr.decode()
    written = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    expected = as_pairs(splade.embed_sparse(lines, top_k=9))  # its batches need not be the CLI's: last bits may differ
    assert_same_vectors([(w["ids"], w["values"]) for w in written], expected, top_k=9)
    assert main(["encode", "--sparse", "--top-k", "3", "hello", "--model", str(directory)]) == 0
    assert json.loads(capsysbinary.readouterr().out) == splade.sparse_tokens(splade.embed_sparse("hello", top_k=3))
    assert main(["encode", "--sparse", "--pooling", "cls", "hello", "--model", str(directory)]) == 1
    error = capsysbinary.readouterr().err.decode()
    assert error == "numbert encode: error: --pooling applies to sentence vectors, not to --sparse\n"


@pytest.fixture(scope="module")
def server(splade_dir):
    from helpers import ServerProcess

    server = ServerProcess(splade_dir(max_active_dims=7)[0])
    yield server
    server.stop()


def test_server_embed_sparse_is_embed_sparse(server, splade_dir):
    model = numbert.load(splade_dir(max_active_dims=7)[0])
    answer = httpx.post(server.url + "/embed_sparse", json={"inputs": TEXTS, "truncate": True}, timeout=60)
    assert answer.status_code == 200, answer.text
    served = [([p["index"] for p in v], [p["value"] for p in v]) for v in answer.json()]
    assert_same_vectors(served, as_pairs(model.embed_sparse(TEXTS)), top_k=7)  # other batches: last bits
    one = httpx.post(server.url + "/embed_sparse", json={"inputs": "hello"}, timeout=60).json()
    assert len(one) == 1 and len(one[0]) == 7


@pytest.mark.parametrize(
    "body,status,param",
    [
        ({"inputs": ["fine", 3]}, 422, "inputs[1]"),
        ({"inputs": []}, 422, "inputs"),
        ({"inputs": "x", "truncate": "yes"}, 422, "truncate"),
        ({"inputs": "x", "truncation_direction": "Up"}, 422, "truncation_direction"),
        ({"inputs": "word " * 100}, 413, "inputs[0]"),
    ],
)
def test_server_names_the_bad_field(server, body, status, param):
    answer = httpx.post(server.url + "/embed_sparse", json=body, timeout=60)
    assert (answer.status_code, answer.json()["error"]["param"]) == (status, param)


def test_server_refuses_dense_vectors_of_a_splade_model(server):
    answer = httpx.post(server.url + "/embed", json={"inputs": "x"}, timeout=60)
    assert answer.status_code == 400 and "/embed_sparse" in answer.json()["error"]["message"]
    assert httpx.get(server.url + "/health").status_code == 200


def test_a_served_model_without_the_masked_lm_head_answers_400_naming_it(minilm_dir):
    from numbert.serve.protocol import ApiError

    with pytest.raises(ApiError) as e:
        served_model(minilm_dir).sparse  # noqa: B018 (the readout /embed_sparse queues for)
    assert (
        e.value.status == 400 and "'cls.predictions.bias'" in e.value.message and "BertForMaskedLM" in e.value.message
    )


def all_active_splade(directory: Path, vocab_path: Path) -> Path:
    """A SPLADE head crafted so every weight is active: its masked-LM bias lifts every vocabulary score to ~10."""
    from safetensors.numpy import load_file, save_file

    write_random_splade(directory, vocab_path, small_config())
    weights = load_file(directory / "model.safetensors")
    weights["cls.predictions.bias"] = np.full_like(weights["cls.predictions.bias"], 10.0)
    save_file(weights, directory / "model.safetensors")
    return directory


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def test_an_embed_sparse_answer_is_bounded_by_max_sparse_weights(tmp_path, vocab_path):
    """Issue 35: 256 inputs of "hi" (a 1.5 KB body) to a head whose weights are all active answered 270 MB
    (30,522 weights an input) at a 938 MB peak in 14 s. The answer's non-zero weights are capped by
    --max-sparse-weights: 413 naming the flag, in seconds, the server serving on."""
    from helpers import ServerProcess

    directory = all_active_splade(tmp_path / "all-active", vocab_path)
    server = ServerProcess(directory, "--max-sparse-weights", "100000")
    try:
        body = {"inputs": ["hi"] * 256}
        refused = httpx.post(server.url + "/embed_sparse", json=body, timeout=30)
        assert refused.status_code == 413, refused.text
        error = refused.json()["error"]
        assert error["param"] == "inputs" and "7,813,632 non-zero weights" in error["message"]
        assert "at most 100,000 a request (--max-sparse-weights)" in error["message"]
        three = httpx.post(server.url + "/embed_sparse", json={"inputs": ["hi", "a", "b"]}, timeout=30)
        assert three.status_code == 200 and [len(v) for v in three.json()] == [30522] * 3  # every weight, as TEI
        four = httpx.post(server.url + "/embed_sparse", json={"inputs": ["hi"] * 4}, timeout=30)
        assert four.status_code == 413  # 122,088 weights
        assert httpx.get(server.url + "/health").status_code == 200
        assert peak_rss_mb(server.proc.pid) < 1024
    finally:
        assert server.stop() == 0, "".join(server.lines)
