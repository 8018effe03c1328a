"""The decoder-shaped embedders (Qwen3: Qwen3-Embedding, causal; Gemma3: EmbeddingGemma, bidirectional) against
transformers: every hidden state of random-weight checkpoints transformers' own Qwen3Model and Gemma3TextModel save
here (grouped-query attention, 4 query / 2 key-value heads, sliding-window and global layers with a window shorter
than the texts), under eager and sdpa attention, right- and left-padded batches; texts run a block of queries at a
time; bf16 weights widened; the committed fixtures (scripts/make_decoder_fixture.py) without torch; the fast
encoder against reference.py; their configs in both shapes and what numbert refuses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import numbert
from numbert.model import decoder, reference
from numbert.model.config import BertConfig
from numbert.model.layers import Norm

FIXTURES = Path(__file__).parent / "fixtures" / "decoder"
ATOL = 1e-5
VOCAB = 64
SHAPE = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=96,
)
MODELS = {  # model_type -> (transformers' config and model classes, the config's fields besides SHAPE)
    "qwen3": ("Qwen3Config", "Qwen3Model", dict(attention_bias=True, rope_parameters={"rope_theta": 1e6})),
    "gemma3_text": (
        "Gemma3TextConfig",
        "Gemma3TextModel",
        dict(
            use_bidirectional_attention=True,
            sliding_window=8,  # keys within 8 // 2 = 4 tokens either side, on the sliding layers
            query_pre_attn_scalar=24,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        ),
    ),
}
LENGTHS = (20, 13, 5)
SIDES = ("right", "left")


def save_decoder(transformers, torch, model_type: str, directory: Path, implementation: str = "eager", **changes):
    """A random-weight transformers model of `model_type`, seed 0, its norms' gains moved off their initial values,
    saved into `directory`; returns the torch model."""
    config_class, model_class, fields = MODELS[model_type]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**{**SHAPE, **fields, **changes})
    config._attn_implementation = implementation
    model = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    model.save_pretrained(directory)
    return model


def batch(side: str, lengths=LENGTHS, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Ids and mask of rows of `lengths` tokens, padded on `side` with id 0."""
    ids = np.random.default_rng(seed).integers(3, VOCAB, (len(lengths), max(lengths)))
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
        if side == "left":
            mask[row] = mask[row, ::-1]
    ids[mask == 0] = 0
    return ids, mask


def transformers_hidden_states(torch, model, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), output_hidden_states=True)
    return np.stack([h.numpy() for h in out.hidden_states])


def largest_differences(found: np.ndarray, expected: np.ndarray, mask: np.ndarray) -> list[float]:
    """Each layer's largest difference on the real tokens (padding: numbert zeros, transformers computes it)."""
    assert found.shape == expected.shape and found.dtype == np.float32
    real = mask.astype(bool)
    return [float(np.abs(found[i][real] - expected[i][real]).max()) for i in range(len(expected))]


@pytest.fixture(scope="module")
def decoders(tmp_path_factory, transformers, torch):
    """A factory: decoders(model_type, implementation) -> (numbert model, torch model), each made once."""
    made = {}

    def make(model_type: str, implementation: str = "eager"):
        if (model_type, implementation) not in made:
            directory = tmp_path_factory.mktemp(f"{model_type}-{implementation}")
            model = save_decoder(transformers, torch, model_type, directory, implementation)
            made[model_type, implementation] = (numbert.load(directory), model)
        return made[model_type, implementation]

    return make


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("model_type", list(MODELS))
def test_hidden_states_match_transformers(decoders, torch, model_type, implementation, side):
    model, torch_model = decoders(model_type, implementation)
    ids, mask = batch(side)
    want = transformers_hidden_states(torch, torch_model, ids, mask)
    diffs = largest_differences(model.forward(ids, attention_mask=mask).hidden_states, want, mask)
    assert max(diffs) <= ATOL, diffs
    for row in range(len(ids)):  # one text alone, unpadded: the same
        real = mask[row].astype(bool)
        alone = model.forward(ids[row][real]).hidden_states
        assert np.abs(alone - want[:, row][:, real]).max() <= ATOL


@pytest.mark.parametrize("model_type", list(MODELS))
def test_long_texts_run_a_block_of_queries_at_a_time(decoders, torch, monkeypatch, model_type):
    """Texts of 90 and 41 tokens, scores cut into blocks of 32 queries (each against the keys it can see: the
    earlier ones for Qwen3, the window's for Gemma3's sliding layers), against transformers."""
    model, torch_model = decoders(model_type)
    monkeypatch.setattr(decoder, "SCORE_BYTES", 1)
    for side in SIDES:
        ids, mask = batch(side, (90, 41), seed=1)
        want = transformers_hidden_states(torch, torch_model, ids, mask)
        diffs = largest_differences(model.forward(ids, attention_mask=mask).hidden_states, want, mask)
        assert max(diffs) <= ATOL, (side, diffs)


@pytest.mark.parametrize("model_type", list(MODELS))
def test_bf16_weights_are_widened_exactly(tmp_path, transformers, torch, model_type):
    """A checkpoint saved in bfloat16 reads as its float32 widening: transformers' float32 model of the same
    rounded weights (read back in float32: the model's rotary frequencies, a buffer, recomputed, not bf16's)."""
    model = save_decoder(transformers, torch, model_type, tmp_path / "f32")
    model.to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    index = json.loads((tmp_path / "bf16" / "config.json").read_text())
    assert index.get("dtype", index.get("torch_dtype")) == "bfloat16"
    model = getattr(transformers, MODELS[model_type][1]).from_pretrained(tmp_path / "bf16", dtype=torch.float32)
    ids, mask = batch("right")
    want = transformers_hidden_states(torch, model, ids, mask)
    found = numbert.load(tmp_path / "bf16").forward(ids, attention_mask=mask).hidden_states
    assert max(largest_differences(found, want, mask)) <= ATOL


@pytest.mark.parametrize("model_type", list(MODELS))
def test_committed_fixtures(model_type):
    """The fixtures' hidden states (transformers', eager) without torch."""
    directory = FIXTURES / model_type
    expected = np.load(directory / "expected.npz")
    model = numbert.load(directory)
    for side in SIDES:
        ids, mask = expected[f"input_ids_{side}"], expected[f"attention_mask_{side}"]
        found = model.forward(ids, attention_mask=mask).hidden_states
        diffs = largest_differences(found, expected[f"hidden_states_{side}"], mask)
        assert max(diffs) <= ATOL, (side, diffs)


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("model_type", list(MODELS))
def test_fast_equals_reference(model_type, side):
    """The fast encoder (packed, blocks, in place) against reference.forward on the padded batch."""
    model = numbert.load(FIXTURES / model_type)
    ids, mask = batch(side)
    hidden_states, _, pooled = reference.forward(model.encoder, ids, np.zeros_like(ids), mask)
    assert pooled is None
    found = model.forward(ids, attention_mask=mask).hidden_states
    assert max(largest_differences(found, hidden_states.astype(np.float32), mask)) <= 1e-5


def test_softmax_numerators_hide_keys_by_a_product_or_by_a_bias():
    """Scores within +-64: the hidden keys zeroed after the exp, no shift; scores beyond (here every one moved by
    100, which softmax does not see but float32 rounds): the hiding bias and each row's maximum. The same softmax,
    hidden keys exactly 0; a NaN score is not hidden away."""
    scores = np.random.default_rng(0).uniform(-8, 8, (2, 3, 5, 5)).astype(np.float32)
    seen = decoder.seen_keys(range(5), range(5), causal=True, window=None)
    near = decoder.softmax_numerators(scores.copy(), None, seen)
    far = decoder.softmax_numerators(scores + np.float32(100), None, seen)
    for weights in (near, far):
        assert np.all(weights[..., seen == 0] == 0) and np.all(weights[..., seen == 1] > 0)
    np.testing.assert_allclose(near / near.sum(-1, keepdims=True), far / far.sum(-1, keepdims=True), atol=1e-6)
    broken = scores.copy()
    broken[0, 0, 2, 1] = np.nan
    assert np.isnan(decoder.softmax_numerators(broken, None, seen)[0, 0, 2]).any()


@pytest.mark.parametrize("side", SIDES)
def test_scores_beyond_the_shift_free_range_take_the_shifted_path(monkeypatch, side):
    """Queries' norm gains 40 times larger push Qwen3's causal scores past +-64: attention then adds the hiding bias
    and shifts each row by its maximum; the fast encoder still equals the reference."""
    model = numbert.load(FIXTURES / "qwen3")
    louder = lambda layer: layer._replace(query_norm=Norm(layer.query_norm.weight * np.float32(40), None))
    model.encoder.layers = [louder(layer) for layer in model.encoder.layers]  # (the reference reads them too)
    shifted = []
    hiding_bias = decoder.hiding_bias

    def counted(seen: np.ndarray) -> np.ndarray:
        shifted.append(seen)
        return hiding_bias(seen)

    monkeypatch.setattr(decoder, "hiding_bias", counted)
    ids, mask = batch(side)
    found = model.forward(ids, attention_mask=mask).hidden_states
    assert shifted
    plain, _, _ = reference.forward(model.encoder, ids, np.zeros_like(ids), mask)
    scale = max(1.0, float(np.abs(plain).max()))
    assert max(largest_differences(found, plain.astype(np.float32), mask)) <= 1e-5 * scale


def test_one_token_first_keeps_the_first_positions():
    model = numbert.load(FIXTURES / "qwen3")
    ids, mask = batch("right")
    whole = model.forward(ids, attention_mask=mask).hidden_states
    first = model.forward(ids, attention_mask=mask, one_token="first").hidden_states
    assert np.abs(first - whole[:, :, :1]).max() <= 1e-6


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("model_type", list(MODELS))
def test_one_token_last_computes_the_last_real_tokens_alone(model_type, side):
    """one_token="last" (last-token pooling, a reranker's score): the last layer's query, attention (Gemma3's
    sliding window shorter than the rows), output and feed-forward for each row's last real token alone, equal to
    the whole forward's states there and to the reference's; the layers below bit for bit the whole forward's."""
    model = numbert.load(FIXTURES / model_type)
    ids, mask = batch(side)
    whole = model.forward(ids, attention_mask=mask)
    last = model.forward(ids, attention_mask=mask, one_token="last")
    rows, columns = np.arange(len(ids)), mask.shape[1] - 1 - np.argmax(mask[:, ::-1] != 0, axis=1)
    states = whole.hidden_states[:, rows, columns]  # (layers + 1, rows, hidden)
    assert last.hidden_states.shape == (len(states), len(ids), 1, states.shape[-1])
    np.testing.assert_array_equal(last.hidden_states[:-1, :, 0], states[:-1])
    scale = max(1.0, float(np.abs(states[-1]).max()))
    assert np.abs(last.hidden_states[-1, :, 0] - states[-1]).max() <= 1e-6 * scale
    plain, _, _ = reference.forward(model.encoder, ids, np.zeros_like(ids), mask)
    assert np.abs(last.hidden_states[-1, :, 0] - plain[-1, rows, columns]).max() <= 1e-5 * scale
    np.testing.assert_allclose(last.sentence_vector("sep", -1), whole.sentence_vector("sep", -1), atol=1e-6 * scale)
    one = model.forward(ids[0][mask[0] > 0], one_token="last")  # one input, no batch axis
    np.testing.assert_allclose(one.hidden_states[-1, 0], states[-1, 0], atol=1e-6 * scale)


# --- configs ---------------------------------------------------------------------------------------------------


def fixture_config(model_type: str) -> dict:
    return json.loads((FIXTURES / model_type / "config.json").read_text())


def test_configs_read_as_transformers_reads_them():
    qwen = BertConfig.from_dict(fixture_config("qwen3"))
    assert (qwen.key_value_heads, qwen.head_size, qwen.causal, qwen.attention_scale) == (2, 16, True, 0.25)
    assert qwen.rope is not None and qwen.rope.theta == 1e6 and set(qwen.biases) == {"qkv", "attention_output"}
    gemma = BertConfig.from_dict(fixture_config("gemma3_text"))
    assert (gemma.causal, gemma.window, gemma.hidden_act, gemma.attention_scale) == (
        False,
        4,
        "gelu_pytorch_tanh",
        24**-0.5,
    )
    assert gemma.local_rope is not None and gemma.local_rope.theta == 10000.0 and gemma.rope.theta == 1e6
    for config in (qwen, gemma):
        assert BertConfig.from_dict(config.to_dict()) == config


def test_gemma3_s_older_config_and_nested_text_config():
    """The hub's older shape (rope_theta, rope_local_base_freq, sliding_window_pattern), and a Gemma3 config with
    the text model's nested under text_config."""
    old = {k: v for k, v in fixture_config("gemma3_text").items() if k not in ("rope_parameters", "layer_types")}
    old |= {"rope_theta": 500000.0, "rope_local_base_freq": 20000.0, "sliding_window_pattern": 2}
    config = BertConfig.from_dict(old)
    assert config.layer_types == ("sliding_attention", "full_attention") * 2
    assert config.rope is not None and config.local_rope is not None
    assert (config.rope.theta, config.local_rope.theta) == (500000.0, 20000.0)
    nested = BertConfig.from_dict({"model_type": "gemma3", "text_config": fixture_config("gemma3_text")})
    assert nested == BertConfig.from_dict(fixture_config("gemma3_text"))


@pytest.mark.parametrize(
    "model_type, change, message",
    [
        ("qwen3", {"use_sliding_window": True}, "config.json: use_sliding_window is True"),
        ("qwen3", {"layer_types": ["sliding_attention"] * 4}, "layer_types has sliding_attention"),
        ("qwen3", {"num_key_value_heads": 3}, "not a multiple of num_key_value_heads 3"),
        ("gemma3_text", {"attn_logit_softcapping": 50.0}, "attn_logit_softcapping is 50.0"),
        ("gemma3_text", {"use_bidirectional_attention": False}, "sliding windows in both directions only"),
        ("gemma3_text", {"head_dim": 0}, "head_dim must be an integer from 1"),
        ("gemma3_text", {"query_pre_attn_scalar": -1}, "query_pre_attn_scalar must be a positive"),
    ],
)
def test_what_is_not_built_is_refused_by_name(model_type, change, message):
    with pytest.raises(ValueError, match=message):
        BertConfig.from_dict(fixture_config(model_type) | change, "config.json")


def test_output_attentions_is_refused():
    model = numbert.load(FIXTURES / "gemma3_text")
    with pytest.raises(ValueError, match="no attention probabilities"):
        model.forward(np.array([3, 4, 5]), output_attentions=True)


def test_gemma3_with_its_vision_tower_reads_its_text_model(tmp_path, transformers, torch):
    """A Gemma3ForConditionalGeneration checkpoint (config nested under text_config, tensors under
    language_model.model.): its text model's hidden states; the vision tower left unread."""
    torch.manual_seed(0)
    text = transformers.Gemma3TextConfig(**SHAPE, **MODELS["gemma3_text"][2])
    vision = dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28, patch_size=14
    )
    config = transformers.Gemma3Config(text_config=text.to_dict(), vision_config=vision, mm_tokens_per_image=4)
    model = transformers.Gemma3ForConditionalGeneration(config).eval()
    model.save_pretrained(tmp_path)
    ids, mask = batch("right")
    want = transformers_hidden_states(torch, model.model.language_model, ids, mask)
    found = numbert.load(tmp_path).forward(ids, attention_mask=mask).hidden_states
    assert max(largest_differences(found, want, mask)) <= ATOL
