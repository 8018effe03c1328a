"""The contract between the two encoders: the fast one (model/encoder.py) equals the plain one (model/reference.py).

Small random BERTs, so every case runs in well under a second: token counts on both sides of the
GEMM switch (layers.FEW_ROWS) and the longest inputs, with and without padding, head sizes 32 and 64,
every activation, and attention scores inside and beyond the range where the fast softmax skips the max shift.
"""

from __future__ import annotations

import numpy as np
import pytest

from numbert.model import layers, reference
from numbert.model.config import BertConfig
from numbert.model.encoder import Encoder
from numbert.model.packing import Packing
from numbert.model.scratch import Scratch
from numbert.model.tensors import LAYER_NAMES
from numbert.testing import random_weights

TOLERANCE = 2e-6
SHIFT_FREE = 64  # layers.exp_shifted skips the max shift when every score lies within +-64


def random_encoder(head_size: int = 64, activation: str = "gelu") -> Encoder:
    """2 layers, hidden 128, weights of std 0.05 and the query's 0.2: scores up to about +-8, so the
    attention is far from uniform."""
    config = BertConfig(
        vocab_size=300,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=128 // head_size,
        intermediate_size=256,
        hidden_act=activation,
        max_position_embeddings=512,
    )
    weights = random_weights(config, seed=head_size)
    for name, w in weights.items():
        if w.ndim == 2 and not name.startswith("embeddings."):
            w *= np.float32(2.5)
    for i in range(config.num_hidden_layers):
        weights[f"encoder.layer.{i}.{LAYER_NAMES['query']}.weight"] *= np.float32(4)
    return Encoder(config, weights)


def random_inputs(tokens: int, padded: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch of two (batch 1 without padding); with padding the second row is a third shorter."""
    rng = np.random.default_rng(seed)
    batch = 2 if padded else 1
    ids = rng.integers(0, 300, (batch, tokens))
    types = rng.integers(0, 2, (batch, tokens))
    mask = np.ones((batch, tokens), np.int64)
    if padded:
        mask[1, max(1, tokens * 2 // 3) :] = 0
    return ids, types, mask


def largest_score(encoder: Encoder, hidden_states: np.ndarray) -> float:
    """max |q k^T / sqrt(d)| over the layers, as the reference computes the scores."""
    heads = encoder.config.num_attention_heads
    largest = 0.0
    for x, layer in zip(hidden_states, encoder.layers):
        batch, seq, hidden = x.shape
        q, k = (
            reference.linear(x, p).reshape(batch, seq, heads, -1).transpose(0, 2, 1, 3)
            for p in (layer.query, layer.key)
        )
        largest = max(largest, float(np.abs(q @ k.transpose(0, 1, 3, 2)).max()) / np.sqrt(hidden // heads))
    return largest


def assert_fast_equals_reference(encoder: Encoder, ids, types, mask) -> None:
    out = encoder.forward(ids, types, mask, output_attentions=True)
    hidden_states, attentions, pooled = reference.forward(encoder, ids, types, mask)
    for fast, plain in ((out.hidden_states, hidden_states), (out.attentions, attentions), (out.pooler_output, pooled)):
        assert fast.dtype == plain.dtype == np.float32 and fast.shape == plain.shape
    real = mask.astype(bool)  # the reference computes padding too; the fast path leaves it zero
    by_query = lambda a: a.transpose(0, 1, 3, 2, 4)  # (layers, batch, seq [queries], heads, seq)
    diffs = {
        "hidden_states": np.abs(out.hidden_states - hidden_states)[:, real].max(),
        "attentions": np.abs(by_query(out.attentions - attentions)[:, real]).max(),
        "pooler_output": np.abs(out.pooler_output - pooled).max(),
    }
    assert max(diffs.values()) <= TOLERANCE, diffs
    assert not out.hidden_states[:, ~real].any() and not by_query(out.attentions)[:, ~real].any()


@pytest.mark.parametrize(
    "tokens, padded",
    [(1, False), (2, True)]
    + [  # one token leaves nothing to pad
        (tokens, padded) for tokens in (layers.FEW_ROWS, layers.FEW_ROWS + 1, 500) for padded in (False, True)
    ],
)
def test_fast_equals_reference_at_every_length(tokens, padded):
    assert_fast_equals_reference(random_encoder(), *random_inputs(tokens, padded))


@pytest.mark.parametrize("padded", [False, True])  # without padding the scores stay within +-64: no max shift
@pytest.mark.parametrize("activation", ["gelu", "gelu_new", "relu"])
@pytest.mark.parametrize("head_size", [32, 64])
def test_fast_equals_reference_for_every_head_size_and_activation(head_size, activation, padded):
    encoder = random_encoder(head_size, activation)
    ids, types, mask = random_inputs(100, padded, seed=1)
    assert_fast_equals_reference(encoder, ids, types, mask)
    assert largest_score(encoder, reference.forward(encoder, ids, types, mask)[0][:-1]) < SHIFT_FREE


@pytest.mark.parametrize("spread", [10, 60, 500])
def test_fast_attention_equals_reference_inside_and_beyond_the_shift_range(spread):
    """Scores beyond +-64 (past the shift-free range of layers.exp_shifted) on their own: q and k hold
    integers and d = 64, so q k^T / 8 is exact both ways and only the softmax differs. (In a whole model
    such scores amplify float32 rounding for any two implementations, so they are tested here.)"""
    rng = np.random.default_rng(spread)
    q, k = (rng.integers(-12, 13, (2, 3, 40, 64)).astype(np.float32) for _ in range(2))
    q *= np.float32(spread / np.abs(q @ k.transpose(0, 1, 3, 2) / 8).max())
    q = np.round(q)  # integers again, so the scores stay exact
    v = rng.standard_normal((2, 3, 40, 64), dtype=np.float32)
    mask = np.ones((2, 40), np.int64)
    mask[1, 25:] = 0
    bias = layers.attention_mask_bias(mask)
    context, probs = layers.attention(q, k, v, bias[:1], output_probs=True)
    expected_context, expected_probs = reference.attention(q, k, v, np.zeros((1, 1, 1, 40), np.float32))
    largest = np.abs(q @ k.transpose(0, 1, 3, 2) / 8).max()
    assert (largest <= SHIFT_FREE) == (spread < SHIFT_FREE), largest
    assert np.abs(probs - expected_probs).max() <= TOLERANCE
    assert np.abs(context - expected_context).max() <= TOLERANCE * np.abs(v).max()
    context, probs = layers.attention(q, k, v, bias, output_probs=True)  # with padding: always shifted
    expected_context, expected_probs = reference.attention(q, k, v, bias)
    assert np.abs(probs - expected_probs).max() <= TOLERANCE
    assert np.abs(context - expected_context).max() <= TOLERANCE * np.abs(v).max()


def test_kept_results_stay_distinct_inside_a_scratch():
    """A reader keeping each layer's attention map and output, inside the scratch the fast forward uses,
    gets every layer's own values: no public function hands back memory the next layer overwrites."""
    encoder = random_encoder()
    ids, types, mask = random_inputs(20, padded=True)
    out = encoder.forward(ids, types, mask, output_attentions=True)
    mask_bias, packing = layers.attention_mask_bias(mask), Packing(mask)
    x, kept, scratch = packing.pack(encoder.embeddings(ids, types)), [], Scratch()
    for layer in encoder.layers:
        with scratch:
            x, probs = encoder.encoder_layer(x, packing, layer, output_probs=True)
            padded = packing.unpack(x, np.zeros(out.hidden_states.shape[1:], np.float32))
            heads = [layers.split_heads(layers.linear(padded, p), 2) for p in (layer.query, layer.key, layer.value)]
            context, inner_probs = layers.attention(*heads, mask_bias, output_probs=True)
        kept.append((padded, probs, context, inner_probs))
    for i, (x, probs, context, inner_probs) in enumerate(kept):
        np.testing.assert_array_equal(x, out.hidden_states[i + 1])
        np.testing.assert_array_equal(probs, out.attentions[i])
        layer = encoder.layers[i]
        heads = [layers.split_heads(layers.linear(x, p), 2) for p in (layer.query, layer.key, layer.value)]
        expected = layers.attention(*heads, mask_bias, output_probs=True)
        np.testing.assert_array_equal(context, expected[0])
        np.testing.assert_array_equal(inner_probs, expected[1])


def test_layer_norm_leaves_its_argument_alone_unless_told_to_write_over_it():
    x = np.random.default_rng(0).standard_normal((3, 16), dtype=np.float32)
    norm = layers.Norm(np.ones(16, np.float32), np.zeros(16, np.float32))
    before = x.copy()
    y = layers.layer_norm(x, norm, 1e-12)
    np.testing.assert_array_equal(x, before)
    assert y is not x
    z = layers.layer_norm(x, norm, 1e-12, out=x)
    assert np.shares_memory(z, x)
    np.testing.assert_array_equal(z, y)


RELATIVES = {  # BERT's relatives (numbert.model.config.FAMILY) as the fast path runs them: each option on
    "roberta": dict(pad_token_id=1, type_vocab_size=1, max_position_embeddings=514),  # positions past padding
    "distilbert": dict(type_vocab_size=0),  # no token types
    "electra": dict(embedding_size=64),  # embeddings of 64, projected to 128
    "mpnet": dict(pad_token_id=1, type_vocab_size=0, max_position_embeddings=514),  # relative position bias
}


@pytest.mark.parametrize(  # 200 tokens: MPNet's buckets beyond their exact range and past 128
    "model_type, tokens", [(model_type, 20) for model_type in RELATIVES] + [("mpnet", 200)]
)
def test_fast_equals_reference_for_bert_s_relatives(model_type, tokens):
    encoder, ids, types, mask = relative_and_inputs(model_type, tokens)
    assert_fast_equals_reference(encoder, ids, types, mask)


def relative_and_inputs(model_type: str, tokens: int) -> tuple[Encoder, np.ndarray, np.ndarray, np.ndarray]:
    """A small random encoder of one of BERT's relatives (seed 3) and a padded batch of `tokens` for it (seed 2)."""
    config = BertConfig(
        vocab_size=300,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        model_type=model_type,
        **RELATIVES[model_type],
    )
    weights = random_weights(config, seed=3)
    if model_type == "mpnet":  # a bias of the attention scores' size, so it matters
        weights["encoder.relative_attention_bias.weight"] *= np.float32(100)
    ids, types, mask = random_inputs(tokens, padded=True, seed=2)
    ids[mask == 0] = config.pad_token_id  # padding told by its id, as RoBERTa's positions need
    types = types if config.type_vocab_size > 1 else np.zeros_like(types)
    return Encoder(config, weights), ids, types, mask
