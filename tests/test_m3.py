"""BGE-M3: numbert's dense, sparse and multi-vector outputs of one forward, and its scores, equal FlagEmbedding's
BGEM3FlagModel.encode(return_dense, return_sparse, return_colbert_vecs) and compute_score (committed fixtures:
FlagEmbedding 1.4 does not import beside transformers 5, so scripts/make_multi_vector_fixtures.py writes them in a
venv of its own) on a tiny random XLM-RoBERTa whose two heads FlagEmbedding saved; and the same outputs computed
live by transformers' XLMRobertaModel and torch.load of the heads. A .pt holding anything else is refused."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import bounded

import numbert
from numbert.checkpoint.m3_heads import read_m3_heads

FIXTURES = Path(__file__).parent / "fixtures"
M3_DIR = FIXTURES / "bge_m3"  # config.json, model.safetensors, tokenizer files, colbert_linear.pt, sparse_linear.pt
M3_EXPECTED = FIXTURES / "bge_m3_expected.json"
TEXTS = [
    "What is BGE M3?",
    "Definition of BM25",
    "BGE M3 is an embedding model supporting dense retrieval, lexical matching and multi-vector interaction.",
    "BM25 is a bag-of-words retrieval function that ranks a set of documents based on the query terms.",
    "x",
]
PAIRS = [(TEXTS[0], TEXTS[2]), (TEXTS[0], TEXTS[3]), (TEXTS[1], TEXTS[3]), (TEXTS[1], TEXTS[4])]
WEIGHTS = [0.4, 0.2, 0.4]


def save_m3(torch, directory: Path) -> None:
    """A tiny random XLM-RoBERTa with the Unigram tokenizer of tests/fixtures/xlmr_spm.json, made BGE-M3 by
    FlagEmbedding's M3 model (colbert_linear 32 -> 32, sparse_linear 32 -> 1) and saved by its save()."""
    import transformers
    from FlagEmbedding.finetune.embedder.encoder_only.m3.modeling import EncoderOnlyEmbedderM3Model

    vocab = json.loads((FIXTURES / "xlmr_spm.json").read_text())
    config = transformers.XLMRobertaConfig(
        vocab_size=len(vocab["model"]["vocab"]),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
    )
    model = transformers.XLMRobertaModel(config, add_pooling_layer=False).eval()
    directory.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "xlmr_spm.json", directory / "tokenizer.json")
    tokenizer = transformers.XLMRobertaTokenizerFast(tokenizer_file=str(directory / "tokenizer.json"))
    tokenizer.model_max_length = 128
    heads = {"colbert_linear": torch.nn.Linear(32, 32), "sparse_linear": torch.nn.Linear(32, 1)}
    m3 = EncoderOnlyEmbedderM3Model({"model": model, **heads}, tokenizer=tokenizer, unified_finetuning=True)
    m3.save(str(directory))
    tokenizer.save_pretrained(str(directory))
    spec = json.loads((directory / "tokenizer.json").read_text())  # written indented: kept compact
    (directory / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False, separators=(",", ":")))


def flagembedding_outputs(directory: Path) -> dict:
    """BGEM3FlagModel.encode of TEXTS (all three outputs) and compute_score of PAIRS (each pair alone: batched,
    FlagEmbedding would offer a shorter passage's padding to MaxSim), with the default and WEIGHTS."""
    from FlagEmbedding import BGEM3FlagModel

    model = BGEM3FlagModel(str(directory), use_fp16=False, devices="cpu")
    out = model.encode(TEXTS, return_dense=True, return_sparse=True, return_colbert_vecs=True)
    scores = {
        name: [model.compute_score(pair, weights_for_different_modes=weights) for pair in PAIRS]
        for name, weights in (("default", None), ("weighted", WEIGHTS))
    }
    return {
        "dense": out["dense_vecs"].tolist(),
        "sparse": [{k: float(v) for k, v in weights.items()} for weights in out["lexical_weights"]],
        "multi": [v.tolist() for v in out["colbert_vecs"]],
        "scores": {name: [{k: float(v) for k, v in s.items()} for s in pairs] for name, pairs in scores.items()},
    }


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads(M3_EXPECTED.read_text())


@pytest.fixture(scope="module")
def model() -> numbert.Bert:
    return numbert.load(M3_DIR)


def sparse_dict(vector) -> dict[str, float]:
    return {str(i): float(w) for i, w in zip(vector.ids.tolist(), vector.weights.tolist())}


def assert_sparse_equal(ours, theirs: dict[str, float]) -> None:
    got = sparse_dict(ours)
    assert got.keys() == theirs.keys()
    np.testing.assert_allclose([got[k] for k in theirs], list(theirs.values()), atol=1e-5, rtol=0)


def test_three_outputs_of_one_forward_equal_flagembeddings(model, expected):
    out = model.embed_m3(TEXTS)
    np.testing.assert_allclose(out.dense, expected["dense"], atol=1e-5, rtol=0)
    for ours, theirs in zip(out.sparse, expected["sparse"]):
        assert_sparse_equal(ours, theirs)
    for ours, theirs in zip(out.multi, expected["multi"]):
        assert ours.shape == np.shape(theirs) and ours.dtype == np.float32
        np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0)
    assert all(len(v) == len(model.tokenizer.encode(t)) - 1 for v, t in zip(out.multi, TEXTS))  # after [CLS]


@pytest.mark.parametrize("weights", ["default", "weighted"])
def test_scores_equal_compute_score(model, expected, weights):
    ours = model.m3_scores(PAIRS, None if weights == "default" else WEIGHTS)
    for mode in ("dense", "sparse", "colbert", "sparse+dense", "colbert+sparse+dense"):
        want = [s[mode] for s in expected["scores"][weights]]
        np.testing.assert_allclose(ours[mode], want, atol=1e-5, rtol=0, err_msg=mode)
    one = model.m3_scores(PAIRS[0])
    assert one["dense"] == pytest.approx(expected["scores"]["default"][0]["dense"], abs=1e-5)


def test_each_output_alone_is_the_same(model):
    """embed (the normalized [CLS]), embed_sparse and embed_multi of a BGE-M3 directory give embed_m3's outputs."""
    out = model.embed_m3(TEXTS)
    np.testing.assert_allclose(model.embed(TEXTS), out.dense, atol=1e-6, rtol=0)
    for ours, theirs in zip(model.embed_sparse(TEXTS), out.sparse):
        assert ours.ids.tolist() == theirs.ids.tolist()
        np.testing.assert_allclose(ours.weights, theirs.weights, atol=1e-6)
    for ours, theirs in zip(model.embed_multi(TEXTS, is_query=True), out.multi):
        np.testing.assert_allclose(ours, theirs, atol=1e-6, rtol=0)
    ranked = model.rank_multi(TEXTS[0], TEXTS[2:])
    scores = [model.m3_scores((TEXTS[0], d))["colbert"] for d in TEXTS[2:]]
    assert [hit["corpus_id"] for hit in ranked] == np.argsort(-np.array(scores), kind="stable").tolist()


@pytest.mark.parity
def test_three_outputs_equal_transformers_and_the_heads_torch_loads(model, transformers, torch):
    """Live: XLMRobertaModel's last layer through the heads torch.load reads, as FlagEmbedding's modeling computes
    them (normalized [CLS]; relu(sparse_linear) max per id, special tokens dropped; colbert_linear after [CLS])."""
    encoder = transformers.XLMRobertaModel.from_pretrained(str(M3_DIR)).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(M3_DIR))
    heads = {}
    for name, shape in (("colbert_linear", (32, 32)), ("sparse_linear", (1, 32))):
        layer = torch.nn.Linear(shape[1], shape[0])
        layer.load_state_dict(torch.load(M3_DIR / f"{name}.pt", map_location="cpu", weights_only=True))
        heads[name] = layer
    unused = {tokenizer.cls_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id}
    texts = [*TEXTS, ""]  # an empty text: no lexical weight, FlagEmbedding's {}
    ours = model.embed_m3(texts)
    for i, text in enumerate(texts):
        inputs = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            h = encoder(**inputs).last_hidden_state[0]
            dense = torch.nn.functional.normalize(h[0], dim=-1).numpy()
            weights = torch.relu(heads["sparse_linear"](h))[:, 0].numpy()
            multi = torch.nn.functional.normalize(heads["colbert_linear"](h[1:]), dim=-1).numpy()
        sparse: dict[str, float] = {}
        for token, w in zip(inputs["input_ids"][0].tolist(), weights.tolist()):
            if token not in unused and w > sparse.get(str(token), 0):
                sparse[str(token)] = w
        np.testing.assert_allclose(ours.dense[i], dense, atol=1e-5, rtol=0)
        assert_sparse_equal(ours.sparse[i], sparse)
        np.testing.assert_allclose(ours.multi[i], multi, atol=1e-5, rtol=0)


@pytest.mark.parity
def test_a_text_without_a_positive_weight_has_no_lexical_weights(model, torch, tmp_path):
    """An empty text, or a sparse head giving every token a weight <= 0: an empty sparse vector (FlagEmbedding's
    empty dict of weights), its sparse score 0, within 10 s and 50 MB."""
    with bounded(seconds=10, memory=50e6):
        out = model.embed_m3(["", TEXTS[0]])
        assert out.sparse[0].ids.tolist() == [] and out.sparse[0].weights.dtype == np.float32
        assert len(out.sparse[1].ids) > 0 and out.multi[0].shape == (1, 32)  # the end token's vector
        assert model.embed_sparse([""])[0].ids.tolist() == []
        assert model.m3_scores(("", TEXTS[0]))["sparse"] == 0.0
    directory = tmp_path / "negative"
    shutil.copytree(M3_DIR, directory)
    torch.save({"weight": torch.zeros(1, 32), "bias": torch.full((1,), -1.0)}, directory / "sparse_linear.pt")
    with bounded(seconds=10, memory=50e6):
        assert [v.ids.tolist() for v in numbert.load(directory).embed_sparse(TEXTS)] == [[]] * len(TEXTS)


# --- the heads' files ---------------------------------------------------------------------------------------------


class Payload:
    """A pickled object that would run a shell command when unpickled."""

    def __reduce__(self):
        return (os.system, ("echo the gated unpickler let this run",))


def heads_copy(tmp_path: Path) -> Path:
    directory = tmp_path / "heads"
    directory.mkdir()
    for name in ("colbert_linear.pt", "sparse_linear.pt"):
        shutil.copyfile(M3_DIR / name, directory / name)
    return directory


@pytest.mark.parity
def test_a_pt_holding_anything_else_is_refused(torch, tmp_path, capfd):
    directory = heads_copy(tmp_path)
    weight, bias = torch.zeros(1, 32), torch.zeros(1)
    torch.save({"weight": weight, "bias": bias, "payload": Payload()}, directory / "sparse_linear.pt")
    with pytest.raises(ValueError, match=r"sparse_linear\.pt: refusing to unpickle global '(posix|os)\.system'"):
        read_m3_heads(directory, 32)
    assert "let this run" not in capfd.readouterr().out
    torch.save({"weight": weight, "bias": bias, "scale": bias}, directory / "sparse_linear.pt")
    with pytest.raises(ValueError, match=r"Linear layer's state dict .* found \['bias', 'scale', 'weight'\]"):
        read_m3_heads(directory, 32)
    torch.save({"weight": torch.zeros(2, 32), "bias": torch.zeros(2)}, directory / "sparse_linear.pt")
    with pytest.raises(ValueError, match=r"expected 'weight' of shape \(1, 32\)"):
        read_m3_heads(directory, 32)
    torch.save([weight], directory / "sparse_linear.pt")
    with pytest.raises(ValueError, match="holds a pickled list, not a state dict"):
        read_m3_heads(directory, 32)
    (directory / "sparse_linear.pt").unlink()
    with pytest.raises(ValueError, match="sparse_linear.pt is missing"):
        read_m3_heads(directory, 32)
    assert read_m3_heads(tmp_path, 32) is None  # neither file: not BGE-M3
