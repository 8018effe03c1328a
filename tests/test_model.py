"""The encoder against transformers' BertModel: every hidden state, the pooler and the attentions.

Two kinds of check: live parity against transformers (marked `parity`, run in CI) and the
committed fixtures in tests/fixtures/model_outputs.npz (made by scripts/make_fixtures.py), which
keep the numerics checked on machines without torch.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import numbert
from numbert.model import layers
from numbert.model.packing import Packing
from numbert.testing import PAIR, SENTENCES

FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures"

TOLERANCE = 2e-5  # float32 noise: transformers fp32 itself differs from fp64 by 3e-6 to 5e-6


@pytest.fixture(scope="session", params=["bert_base", "minilm"])
def pair_of_models(request, transformers, torch):
    """(numbert model, transformers BertModel) on the same weights."""
    directory = request.getfixturevalue(f"{request.param}_dir" if request.param == "minilm" else "bert_base_dir")
    ours = request.getfixturevalue(request.param)
    theirs = transformers.BertModel.from_pretrained(directory, attn_implementation="eager").eval()
    return ours, theirs


def run_transformers(model, torch, input_ids, token_type_ids, attention_mask):
    with torch.no_grad():
        out = model(
            input_ids=torch.from_numpy(input_ids),
            token_type_ids=torch.from_numpy(token_type_ids),
            attention_mask=torch.from_numpy(attention_mask),
            output_hidden_states=True,
            output_attentions=True,
        )
    return (torch.stack(out.hidden_states).numpy(), out.pooler_output.numpy(), torch.stack(out.attentions).numpy())


def assert_parity(ours, theirs, torch, ids, types, mask):
    hidden, pooled, attentions = run_transformers(theirs, torch, ids, types, mask)
    out = ours.forward(ids, types, mask, output_attentions=True)
    real = mask.astype(bool)  # padded positions are garbage in both; compare real tokens
    diffs = {
        "hidden_states": np.abs(out.hidden_states - hidden)[:, real].max(),
        "pooler_output": np.abs(out.pooler_output - pooled).max(),
        "attentions": np.abs(out.attentions - attentions).transpose(0, 1, 3, 2, 4)[:, real].max(),
    }
    print(ours.name, ids.shape, {k: f"{v:.1e}" for k, v in diffs.items()})
    assert max(diffs.values()) <= TOLERANCE, diffs


@pytest.mark.parity
@pytest.mark.parametrize("case", ["single", "pair", "batch", "512"])
def test_parity_with_transformers(pair_of_models, torch, case):
    ours, theirs = pair_of_models
    tok = ours.tokenizer
    if case == "single":
        batch = tok.encode_batch([SENTENCES[0]])
    elif case == "pair":
        batch = tok.encode_batch([PAIR[0]], [PAIR[1]])
    elif case == "batch":
        batch = tok.encode_batch(SENTENCES + ["dog", "", "A much longer third sentence, " * 12])
    else:
        batch = tok.encode_batch([" ".join(f"word{i} bank river" for i in range(400))], max_length=512)
        assert batch.input_ids.shape == (1, 512)
    assert_parity(ours, theirs, torch, batch.input_ids, batch.token_type_ids, batch.attention_mask)


@pytest.mark.parametrize("model_name", ["bert_base", "minilm"])
@pytest.mark.parametrize("case", ["batch", "pair"])
def test_matches_committed_transformers_fixtures(request, model_name, case):
    """The same parity, against outputs transformers produced once (runs without torch)."""
    model = request.getfixturevalue(model_name)
    ref = np.load(FIXTURES / "model_outputs.npz")
    key = functools.partial("{}/{}/{}".format, model_name, case)
    ids, types, mask = (ref[key(k)] for k in ("input_ids", "token_type_ids", "attention_mask"))
    texts = ([PAIR[0]], [PAIR[1]]) if case == "pair" else (SENTENCES, None)
    ours_batch = model.tokenizer.encode_batch(*texts)
    np.testing.assert_array_equal(ours_batch.input_ids, ids)
    np.testing.assert_array_equal(ours_batch.token_type_ids, types)
    out = model.forward(ids, types, mask, output_attentions=True)
    real = mask.astype(bool)
    assert np.abs(out.hidden_states[..., ::16] - ref[key("hidden_states")])[:, real].max() <= TOLERANCE
    assert np.abs(out.pooler_output - ref[key("pooler_output")]).max() <= TOLERANCE
    attentions = np.abs(out.attentions[[0, -1]] - ref[key("attentions")]).transpose(0, 1, 3, 2, 4)
    assert attentions[:, real].max() <= TOLERANCE


def test_padded_batch_equals_each_sentence_alone(minilm):
    texts = ["short", "a somewhat longer sentence about the river bank", "medium length one here"]
    batch = minilm(texts, output_attentions=True)
    for i, text in enumerate(texts):
        alone = minilm(text, output_attentions=True)
        n = len(alone.tokens)
        assert batch.attention_mask[i].sum() == n
        assert np.abs(batch.hidden_states[:, i, :n] - alone.hidden_states).max() <= 1e-5
        assert np.abs(batch.pooler_output[i] - alone.pooler_output).max() <= 1e-5
        assert np.abs(batch.attentions[:, i, :, :n, :n] - alone.attentions).max() <= 1e-5
        assert not batch.attentions[:, i, :, :, n:].any()  # nothing attends to padding


@pytest.mark.parametrize("texts", [["the river bank"], ["short", "a somewhat longer sentence about the river bank"]])
def test_forward_reusing_memory_equals_the_layers_run_one_by_one(minilm, texts):
    """forward hands each layer's temporary arrays on to the next (Scratch): the numbers must not change."""
    out = minilm(texts, output_attentions=True)
    packing, encoder = Packing(out.attention_mask), minilm.encoder
    x = packing.pack(encoder.embeddings(out.input_ids, out.token_type_ids))
    for i, layer in enumerate(encoder.layers):
        x, probs = encoder.encoder_layer(x, packing, layer, output_probs=True)
        np.testing.assert_array_equal(out.hidden_states[i + 1], packing.unpack(x, np.zeros_like(out.hidden_states[0])))
        np.testing.assert_array_equal(out.attentions[i], probs)


def test_output_shapes_and_dtypes(bert_base):
    out = numbert.forward("Here is the sentence I want embeddings for.", model=bert_base, output_attentions=True)
    assert out.tokens[0] == "[CLS]" and out.tokens[-1] == "[SEP]"
    seq = len(out.tokens)
    assert out.input_ids.shape == out.token_type_ids.shape == out.attention_mask.shape == (seq,)
    assert out.hidden_states.shape == (13, seq, 768)
    assert out.last_hidden_state.shape == (seq, 768)
    assert out.pooler_output.shape == (768,)
    assert out.attentions.shape == (12, 12, seq, seq)
    for a in (out.hidden_states, out.pooler_output, out.attentions):
        assert a.dtype == np.float32
    assert bert_base(["a", "b c d"]).hidden_states.shape[:3] == (13, 2, 5)
    assert bert_base("a").attentions is None


def test_every_output_is_float32(minilm):
    """No float64 on the hot path: every array the encoder and its blocks return is float32 (the
    numbers themselves are checked against numbert.model.reference in tests/test_reference.py)."""
    out = minilm(["a batch of two", "sentences"], output_attentions=True)
    assert out.hidden_states.dtype == out.attentions.dtype == out.pooler_output.dtype == np.float32
    encoder = minilm.encoder
    x = encoder.embeddings(out.input_ids, out.token_type_ids)
    mask_bias = layers.attention_mask_bias(out.attention_mask)
    layer = encoder.layers[0]
    heads = [
        layers.split_heads(layers.linear(x, p), minilm.config.num_attention_heads)
        for p in (layer.query, layer.key, layer.value)
    ]
    results = [
        x,
        mask_bias,
        *heads,
        *layers.attention(*heads, mask_bias, output_probs=True),
        *encoder.encoder_layer(Packing(out.attention_mask).pack(x), Packing(out.attention_mask), layer, True),
        layers.layer_norm(x, layer.attention_norm, 1e-12),
        layers.feed_forward(x, layer.up, layer.down, encoder.activation),
        encoder.pooler_output(x),
        *(f(x) for f in layers.ACTIVATIONS.values()),
    ]
    assert [a.dtype for a in results] == [np.float32] * len(results)


def test_long_input_is_truncated_unless_told_not_to(minilm):
    text = "bank " * 600
    out = minilm(text)
    assert out.hidden_states.shape[1] == 512 and out.tokens[-1] == "[SEP]"
    assert minilm(text, max_length=20).hidden_states.shape[1] == 20
    with pytest.raises(ValueError, match="602 tokens"):
        minilm(text, truncation=False)
    with pytest.raises(ValueError, match="max_length"):
        minilm(text, max_length=513)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"input_ids": [[101, 2.5]]}, TypeError, "input_ids must be an array of integers"),
        ({"input_ids": "hello"}, TypeError, "input_ids"),
        ({"input_ids": np.zeros((1, 2, 3), int)}, ValueError, r"shape \(seq,\) or \(batch, seq\)"),
        ({"input_ids": [101, 30522]}, ValueError, r"input_ids must lie in \[0, 30522\)"),
        ({"input_ids": [101, 102], "token_type_ids": [0, 2]}, ValueError, r"token_type_ids must lie in \[0, 2\)"),
        ({"input_ids": [101, 102], "attention_mask": [1, 1, 1]}, ValueError, r"attention_mask has shape \(1, 3\)"),
        ({"input_ids": np.zeros(513, int)}, ValueError, "513 tokens long"),
        ({"input_ids": []}, ValueError, "empty"),
    ],
)
def test_bad_forward_inputs_are_named(minilm, kwargs, error, match):
    with pytest.raises(error, match=match):
        minilm.forward(**kwargs)


def test_encode_and_forward_cache_the_model_by_name(minilm_dir):
    numbert._cached_model.cache_clear()
    a = numbert.forward("dog", model=minilm_dir)
    b = numbert.forward(["dog", "cat"], model=str(minilm_dir))
    assert numbert._cached_model.cache_info().misses == 1
    np.testing.assert_allclose(a.hidden_states, b.hidden_states[:, 0, :3], atol=1e-5)
    vector, vectors = numbert.encode("dog", model=minilm_dir), numbert.encode(["dog", "cat"], model=minilm_dir)
    assert numbert._cached_model.cache_info().misses == 1 and vector.shape == (384,) and vectors.shape == (2, 384)
    np.testing.assert_allclose(vector, vectors[0], atol=1e-6)
    np.testing.assert_array_equal(vector, numbert.load(minilm_dir).embed("dog"))
    assert len(repr(b)) < 2000 and "hidden_states=(7, 2, 3, 384)" in repr(b)


@pytest.mark.parity
def test_a_checkpoint_saved_from_bert_for_masked_lm_has_no_pooler(tmp_path, minilm_dir, transformers, torch):
    """BertForMaskedLM leaves the pooler out: numbert runs the encoder and says so if the pooler is asked for."""
    theirs = transformers.BertForMaskedLM.from_pretrained(minilm_dir, attn_implementation="eager").eval()
    theirs.save_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_bytes((minilm_dir / "vocab.txt").read_bytes())
    ours = numbert.load(tmp_path)
    assert ours.encoder.pooler is None
    text = "The bank vault was robbed."
    out = ours(text, output_attentions=True)
    ids = torch.from_numpy(out.input_ids[None])
    with torch.no_grad():
        expected = theirs.bert(input_ids=ids, output_hidden_states=True, output_attentions=True)
    assert np.abs(out.hidden_states - torch.stack(expected.hidden_states)[:, 0].numpy()).max() <= TOLERANCE
    assert np.abs(out.attentions - torch.stack(expected.attentions)[:, 0].numpy()).max() <= TOLERANCE
    assert out.pooler_output is None and ours([text, "a river bank"]).pooler_output is None
    assert ours(text * 100, long="window").pooler_output is None
    assert out.sentence_vector("cls").shape == (384,)
    for call in (lambda: out.sentence_vector("pooler"), lambda: ours.embed([text], pooling="pooler")):
        with pytest.raises(ValueError, match="pooler_output, and there is none"):
            call()


def test_a_long_text_can_run_as_windows(minilm):
    text = "the river bank " * 200  # 600 words, 602 tokens
    out = minilm(text, long="window", stride=64)
    assert out.hidden_states.shape == (7, 602, 384)
    assert out.tokens[0] == "[CLS]" and out.tokens[-1] == "[SEP]"
    with pytest.raises(ValueError, match="long must be"):
        minilm(text, long="chunk")
    with pytest.raises(ValueError, match="one text"):
        minilm([text, text], long="window")
