"""sentence-transformers directories beyond Transformer + Pooling + Normalize: Dense modules and prompts.

Every directory is saved by sentence-transformers itself, on a small random BERT saved by transformers,
in the layouts of the BERT-architecture retrieval families: e5 (mean pooling, Normalize, "query: " /
"passage: " prompts), bge (CLS pooling, Normalize, a default query prompt) and LaBSE (CLS pooling, a
Dense layer with tanh, Normalize).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import served_model

import numbert
from numbert.checkpoint.sentence_config import read_sentence_config

TEXTS = [
    "Here is the sentence I want embeddings for.",
    "hello, world!",
    "The bank of the river.",
    "After stealing money from the bank vault, the robber was seen fishing.",
]


@pytest.fixture(scope="module")
def st(torch):
    return pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def random_bert(tmp_path_factory, transformers, torch, vocab_path):
    """A small random BertModel and the bert-base-uncased tokenizer, saved by transformers."""
    from transformers.models.bert.tokenization_bert import load_vocab

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, max_position_embeddings=128
    )
    d = tmp_path_factory.mktemp("random-bert")
    transformers.BertModel(config).save_pretrained(d)
    transformers.BertTokenizer(vocab=load_vocab(str(vocab_path))).save_pretrained(d)
    return d


def save_st(st, torch, random_bert, directory, pooling: str, *, dense: int | None = None, **prompting):
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers import models

    torch.manual_seed(1)
    transformer = models.Transformer(str(random_bert), max_seq_length=64)
    modules = [transformer, models.Pooling(32, pooling_mode=pooling)]
    if dense:
        modules.append(models.Dense(32, dense, activation_function=torch.nn.Tanh()))
    modules.append(models.Normalize())
    model = SentenceTransformer(modules=modules, device="cpu", **prompting)
    model.save(str(directory))
    return model


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=2e-6, rtol=0)


@pytest.mark.parity
def test_e5_layout_query_and_passage_prompts(tmp_path, st, torch, random_bert):
    reference = save_st(
        st, torch, random_bert, tmp_path / "e5", "mean", prompts={"query": "query: ", "passage": "passage: "}
    )
    ours = numbert.load(tmp_path / "e5")
    assert ours.sentence_config.prompts.items() >= {"query": "query: ", "passage": "passage: "}.items()
    for name in ("query", "passage"):
        assert_same(ours.embed(TEXTS, prompt_name=name), reference.encode(TEXTS, prompt_name=name))
    assert_same(ours.embed(TEXTS), reference.encode(TEXTS))  # no default prompt: none
    assert_same(ours.embed(TEXTS, prompt="query: "), reference.encode(TEXTS, prompt="query: "))


@pytest.mark.parity
def test_bge_layout_cls_pooling_and_default_prompt(tmp_path, st, torch, random_bert):
    instruction = "Represent this sentence for searching relevant passages: "
    reference = save_st(
        st,
        torch,
        random_bert,
        tmp_path / "bge",
        "cls",
        prompts={"query": instruction, "passage": ""},
        default_prompt_name="query",
    )
    ours = numbert.load(tmp_path / "bge")
    assert_same(ours.embed(TEXTS), reference.encode(TEXTS))  # the default prompt applies
    assert_same(ours.embed(TEXTS, prompt_name="passage"), reference.encode(TEXTS, prompt_name="passage"))
    assert_same(ours.embed(TEXTS[0]), reference.encode(TEXTS[0]))


@pytest.mark.parity
def test_labse_layout_dense_tanh_then_normalize(tmp_path, st, torch, random_bert):
    reference = save_st(st, torch, random_bert, tmp_path / "labse", "cls", dense=16)
    config = read_sentence_config(tmp_path / "labse")
    assert len(config.dense) == 1 and config.dense[0].weight.shape == (16, 32) and config.unsupported == ()
    ours = numbert.load(tmp_path / "labse")
    got = ours.embed(TEXTS)
    assert got.shape == (len(TEXTS), 16)
    assert_same(got, reference.encode(TEXTS))
    assert ours.embed(TEXTS, pooling="cls").shape == (len(TEXTS), 32)  # a recipe of one's own: BERT's vectors


def test_prompt_errors(tmp_path, st, torch, random_bert):
    save_st(st, torch, random_bert, tmp_path / "e5", "mean", prompts={"query": "query: "})
    model = numbert.load(tmp_path / "e5")
    with pytest.raises(ValueError, match="unknown prompt_name 'nope'; this model's prompts: .*'query'"):
        model.embed(TEXTS, prompt_name="nope")
    with pytest.raises(ValueError, match="pass prompt= or prompt_name=, not both"):
        model.embed(TEXTS, prompt="a", prompt_name="query")
    settings = tmp_path / "e5" / "config_sentence_transformers.json"
    settings.write_text(json.dumps(json.loads(settings.read_text()) | {"default_prompt_name": "nope"}))
    with pytest.raises(ValueError, match="default_prompt_name 'nope' is not one of its prompts"):
        numbert.load(tmp_path / "e5")


def test_dense_module_errors_name_the_file(tmp_path, st, torch, random_bert):
    save_st(st, torch, random_bert, tmp_path / "labse", "cls", dense=16)
    config = tmp_path / "labse" / "2_Dense" / "config.json"
    original = json.loads(config.read_text())
    config.write_text(json.dumps(original | {"activation_function": "torch.nn.modules.activation.Softsign"}))
    with pytest.raises(ValueError, match="2_Dense/config.json: unsupported activation_function"):
        numbert.load(tmp_path / "labse")
    config.write_text(json.dumps(original | {"out_features": 8}))
    with pytest.raises(
        ValueError,
        match=r"2_Dense/model.safetensors: expected tensor 'linear.weight' of shape "
        r"\(8, 32\), found \(16, 32\)",
    ):
        numbert.load(tmp_path / "labse")


@pytest.mark.parity
def test_cli_encode_prompt_name(tmp_path, st, torch, random_bert):
    import subprocess
    import sys

    reference = save_st(st, torch, random_bert, tmp_path / "e5", "mean", prompts={"query": "query: "})
    out = tmp_path / "v.npy"

    def encode(flags, texts):
        command = [sys.executable, "-m", "numbert", "encode", "--model", str(tmp_path / "e5"), *flags, "-o", str(out)]
        return subprocess.run([*command, *texts], capture_output=True, text=True, check=False)

    for flags in (["--prompt-name", "query"], ["--prompt", "query: "]):
        result = encode(flags, TEXTS)
        assert result.returncode == 0, result.stderr
        assert_same(np.load(out), reference.encode(TEXTS, prompt_name="query"))
    result = encode(["--prompt-name", "nope"], ["x"])
    assert result.returncode != 0 and "unknown prompt_name 'nope'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parity
def test_served_vectors_take_the_dense_layers_and_prompts(tmp_path, st, torch, random_bert):
    """`numbert serve` of such a directory answers what SentenceTransformer.encode gives: its Dense layer,
    its default prompt, a prompt named by /embed's prompt_name or by --prompt-name."""
    import httpx
    from helpers import ServerProcess

    prompts = {"query": "query: ", "passage": "passage: "}
    reference = save_st(
        st, torch, random_bert, tmp_path / "st", "cls", dense=16, prompts=prompts, default_prompt_name="query"
    )
    server = ServerProcess(tmp_path / "st")
    try:
        answer = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS}).json()
        got = np.array([row["embedding"] for row in answer["data"]], np.float32)
        assert_same(got, reference.encode(TEXTS))  # the default prompt and the Dense layer
        tei = httpx.post(server.url + "/embed", json={"inputs": TEXTS, "prompt_name": "passage"})
        assert_same(np.array(tei.json(), np.float32), reference.encode(TEXTS, prompt_name="passage"))
        refused = httpx.post(server.url + "/embed", json={"inputs": TEXTS, "prompt_name": "nope"})
        assert refused.status_code == 422 and refused.json()["error"]["param"] == "prompt_name"
        assert "unknown prompt_name 'nope'" in refused.json()["error"]["message"]
    finally:
        assert server.stop() == 0, "".join(server.lines)
    server = ServerProcess(tmp_path / "st", "--prompt-name", "passage", "--pooling", "mean")
    try:  # a pooling of one's own: BERT's vectors, no Dense layer (as Bert.embed)
        answer = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS}).json()
        got = np.array([row["embedding"] for row in answer["data"]], np.float32)
        want = numbert.load(tmp_path / "st").embed(TEXTS, prompt_name="passage", pooling="mean")
        assert got.shape == (len(TEXTS), 32)
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
    finally:
        assert server.stop() == 0, "".join(server.lines)


def test_a_served_prompt_name_needs_a_model_with_prompts(random_bert):
    from numbert.serve.protocol import ApiError

    plain = served_model(random_bert)  # a BERT saved by transformers: no prompts
    assert plain.request_recipe(None, None, None).prompt == ""
    with pytest.raises(ApiError, match="this model has none") as refused:
        plain.request_recipe("query", None, None)
    assert refused.value.status == 422 and refused.value.param == "prompt_name"
