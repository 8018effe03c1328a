"""Truncation on the left (transformers' truncation_side="left", text-embeddings-inference's
truncation_direction "Left"): a long text keeps its last tokens.

The tokenizers against the Rust library (WordPiece through transformers, BPE and Unigram through
`tokenizers`), on every strategy, stride and overflowing window; tokenizer_config.json's truncation_side
read as transformers reads it; embed, embed_sparse and rerank cut so; the server's TEI routes take the
field per request, and a long text is cut from the end it keeps without being tokenized whole.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from test_rerank import DOCUMENTS, QUERY
from test_tokenizer_family import NAMES
from test_tokenizer_parity import CORPUS, as_dict

import numbert
from numbert.tokenizer import Tokenizer
from numbert.tokenizer.truncation import windows

FIXTURES = Path(__file__).parent / "fixtures"
LONG = " ".join(" ".join(line.split()) for line in CORPUS)  # thousands of tokens of real text, one line


def our_windows(tok, text, pair=None, **options) -> list[dict]:
    enc = tok.encode(text, pair, **options, return_overflowing_tokens=True)
    return [as_dict(e) for e in [enc, *enc.overflowing]]


def random_cases(seed: int, n: int):
    rng = random.Random(seed)
    for _ in range(n):
        yield {
            "text": rng.choice([*CORPUS, LONG[: rng.randrange(50, 2000)]]),
            "pair": rng.choice([None, *filter(None, CORPUS)]),
            "max_length": rng.choice([8, 16, 40, 128]),
            "strategy": rng.choice(["longest_first", "only_first", "only_second"]),
            "stride": rng.choice([0, 0, 3]),
        }


def test_left_windows_are_the_right_ones_mirrored():
    for length in range(0, 30):
        for max_len in range(1, 12):
            for stride in range(0, max_len):
                right, left = windows(length, max_len, stride), windows(length, max_len, stride, "left")
                assert left == [(length - e, length - s) for s, e in right]
                assert left[0] == (max(0, length - max_len), length)  # the kept tokens: the last ones


def test_wordpiece_cut_on_the_left_is_rusts(transformers, vocab_path):
    """Every strategy, stride and overflowing window, against transformers' Rust-backed tokenizer with
    truncation_side="left"; the side as the tokenizer's attribute and as encode's argument."""
    from transformers.models.bert.tokenization_bert import load_vocab

    rust = transformers.BertTokenizer(vocab=load_vocab(str(vocab_path)), truncation_side="left")
    ours, left = Tokenizer.from_vocab(vocab_path), Tokenizer.from_vocab(vocab_path, truncation_side="left")
    for case in random_cases(0, 150):
        text, pair, strategy = case.pop("text"), case.pop("pair"), case.pop("strategy")
        try:
            expected = rust(
                text,
                pair,
                truncation=strategy,
                return_offsets_mapping=True,
                return_overflowing_tokens=True,
                return_special_tokens_mask=True,
                **case,
            ).encodings
        except BaseException:  # noqa: B036 - Rust refuses (a strategy that cannot fit) with an exception or a panic
            with pytest.raises(ValueError):
                our_windows(left, text, pair, truncation=strategy, **case)
            continue
        expected = [as_dict(e) for e in expected]
        assert our_windows(left, text, pair, truncation=strategy, **case) == expected, (text, pair, strategy, case)
        assert our_windows(ours, text, pair, truncation=strategy, truncation_side="left", **case) == expected


@pytest.mark.parametrize("name", NAMES)
def test_bpe_and_unigram_cut_on_the_left_are_rusts(name):
    """The byte-level BPE and Unigram tokenizer.json fixtures against `tokenizers` truncating on the left."""
    tokenizers = pytest.importorskip("tokenizers")
    rust = tokenizers.Tokenizer.from_file(str(FIXTURES / f"{name}.json"))
    ours = Tokenizer.from_tokenizer_json(FIXTURES / f"{name}.json")
    for case in random_cases(1, 60):
        rust.no_truncation()
        rust.enable_truncation(case["max_length"], strategy=case["strategy"], stride=case["stride"], direction="left")
        try:
            encoding = rust.encode(case["text"], case["pair"])
            expected = [as_dict(e) for e in [encoding, *encoding.overflowing]]
        except BaseException:  # noqa: B036
            with pytest.raises(ValueError):
                our_windows(ours, case["text"], case["pair"], truncation=case["strategy"], **side(case))
            continue
        got = our_windows(ours, case["text"], case["pair"], truncation=case["strategy"], **side(case))
        assert got == expected, case


def side(case: dict) -> dict:
    return {"max_length": case["max_length"], "stride": case["stride"], "truncation_side": "left"}


def test_tokenizer_config_truncation_side_is_read_and_checked(tmp_path, minilm_dir):
    directory = tmp_path / "left"
    shutil.copytree(minilm_dir, directory)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps(config | {"truncation_side": "left"}))
    tok = Tokenizer.from_pretrained(directory)
    assert tok.truncation_side == "left"
    assert (
        tok.encode(LONG, max_length=10).ids
        == Tokenizer.from_pretrained(minilm_dir).encode(LONG, max_length=10, truncation_side="left").ids
    )
    (directory / "tokenizer_config.json").write_text(json.dumps(config | {"truncation_side": "middle"}))
    with pytest.raises(ValueError, match=r"tokenizer_config\.json: truncation_side must be 'right' or 'left'"):
        Tokenizer.from_pretrained(directory)
    with pytest.raises(ValueError, match="truncation_side must be 'right' or 'left', got 'up'"):
        tok.encode("a b", max_length=3, truncation_side="up")


@pytest.fixture(scope="module")
def left_dir(tmp_path_factory, minilm_dir) -> Path:
    """all-MiniLM-L6-v2 whose tokenizer_config.json says truncation_side "left", as transformers writes it."""
    directory = tmp_path_factory.mktemp("minilm-left")
    for item in minilm_dir.iterdir():
        (shutil.copytree if item.is_dir() else shutil.copyfile)(item, directory / item.name)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps(config | {"truncation_side": "left"}))
    return directory


TEXTS = [LONG[:3000], "a short one", LONG[500:1500]]


def test_embed_cuts_on_the_side_asked_or_the_tokenizers(minilm, left_dir):
    left = numbert.load(left_dir)
    assert left.recipe().truncation_side == "left" and minilm.recipe().truncation_side == "right"
    ours = minilm.embed(TEXTS, max_length=32, truncation_side="left")
    np.testing.assert_array_equal(left.embed(TEXTS, max_length=32), ours)
    assert not np.allclose(minilm.embed(TEXTS, max_length=32)[0], ours[0])  # the other end of the text
    short = minilm.embed(TEXTS[1], max_length=32, truncation_side="left")  # alone: other batches, other last bits
    np.testing.assert_allclose(short, ours[1], atol=1e-6, rtol=0)
    assert minilm.recipe(truncation_side="left").describe()["truncation_side"] == "left"
    assert "truncation_side" not in minilm.recipe().describe()  # jobs' manifests from before still match
    with pytest.raises(ValueError, match="truncation_side must be 'right' or 'left'"):
        minilm.embed(TEXTS, truncation_side="start")


@pytest.mark.parity
def test_embed_on_the_left_is_sentence_transformers(torch, left_dir, minilm):
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(left_dir), device="cpu")
    assert reference.tokenizer.truncation_side == "left"
    reference.max_seq_length = 32
    np.testing.assert_allclose(
        minilm.embed(TEXTS, max_length=32, truncation_side="left"), reference.encode(TEXTS), atol=1e-5, rtol=0
    )


def test_rerank_reads_the_tokenizers_side(tmp_path):
    """A cross-encoder whose tokenizer cuts on the left scores the documents' ends."""
    directory = tmp_path / "ranker"
    shutil.copytree(FIXTURES / "cross_encoder", directory)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps(config | {"truncation_side": "left"}))
    right, left = numbert.load(FIXTURES / "cross_encoder"), numbert.load(directory)
    documents = [d + " " + LONG[:400] for d in DOCUMENTS]  # longer than the model's 64 positions
    pairs = [(QUERY, d) for d in documents]
    right.tokenizer.truncation_side = "left"
    np.testing.assert_array_equal(left.predict(pairs), right.predict(pairs))
    right.tokenizer.truncation_side = "right"
    assert not np.allclose(left.predict(pairs), right.predict(pairs))


# --- the server --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(minilm_dir):
    from starlette.testclient import TestClient

    from numbert.serve import Settings
    from numbert.serve.app import create_app

    settings = Settings(
        model=str(minilm_dir),
        more_models={"ranker": str(FIXTURES / "cross_encoder")},
        recipe={"max_length": 32},
    )
    with TestClient(create_app(settings)) as client:
        deadline = time.monotonic() + 120
        while client.get("/health").status_code != 200:  # every model loaded
            assert time.monotonic() < deadline, client.get("/health").text
            time.sleep(0.05)
        yield client


def test_served_embed_cuts_on_the_left_when_asked(client, minilm):
    """/embed, /embed_sparse's sibling /embed_all and /similarity take truncation_direction per request. A text
    far longer than its max_length tokens is cut from its end, the tokenizer reading only its last tokens: the same
    vectors as the whole text cut on the left."""
    texts = [LONG * 3, *TEXTS]
    expected = minilm.embed(texts, max_length=32, truncation_side="left", normalize=True)
    answer = client.post("/embed", json={"inputs": texts, "truncate": True, "truncation_direction": "Left"})
    assert answer.status_code == 200, answer.text
    np.testing.assert_allclose(np.array(answer.json(), np.float32), expected, atol=1e-6, rtol=0)
    right = client.post("/embed", json={"inputs": texts, "truncate": True, "truncation_direction": "Right"}).json()
    np.testing.assert_allclose(right, minilm.embed(texts, max_length=32, normalize=True), atol=1e-6, rtol=0)
    tokens = client.post("/embed_all", json={"inputs": texts[0], "truncate": True, "truncation_direction": "left"})
    assert tokens.status_code == 200 and len(tokens.json()[0]) == 32
    similar = client.post(
        "/similarity",
        json={
            "inputs": {"source_sentence": texts[0], "sentences": texts[1:]},
            "parameters": {"truncate": True, "truncation_direction": "Left"},
        },
    )
    assert similar.status_code == 200, similar.text
    np.testing.assert_allclose(similar.json(), expected[1:] @ expected[0], atol=1e-5, rtol=0)


def test_served_rerank_cuts_on_the_left_when_asked(client, tmp_path):
    directory = tmp_path / "ranker"
    shutil.copytree(FIXTURES / "cross_encoder", directory)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps(config | {"truncation_side": "left"}))
    documents = [d + " " + LONG[:400] for d in DOCUMENTS]
    expected = numbert.load(directory).rerank(QUERY, documents)
    body = {"query": QUERY, "texts": documents, "truncate": True, "truncation_direction": "Left"}
    answer = client.post("/models/ranker/rerank", json=body)
    assert answer.status_code == 200, answer.text
    assert [r["index"] for r in answer.json()] == [r["corpus_id"] for r in expected]
    np.testing.assert_allclose([r["score"] for r in answer.json()], [r["score"] for r in expected], atol=1e-6)


@pytest.mark.parametrize(
    "route, body, param",
    [
        ("/embed", {"inputs": "x", "truncation_direction": "Up"}, "truncation_direction"),
        ("/embed_sparse", {"inputs": "x", "truncation_direction": 1}, "truncation_direction"),
        ("/predict", {"inputs": "x", "truncation_direction": "middle"}, "truncation_direction"),
        (
            "/similarity",
            {"inputs": {"source_sentence": "a", "sentences": ["b"]}, "parameters": {"truncation_direction": "no"}},
            "parameters.truncation_direction",
        ),
    ],
)
def test_a_bad_truncation_direction_is_a_422_naming_it(client, route, body, param):
    answer = client.post(route, json=body)
    assert (answer.status_code, answer.json()["error"]["param"]) == (422, param)
    assert "'Right' or 'Left'" in answer.json()["error"]["message"]


def test_the_command_line_cuts_on_the_side_asked(tmp_path, minilm_dir, minilm):
    from test_cli import run

    (tmp_path / "in.txt").write_text("\n".join(TEXTS) + "\n")
    result = run(
        "encode", "--file", tmp_path / "in.txt", "-o", tmp_path / "out.npy", "--max-length", 32,
        "--truncation-side", "left", model=minilm_dir,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    expected = minilm.embed(TEXTS, max_length=32, truncation_side="left")
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, atol=1e-6, rtol=0)
