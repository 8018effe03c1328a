"""The modern family (ModernBERT, NomicBERT, GTE, jina-embeddings-v3) against transformers: every hidden state,
attention map and pooler, the masked-LM and sequence-classification logits, under eager and sdpa attention, on
random-weight checkpoints transformers' own classes save here; a ModernBERT whose window is shorter than its
texts, and texts past 1,024 tokens run a block of queries at a time; the committed fixtures
(scripts/make_modern_fixture.py) without torch; the fast encoder against reference.py; jina's task adapters
against a torch re-statement of their formula; configs in both shapes and what numbert refuses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import numbert
from numbert.checkpoint.model_config import read_config
from numbert.model import attention_blocks, reference
from numbert.model.config import BertConfig
from numbert.model.encoder import Encoder
from numbert.model.heads import masked_lm_logits
from numbert.model.rotary import Rope
from numbert.pipeline.readouts import SequenceLogits
from numbert.testing import random_weights

FIXTURES = Path(__file__).parent / "fixtures" / "modern"
ATOL = 1e-5
VOCAB, LABELS = 64, 3
SHAPE = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=40)
MODERNBERT_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
MODELS = {  # model_type -> (transformers' class-name stem, its config's fields besides SHAPE)
    # a window of +-4 tokens: shorter than the batch's rows; global layers 0 and 3 (every third), sliding 1 and 2
    "modernbert": ("ModernBert", dict(MODERNBERT_IDS, local_attention=8)),
    "nomic_bert": ("NomicBert", dict(pad_token_id=0)),
    "gte": ("Gte", dict(pad_token_id=1, rope_parameters={"rope_type": "default", "rope_theta": 500000.0})),
    "jina_embeddings_v3": ("JinaEmbeddingsV3", dict(pad_token_id=1)),
}
TASKS = ("Model", "ForMaskedLM", "ForSequenceClassification")
LENGTHS = (20, 13, 5)  # the batch's rows: right-padded to 20


def transformers_config(transformers, model_type: str, task: str = "Model", **changes):
    stem, fields = MODELS[model_type]
    return getattr(transformers, f"{stem}Config")(**{**SHAPE, "num_labels": LABELS, **fields, **changes})


def save_modern(transformers, torch, model_type: str, task: str, directory: Path, implementation: str, **changes):
    """A random-weight transformers model of `model_type` + `task`, seed 0, its 1-D tensors (biases, norms) moved off
    their initial zeros and ones so each is tested, saved into `directory`; returns the torch model."""
    torch.manual_seed(0)
    config = transformers_config(transformers, model_type, task, **changes)
    config._attn_implementation = implementation
    model = getattr(transformers, MODELS[model_type][0] + task)(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    model.save_pretrained(directory)
    return model


def batch(model_type: str, lengths=LENGTHS, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of `lengths` tokens, right-padded with the pad id; a second segment in the first row where the model
    has token types of two kinds (NomicBERT)."""
    pad = MODELS[model_type][1]["pad_token_id"]
    ids = np.random.default_rng(seed).integers(3, VOCAB, (len(lengths), max(lengths)))
    mask = np.ones_like(ids)
    for row, length in enumerate(lengths):
        ids[row, length:], mask[row, length:] = pad, 0
    types = np.zeros_like(ids)
    if model_type == "nomic_bert":
        types[0, 7:] = 1
    return ids, types, mask


def transformers_outputs(torch, model, model_type: str, task: str, inputs, attentions: bool) -> dict[str, np.ndarray]:
    ids, types, mask = inputs
    kwargs = dict(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
    if model_type != "modernbert":
        kwargs["token_type_ids"] = torch.tensor(types)
    with torch.no_grad():
        out = model(**kwargs, output_hidden_states=True, output_attentions=attentions)
    found = {"hidden_states": np.stack([h.numpy() for h in out.hidden_states])}
    if attentions:
        found["attentions"] = np.stack([a.numpy() for a in out.attentions])
    if task == "Model" and getattr(out, "pooler_output", None) is not None:
        found["pooler_output"] = out.pooler_output.numpy()
    if task != "Model":
        found["logits"] = out.logits.numpy()
    return found


def numbert_outputs(model: numbert.Bert, task: str, inputs, attentions: bool, expected: dict) -> dict[str, np.ndarray]:
    out = model.forward(*inputs, output_attentions=attentions)
    found = {"hidden_states": out.hidden_states}
    if attentions:
        found["attentions"] = out.attentions
    if "pooler_output" in expected:
        found["pooler_output"] = out.pooler_output
    if task == "ForMaskedLM":
        found["logits"] = masked_lm_logits(out.last_hidden_state, model.heads.masked_lm, model.config.layer_norm_eps)
    elif task == "ForSequenceClassification":
        found["logits"] = np.stack(SequenceLogits(model.heads.sequence_classifier)(out))
    return found


def largest_differences(found: dict, expected: dict, mask: np.ndarray) -> dict[str, float]:
    """Each output's largest difference on the real tokens (numbert leaves padding zero; transformers computes it),
    hidden states layer by layer."""
    assert sorted(found) == sorted(expected)
    real, diffs = mask.astype(bool), {}
    for name, want in expected.items():
        got = found[name]
        assert got.shape == want.shape and got.dtype == np.float32, name
        if name == "hidden_states":
            for i in range(len(want)):
                diffs[f"hidden_states[{i}]"] = float(np.abs(got[i][real] - want[i][real]).max())
            continue
        if name == "attentions":
            got, want = got.transpose(0, 1, 3, 2, 4)[:, real], want.transpose(0, 1, 3, 2, 4)[:, real]
        elif got.ndim >= 2 and got.shape[:2] == real.shape:
            got, want = got[real], want[real]
        diffs[name] = float(np.abs(got - want).max())
    return diffs


def assert_outputs_match(found: dict, expected: dict, mask: np.ndarray, atol: float = ATOL) -> None:
    diffs = largest_differences(found, expected, mask)
    assert max(diffs.values()) <= atol, diffs


@pytest.fixture(scope="module")
def modern(tmp_path_factory, transformers, torch):
    """A factory: modern(model_type, task, implementation) -> (numbert model, torch model), each made once."""
    made = {}

    def make(model_type: str, task: str, implementation: str = "eager"):
        key = (model_type, task, implementation)
        if key not in made:
            directory = tmp_path_factory.mktemp(f"{model_type}-{task}-{implementation}")
            reference_model = save_modern(transformers, torch, model_type, task, directory, implementation)
            made[key] = numbert.load(directory), reference_model
        return made[key]

    return make


# ----------------------------------------------------------------------------------------------
# parity with transformers


@pytest.mark.parity
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("model_type", MODELS)
def test_outputs_match_transformers(modern, torch, model_type, task, implementation):
    """Every hidden state (and, eager, every attention map: numbert's plain path; sdpa: its band and blocks), the
    pooler, the masked-LM and the sequence classifier's logits, on a padded batch."""
    model, reference_model = modern(model_type, task, implementation)
    assert model.config.model_type == model_type
    eager = implementation == "eager"
    inputs = batch(model_type)
    expected = transformers_outputs(torch, reference_model, model_type, task, inputs, attentions=eager)
    assert_outputs_match(numbert_outputs(model, task, inputs, eager, expected), expected, inputs[2])


@pytest.mark.parity
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_a_modernbert_classifier_pooling_the_mean(tmp_path, transformers, torch, implementation):
    """classifier_pooling "mean": ModernBERT's prediction head reads the mean of each row's tokens."""
    reference_model = save_modern(
        transformers,
        torch,
        "modernbert",
        "ForSequenceClassification",
        tmp_path,
        implementation,
        classifier_pooling="mean",
    )
    model, inputs = numbert.load(tmp_path), batch("modernbert")
    expected = transformers_outputs(torch, reference_model, "modernbert", "ForSequenceClassification", inputs, False)
    found = numbert_outputs(model, "ForSequenceClassification", inputs, False, expected)
    assert_outputs_match(found, expected, inputs[2])


@pytest.mark.parity
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_texts_longer_than_the_window_and_1024_tokens(tmp_path, transformers, torch, monkeypatch, implementation):
    """A ModernBERT of window +-8 on rows of 1,100 and 700 tokens: its sliding layers run as a band, its global
    layers a block of queries at a time (LONG_SCORES lowered so a test-sized model reaches it)."""
    monkeypatch.setattr(attention_blocks, "LONG_SCORES", 1 << 20)
    monkeypatch.setattr(attention_blocks, "BLOCK_BYTES", 1 << 18)
    reference_model = save_modern(
        transformers, torch, "modernbert", "Model", tmp_path, implementation, local_attention=16
    )
    model, inputs = numbert.load(tmp_path), batch("modernbert", (1100, 700))
    expected = transformers_outputs(torch, reference_model, "modernbert", "Model", inputs, False)
    assert_outputs_match(numbert_outputs(model, "Model", inputs, False, expected), expected, inputs[2])


@pytest.mark.parity
@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
        {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
        {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0, "original_max_position_embeddings": 16},
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "rope_theta": 500000.0,
            "original_max_position_embeddings": 16,
        },
    ],
    ids=lambda rope: rope["rope_type"],
)
def test_rope_scaling_types_transformers_runs(tmp_path, transformers, torch, rope):
    """GTE with each rope type transformers' port runs: the frequencies, YaRN's attention factor, the outputs."""
    reference_model = save_modern(transformers, torch, "gte", "Model", tmp_path, "sdpa", rope_parameters=rope)
    model, inputs = numbert.load(tmp_path), batch("gte")
    inv_freq = reference_model.rotary_emb.inv_freq.numpy()
    frequencies, scaling = model.config.rope.frequencies(model.config.head_size, model.config.max_position_embeddings)
    np.testing.assert_allclose(frequencies, inv_freq, rtol=1e-6)
    assert scaling == pytest.approx(reference_model.rotary_emb.attention_scaling)
    expected = transformers_outputs(torch, reference_model, "gte", "Model", inputs, False)
    assert_outputs_match(numbert_outputs(model, "Model", inputs, False, expected), expected, inputs[2])


# ----------------------------------------------------------------------------------------------
# jina-embeddings-v3's task adapters against a torch re-statement of their formula

TASK_NAMES = ["retrieval.query", "retrieval.passage", "separation", "classification", "text-matching"]
LORA_RANK, LORA_ALPHA = 4, 2.0


def jina_hub_checkpoint(transformers, torch, directory: Path, **changes) -> tuple[dict, object]:
    """A jina-embeddings-v3 as the hub holds it (XLMRobertaLoRA: model_type "xlm-roberta", rotary positions, every
    Linear and embedding table parametrized by torch's parametrize with LoRA adapters, lora_A and lora_B, one per
    task), made from a random JinaEmbeddingsV3Model (its config's `changes`); returns (the adapters by weight name,
    the torch model)."""
    from safetensors.torch import load_file, save_file

    plain = directory / "plain"
    reference_model = save_modern(transformers, torch, "jina_embeddings_v3", "Model", plain, "eager", **changes)
    tensors, adapters = load_file(plain / "model.safetensors"), {}
    generator = torch.Generator().manual_seed(1)
    hub = {}
    for name, tensor in tensors.items():
        base = name.removesuffix(".weight")
        if not name.endswith(".weight") or tensor.dim() != 2:
            hub[f"roberta.{name}"] = tensor
            continue
        rows, columns = tensor.shape
        table = base.startswith("embeddings.")
        shape_a, shape_b = (
            ((rows, LORA_RANK), (LORA_RANK, columns)) if table else ((LORA_RANK, columns), (rows, LORA_RANK))
        )
        a = torch.randn((len(TASK_NAMES), *shape_a), generator=generator) * 0.3
        b = torch.randn((len(TASK_NAMES), *shape_b), generator=generator) * 0.3
        adapters[name] = (a, b, table)
        hub[f"roberta.{base}.parametrizations.weight.original"] = tensor
        (
            hub[f"roberta.{base}.parametrizations.weight.0.lora_A"],
            hub[f"roberta.{base}.parametrizations.weight.0.lora_B"],
        ) = a, b
    save_file(hub, directory / "model.safetensors")
    config = json.loads((plain / "config.json").read_text())
    config = {k: v for k, v in config.items() if k not in ("rope_parameters", "architectures")}
    config |= {
        "model_type": "xlm-roberta",
        "architectures": ["XLMRobertaLoRA"],
        "position_embedding_type": "rotary",
        "rotary_emb_base": 20000.0,
        "lora_adaptations": TASK_NAMES,
        "lora_rank": LORA_RANK,
        "lora_alpha": LORA_ALPHA,
        "task_instructions": {name: f"Do {name}: " if name.startswith("retrieval") else "" for name in TASK_NAMES},
        "matryoshka_dimensions": [8, 16, 32],
    }
    (directory / "config.json").write_text(json.dumps(config))
    return adapters, reference_model


def adapted_torch_model(torch, reference_model, adapters: dict, task: int):
    """The torch model with task `task`'s adapters merged as jina's LoRAParametrization.lora_forward writes them: a
    Linear's W + B[task] A[task] * alpha / rank, a table's E + A[task] B[task] * alpha / rank."""
    import copy

    model = copy.deepcopy(reference_model)
    scaling = LORA_ALPHA / LORA_RANK
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    names = {  # the hub's names (transformers' save format) -> transformers' own
        "embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight",
        "embeddings.token_type_embeddings.weight": "embeddings.token_type_embeddings.weight",
        "pooler.dense.weight": "pooler.dense.weight",
    }
    for hub_name, (a, b, table) in adapters.items():
        delta = (a[task] @ b[task] if table else b[task] @ a[task]) * scaling
        if hub_name in names:
            state[names[hub_name]] += delta
            continue
        layer = hub_name.split(".")[2]
        own = {
            "mixer.Wqkv": [f"layers.{layer}.self_attn.{p}_proj.weight" for p in "qkv"],
            "mixer.out_proj": [f"layers.{layer}.self_attn.o_proj.weight"],
            "mlp.fc1": [f"layers.{layer}.mlp.fc1.weight"],
            "mlp.fc2": [f"layers.{layer}.mlp.fc2.weight"],
        }[".".join(hub_name.split(".")[3:5])]
        for part, name in zip(delta.chunk(len(own)), own):
            state[name] += part
    model.load_state_dict(state)
    return model


@pytest.mark.parity
def test_jina_task_adapters_match_a_torch_restatement(tmp_path, transformers, torch):
    """Each task's adapters (and none) against the torch model with the adapters merged by jina's formula: every
    hidden state and the pooler; the recipe's task prepends its instruction."""
    adapters, reference_model = jina_hub_checkpoint(transformers, torch, tmp_path)
    model = numbert.load(tmp_path)
    assert model.config.model_type == "jina_embeddings_v3" and model.config.task_adapters == tuple(TASK_NAMES)
    inputs = batch("jina_embeddings_v3")
    for task in [None, *range(len(TASK_NAMES))]:
        torch_model = reference_model if task is None else adapted_torch_model(torch, reference_model, adapters, task)
        expected = transformers_outputs(torch, torch_model, "jina_embeddings_v3", "Model", inputs, False)
        encoder = model.encoder.adapted(None if task is None else TASK_NAMES[task])
        out = encoder.forward(*inputs)
        found = {"hidden_states": out.hidden_states, "pooler_output": out.pooler_output}
        assert_outputs_match(found, expected, inputs[2])
    assert model.encoder.adapted("separation") is model.encoder.adapted("separation")  # made once
    with pytest.raises(ValueError, match="unknown task 'search'.*retrieval.query, retrieval.passage"):
        model.encoder.adapted("search")
    recipe = model.recipe(task="retrieval.query")
    assert recipe.task == "retrieval.query" and recipe.prepare("x") == "Do retrieval.query: x"
    assert model.recipe(task="retrieval.query", prompt="").prepare("x") == "x"
    assert model.recipe(dimensions=16).dimensions == 16
    with pytest.raises(ValueError, match="dimensions 12 .* 8, 16, 32"):
        model.recipe(dimensions=12)


# ----------------------------------------------------------------------------------------------
# the fast encoder against reference.py


def modern_encoder(model_type: str, **changes) -> Encoder:
    """A random modern encoder without torch: its config read from transformers 5's shape, its weights random
    (numbert.testing), norms' gains near 1 and the queries scaled so the attention is far from uniform."""
    stem, fields = MODELS[model_type]
    d = {**SHAPE, **fields, "model_type": model_type, **changes}
    config = BertConfig.from_dict(d)
    weights = random_weights(config, seed=len(model_type))
    for name, w in weights.items():
        if name.endswith(("LayerNorm.weight", "final_norm.weight")):
            w += np.float32(1.0)
        elif w.ndim == 2 and not name.startswith("embeddings."):
            w *= np.float32(4)
    return Encoder(config, weights)


@pytest.mark.parametrize("model_type", MODELS)
@pytest.mark.parametrize("padded", [False, True])
def test_fast_equals_reference(model_type, padded, monkeypatch):
    """Eager-like (attentions asked: the plain path) and without (ModernBERT's band; blocks of queries, LONG_SCORES
    lowered), against reference.forward."""
    monkeypatch.setattr(attention_blocks, "LONG_SCORES", 1 << 12)
    monkeypatch.setattr(attention_blocks, "MIN_BLOCK", 4)
    monkeypatch.setattr(attention_blocks, "BLOCK_BYTES", 1 << 11)
    encoder = modern_encoder(model_type)
    ids, types, mask = batch(model_type, (37, 22) if padded else (37,), seed=2)
    hidden_states, attentions, pooled = reference.forward(encoder, ids, types, mask)
    real = mask.astype(bool)
    for probs in (True, False):
        out = encoder.forward(ids, types, mask, output_attentions=probs)
        np.testing.assert_allclose(out.hidden_states[:, real], hidden_states[:, real], atol=2e-5, rtol=1e-5)
        if probs:
            by_query = lambda a: a.transpose(0, 1, 3, 2, 4)[:, real]
            np.testing.assert_allclose(by_query(out.attentions), by_query(attentions), atol=2e-6)


def test_fast_equals_reference_with_task_adapters():
    encoder = modern_encoder("jina_embeddings_v3", lora_adaptations=["a", "b"], lora_rank=2, lora_alpha=3.0)
    ids, types, mask = batch("jina_embeddings_v3")
    base = encoder.forward(ids, types, mask).hidden_states
    for task in ("a", "b"):
        adapted = encoder.adapted(task)
        hidden_states, _, pooled = reference.forward(adapted, ids, types, mask)
        out = adapted.forward(ids, types, mask)
        real = mask.astype(bool)
        np.testing.assert_allclose(out.hidden_states[:, real], hidden_states[:, real], atol=2e-5, rtol=1e-5)
        assert np.abs(out.hidden_states - base)[:, real].max() > 1e-3  # the adapters change the vectors


def test_a_band_computes_what_a_masked_full_attention_does():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 50, 8), dtype=np.float32) for _ in range(3))
    mask = np.ones((2, 50), np.int64)
    mask[1, 31:] = 0
    bias = np.where(mask[:, None, None, :] > 0, 0, np.finfo(np.float32).min).astype(np.float32)
    for window in (None, 3, 10):
        full = bias if window is None else np.minimum(bias, reference.band(50, window))
        want, _ = reference.attention(q, k, v, full)
        got = attention_blocks.attention_in_blocks(q, k, v, bias, window, out=np.empty_like(q))
        np.testing.assert_allclose(got[0], want[0], atol=1e-6)
        np.testing.assert_allclose(got[1, :, :31], want[1, :, :31], atol=1e-6)


# ----------------------------------------------------------------------------------------------
# the committed fixtures, without torch

FIXTURE_TASKS = ("ForMaskedLM", "ForSequenceClassification")


@pytest.mark.parametrize("task", FIXTURE_TASKS)
@pytest.mark.parametrize("model_type", MODELS)
def test_committed_fixtures(model_type, task):
    directory = FIXTURES / f"{model_type}-{task}"
    model, inputs = numbert.load(directory), batch(model_type)
    with np.load(directory / "expected.npz") as expected:
        expected = dict(expected)
    assert_outputs_match(numbert_outputs(model, task, inputs, True, expected), expected, inputs[2])


# ----------------------------------------------------------------------------------------------
# configs in both shapes, and what numbert refuses


def copy_fixture(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp_path / name))


def edit_config(directory: Path, drop=(), **changes) -> None:
    path = directory / "config.json"
    config = {k: v for k, v in json.loads(path.read_text()).items() if k not in drop}
    path.write_text(json.dumps(config | changes))


def test_modernbert_s_older_config_keys_read_as_transformers_5_s(tmp_path):
    new = read_config(FIXTURES / "modernbert-ForMaskedLM" / "config.json")
    directory = copy_fixture(tmp_path, "modernbert-ForMaskedLM")
    edit_config(
        directory,
        drop=("layer_types", "rope_parameters"),
        global_attn_every_n_layers=3,
        global_rope_theta=160000.0,
        local_rope_theta=10000.0,
    )
    old = read_config(directory / "config.json")
    assert old == new and old.layer_types == ("full_attention", "sliding_attention", "sliding_attention")
    assert (old.rope, old.local_rope) == (Rope(160000.0), Rope(10000.0)) and old.window == 4
    model = numbert.load(directory)
    np.testing.assert_array_equal(
        model.forward(*batch("modernbert")).hidden_states,
        numbert.load(FIXTURES / "modernbert-ForMaskedLM").forward(*batch("modernbert")).hidden_states,
    )


def test_nomic_s_gpt2_config_keys_read_as_transformers_5_s(tmp_path):
    new = read_config(FIXTURES / "nomic_bert-ForMaskedLM" / "config.json")
    directory = copy_fixture(tmp_path, "nomic_bert-ForMaskedLM")
    names = dict(
        hidden_size="n_embd",
        num_hidden_layers="n_layer",
        num_attention_heads="n_head",
        intermediate_size="n_inner",
        max_position_embeddings="n_positions",
        layer_norm_eps="layer_norm_epsilon",
    )
    config = json.loads((directory / "config.json").read_text())
    gpt2 = {names[k]: config[k] for k in names} | {
        "activation_function": "swiglu",
        "rotary_emb_base": 1000,
        "rotary_emb_fraction": 1.0,
        "rotary_emb_interleaved": False,
        "rotary_scaling_factor": None,
        "qkv_proj_bias": False,
        "mlp_fc1_bias": False,
        "mlp_fc2_bias": False,
        "prenorm": False,
        "use_rms_norm": False,
        "causal": False,
    }
    edit_config(directory, drop=(*names, "hidden_act", "rope_parameters", "head_dim"), **gpt2)
    assert read_config(directory / "config.json") == new
    for key, value in (
        ("prenorm", True),
        ("rotary_emb_interleaved", True),
        ("rotary_scaling_factor", 2.0),
        ("activation_function", "gelu"),
    ):
        edit_config(directory, **{key: value})
        with pytest.raises(ValueError, match=f"{key}|{value}"):
            numbert.load(directory)
        edit_config(directory, **{key: gpt2[key]})


def test_gte_s_remote_code_config_reads_and_its_ntk_is_refused(tmp_path):
    directory = copy_fixture(tmp_path, "gte-ForMaskedLM")
    new = read_config(directory / "config.json")
    edit_config(
        directory,
        drop=("rope_parameters",),
        model_type="new",
        architectures=["NewForMaskedLM"],
        rope_theta=500000.0,
        rope_scaling=None,
        position_embedding_type="rope",
        pack_qkv=True,
    )
    old = read_config(directory / "config.json")
    assert old.model_type == "new" and (old.rope, old.biases, old.layer_types) == (
        new.rope,
        new.biases,
        new.layer_types,
    )
    edit_config(directory, rope_scaling={"type": "ntk", "factor": 2.0})
    with pytest.raises(ValueError, match="rope type 'ntk' .*transformers' GteModel.*default, linear, dynamic, yarn"):
        numbert.load(directory)


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}}, ["longrope", "batch-mates"]),
        ({"rope_parameters": {"rope_type": "mrope", "rope_theta": 1e4}}, ["unknown rope type 'mrope'"]),
        ({"rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.5}}, ["partial_rotary_factor 0.5"]),
        ({"rope_parameters": {"rope_type": "linear", "rope_theta": 1e4}}, ["'linear' needs 'factor'"]),
        ({"layer_types": ["full_attention", "chunked_attention", "full_attention"]}, ["unknown layer type"]),
        ({"layer_types": ["full_attention"]}, ["layer_types", "each of the 3 layers"]),
        ({"intermediate_size": 48}, ["'encoder.layer.0.intermediate.dense.weight' ('nomic_bert"]),
        ({"model_type": "deberta-v2"}, ["'deberta-v2'", "modernbert, nomic_bert, gte, new, jina_embeddings_v3"]),
        (  # nomic-embed-text-v2-moe's config: transformers 5 has no NomicBERT mixture of experts
            {"moe_every_n_layers": 2, "num_experts": 8, "moe_top_k": 2},
            ["config.json: a NomicBERT with mixture-of-experts", "nomic-embed-text-v2-moe", "num_experts 8"],
        ),
    ],
)
def test_configs_numbert_cannot_run_are_refused_naming_what(tmp_path, changes, words):
    name = "modernbert-ForMaskedLM" if "layer_types" in changes else "nomic_bert-ForMaskedLM"
    directory = copy_fixture(tmp_path, name)
    edit_config(directory, **changes)
    with pytest.raises(ValueError) as e:
        numbert.load(directory)
    for word in words:
        assert word in str(e.value), str(e.value)


def test_modernbert_s_token_heads_are_refused_not_misread():
    model = numbert.load(FIXTURES / "modernbert-ForSequenceClassification")
    with pytest.raises(ValueError, match="ModernBertForTokenClassification's head .* is not built"):
        model.ner("a b")


# ----------------------------------------------------------------------------------------------
# a long text on a ModernBERT of real sizes

MEASURE = """
import sys
import numpy as np
import numbert
model = numbert.load(sys.argv[1])
ids = np.load(sys.argv[2])
np.save(sys.argv[3], model.forward(ids).last_hidden_state)
status = open("/proc/self/status").read()  # VmHWM: this program's peak (ru_maxrss keeps the parent's across exec)
print(int(status.split("VmHWM:")[1].split()[0]) * 1024)
"""


@pytest.mark.parity
def test_a_4096_token_text_on_a_modernbert_of_real_sizes_in_under_1_gb(tmp_path, transformers, torch):
    """Hidden 768, 12 heads, ModernBERT-base's vocabulary and window, three layers (global, sliding, sliding): a
    4,096-token text runs in a process of its own under 1 GB of peak RSS and equals transformers' sdpa within 1e-4
    (scripts/bench_long.py measures the full 22 layers at 512, 2,048 and 8,192 tokens)."""
    import subprocess
    import sys

    config = transformers.ModernBertConfig(num_hidden_layers=3, **MODERNBERT_IDS, attn_implementation="sdpa")
    torch.manual_seed(0)
    reference_model = transformers.ModernBertModel(config).eval()
    reference_model.save_pretrained(tmp_path / "model")
    ids = np.random.default_rng(0).integers(5, config.vocab_size, (1, 4096))
    np.save(tmp_path / "ids.npy", ids)
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, tmp_path / "model", tmp_path / "ids.npy", tmp_path / "last.npy"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    peak = int(done.stdout.split()[-1])
    assert peak < 1 << 30, f"peak RSS {peak / 2**20:.0f} MiB"
    with torch.no_grad():
        want = reference_model(torch.tensor(ids)).last_hidden_state.numpy()[0]
    np.testing.assert_allclose(np.load(tmp_path / "last.npy")[0], want, atol=1e-4, rtol=0)
