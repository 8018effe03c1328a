"""numbert.model.packing: the layers run on the real tokens of a batch only, and attention per group of one length
gives the padded batch's numbers on every real token (with an additive score bias too)."""

from __future__ import annotations

import numpy as np

from numbert.model import layers, reference
from numbert.model.config import BertConfig
from numbert.model.encoder import Encoder
from numbert.model.packing import Packing, attention_by_group
from numbert.testing import random_weights

TOLERANCE = 2e-6
LENGTHS = [5, 9, 5, 1, 9, 7]  # rows of equal length in a group; one row of a single token


def right_padded(lengths: list[int]) -> np.ndarray:
    return (np.arange(max(lengths)) < np.array(lengths)[:, None]).astype(np.int64)


def test_a_right_padded_batch_packs_its_real_tokens_in_groups_of_one_length():
    mask = right_padded(LENGTHS)
    packing = Packing(mask)
    assert packing.tokens == sum(LENGTHS) and packing.padding_ratio == 1.0
    assert [(g.length, sorted(g.rows.tolist())) for g in packing.groups] == [
        (1, [3]),
        (5, [0, 2]),
        (7, [5]),
        (9, [1, 4]),
    ]
    padded = np.random.default_rng(0).standard_normal((*mask.shape, 4), dtype=np.float32)
    packed = packing.pack(padded)
    for group in packing.groups:  # each group a contiguous (rows, length, ...) block
        block = packed[group.tokens].reshape(len(group.rows), group.length, 4)
        np.testing.assert_array_equal(block, padded[group.rows, : group.length])
    back = packing.unpack(packed, np.zeros_like(padded))
    np.testing.assert_array_equal(back[mask == 1], padded[mask == 1])
    assert not back[mask == 0].any()


def test_without_padding_the_packed_array_is_the_batch_itself():
    packing = Packing(np.ones((3, 4), np.int64))
    padded = np.zeros((3, 4, 2), np.float32)
    assert packing.whole and np.shares_memory(packing.pack(padded), padded)


def test_grouped_attention_with_a_score_bias_equals_the_padded_batch():
    """The relative-position bias of MPNet-like models, (heads, seq, seq), cut to each group's length."""
    rng = np.random.default_rng(1)
    mask, heads, head_size = right_padded(LENGTHS), 2, 8
    batch, seq = mask.shape
    q, k, v = (rng.standard_normal((batch, seq, heads * head_size), dtype=np.float32) for _ in range(3))
    score_bias = rng.standard_normal((heads, seq, seq), dtype=np.float32)
    expected_context, expected_probs = layers.attention(
        *(layers.split_heads(a, heads) for a in (q, k, v)), layers.attention_mask_bias(mask) + score_bias, True
    )
    packing = Packing(mask)
    context = np.empty((packing.tokens, heads * head_size), np.float32)
    probs = attention_by_group(*(packing.pack(a) for a in (q, k, v)), packing, heads, score_bias, True, out=context)
    got = packing.unpack(context, np.zeros_like(q))
    real = mask == 1
    assert np.abs(got[real] - layers.merge_heads(expected_context)[real]).max() <= TOLERANCE
    assert np.abs((probs - expected_probs).transpose(0, 2, 1, 3)[real]).max() <= TOLERANCE


def test_padding_on_the_left_runs_padded_and_masked_as_before():
    config = BertConfig(
        vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    encoder = Encoder(config, random_weights(config))
    mask = right_padded(LENGTHS)[:, ::-1].copy()  # padding first
    packing = Packing(mask)
    assert len(packing.groups) == 1 and packing.padding_ratio == mask.size / mask.sum()
    ids = np.random.default_rng(2).integers(0, 300, mask.shape)
    out = encoder.forward(ids, np.zeros_like(ids), mask, output_attentions=True)
    hidden_states, _, _ = reference.forward(encoder, ids, np.zeros_like(ids), mask)
    assert np.abs(out.hidden_states - hidden_states)[:, mask == 1].max() <= TOLERANCE
