"""mmBERT (jhu-clsp/mmBERT-base: multilingual ModernBERT) from text: ModernBERT's architecture with Gemma's tokenizer
(tests/fixtures/gemma_bpe.json, tests/test_tokenizer_gemma_qwen.py) and its config's own values: pad 0, eos = sep 1,
bos = cls 2 (<bos> $A <eos>), rope theta 160,000 on the sliding layers as on the global ones (ModernBERT-base: 10,000),
8,192 positions, a vocabulary of 256,000 (here the small tokenizer's). A random-weight checkpoint saved by
transformers' ModernBertModel, read by numbert.load from the directory and run from text: every hidden state within
1e-5 of transformers' (eager and sdpa) on the ids transformers' own tokenizer gives, in both config shapes in
circulation (transformers 5's rope_parameters, and mmBERT-base's hub file: global_rope_theta, local_rope_theta); a
sentence-transformers directory over it (mean pooling, Normalize) equal to SentenceTransformer.encode."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import numbert

FIXTURES = Path(__file__).parent / "fixtures"
ATOL = 1e-5
TEXTS = [
    "Hello  world, 日本語 and Ελληνικά <start_of_turn>x",  # characters outside the vocabulary: byte fallback
    "The quick brown fox jumps over the lazy dog. " * 3,  # longer than the window of +-4 tokens
    "é",
    "  leading\n\nand trailing  ",
]
ROPE = {"rope_type": "default", "rope_theta": 160000.0}
MMBERT = dict(  # jhu-clsp/mmBERT-base's config.json, but for the sizes
    pad_token_id=0,
    eos_token_id=1,
    bos_token_id=2,
    cls_token_id=2,
    sep_token_id=1,
    max_position_embeddings=8192,
    rope_parameters={"full_attention": ROPE, "sliding_attention": ROPE},
    local_attention=8,  # (128 in mmBERT-base) a window shorter than the longer texts
)
SIZES = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=40)
HUB_KEYS = dict(global_rope_theta=160000.0, local_rope_theta=160000.0, global_attn_every_n_layers=3)


def gemma_tokenizer(transformers):
    from tokenizers import Tokenizer as RustTokenizer

    backend = RustTokenizer.from_file(str(FIXTURES / "gemma_bpe.json"))
    names = dict(bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, cls_token="<bos>", sep_token="<eos>", **names)


@pytest.fixture(scope="module")
def mmbert(tmp_path_factory, transformers, torch):
    """A factory: mmbert(implementation) -> (directory, torch model, transformers tokenizer), each made once."""
    made = {}

    def make(implementation: str):
        if implementation not in made:
            directory = tmp_path_factory.mktemp(f"mmbert-{implementation}")
            tokenizer = gemma_tokenizer(transformers)
            config = transformers.ModernBertConfig(vocab_size=len(tokenizer), **SIZES, **MMBERT)
            config._attn_implementation = implementation
            torch.manual_seed(0)
            model = transformers.ModernBertModel(config).eval()
            with torch.no_grad():
                for parameter in model.parameters():
                    if parameter.dim() == 1:  # norms off their initial ones
                        parameter.add_(torch.randn_like(parameter) * 0.1)
            model.save_pretrained(directory)
            tokenizer.save_pretrained(directory)
            made[implementation] = directory, model, tokenizer
        return made[implementation]

    return make


def assert_hidden_states_match(torch, directory: Path, reference, tokenizer) -> None:
    model = numbert.load(directory)
    assert model.config.model_type == "modernbert"
    ours = model(TEXTS)
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    np.testing.assert_array_equal(ours.input_ids, batch["input_ids"].numpy())  # <bos> ... <eos>, padded with 0
    with torch.no_grad():
        theirs = reference(**batch, output_hidden_states=True).hidden_states
    mask = batch["attention_mask"].numpy().astype(bool)
    assert len(ours.hidden_states) == len(theirs) == 4
    for layer, hidden in enumerate(theirs):
        diff = float(np.abs(ours.hidden_states[layer][mask] - hidden.numpy()[mask]).max())
        assert diff <= ATOL, (layer, diff)


@pytest.mark.parity
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_hidden_states_from_text_match_transformers(mmbert, torch, implementation):
    directory, reference, tokenizer = mmbert(implementation)
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    assert config["rope_parameters"]["sliding_attention"]["rope_theta"] == 160000.0
    assert_hidden_states_match(torch, directory, reference, tokenizer)


@pytest.mark.parity
def test_mmbert_base_s_hub_config_keys(mmbert, transformers, torch, tmp_path):
    """mmBERT-base's config.json (written by transformers 4.48): global_rope_theta, local_rope_theta 160,000 and
    global_attn_every_n_layers instead of rope_parameters and layer_types; numbert reads it as transformers 5 does."""
    import shutil

    directory, _, tokenizer = mmbert("eager")
    hub = tmp_path / "mmbert-hub"
    shutil.copytree(directory, hub)
    config = json.loads((hub / "config.json").read_text(encoding="utf-8"))
    for key in ("rope_parameters", "layer_types"):
        config.pop(key, None)
    (hub / "config.json").write_text(json.dumps({**config, **HUB_KEYS}), encoding="utf-8")
    reference = transformers.ModernBertModel.from_pretrained(hub, attn_implementation="eager").eval()
    assert reference.config.rope_parameters["sliding_attention"]["rope_theta"] == 160000.0
    assert_hidden_states_match(torch, hub, reference, tokenizer)


@pytest.mark.parity
def test_a_sentence_transformers_directory_over_mmbert(mmbert, torch, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st_modules

    directory, _, _ = mmbert("sdpa")
    word = st_modules.Transformer(str(directory), max_seq_length=16)
    st_model = SentenceTransformer(
        modules=[word, st_modules.Pooling(32, pooling_mode="mean"), st_modules.Normalize()], device="cpu"
    )
    st_model.save(str(tmp_path / "st"))
    got = numbert.load(tmp_path / "st").embed(TEXTS, progress=False)
    np.testing.assert_allclose(got, st_model.encode(TEXTS), atol=ATOL, rtol=0)
