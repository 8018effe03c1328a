"""Deterministic random BERT checkpoints, for tests, benchmarks and docs that must run without a hub."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from .checkpoint import tensor_shapes
from .config import BertConfig


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
