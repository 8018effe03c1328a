"""sentence-transformers directories over the decoder-shaped embedders, against sentence-transformers'
`encode`, `encode_query` and `encode_document`, batched: a Qwen3-Embedding-like one (the Transformer, last-token
pooling of the end-of-text token its tokenizer appends, left padding, Normalize, the query instruction prompt) and an
EmbeddingGemma-like one (mean pooling, Dense 64 -> 256 -> 64 without biases, Normalize, its task prompts). Their
tokenizers are tiny byte-level BPEs of the fixtures' 64 ids with each model's special tokens and template (Gemma's
and Qwen's own tokenizers are tested with the tokenizers)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
from helpers import serve_by_name, served_as_embed
from test_decoder_family import MODELS, save_decoder

import numbert
from numbert.cli import main as cli_main
from numbert.model.pooling import pool

FIXTURES = Path(__file__).parent / "fixtures"
ATOL = 1e-5
TEXTS = [
    "here is the sentence i want embeddings for.",
    "hello, world!",
    "the bank of the river.",
    "after stealing money from the bank vault, the robber was seen fishing on the river bank.",
]
QWEN_QUERY = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
GEMMA_PROMPTS = {  # EmbeddingGemma's config_sentence_transformers.json, in part
    "query": "task: search result | query: ",
    "document": "title: none | text: ",
    "Classification": "task: classification | query: ",
    "Clustering": "task: clustering | query: ",
}
TOKENS = {  # model_type -> its special tokens at ids 0-4, the template around one text, its padding side
    "qwen3": (["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>", "<mask>"], ([], ["<|endoftext|>"]), "left"),
    "gemma3_text": (["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"], (["<bos>"], ["<eos>"]), "right"),
}


def save_tokenizer(model_type: str, directory: Path) -> None:
    """The modern fixtures' 64-piece byte-level BPE with `model_type`'s special tokens and template, and a
    tokenizer_config.json with its padding side."""
    spec = json.loads((FIXTURES / "modern" / "modernbert-ForMaskedLM" / "tokenizer.json").read_text())
    specials, (before, after), side = TOKENS[model_type]
    old = [token["content"] for token in spec["added_tokens"]]
    renamed = dict(zip(old, specials))
    for token in spec["added_tokens"]:
        token["content"] = renamed[token["content"]]
    spec["model"]["vocab"] = {renamed.get(piece, piece): i for piece, i in spec["model"]["vocab"].items()}
    spec["model"]["unk_token"] = renamed.get(spec["model"].get("unk_token") or "[UNK]")
    special = lambda token: {"SpecialToken": {"id": token, "type_id": 0}}
    sequence = lambda name: {"Sequence": {"id": name, "type_id": 0}}
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [*map(special, before), sequence("A"), *map(special, after)],
        "pair": [*map(special, before), sequence("A"), *map(special, after), sequence("B"), *map(special, after)],
        "special_tokens": {t: {"id": t, "ids": [specials.index(t)], "tokens": [t]} for t in {*before, *after}},
    }
    (directory / "tokenizer.json").write_text(json.dumps(spec))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": specials[0], "padding_side": side}
    (directory / "tokenizer_config.json").write_text(json.dumps(config | {"model_max_length": 512}))


@pytest.fixture(scope="module")
def st(torch):
    return pytest.importorskip("sentence_transformers")


def modules(st):
    try:
        from sentence_transformers.sentence_transformer import modules as found
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers import models as found
    return found


def save_st(st, transformers, torch, tmp_path: Path, model_type: str):
    """A Qwen3-Embedding-like or EmbeddingGemma-like sentence-transformers directory; returns the reference model."""
    from sentence_transformers import SentenceTransformer

    base = tmp_path / f"{model_type}-base"
    save_decoder(transformers, torch, model_type, base)
    save_tokenizer(model_type, base)
    found = modules(st)
    torch.manual_seed(1)
    transformer = found.Transformer(str(base), max_seq_length=128)
    if model_type == "qwen3":
        layers = [transformer, found.Pooling(64, pooling_mode="lasttoken"), found.Normalize()]
        prompting = dict(prompts={"query": QWEN_QUERY, "document": ""})
    else:
        dense = [
            found.Dense(a, b, bias=False, activation_function=torch.nn.Identity()) for a, b in ((64, 256), (256, 64))
        ]
        layers = [transformer, found.Pooling(64, pooling_mode="mean"), *dense, found.Normalize()]
        prompting = dict(prompts=GEMMA_PROMPTS)
    reference = SentenceTransformer(modules=layers, device="cpu", **prompting)
    reference.save(str(tmp_path / model_type))
    return reference


def assert_same(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


@pytest.fixture(scope="module")
def directories(tmp_path_factory, st, transformers, torch) -> tuple[Path, dict]:
    """Both directories, made once: their folder and sentence-transformers' models by model type."""
    made = tmp_path_factory.mktemp("decoder-st")
    return made, {model_type: save_st(st, transformers, torch, made, model_type) for model_type in MODELS}


@pytest.mark.parity
@pytest.mark.parametrize("model_type", list(MODELS))
def test_directories_encode_as_sentence_transformers(directories, model_type):
    made, references = directories
    reference = references[model_type]
    ours = numbert.sentence_transformers.SentenceTransformer(str(made / model_type))
    assert_same(ours.encode(TEXTS), reference.encode(TEXTS))
    assert_same(ours.encode_query(TEXTS), reference.encode_query(TEXTS))
    assert_same(ours.encode_document(TEXTS), reference.encode_document(TEXTS))
    assert_same(ours.encode(TEXTS[1]), reference.encode(TEXTS[1]))
    for name in reference.prompts:
        assert_same(ours.encode(TEXTS, prompt_name=name), reference.encode(TEXTS, prompt_name=name))


def test_last_token_pooling_reads_the_last_real_token_on_either_side():
    """sentence-transformers' lasttoken: the last position the mask keeps, right or left padded; zeros for a row
    with none."""
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    right, left = np.array([[1, 1, 1, 0], [1, 1, 0, 0]]), np.array([[0, 1, 1, 1], [0, 0, 1, 1]])
    np.testing.assert_array_equal(pool(x, right, "sep"), x[[0, 1], [2, 1]])
    np.testing.assert_array_equal(pool(x, left, "sep"), x[[0, 1], [3, 3]])
    assert not pool(x, np.zeros((2, 4), int), "sep").any()


@pytest.mark.parity
def test_served_by_name_and_encoded_by_workers(directories):
    """`numbert serve` of both under the names users configure answers /v1/embeddings and Ollama's /api/embed with
    sentence-transformers' vectors; `numbert encode --workers 2 --prompt-name query` writes encode_query's."""
    made, references = directories
    names = {"default": made / "qwen3", "qwen3-embedding:0.6b": made / "qwen3", "embeddinggemma": made / "gemma3_text"}
    server = serve_by_name(names)
    try:
        for name, model_type in (("qwen3-embedding:0.6b", "qwen3"), ("embeddinggemma", "gemma3_text")):
            served_as_embed(server, name, names[name], TEXTS)
            r = httpx.post(server.url + "/api/embed", json={"model": name, "input": TEXTS}, timeout=60)
            assert r.status_code == 200, r.text
            assert_same(np.array(r.json()["embeddings"], np.float32), references[model_type].encode(TEXTS))
    finally:
        assert server.stop() == 0, "".join(server.lines)
    out = made / "query.npy"
    arguments = ["encode", "--model", str(made / "qwen3"), "--workers", "2", "--prompt-name", "query"]
    assert cli_main([*arguments, "--output", str(out), *TEXTS]) in (0, None)
    assert_same(np.load(out), references["qwen3"].encode_query(TEXTS))


@pytest.mark.parity
def test_long_texts_window_where_the_template_frames_them_and_are_refused_where_not(directories):
    """Windows repeat a text's two framing tokens around each part: Gemma's <bos> ... <eos> windows as BERT's [CLS]
    ... [SEP] (every token's states averaged over its windows); Qwen3's template puts <|endoftext|> after the text
    alone, so long="window" is refused in one line naming the way out; Matryoshka dimensions cut either."""
    made, _ = directories
    long = " ".join(TEXTS * 12)  # over the directories' 128 tokens
    gemma, qwen = numbert.load(made / "gemma3_text"), numbert.load(made / "qwen3")
    vectors = gemma.embed([long, TEXTS[0]], long="window")  # the default stride: 63 of a window's 126
    assert vectors.shape == (2, 64) and np.isfinite(vectors).all()
    np.testing.assert_array_equal(vectors[1], gemma.embed(TEXTS[0]))
    out = gemma.windowed(long)
    assert out.hidden_states.shape[1] == len(gemma.tokenizer.encode(long, max_length=None, truncation=False).ids)
    with pytest.raises(ValueError, match=r"long='window'.*adds 1 to a text.*use long='truncate'"):
        qwen.embed([long], long="window")
    for model in (gemma, qwen):
        cut = model.embed(TEXTS, dimensions=16)
        np.testing.assert_allclose(np.linalg.norm(cut, axis=1), 1, atol=1e-6)
        assert cut.shape == (4, 16)
