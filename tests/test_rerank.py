"""Cross-encoder reranking against sentence-transformers' CrossEncoder: predict, rank, the activation a model
names, truncation of long pairs, bad input; the command line and the server's /rerank, /v1/rerank, /predict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_cli import one_error_line, run

import numbert

ATOL = 1e-5
FIXTURES = Path(__file__).parent / "fixtures"  # written by scripts/make_retrieval_fixture.py
QUERY = "How many people live in Berlin?"
DOCUMENTS = [
    "Berlin had a population of 3,520,031 registered inhabitants in an area of 891.82 square kilometers.",
    "Berlin is well known for its museums.",
    "",
    "In 2013 around 600,000 Berliners were registered in one of the more than 2,300 sport and fitness clubs. "
    "The city of Berlin is the capital and largest city of Germany, both by area and by population, and its "
    "more than 3.85 million inhabitants make it the most populous city proper in the European Union.",
    "Paris is the capital of France.",
]
PAIRS = [(QUERY, d) for d in DOCUMENTS] + [("A man is eating food.", "A man is eating a meal."), ("", "nothing asked")]


@pytest.fixture(scope="module")
def st(torch):
    return pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory, transformers, torch, vocab_path):
    """A factory: cross_encoder_dir(labels, **config) -> a BertForSequenceClassification directory that
    transformers saves (random weights, seed 0; the classifier scaled up so scores spread), 64 positions so
    long pairs are cut."""
    made = {}

    def make(labels: int, **config):
        key = json.dumps([labels, config], sort_keys=True)
        if key not in made:
            torch.manual_seed(0)
            shape = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=37)
            bert_config = transformers.BertConfig(**shape, max_position_embeddings=64, num_labels=labels, **config)
            model = transformers.BertForSequenceClassification(bert_config).eval()
            with torch.no_grad():
                model.classifier.weight *= 100
            directory = tmp_path_factory.mktemp(f"cross-encoder-{labels}")
            model.save_pretrained(directory)
            transformers.BertTokenizer(str(vocab_path)).save_pretrained(directory)
            shutil.copyfile(vocab_path, directory / "vocab.txt")
            made[key] = directory
        return made[key]

    return make


def cross_encoder(st, directory, **options):
    return st.CrossEncoder(str(directory), device="cpu", **options)


# --- predict and rerank against CrossEncoder ----------------------------------------------------------------


@pytest.mark.parity
@pytest.mark.parametrize("labels", [1, 3])
def test_predict_matches_cross_encoder(st, cross_encoder_dir, labels):
    directory = cross_encoder_dir(labels)
    theirs = cross_encoder(st, directory).predict(PAIRS, batch_size=3)
    ours = numbert.load(directory).predict(PAIRS, batch_size=3)
    assert ours.shape == theirs.shape == ((len(PAIRS),) if labels == 1 else (len(PAIRS), labels))
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, atol=ATOL, rtol=0)
    assert np.ptp(ours, axis=0).min() > 100 * ATOL  # the scores differ, so the comparison means something


@pytest.mark.parity
def test_predict_options_match_cross_encoder(st, torch, cross_encoder_dir):
    directory = cross_encoder_dir(3)
    model, reference = numbert.load(directory), cross_encoder(st, directory)
    np.testing.assert_allclose(
        model.predict(PAIRS, apply_softmax=True), reference.predict(PAIRS, apply_softmax=True), atol=ATOL, rtol=0
    )
    np.testing.assert_allclose(model.predict(PAIRS[0]), reference.predict(PAIRS[0]), atol=ATOL, rtol=0)  # one pair
    np.testing.assert_allclose(
        model.predict(PAIRS, activation_fn="sigmoid"),
        reference.predict(PAIRS, activation_fn=torch.nn.Sigmoid()),
        atol=ATOL,
        rtol=0,
    )
    assert model.predict([]).shape == (0, 3)


@pytest.mark.parity
def test_rerank_matches_cross_encoder_rank(st, torch, cross_encoder_dir):
    directory = cross_encoder_dir(1)
    model, reference = numbert.load(directory), cross_encoder(st, directory)
    for options in ({}, {"top_k": 3, "return_documents": True}):
        theirs = reference.rank(QUERY, DOCUMENTS, **options)
        ours = model.rerank(QUERY, DOCUMENTS, **options)
        assert [r["corpus_id"] for r in ours] == [r["corpus_id"] for r in theirs]
        assert [r.get("text") for r in ours] == [r.get("text") for r in theirs]
        np.testing.assert_allclose([r["score"] for r in ours], [r["score"] for r in theirs], atol=ATOL, rtol=0)
    ours = model.rerank(QUERY, DOCUMENTS, raw_scores=True)
    theirs = reference.rank(QUERY, DOCUMENTS, activation_fn=torch.nn.Identity())
    assert [r["corpus_id"] for r in ours] == [r["corpus_id"] for r in theirs]
    np.testing.assert_allclose([r["score"] for r in ours], [r["score"] for r in theirs], atol=ATOL, rtol=0)


@pytest.mark.parity
def test_ties_keep_the_documents_order(st, cross_encoder_dir):
    """Equal scores keep the documents' order, as CrossEncoder.rank's stable sort (one pair per forward, so
    equal documents get equal scores to the last bit)."""
    directory = cross_encoder_dir(1)
    documents = ["Paris is the capital of France.", "Berlin is well known for its museums."] * 2
    theirs = cross_encoder(st, directory).rank(QUERY, documents, batch_size=1)
    ours = numbert.load(directory).rerank(QUERY, documents, batch_size=1)
    assert [r["corpus_id"] for r in ours] == [r["corpus_id"] for r in theirs]
    assert ours[0]["score"] == ours[1]["score"] and ours[0]["corpus_id"] < ours[1]["corpus_id"]


@pytest.mark.parity
@pytest.mark.parametrize(
    "config",
    [
        {"sentence_transformers": {"activation_fn": "torch.nn.modules.linear.Identity"}},
        {"sbert_ce_default_activation_function": "torch.nn.modules.activation.Tanh"},
    ],
)
def test_the_activation_a_config_names(st, cross_encoder_dir, tmp_path, config):
    directory = tmp_path / "model"
    shutil.copytree(cross_encoder_dir(1), directory)
    config_file = directory / "config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), **config}))
    theirs = cross_encoder(st, directory).predict(PAIRS)
    model = numbert.load(directory)
    np.testing.assert_allclose(model.predict(PAIRS), theirs, atol=ATOL, rtol=0)
    assert np.abs(theirs - model.predict(PAIRS, activation_fn="sigmoid")).min() > 0.1  # not the default


@pytest.mark.parity
def test_a_directory_saved_by_cross_encoder(st, torch, cross_encoder_dir, tmp_path):
    """A CrossEncoder's own directory (modules.json, its activation_fn in config_sentence_transformers.json)."""
    reference = cross_encoder(st, cross_encoder_dir(1), activation_fn=torch.nn.Tanh())
    reference.save_pretrained(str(tmp_path / "saved"))
    theirs = cross_encoder(st, tmp_path / "saved").rank(QUERY, DOCUMENTS)
    model = numbert.load(tmp_path / "saved")
    ours = model.rerank(QUERY, DOCUMENTS)
    assert [r["corpus_id"] for r in ours] == [r["corpus_id"] for r in theirs]
    np.testing.assert_allclose([r["score"] for r in ours], [r["score"] for r in theirs], atol=ATOL, rtol=0)
    sigmoid = model.rerank(QUERY, DOCUMENTS, activation_fn="sigmoid")
    assert abs(ours[0]["score"] - sigmoid[0]["score"]) > 0.1  # tanh, not the default sigmoid


@pytest.mark.parity
def test_long_pairs_are_cut_as_cross_encoder_cuts_them(st, cross_encoder_dir):
    directory = cross_encoder_dir(1)
    model, reference = numbert.load(directory), cross_encoder(st, directory)
    long_query = " ".join(["where is the longest river of the world"] * 10)
    long_document = " ".join(DOCUMENTS * 3)
    pairs = [(long_query, "short"), ("short", long_document), (long_query, long_document)]
    encodings = reference.tokenizer([a for a, _ in pairs], [b for _, b in pairs], truncation="longest_first")
    assert {len(ids) for ids in encodings["input_ids"]} == {64}  # all three are cut
    np.testing.assert_allclose(model.predict(pairs), reference.predict(pairs), atol=ATOL, rtol=0)
    np.testing.assert_allclose(
        model.predict(pairs, max_length=20), cross_encoder(st, directory, max_length=20).predict(pairs), atol=ATOL
    )


@pytest.mark.parity
def test_long_documents_as_windows_score_their_best_window(transformers, torch, cross_encoder_dir):
    """long="window": the best of the windows transformers' tokenizer makes (only_second, overflowing
    tokens, `stride` shared), each scored by BertForSequenceClassification."""
    directory = cross_encoder_dir(1)
    long_document = " ".join(DOCUMENTS * 3)
    pairs = [(QUERY, long_document), (QUERY, DOCUMENTS[1]), ("short", long_document)]
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    reference = transformers.BertForSequenceClassification.from_pretrained(directory).eval()
    want = []
    for query, document in pairs:
        windows = tokenizer(
            query,
            document,
            truncation="only_second",
            max_length=64,
            stride=16,
            return_overflowing_tokens=True,
            padding=True,
            return_tensors="pt",
        )
        windows.pop("overflow_to_sample_mapping")
        with torch.no_grad():
            want.append(torch.sigmoid(reference(**windows).logits.max()).item())
    assert len(windows["input_ids"]) > 2  # the long document makes several windows
    model = numbert.load(directory)
    np.testing.assert_allclose(model.predict(pairs, long="window", stride=16), want, atol=ATOL, rtol=0)
    assert model.predict(pairs[1], long="window") == model.predict(pairs[1])  # a short one is one window
    ranked = model.rerank(QUERY, [DOCUMENTS[1], long_document], long="window", stride=16)
    assert {r["corpus_id"]: r["score"] for r in ranked} == pytest.approx({0: want[1], 1: want[0]}, abs=ATOL)


def test_windows_need_one_label_and_a_stride_that_fits(cross_encoder_dir, reranker):
    with pytest.raises(ValueError, match="long='window' scores a document by its best window, for one label"):
        numbert.load(cross_encoder_dir(3)).predict(PAIRS, long="window")
    with pytest.raises(ValueError, match=r"stride \(60\) must be smaller"):
        reranker.predict([(QUERY, " ".join(DOCUMENTS * 3))], long="window", stride=60)
    with pytest.raises(ValueError, match="long must be 'truncate' or 'window'"):
        reranker.predict(PAIRS, long="chunks")


def test_predict_and_rerank_match_the_committed_cross_encoder_outputs():
    """Without torch: CrossEncoder.predict and .rank of the tiny cross-encoder in tests/fixtures."""
    expected = np.load(FIXTURES / "retrieval_expected.npz")
    model = numbert.load(FIXTURES / "cross_encoder")
    np.testing.assert_allclose(model.predict(PAIRS), expected["predict"], atol=ATOL, rtol=0)
    np.testing.assert_allclose(
        model.predict(PAIRS, activation_fn="identity"), expected["predict_raw"], atol=ATOL, rtol=0
    )
    ranked = model.rerank(QUERY, DOCUMENTS)
    assert [hit["corpus_id"] for hit in ranked] == expected["rank_ids"].tolist()
    np.testing.assert_allclose([hit["score"] for hit in ranked], expected["rank_scores"], atol=ATOL, rtol=0)


# --- bad input ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reranker(cross_encoder_dir):
    return numbert.load(cross_encoder_dir(1))


@pytest.mark.parametrize(
    "query, documents, options, error, message",
    [
        (QUERY, [], {}, ValueError, "documents is empty"),
        ("  ", ["a"], {}, ValueError, "query is empty"),
        (None, ["a"], {}, TypeError, "query must be a str"),
        (QUERY, ["a", 3], {}, TypeError, r"documents\[1\] is a int"),
        (QUERY, "a document", {}, TypeError, "documents must be a str or a list"),
        (QUERY, ["a"], {"top_k": 0}, ValueError, "top_k must be a positive integer"),
        (QUERY, ["a"], {"batch_size": 0}, ValueError, "batch_size must be a positive integer"),
        (QUERY, ["a"], {"raw_scores": True, "activation_fn": "sigmoid"}, ValueError, "not both"),
        (QUERY, ["a"], {"activation_fn": "relu"}, ValueError, "unknown activation_fn 'relu'"),
        (QUERY, ["a"], {"max_length": 1000}, ValueError, "max_length must be an integer between 4 and 64"),
    ],
)
def test_rerank_refuses_bad_input(reranker, query, documents, options, error, message):
    with pytest.raises(error, match=message):
        reranker.rerank(query, documents, **options)


def test_predict_refuses_what_is_not_pairs(reranker):
    with pytest.raises(TypeError, match=r"pairs\[1\] must be a \(query, document\) pair"):
        reranker.predict([("a", "b"), ("a", "b", "c")])
    with pytest.raises(TypeError, match=r"pairs\[0\]\[1\] is a NoneType"):
        reranker.predict([("a", None)])


def test_rerank_needs_a_cross_encoder_with_one_label(cross_encoder_dir):
    with pytest.raises(ValueError, match="one label .* has 3: use predict"):
        numbert.load(cross_encoder_dir(3)).rerank(QUERY, ["a"])


def test_a_bi_encoder_asked_to_rerank_names_the_missing_tensors(model):
    with pytest.raises(ValueError, match="lacks tensors 'classifier.weight', 'classifier.bias'.*BertForSequence"):
        model.rerank(QUERY, ["a"])


def test_an_activation_numbert_does_not_run_is_named(cross_encoder_dir, tmp_path):
    directory = tmp_path / "model"
    shutil.copytree(cross_encoder_dir(1), directory)
    config_file = directory / "config.json"
    activation = {"sentence_transformers": {"activation_fn": "torch.nn.modules.activation.Softplus"}}
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), **activation}))
    with pytest.raises(ValueError, match="activation_fn torch.nn.modules.activation.Softplus is not one numbert runs"):
        numbert.load(directory).predict(PAIRS)


# --- the command line -----------------------------------------------------------------------------------


@pytest.mark.parity
def test_rerank_command_matches_cross_encoder_rank(st, cross_encoder_dir, tmp_path):
    directory = cross_encoder_dir(1)
    documents = [d for d in DOCUMENTS if d]  # a line per document
    (tmp_path / "docs.txt").write_text("\n".join(documents) + "\n", encoding="utf-8")
    result = run("rerank", QUERY, "--file", tmp_path / "docs.txt", "--json", "--top-k", "3", model=directory)
    assert result.returncode == 0, result.stderr.decode()
    ours = [json.loads(line) for line in result.stdout.decode().splitlines()]
    theirs = cross_encoder(st, directory).rank(QUERY, documents, top_k=3, return_documents=True)
    assert [(r["corpus_id"], r["text"]) for r in ours] == [(r["corpus_id"], r["text"]) for r in theirs]
    np.testing.assert_allclose([r["score"] for r in ours], [r["score"] for r in theirs], atol=ATOL, rtol=0)
    plain = run("rerank", QUERY, model=directory, stdin="\n".join(documents).encode())
    first = plain.stdout.decode().splitlines()[0].split("\t")
    assert [int(first[1]), first[2]] == [theirs[0]["corpus_id"], theirs[0]["text"]]
    assert abs(float(first[0]) - theirs[0]["score"]) < ATOL
    windows = run("rerank", QUERY, "--long", "window", "--stride", "8", "-f", tmp_path / "docs.txt", model=directory)
    want = numbert.load(directory).rerank(QUERY, documents, long="window", stride=8)
    got = [line.split("\t") for line in windows.stdout.decode().splitlines()]
    assert [int(i) for _, i, _ in got] == [r["corpus_id"] for r in want]
    np.testing.assert_allclose([float(s) for s, _, _ in got], [r["score"] for r in want], atol=1e-6, rtol=0)


def test_rerank_command_errors(cross_encoder_dir, minilm_dir):
    assert "documents is empty" in one_error_line(run("rerank", QUERY, model=cross_encoder_dir(1), stdin=b""))
    assert "classifier.weight" in one_error_line(run("rerank", QUERY, model=minilm_dir, stdin=b"a\n"))


# --- the server -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(cross_encoder_dir):
    """`numbert serve` of the one-label cross-encoder, at most 8 inputs a request."""
    from helpers import ServerProcess

    server = ServerProcess(cross_encoder_dir(1), "--max-client-batch-size", "8")
    yield server
    assert server.stop() == 0, "".join(server.lines)


def post(server, route: str, body):
    import httpx

    return httpx.post(server.url + route, json=body, timeout=60)


@pytest.mark.parity
def test_served_rerank_matches_cross_encoder_rank(st, torch, cross_encoder_dir, served):
    reference = cross_encoder(st, cross_encoder_dir(1))
    theirs = reference.rank(QUERY, DOCUMENTS, return_documents=True)
    tei = post(served, "/rerank", {"query": QUERY, "texts": DOCUMENTS, "return_text": True, "truncate": True}).json()
    assert [(r["index"], r["text"]) for r in tei] == [(r["corpus_id"], r["text"]) for r in theirs]
    np.testing.assert_allclose([r["score"] for r in tei], [r["score"] for r in theirs], atol=ATOL, rtol=0)

    raw = reference.rank(QUERY, DOCUMENTS, activation_fn=torch.nn.Identity())
    tei = post(served, "/rerank", {"query": QUERY, "texts": DOCUMENTS, "raw_scores": True, "truncate": True}).json()
    assert [r["index"] for r in tei] == [r["corpus_id"] for r in raw] and "text" not in tei[0]
    np.testing.assert_allclose([r["score"] for r in tei], [r["score"] for r in raw], atol=ATOL, rtol=0)

    documents = [DOCUMENTS[0], {"text": DOCUMENTS[1]}, *DOCUMENTS[2:]]
    body = {"model": served.model_name, "query": QUERY, "documents": documents, "top_n": 2, "return_documents": True}
    answer = post(served, "/v1/rerank", body).json()
    assert [(r["index"], r["document"]["text"]) for r in answer["results"]] == [
        (r["corpus_id"], r["text"]) for r in theirs[:2]
    ]
    np.testing.assert_allclose(
        [r["relevance_score"] for r in answer["results"]], [r["score"] for r in theirs[:2]], atol=ATOL, rtol=0
    )
    assert answer["model"] == served.model_name and answer["usage"]["total_tokens"] > len(DOCUMENTS)


@pytest.mark.parity
def test_served_predict_matches_cross_encoder_predict(st, cross_encoder_dir, served):
    theirs = cross_encoder(st, cross_encoder_dir(1)).predict(PAIRS)
    answer = post(served, "/predict", {"inputs": [list(p) for p in PAIRS], "truncate": True}).json()
    assert [[p["label"] for p in labels] for labels in answer] == [["LABEL_0"]] * len(PAIRS)
    np.testing.assert_allclose([labels[0]["score"] for labels in answer], theirs, atol=ATOL, rtol=0)
    one = post(served, "/predict", {"inputs": list(PAIRS[0]), "truncate": True}).json()  # two strings: a pair
    # alone, the pair runs in another batch than among its batch-mates: the same score up to the last bits
    assert [p["label"] for p in one] == [p["label"] for p in answer[0]]
    np.testing.assert_allclose([p["score"] for p in one], [p["score"] for p in answer[0]], atol=1e-6, rtol=0)
    single = post(served, "/predict", {"inputs": PAIRS[0][0]}).json()  # one text
    assert single[0]["label"] == "LABEL_0" and 0 < single[0]["score"] < 1


@pytest.mark.parametrize(
    "route, body, status, param",
    [
        ("/rerank", {"texts": ["a"]}, 422, "query"),
        ("/rerank", {"query": "", "texts": ["a"]}, 422, "query"),
        ("/rerank", {"query": "q", "texts": []}, 422, "texts"),
        ("/rerank", {"query": "q", "texts": ["a", 3]}, 422, "texts[1]"),
        ("/rerank", {"query": "q", "texts": ["a"], "raw_scores": "yes"}, 422, "raw_scores"),
        ("/rerank", {"query": "q", "texts": ["a"] * 9}, 413, "texts"),
        ("/rerank", {"query": "q", "texts": ["a", "long " * 100], "truncate": False}, 413, "texts[1]"),
        ("/v1/rerank", {"query": "q", "documents": ["a", {"txt": "b"}]}, 422, "documents[1].text"),
        ("/v1/rerank", {"query": "q", "documents": ["a"], "top_n": 0}, 422, "top_n"),
        ("/v1/rerank", {"query": "q", "documents": "a"}, 422, "documents"),
        ("/predict", {"inputs": []}, 422, "inputs"),
        ("/predict", {"inputs": ["a", ["b", "c", "d"]]}, 422, "inputs[1]"),
        ("/predict", {"inputs": 3}, 422, "inputs"),
    ],
)
def test_served_scoring_refuses_bad_fields(served, route, body, status, param):
    answer = post(served, route, body)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["param"] == param
    assert post(served, "/rerank", {"query": "q", "texts": ["a"]}).status_code == 200  # and it keeps serving


def test_a_long_text_is_cut_when_asked(served):
    answer = post(served, "/rerank", {"query": "q", "texts": ["a", "long " * 100], "truncate": True})
    assert answer.status_code == 200 and {r["index"] for r in answer.json()} == {0, 1}
    cohere = post(served, "/v1/rerank", {"query": "q", "documents": ["long " * 100]})  # Cohere always cuts
    assert cohere.status_code == 200


@pytest.mark.parity
def test_served_predict_with_several_labels_and_rerank_refused(st, cross_encoder_dir):
    from helpers import ServerProcess

    directory = cross_encoder_dir(3)
    server = ServerProcess(directory)
    try:
        theirs = cross_encoder(st, directory).predict(PAIRS, apply_softmax=True)  # softmax: classify's default
        answer = post(server, "/predict", {"inputs": [list(p) for p in PAIRS], "truncate": True}).json()
        got = [[{p["label"]: p["score"] for p in labels}[f"LABEL_{i}"] for i in range(3)] for labels in answer]
        np.testing.assert_allclose(got, theirs, atol=ATOL, rtol=0)
        assert all(
            [p["score"] for p in labels] == sorted((p["score"] for p in labels), reverse=True) for labels in answer
        )
        refused = post(server, "/rerank", {"query": "q", "texts": ["a"]})
        assert refused.status_code == 400 and "one label" in refused.json()["error"]["message"]
    finally:
        assert server.stop() == 0, "".join(server.lines)


def test_an_embedding_model_refuses_to_rerank_and_keeps_embedding(minilm_dir, minilm):
    from helpers import ServerProcess

    server = ServerProcess(minilm_dir)
    try:
        for route, body in [
            ("/rerank", {"query": "q", "texts": ["a"]}),
            ("/v1/rerank", {"query": "q", "documents": ["a"]}),
            ("/predict", {"inputs": "a"}),
        ]:
            refused = post(server, route, body)
            assert refused.status_code == 400, refused.text
            assert "'classifier.weight'" in refused.json()["error"]["message"]
        vectors = post(server, "/embed", {"inputs": ["a text"]}).json()
        np.testing.assert_allclose(vectors[0], minilm.embed("a text", normalize=True), atol=1e-6)
    finally:
        assert server.stop() == 0, "".join(server.lines)
