"""The embedding recipes, each checked against values computed independently from the hidden states
(plain NumPy written out in the test), or from transformers.

Most tests run the real all-MiniLM-L6-v2 (6 layers, hidden 384); a tiny random BERT without a
sentence-transformers description stands in for "a plain BERT" where defaults differ.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbert
from numbert.model import windows
from numbert.model.config import BertConfig
from numbert.model.encoder import Encoder
from numbert.model.layers import Norm, layer_norm
from numbert.model.pooling import cosine_matrix
from numbert.testing import BANK as SENTENCE
from numbert.testing import random_weights
from numbert.tokenizer import Tokenizer

TEXTS = ["Hello, world!", "Embeddings are useful.", SENTENCE, "x", ""]


@pytest.fixture(scope="module")
def plain_bert(minilm_dir) -> numbert.Bert:
    """A small random BERT with no sentence-transformers modules: bert-as-service defaults apply."""
    config = BertConfig(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64)
    return numbert.Bert(
        Encoder(config, random_weights(config, seed=1)), Tokenizer.from_pretrained(minilm_dir), name="tiny"
    )


def cos(a, b) -> float:
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


# --- layer strategies ------------------------------------------------------------------------------


def test_layer_strategies_match_numpy(model):
    out = model(SENTENCE)
    hs = out.hidden_states.astype(np.float64)  # (7, seq, 384)
    expected = {
        "embeddings": hs[0],
        "last": hs[6],
        "second_to_last": hs[5],
        "sum_last_four": hs[3] + hs[4] + hs[5] + hs[6],
        "concat_last_four": np.concatenate([hs[6], hs[5], hs[4], hs[3]], axis=-1),
        "sum_all": hs[1:].sum(axis=0),
    }
    for strategy, want in expected.items():
        got = out.token_vectors(strategy)
        assert got.dtype == np.float32, strategy
        assert got.shape == want.shape, strategy
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=strategy)
    assert out.token_vectors().shape == hs[0].shape  # default: sum_last_four


def test_layer_lists_with_sum_mean_concat(model):
    out = model("The quick brown fox.")
    hs = out.hidden_states
    np.testing.assert_allclose(out.token_vectors([-1, 2]), hs[-1] + hs[2], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out.token_vectors([-1, 2], combine="mean"), (hs[-1] + hs[2]) / 2, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out.token_vectors([0, -1], combine="concat"), np.concatenate([hs[0], hs[-1]], -1))
    np.testing.assert_array_equal(out.token_vectors(-3), hs[-3])
    np.testing.assert_array_equal(out.token_vectors(0), out.token_vectors("embeddings"))


def test_batched_token_vectors_zero_the_padding(model):
    batch = model(["short", SENTENCE])
    vectors = batch.token_vectors("sum_last_four")  # (2, seq, 384)
    n = len(batch.encodings[0])
    assert np.all(vectors[0, n:] == 0)
    alone = model("short").token_vectors("sum_last_four")
    np.testing.assert_allclose(vectors[0, :n], alone, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "layers, combine, message",
    [
        ("top_four", None, "unknown layer strategy 'top_four'; choose one of embeddings, last"),
        ([-8], None, "layer -8 does not exist"),
        ([7], None, "layer 7 does not exist"),
        ([], None, "non-empty list"),
        ([-1, -2], "max", "unknown combine 'max'; choose one of sum, mean, concat"),
        ("concat_last_four", "sum", "strategy 'concat_last_four' combines by concat"),
    ],
)
def test_bad_layer_choices_name_the_valid_ones(model, layers, combine, message):
    out = model("hi")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        out.token_vectors(layers, combine)


def test_layers_of_the_wrong_type(model):
    with pytest.raises(TypeError, match="not float"):
        model("hi").token_vectors(1.5)


@pytest.mark.parity
def test_sum_last_four_matches_transformers_hidden_states(model, minilm_dir, transformers, torch):
    hf = transformers.AutoModel.from_pretrained(str(minilm_dir)).eval()
    out = model(SENTENCE)
    with torch.no_grad():
        hs = hf(torch.tensor(out.input_ids[None]), output_hidden_states=True).hidden_states
    want = sum(h[0].numpy() for h in hs[-4:])
    got = out.token_vectors("sum_last_four")
    assert min(cos(g, w) for g, w in zip(got, want)) > 0.99999
    np.testing.assert_allclose(got, want, atol=2e-4)


# --- word vectors ----------------------------------------------------------------------------------


def words_by_hand(tokens: list[str]) -> list[list[int]]:
    """Positions of each word's pieces: a piece starting with ## continues the previous word."""
    groups = []
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if token.startswith("##"):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


@pytest.mark.parametrize("merge", ["mean", "sum", "first", "last"])
def test_word_vectors_merge_the_pieces(model, merge):
    text = "Embeddings are surprisingly useful, aren't they?"
    words = model.word_vectors(text, layers="last", merge=merge)
    out = model(text)
    groups = words_by_hand(out.tokens)
    reduce = {"mean": lambda v: v.mean(0), "sum": lambda v: v.sum(0), "first": lambda v: v[0], "last": lambda v: v[-1]}
    assert len(words) == len(groups)
    for word, positions in zip(words, groups):
        np.testing.assert_allclose(word.vector, reduce[merge](out.hidden_states[-1][positions]), rtol=1e-5, atol=1e-5)
        assert word.tokens == [out.tokens[p] for p in positions]
    assert [w.text for w in words] == [
        "Embeddings",
        "are",
        "surprisingly",
        "useful",
        ",",
        "aren",
        "'",
        "t",
        "they",
        "?",
    ]
    assert all(text[w.span[0] : w.span[1]] == w.text for w in words)
    assert words[0].tokens == ["em", "##bed", "##ding", "##s"]


def test_word_vectors_of_a_pair_and_of_a_batch(model):
    out = model("Hello there", "General Kenobi")
    words = out.word_vectors()
    assert [(w.text, w.segment) for w in words] == [("hello", 0), ("there", 0), ("general", 1), ("kenobi", 1)]
    assert [w.span for w in words] == [(0, 5), (6, 11), (0, 7), (8, 14)]
    batch = model(["Unbelievable results", SENTENCE]).word_vectors(layers="sum_last_four")
    alone = model("Unbelievable results").word_vectors(layers="sum_last_four")
    assert [w.text for w in batch[0]] == [w.text for w in alone] == ["unbelievable", "results"]
    for a, b in zip(batch[0], alone):
        np.testing.assert_allclose(a.vector, b.vector, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="unknown merge 'median'; choose one of mean, sum, first, last"):
        model.word_vectors("hi", merge="median")


# --- sentence vectors ------------------------------------------------------------------------------


def pooled_by_hand(x: np.ndarray, pooling: str) -> np.ndarray:
    """One unpadded sequence's token vectors (seq, dim) pooled, written out plainly."""
    x = x.astype(np.float64)
    n = len(x)
    return {
        "mean": x.sum(0) / n,
        "max": x.max(0),
        "mean_max": np.concatenate([x.sum(0) / n, x.max(0)]),
        "cls": x[0],
        "sep": x[-1],
        "mean_sqrt_len": x.sum(0) / np.sqrt(n),
        "weighted_mean": (x * np.arange(1, n + 1)[:, None]).sum(0) / np.arange(1, n + 1).sum(),
    }[pooling]


@pytest.mark.parametrize("pooling", ["mean", "max", "mean_max", "cls", "sep", "mean_sqrt_len", "weighted_mean"])
def test_sentence_pooling_ignores_padding(model, pooling):
    batch = model(TEXTS)  # padded to SENTENCE's length
    got = batch.sentence_vector(pooling, layers=-2)
    assert got.dtype == np.float32 and got.shape[0] == len(TEXTS)
    for row, enc in enumerate(batch.encodings):
        want = pooled_by_hand(batch.hidden_states[-2, row, : len(enc)], pooling)
        np.testing.assert_allclose(got[row], want, rtol=1e-5, atol=1e-5, err_msg=f"{pooling} row {row}")


def test_sentence_vector_defaults_and_pooler(model):
    out = model(SENTENCE)
    np.testing.assert_allclose(out.sentence_vector(), out.hidden_states[-2].mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out.sentence_vector("pooler"), out.pooler_output)
    np.testing.assert_allclose(
        out.sentence_vector("mean", layers="sum_last_four"), out.hidden_states[-4:].sum(0).mean(0), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        out.sentence_vector(("cls", "mean"), layers=-1),
        np.concatenate([out.hidden_states[-1, 0], out.hidden_states[-1].mean(0)]),
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="unknown pooling 'avg'; choose one of mean, max, mean_max, cls"):
        out.sentence_vector("avg")


# --- many texts at once -----------------------------------------------------------------------------


def test_embed_keep_the_input_order(plain_bert):
    texts = [" ".join(["word"] * n) + f" {i}" for i, n in enumerate([1, 30, 4, 0, 12, 7, 30, 2, 19])]
    vectors = plain_bert.embed(texts, batch_size=3)
    assert vectors.shape == (len(texts), 32) and vectors.dtype == np.float32
    for text, vector in zip(texts, vectors):  # the default of a plain BERT: mean of layer -2
        hs = plain_bert(text).hidden_states
        np.testing.assert_allclose(vector, hs[-2].mean(0), rtol=1e-4, atol=1e-5)


def test_embed_batch_neighbours_by_length(plain_bert, monkeypatch):
    widths = []
    forward = plain_bert.encoder.forward
    monkeypatch.setattr(
        plain_bert.encoder, "forward", lambda ids, *a, **k: widths.append(ids.shape) or forward(ids, *a, **k)
    )
    lengths = [40, 3, 25, 3, 40, 25, 3, 40]
    texts = [" ".join(["a"] * (n - 2)) for n in lengths]  # n tokens with [CLS] and [SEP]
    plain_bert.embed(texts, batch_size=3)
    assert widths == [(3, 40), (3, 25), (2, 3)]  # longest first, each batch padded to its own longest


def test_embed_shapes_options_and_errors(plain_bert, model):
    assert plain_bert.embed([]).shape == (0, 32)
    assert model.embed([], pooling="mean_max").shape == (0, 768)
    assert model.embed([], layers="concat_last_four", pooling="mean").shape == (0, 1536)
    one = plain_bert.embed("Hello")
    assert one.shape == (32,)
    np.testing.assert_allclose(one, plain_bert.embed(["Hello", "there"])[0], rtol=1e-4, atol=1e-5)
    unit = plain_bert.embed(TEXTS, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1, rtol=1e-5)
    with pytest.raises(TypeError, match=r"texts\[1\] is a int, not a str"):
        plain_bert.embed(["ok", 3])
    with pytest.raises(TypeError, match="not bytes"):
        plain_bert.embed(b"bytes")
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        plain_bert.embed(["a"], batch_size=0)
    with pytest.raises(ValueError, match="long must be 'truncate' or 'window'"):
        plain_bert.embed(["a"], long="split")
    with pytest.raises(ValueError, match="unknown pooling 'avg'"):
        plain_bert.embed([], pooling="avg")


def test_progress_bar_goes_to_stderr(plain_bert, capsys):
    plain_bert.embed(["a", "b"], progress=True)
    assert "2/2" in capsys.readouterr().err
    plain_bert.embed(["a", "b"], progress=False)
    assert capsys.readouterr().err == ""


def test_similarity(model):
    a, b = "A man is eating food.", "A man is eating a meal."
    u, v = model.embed([a, b])
    assert model.similarity(a, b) == pytest.approx(cos(u, v), abs=1e-6)
    assert model.similarity(a, b) > model.similarity(a, "The stock market fell sharply today.")
    assert cosine_matrix(np.stack([u, v]), np.stack([u, v])) == pytest.approx(
        np.array([[1, cos(u, v)], [cos(u, v), 1]]), abs=1e-6
    )


# --- raw token embeddings ------------------------------------------------------------------------------


def test_token_embedding_is_the_raw_row(model):
    vocab = model.tokenizer.vocab
    np.testing.assert_array_equal(model.token_embedding("bank"), model.encoder.word_embeddings[vocab["bank"]])
    np.testing.assert_array_equal(
        model.token_embedding("Bank"), model.encoder.word_embeddings[vocab["bank"]]
    )  # uncased
    np.testing.assert_array_equal(model.token_embedding(2088), model.encoder.word_embeddings[2088])
    np.testing.assert_array_equal(
        model.token_embedding(["##ing", 101]), model.encoder.word_embeddings[[vocab["##ing"], 101]]
    )
    with pytest.raises(ValueError, match=r"'embeddings' is not one vocabulary entry: .*\['em', '##bed', '##ding'"):
        model.token_embedding("embeddings")
    with pytest.raises(ValueError, match=r"token id 30522 is outside the vocabulary \[0, 30522\)"):
        model.token_embedding(30522)
    with pytest.raises(TypeError, match="not float"):
        model.token_embedding(1.0)


def test_embedding_layer_is_layernorm_of_word_position_and_segment(model):
    out = model("hello, world!")
    assert out.tokens[3] == "world" and out.input_ids[3] == 2088
    e = model.encoder
    x = e.word_embeddings[2088] + e.position_embeddings[3] + e.token_type_embeddings[0]
    norm = Norm(e.embedding_norm.weight, e.embedding_norm.bias)
    np.testing.assert_allclose(
        layer_norm(x[None].copy(), norm, model.config.layer_norm_eps)[0], out.hidden_states[0][3], rtol=1e-5, atol=1e-5
    )
    # the same by hand, LayerNorm written out
    by_hand = (x - x.mean()) / np.sqrt(x.var() + 1e-12) * e.embedding_norm.weight + e.embedding_norm.bias
    np.testing.assert_allclose(by_hand, out.hidden_states[0][3], rtol=1e-4, atol=1e-4)


def test_nearest_tokens_by_cosine(model):
    E = model.encoder.word_embeddings.astype(np.float64)
    unit = E / np.linalg.norm(E, axis=1, keepdims=True)
    bank = model.tokenizer.vocab["bank"]
    sims = unit @ unit[bank]
    sims[bank] = -np.inf
    want = np.argsort(-sims)[:8]
    got = model.nearest_tokens("bank", k=8)
    assert [n.id for n in got] == list(want)
    assert [n.token for n in got] == model.tokenizer.convert_ids_to_tokens([int(i) for i in want])
    assert [n.similarity for n in got] == pytest.approx(sims[want], abs=1e-5)
    by_vector = model.nearest_tokens(model.encoder.word_embeddings[bank], k=3)
    assert by_vector[0].token == "bank" and by_vector[0].similarity == pytest.approx(1, abs=1e-5)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        model.nearest_tokens("bank", k=0)
    with pytest.raises(ValueError, match=r"a query vector must have shape \(384,\)"):
        model.nearest_tokens(np.zeros(10))


# --- long texts ----------------------------------------------------------------------------------------


def test_window_spans_cover_every_token():
    assert windows.window_spans(10, 4, 1) == [(0, 4), (3, 7), (6, 10)]
    assert windows.window_spans(3, 4, 1) == [(0, 3)]
    for n, size, stride in [(1000, 510, 128), (511, 510, 0), (77, 10, 9)]:
        spans = windows.window_spans(n, size, stride)
        covered = np.zeros(n, int)
        for s, e in spans:
            covered[s:e] += 1
            assert e - s <= size
        assert covered.min() >= 1 and spans[-1][1] == n
    with pytest.raises(ValueError, match="stride"):
        windows.window_spans(10, 4, 4)


def test_windowed_averages_each_token_over_its_windows(model):
    text = " ".join(f"word{i}" for i in range(40))  # 80+ tokens
    out = model.windowed(text, stride=6, max_length=24)
    full = model.tokenizer.encode(text)
    content = full.ids[1:-1]
    assert out.tokens == full.tokens and out.hidden_states.shape == (7, len(full), 384)
    # Expected: run every window (22 content tokens, neighbours sharing 6) on its own, average by hand.
    total, count = np.zeros((7, len(content) + 2, 384)), np.zeros(len(content) + 2)
    start = 0
    while True:
        end = min(start + 22, len(content))
        hs = model.forward(np.array([full.ids[0], *content[start:end], full.ids[-1]])).hidden_states
        total[:, [0, -1]] += hs[:, [0, -1]]
        total[:, 1 + start : 1 + end] += hs[:, 1:-1]
        count[[0, -1]] += 1
        count[1 + start : 1 + end] += 1
        if end == len(content):
            break
        start += 16
    assert count[1:-1].min() == 1 and count[1:-1].max() == 2 and count[0] == count[-1] == 5  # 5 windows
    np.testing.assert_allclose(out.hidden_states, total / count[:, None], rtol=1e-4, atol=1e-4)
    assert [w.text for w in out.word_vectors()] == [f"word{i}" for i in range(40)]


def test_long_texts_truncate_or_window(plain_bert, model):
    long = " ".join(["river"] * 600)  # 602 tokens: more than the 512 positions
    truncated = plain_bert.embed(long)
    np.testing.assert_allclose(truncated, plain_bert(long).hidden_states[-2].mean(0), rtol=1e-4, atol=1e-5)
    assert plain_bert(long).hidden_states.shape[1] == 512
    windowed = plain_bert.embed(long, long="window", stride=64)
    by_window = plain_bert.windowed(long, stride=64)
    assert by_window.hidden_states.shape[1] == 602
    np.testing.assert_allclose(windowed, by_window.hidden_states[-2].mean(0), rtol=1e-4, atol=1e-5)
    assert len(plain_bert.word_vectors(long, long="window", stride=64)) == 600  # every word gets a vector
    mixed = [long, "short", long + " again", "x"]
    np.testing.assert_allclose(
        plain_bert.embed(mixed, long="window", stride=64),
        [plain_bert.embed(t, long="window", stride=64) for t in mixed],
        rtol=1e-4,
        atol=1e-5,
    )
    # a sentence-transformers model cuts at its max_seq_length (256 for all-MiniLM-L6-v2)
    text = " ".join(["bank"] * 300)
    cut = model(text, max_length=256).hidden_states[-1].mean(0)
    np.testing.assert_allclose(model.embed(text, normalize=False), cut, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="stride"):
        model.embed(["a"], long="window", stride=300)


def test_the_default_stride_fits_a_model_of_128_tokens(model):
    """The default stride is 128 tokens, at most half a window: a model reading 128 tokens (many sentence-transformers
    models do) windows its long texts by 63 of its 126 content tokens, as if asked stride=63, instead of refusing
    the default."""
    text = " ".join(["bank", "river", "money"] * 100)  # 300 words, over 128 tokens
    np.testing.assert_array_equal(
        model.embed(text, long="window", max_length=128), model.embed(text, long="window", max_length=128, stride=63)
    )
    assert model.recipe(long="window", max_length=128).stride == 63
    assert model.recipe(long="window").stride == 128  # 254 content tokens: the default itself
    out, by_hand = model.windowed(text, max_length=128), model.windowed(text, max_length=128, stride=63)
    np.testing.assert_array_equal(out.hidden_states, by_hand.hidden_states)


def test_bank_example_separates_the_senses(model):
    """examples/bank.py: the vault and robber banks are closer to each other than to the river bank."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "examples" / "bank.py"
    spec = importlib.util.spec_from_file_location("bank_example", path)
    bank = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bank)
    s = bank.bank_similarities(model)
    assert s["bank vault  ~ bank robber"] > max(s["bank vault  ~ river bank"], s["bank robber ~ river bank"])
