"""The Python API as users of transformers and sentence-transformers call it: bad input named at the
boundary, empty input, unordered containers refused, one name for the pair argument, embed under
sentence-transformers' names and `Bert.encode`, output_hidden_states, a callable Tokenizer; and
`batches` tokenizing a block of texts at a time (memory that does not grow with the number of texts)."""

from __future__ import annotations

import numpy as np
import pytest

from numbert.pipeline import planner

SENTENCES = [
    "A man is eating food.",
    "A man is riding a horse.",
    "short",
    "",
    "A much longer sentence about the bank of the river and the bank that holds money. " * 5,
    "Numbers 1 2 3 and punctuation!!!",
    "Héllo wörld",
    "中文 text",
]


@pytest.mark.parametrize(
    "bad, says",
    [
        (None, "NoneType"),
        (b"bytes", "decode it first"),
        (42, "int"),
        ({"a", "b"}, "set, which has no order"),
        ({"a": 1}, "dict, which has no order"),
        ({"a": 1}.keys(), "no order"),
        (["a", None], r"text\[1\] is a NoneType"),
    ],
)
def test_bad_text_is_named(model, bad, says):
    with pytest.raises(TypeError, match=says):
        model(bad)
    with pytest.raises(TypeError, match=says.replace("text", "texts")):
        model.embed(bad)


def test_a_pair_of_the_wrong_kind(model):
    with pytest.raises(TypeError, match="text_pair"):
        model("a", ["b"])
    with pytest.raises(TypeError, match="no order"):
        model(["a"], {"b"})


def test_no_texts(model):
    out, vectors = model([]), model.embed([])
    assert out.hidden_states.shape[1] == 0 and out.input_ids.shape == (0, 0) and out.tokens == []
    assert out.sentence_vector("mean", -1).shape == vectors.shape == (0, model.config.hidden_size)


def test_output_hidden_states_is_accepted(model):
    out = model("hello world", output_hidden_states=True)
    assert out.hidden_states.shape[0] == model.config.num_hidden_layers + 1


def test_the_pair_argument_has_one_name(model):
    expected = model("a question", "an answer").last_hidden_state
    np.testing.assert_array_equal(model("a question", text_pair="an answer").last_hidden_state, expected)
    batched = [out for _, out in model.batches(["a question"], text_pair=["an answer"])]
    older = [out for _, out in model.batches(["a question"], pairs=["an answer"])]
    np.testing.assert_array_equal(batched[0].last_hidden_state[0], expected)
    np.testing.assert_array_equal(older[0].last_hidden_state[0], expected)
    with pytest.raises(TypeError, match="older name"):
        next(model.batches(["a"], text_pair=["b"], pairs=["c"]))
    tok = model.tokenizer
    assert tok.encode("a", text_pair="b").ids == tok.encode("a", pair="b").ids == tok.encode("a", "b").ids
    assert (tok.encode_batch(["a"], text_pair=["b"]).input_ids == tok.encode_batch(["a"], pairs=["b"]).input_ids).all()


def test_sentence_transformers_names(model):
    vectors = model.embed(SENTENCES)
    np.testing.assert_array_equal(model.encode(SENTENCES), vectors)
    np.testing.assert_array_equal(
        model.embed(SENTENCES, normalize_embeddings=True, show_progress_bar=False, batch_size=3),
        model.embed(SENTENCES, normalize=True, batch_size=3),
    )
    listed = model.encode(SENTENCES, convert_to_numpy=False)
    assert isinstance(listed, list) and len(listed) == len(SENTENCES)
    np.testing.assert_array_equal(np.stack(listed), vectors)
    assert model.encode("one text").shape == (model.config.hidden_size,)
    with pytest.raises(TypeError, match="normalize_embeddings"):
        model.embed(SENTENCES, normalize=True, normalize_embeddings=True)


def test_batches_match_one_text_at_a_time(model, monkeypatch):
    """Texts tokenized a few batches at a time, sorted within: the same vectors as each text run alone
    (within 1e-6; the padding differs), in the input order."""
    monkeypatch.setattr(planner, "LOOK_AHEAD", 2)
    texts = [SENTENCES[i % len(SENTENCES)] + " x" * (i % 7) for i in range(23)]
    vectors = model.embed(texts, batch_size=3)
    one_by_one = np.stack([model.embed(t) for t in texts])
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-6)


def test_batches_tokenize_a_block_at_a_time(model, monkeypatch):
    """Before the first forward pass only LOOK_AHEAD batches' worth of texts are tokenized (embed used
    to tokenize every text, and keep unused windows, first: 730 MB for 5,000 texts of 400 words)."""
    calls, first_forward = [], []
    encode, forward = model.tokenizer.encode, model.encoder.forward
    monkeypatch.setattr(model.tokenizer, "encode", lambda *a, **k: calls.append(1) or encode(*a, **k))
    monkeypatch.setattr(model.encoder, "forward", lambda *a, **k: first_forward.append(len(calls)) or forward(*a, **k))
    model.embed(["word " * (i % 50) for i in range(200)], batch_size=4)
    assert first_forward[0] == planner.LOOK_AHEAD * 4 and len(calls) == 200


def test_tokenizer_is_callable_as_transformers(model):
    tok = model.tokenizer
    one = tok("hello world")
    assert one == {
        "input_ids": tok.encode("hello world").ids,
        "token_type_ids": [0, 0, 0, 0],
        "attention_mask": [1, 1, 1, 1],
    }
    batch = tok(["hello world", "a"], padding=True, return_tensors="np")
    np.testing.assert_array_equal(batch["input_ids"], tok.encode_batch(["hello world", "a"]).input_ids)
    assert batch["attention_mask"].dtype == np.int64 and tok("hi", return_tensors="np")["input_ids"].shape == (1, 3)
    ragged = tok(["hello world", "a"])
    assert [len(r) for r in ragged["input_ids"]] == [4, 3]
    with pytest.raises(ValueError, match="padding=True"):
        tok(["hello world", "a"], return_tensors="np")
    with pytest.raises(ValueError, match="return_tensors"):
        tok("a", return_tensors="pt")
