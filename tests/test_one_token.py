"""A last layer for one token a row (Encoder.forward's one_token): each row's [CLS] ("first") or last real token
("last") as the whole forward computes it, within rounding, for BERT, its relatives and the modern family (the
decoders': tests/test_decoder_family.py); and the readouts that read one token alone (a cross-encoder's scores, a
classifier's logits, CLS and last-token pooling) give the whole forward's answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_modern import MODELS, batch, modern_encoder
from test_reference import RELATIVES, random_encoder, random_inputs, relative_and_inputs
from test_sentence_transformers import SENTENCES, SentenceTransformer, cosines, write_st_dir

import numbert
from numbert.model import attention_blocks, reference
from numbert.model.encoder import Encoder

__all__ = ["SentenceTransformer"]  # a fixture, used by name
TOLERANCE = 1e-6


def assert_first_positions_equal(encoder: Encoder, ids, types, mask, scale: float = 1.0) -> None:
    """one_token="first"'s every layer equals the whole forward's first positions (and the pooler its pooler) within
    TOLERANCE x scale; the reference's plain maths too."""
    whole = encoder.forward(ids, types, mask)
    first = encoder.forward(ids, types, mask, one_token="first")
    assert first.one_token == "first" and first.hidden_states.shape == (
        *whole.hidden_states.shape[:2],
        1,
        whole.hidden_states.shape[-1],
    )
    assert first.hidden_states.dtype == np.float32
    real_first = mask[:, 0].astype(bool)
    np.testing.assert_array_equal(first.hidden_states[:-1], whole.hidden_states[:-1, :, :1])  # the same layers
    difference = np.abs(first.hidden_states[-1] - whole.hidden_states[-1][:, :1])[real_first].max()
    assert difference <= TOLERANCE * scale, difference
    if whole.pooler_output is not None:
        assert np.abs(first.pooler_output - whole.pooler_output).max() <= TOLERANCE * scale
    plain, _, _ = reference.forward(encoder, ids, types, mask)
    assert np.abs(first.hidden_states[-1, :, 0] - plain[-1, :, 0])[real_first].max() <= 2 * TOLERANCE * scale


@pytest.mark.parametrize("tokens, padded", [(1, False), (9, True), (40, False), (130, True)])
def test_bert(tokens, padded):
    assert_first_positions_equal(random_encoder(), *random_inputs(tokens, padded))


def test_bert_with_rows_of_many_lengths_and_padding_on_the_left():
    ids, types, mask = random_inputs(30, padded=False, seed=4)
    ids, types = np.repeat(ids, 4, axis=0), np.repeat(types, 4, axis=0)
    mask = np.ones_like(ids)
    mask[1, 20:], mask[2, 5:], mask[3, :3] = 0, 0, 0  # the last row padded on the left: one masked group
    encoder = random_encoder()
    assert_first_positions_equal(encoder, ids[:3], types[:3], mask[:3])
    whole = encoder.forward(ids, types, mask)
    first = encoder.forward(ids, types, mask, one_token="first")
    assert np.abs(first.hidden_states[-1, :, 0] - whole.hidden_states[-1, :, 0]).max() <= TOLERANCE


@pytest.mark.parametrize("model_type", list(RELATIVES))
def test_bert_s_relatives(model_type):
    assert_first_positions_equal(*relative_and_inputs(model_type, 40))


@pytest.mark.parametrize("model_type", MODELS)
def test_the_modern_family(model_type, monkeypatch):
    """Pre-norm with a final norm (ModernBERT, whose window the 37 tokens outreach), rotary positions, gated
    feed-forwards; the whole forward's long groups in blocks of queries."""
    monkeypatch.setattr(attention_blocks, "LONG_SCORES", 1 << 12)
    encoder = modern_encoder(model_type)
    ids, types, mask = batch(model_type, (37, 22), seed=2)
    last = np.abs(encoder.forward(ids, types, mask).hidden_states[-1]).max()
    assert_first_positions_equal(encoder, ids, types, mask, scale=max(1.0, float(last)))


def test_one_token_refuses_what_it_has_not_computed():
    encoder = random_encoder()
    ids, types, mask = random_inputs(9, padded=True)
    with pytest.raises(ValueError, match="attentions"):
        encoder.forward(ids, types, mask, one_token="first", output_attentions=True)
    out = encoder.forward(ids, types, mask, one_token="first")
    with pytest.raises(ValueError, match="one token a row"):
        out.token_vectors("last")
    with pytest.raises(ValueError, match="one token a row"):
        out.sentence_vector("mean", layers=-1)
    whole = encoder.forward(ids, types, mask)
    for pooling, layers in (("cls", -1), (["cls", "pooler"], "sum_all")):
        np.testing.assert_allclose(
            out.sentence_vector(pooling, layers), whole.sentence_vector(pooling, layers), atol=TOLERANCE
        )


def last_columns(mask: np.ndarray) -> np.ndarray:
    """Each row's last position the mask keeps."""
    return mask.shape[1] - 1 - np.argmax(mask[:, ::-1] != 0, axis=1)


@pytest.mark.parametrize("tokens, padded", [(1, False), (9, True), (40, True)])
def test_bert_s_last_tokens(tokens, padded):
    """one_token="last": every layer's state at each row's last real token ([SEP]), the whole forward's within
    rounding (BERT's last layer runs whole, then keeps those rows); no pooler output, which reads [CLS]."""
    encoder = random_encoder()
    ids, types, mask = random_inputs(tokens, padded)
    whole = encoder.forward(ids, types, mask)
    last = encoder.forward(ids, types, mask, one_token="last")
    rows, columns = np.arange(len(ids)), last_columns(mask)
    assert last.one_token == "last" and last.pooler_output is None
    assert last.hidden_states.shape == (*whole.hidden_states.shape[:2], 1, whole.hidden_states.shape[-1])
    np.testing.assert_array_equal(last.hidden_states[:-1, :, 0], whole.hidden_states[:-1, rows, columns])
    assert np.abs(last.hidden_states[-1, :, 0] - whole.hidden_states[-1, rows, columns]).max() <= TOLERANCE
    np.testing.assert_allclose(
        last.sentence_vector("sep", layers=-1), whole.sentence_vector("sep", layers=-1), atol=TOLERANCE
    )
    with pytest.raises(ValueError, match="one token a row"):
        last.sentence_vector("cls", layers=-1)
    with pytest.raises(ValueError, match="one_token must be one of"):
        encoder.forward(ids, types, mask, one_token="middle")


def test_last_tokens_with_padding_on_the_left():
    """A left-padded row packs every position as one masked group: its last real token is the row's last position."""
    ids, types, mask = random_inputs(30, padded=False, seed=4)
    ids, types = np.repeat(ids, 3, axis=0), np.repeat(types, 3, axis=0)
    mask = np.ones_like(ids)
    mask[1, 20:], mask[2, :3] = 0, 0
    encoder = random_encoder()
    whole = encoder.forward(ids, types, mask).hidden_states[-1]
    last = encoder.forward(ids, types, mask, one_token="last").hidden_states[-1, :, 0]
    assert np.abs(last - whole[np.arange(3), last_columns(mask)]).max() <= TOLERANCE


# --- the readouts that read one token alone, through the pipeline --------------------------------------------


def test_which_readouts_read_one_token_alone(minilm):
    assert minilm.sentence_vectors(minilm.recipe(pooling="cls")).one_token == "first"
    assert minilm.sentence_vectors(minilm.recipe(pooling=["cls", "pooler"])).one_token == "first"
    assert minilm.sentence_vectors(minilm.recipe()).one_token is None  # its mean pooling
    assert minilm.sentence_vectors(minilm.recipe(pooling=["cls", "mean"])).one_token is None
    assert minilm.sentence_vectors(minilm.recipe(pooling="sep")).one_token == "last"
    assert minilm.sentence_vectors(minilm.recipe(pooling=["sep", "cls"])).one_token is None
    assert minilm.token_vectors().one_token is None


def test_a_cross_encoder_s_scores_equal_the_whole_forward_s():
    model = numbert.load(Path(__file__).parent / "fixtures" / "cross_encoder")
    readout = model.sequence_logits()
    assert readout.one_token == "first"
    pairs = [("what is bert", "a language model"), ("numbers", "numpy arrays of float32 " * 5), ("a", "b")]
    rows = model.pair_rows([a for a, _ in pairs], [b for _, b in pairs], truncate=True)
    whole = np.stack(readout(model.forward_rows(rows)))
    first = np.stack(readout(model.forward_rows(rows, one_token="first")))
    assert np.abs(first - whole).max() <= TOLERANCE * max(1.0, float(np.abs(whole).max()))
    np.testing.assert_allclose(model.predict(pairs, activation_fn="identity"), whole[:, 0], atol=TOLERANCE, rtol=0)


@pytest.mark.parity
def test_cls_pooling_matches_sentence_transformers_and_the_whole_forward(tmp_path, minilm_dir, SentenceTransformer):
    d = write_st_dir(tmp_path, minilm_dir, {"pooling_mode_cls_token": True}, normalize=True, max_seq_length=64)
    model = numbert.load(d)
    recipe = model.recipe()
    assert recipe.one_token == "first"
    texts = SENTENCES[::2]
    got = model.embed(texts, batch_size=4)
    whole = np.empty_like(got)
    for positions, out in model.batches(texts, batch_size=4, max_length=64):
        assert out.one_token is None
        whole[positions] = recipe.sentence_vectors(out)
    assert np.abs(got - recipe.finish(whole)).max() <= TOLERANCE
    want = SentenceTransformer(str(d), device="cpu").encode(texts)
    assert cosines(got, want).min() >= 0.99999


@pytest.mark.parametrize("kind", ["bert", "modernbert", "jina_embeddings_v3"])
@pytest.mark.parametrize("padded", [False, True])
def test_a_forward_keeping_its_last_layers_keeps_their_numbers(kind, padded):
    """Encoder.forward's last_layers: hidden_states holds the last ones alone, bit for bit the whole forward's (and
    with one_token, its first or last positions'); the pooler reads the same last layer."""
    if kind == "bert":
        encoder, (ids, types, mask) = random_encoder(), random_inputs(40, padded)
    else:
        encoder = modern_encoder(kind)
        ids, types, mask = batch(kind) if padded else (a[:1] for a in batch(kind, lengths=[12]))
    layers = len(encoder.layers) + 1
    for one_token in (None, "first", "last"):
        whole = encoder.forward(ids, types, mask, one_token=one_token)
        for last in (1, 2, layers, layers + 5):
            kept = encoder.forward(ids, types, mask, one_token=one_token, last_layers=last)
            np.testing.assert_array_equal(kept.hidden_states, whole.hidden_states[-last:])
            if whole.pooler_output is not None:
                np.testing.assert_array_equal(kept.pooler_output, whole.pooler_output)
    one = encoder.forward(ids[0], types[0], mask[0], last_layers=1)
    assert one.hidden_states.shape == (1, ids.shape[1], encoder.config.hidden_size)


def test_a_forward_keeping_its_last_layer_does_not_hold_the_others():
    """The memory half of last_layers (#43 item 8): a 256-token forward of an 8-layer encoder holding its last
    layer alone peaks lower than the whole forward by most of the 8 layers it does not keep."""
    import tracemalloc

    encoder = modern_encoder("gte", num_hidden_layers=8)
    ids = np.random.default_rng(0).integers(3, 60, (1, 256))
    peaks = {}
    for last in (None, 1):
        tracemalloc.start()
        encoder.forward(ids, last_layers=last)
        peaks[last] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    one_layer = ids.size * encoder.config.hidden_size * 4
    assert peaks[1] <= peaks[None] - 6 * one_layer, (peaks, one_layer)
