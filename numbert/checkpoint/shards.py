"""Checkpoints split into shards, listed by model.safetensors.index.json or pytorch_model.bin.index.json (a
`weight_map` from tensor name to shard file), and the reading of one weight file or shard by its kind.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from .json_file import read_object
from .safetensors_file import read_rows, read_safetensors
from .torch_zip import read_torch_bin


def read_weight_file(path: Path, skip: Collection[str] = ()) -> dict[str, np.ndarray]:
    """Every tensor of one weight file (or shard) by its stored name: a .safetensors file, else a torch .bin; those
    named in `skip` left out (a safetensors file does not read them at all)."""
    if path.name.endswith(".safetensors"):
        return read_safetensors(path, skip)
    return {name: tensor for name, tensor in read_torch_bin(path).items() if name not in skip}


def read_sharded(index: str | Path, skip: Collection[str] = ()) -> dict[str, np.ndarray]:
    """Every tensor of a checkpoint split into shards, by name, as `index` (its weight_map) lists them; those
    named in `skip` left out."""
    index = Path(index)
    weight_map = read_weight_map(index)
    tensors = {}
    for path in shard_paths(index, weight_map):
        for name, tensor in read_weight_file(path, skip).items():
            if name in tensors:
                raise ValueError(f"{index}: tensor {name!r} is in two shards (one of them {path.name!r})")
            tensors[name] = tensor
    for name, shard in weight_map.items():
        if name not in tensors and name not in skip:
            raise ValueError(f"{index} maps tensor {name!r} to shard {shard!r}, which does not hold it")
    return tensors


def read_weight_map(index: Path) -> dict[str, str]:
    """The weight_map of a shard index: each tensor's name -> the file name of the shard holding it."""
    weight_map = read_object(index).get("weight_map")
    if not (isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values())):
        raise ValueError(f"{index}: weight_map must be an object mapping each tensor name to a shard file name")
    for shard in sorted(set(weight_map.values())):
        if Path(shard).name != shard:
            raise ValueError(f"{index}: shard {shard!r} is not a file name in the checkpoint's directory")
    return weight_map


def shard_paths(index: Path, weight_map: dict[str, str]) -> list[Path]:
    """The shards `weight_map` lists, in `index`'s directory, by name; a missing one is an error naming it."""
    paths = []
    for shard in sorted(set(weight_map.values())):
        path = index.parent / shard
        if not path.is_file():
            example = next(name for name, s in weight_map.items() if s == shard)
            raise FileNotFoundError(
                f"{index} lists shard {shard!r} (holding {example!r}, among others), but {path} is missing"
            )
        paths.append(path)
    return paths


def read_tensor_rows(path: Path, name: str, rows: Sequence[int]) -> np.ndarray | None:
    """Rows of the 2-D tensor `name` of a weight file or a shard index, float32, reading only those rows from a
    safetensors file (a torch .bin: the tensor, then its rows); None when the checkpoint has no such tensor."""
    if path.name.endswith(".index.json"):
        shard = read_weight_map(path).get(name)
        if shard is None:
            return None
        path = path.parent / shard
    if path.name.endswith(".safetensors"):
        return read_rows(path, name, rows)
    tensor = read_torch_bin(path).get(name)
    return None if tensor is None else np.asarray(tensor[list(rows)], np.float32)
