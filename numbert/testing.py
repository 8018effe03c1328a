"""Deterministic random BERT checkpoints, for tests, benchmarks and docs that must run without a hub."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from .checkpoint import tensor_shapes
from .config import BertConfig
from .heads import pre_training_shapes


def random_weights(config: BertConfig, seed: int = 0, heads: bool = False) -> dict[str, np.ndarray]:
    """BERT-initialised float32 weights: N(0, 0.02) matrices and biases, LayerNorm gains near 1.

    With heads, the two pre-training heads follow the encoder (whose weights they leave as they are).
    """
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in (tensor_shapes(config) | (pre_training_shapes(config) if heads else {})).items():
        w = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        if "LayerNorm.weight" in name:
            w += np.float32(1.0)
        weights[name] = w
    return weights


def write_random_bert(directory: str | Path, vocab_path: str | Path, config: BertConfig = BertConfig(),
                      seed: int = 0) -> Path:
    """Write config.json, vocab.txt and model.safetensors of a random BERT into `directory`, with the two
    pre-training heads (masked LM, next sentence) as the published bert-base-uncased has them."""
    from safetensors.numpy import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config_json = config.to_dict() | {"architectures": ["BertForPreTraining"]}
    (directory / "config.json").write_text(json.dumps(config_json, indent=2) + "\n", encoding="utf-8")
    shutil.copyfile(vocab_path, directory / "vocab.txt")
    save_file(random_weights(config, seed, heads=True), str(directory / "model.safetensors"))
    return directory
