"""Read BERT weights from a checkpoint into NumPy arrays named as a bare transformers `BertModel`.

Four formats, none needs torch or TensorFlow, each read by a module of its own: model.safetensors
(`safetensors_file`), pytorch_model.bin (`torch_zip`), either split into shards listed by an index (`shards`),
and Google's TensorFlow checkpoints (`tf_names` over `tf_bundle`).

`Checkpoint.find(path)` is the one place that tells these formats apart: it records which format a
directory (or TensorFlow prefix) holds and every file holding its weights, an index with each of
its shards; `read()` returns the tensors, `fingerprint()` the SHA-256 of each file (a long job
compares it to know it still runs the same weights).

Names are then normalised (`bert.` prefix, legacy LayerNorm `gamma`/`beta`, buffers) and every
tensor the config needs is checked for presence, shape and dtype before anything runs. The task heads'
tensors come along (numbert.model.heads checks them when a task first uses them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

import numpy as np

from ..model.config import CONFIG_FILES, BertConfig
from ..model.tensors import POOLER, POOLER_NAME, bert_name, tensor_shapes
from . import tf_bundle
from .shards import read_sharded, read_tensor_rows, read_weight_file, read_weight_map, shard_paths
from .tensor_bytes import read_only
from .tf_names import read_tf_checkpoint

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # the files numbert reads weights from, in this order

# pre-training heads (cls.*, a family member's masked-LM head renamed so); fine-tuning heads (DistilBERT's)
HEAD_PREFIXES = (
    "cls.",
    "classifier.",
    "qa_outputs.",
    "pre_classifier.",
    "head.",
    "score.",
)  # head.: ModernBERT's prediction head; score.: a decoder's sequence classifier (Qwen3ForSequenceClassification)
UNEMBEDDING = "lm_head.weight"  # a causal LM's (vocab, hidden) output matrix: never read whole (`Checkpoint.rows`)
BUFFER_SUFFIXES = ("position_ids", "token_type_ids")  # index buffers some checkpoints save
SHARD_INDEXES = tuple(f"{name}.index.json" for name in WEIGHT_FILES)  # weight_map -> shards, for large checkpoints
FORMATS = {  # the file a checkpoint is found by -> its format
    "model.safetensors": "safetensors",
    "pytorch_model.bin": "pytorch",
    "model.safetensors.index.json": "sharded safetensors",
    "pytorch_model.bin.index.json": "sharded pytorch",
}
TENSORFLOW = "tensorflow"  # the format of a checkpoint found by its `.index` (Google's, read by tf_bundle)


def load_weights(
    path: str | Path | Checkpoint, config: BertConfig, *, verify_crc: bool = True, check_finite: bool = False
) -> dict[str, np.ndarray]:
    """Weights of the BERT encoder at `path`, by bare `BertModel` name, float32, read-only.

    `path` is a Checkpoint, or where `Checkpoint.find` finds one: a model directory or a TensorFlow
    checkpoint prefix (`.../bert_model.ckpt`). A directory is read from model.safetensors, else
    pytorch_model.bin, else their sharded forms, else a TensorFlow checkpoint (the one its
    `checkpoint` file names). The keys are those of `tensor_shapes(config)`, less the pooler's if
    the checkpoint has neither of them, then the heads'
    (names starting with HEAD_PREFIXES); each encoder tensor is checked for presence and shape first,
    so a checkpoint that disagrees with its config fails here, naming the tensor, rather than
    mid-forward. A TensorFlow checkpoint's per-tensor CRC-32C is checked unless verify_crc=False
    (faster with `pip install google-crc32c`); sizes and bounds are always checked. With `check_finite`, a tensor
    holding NaN or infinity is refused too, by name (this reads every page of the file).
    """
    source, raw = read_checkpoint(path, verify_crc=verify_crc, skip=(UNEMBEDDING,))
    weights = _check_weights(normalise_names(raw, config), config, source, raw_names=list(raw))
    if check_finite:
        for name, tensor in weights.items():
            _check_finite(source, name, tensor)
    return weights


def read_checkpoint(
    path: str | Path | Checkpoint, *, verify_crc: bool = True, skip: Collection[str] = ()
) -> tuple[Path, dict[str, np.ndarray]]:
    """(the file to name in errors, every tensor by its transformers name, but those named in `skip`) of the
    checkpoint at `path`."""
    checkpoint = path if isinstance(path, Checkpoint) else Checkpoint.find(path)
    return checkpoint.path, checkpoint.read(verify_crc=verify_crc, skip=skip)


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A checkpoint on disk, as `Checkpoint.find` finds it: its format and every file holding its weights.

    format: a value of FORMATS, or TENSORFLOW.
    files: every file holding weights, the one to name in errors first: the weight file; or a shard
        index, then each shard its weight_map lists; or a TensorFlow `.index`, then each `.data-*` shard.
    config_file: config.json, else Google's bert_config.json, beside the weights; None if neither is there.
    """

    format: str
    files: tuple[Path, ...]
    config_file: Path | None

    @classmethod
    def find(cls, path: str | os.PathLike) -> Checkpoint:
        """The checkpoint at `path`: a model directory, or a TensorFlow checkpoint prefix
        (`.../bert_model.ckpt`, as `--init_checkpoint` names it) or its `.index` file.

        A directory's is model.safetensors, else pytorch_model.bin, else the index of their shards,
        else the TensorFlow checkpoint its `checkpoint` file names (or its only one). A shard that an
        index lists and the directory lacks is an error naming it.
        """
        prefix = tf_bundle.prefix_of(path)
        found = weight_file(path) if prefix is None else tf_bundle.index_path(prefix)
        config = next((found.parent / name for name in CONFIG_FILES if (found.parent / name).is_file()), None)
        if found.name in SHARD_INDEXES:
            return cls(FORMATS[found.name], (found, *shard_paths(found, read_weight_map(found))), config)
        if found.name in FORMATS:
            return cls(FORMATS[found.name], (found,), config)
        prefix = found.with_name(found.name.removesuffix(".index"))  # a TensorFlow checkpoint's `.index`
        num_shards, _ = tf_bundle.read_index(prefix)
        return cls(TENSORFLOW, (found, *tf_bundle.data_shards(prefix, num_shards)), config)

    @property
    def path(self) -> Path:
        """The file to name in errors: the weight file, the shard index, or the TensorFlow `.index`."""
        return self.files[0]

    @property
    def directory(self) -> Path:
        """The model directory the checkpoint is in."""
        return self.path.parent

    @property
    def location(self) -> Path:
        """The path that finds this checkpoint again: a TensorFlow checkpoint's prefix (its directory
        may hold others), else the directory."""
        if self.format == TENSORFLOW:
            return self.path.with_name(self.path.name.removesuffix(".index"))
        return self.directory

    def read(self, *, verify_crc: bool = True, skip: Collection[str] = ()) -> dict[str, np.ndarray]:
        """Every tensor, by its transformers name, but those named in `skip` (left unread where the format allows);
        `verify_crc` is for TensorFlow checkpoints (see load_weights)."""
        if self.format == TENSORFLOW:
            return {k: v for k, v in read_tf_checkpoint(self.location, verify_crc=verify_crc).items() if k not in skip}
        if self.path.name in SHARD_INDEXES:
            return read_sharded(self.path, skip)
        return read_weight_file(self.path, skip)

    def rows(self, name: str, rows: Sequence[int]) -> np.ndarray | None:
        """Rows of the 2-D tensor `name` (by its name in the file), float32, only those rows read from a
        safetensors checkpoint; None when the checkpoint has no such tensor. (len(rows), columns)"""
        if self.format == TENSORFLOW:
            return None
        return read_tensor_rows(self.path, name, rows)

    def fingerprint(self) -> dict[str, str]:
        """{name relative to the directory: SHA-256} of each of its files and of its config file."""
        config = [self.config_file] if self.config_file else []
        return sha256_by_name(self.directory, [*self.files, *config])


def weight_file(directory: str | os.PathLike) -> Path:
    """The weight file numbert reads in `directory`: model.safetensors, else pytorch_model.bin, else the
    index of their shards, else the `.index` of a TensorFlow checkpoint."""
    directory = Path(directory)
    for name in (*WEIGHT_FILES, *SHARD_INDEXES):
        if (directory / name).is_file():
            return directory / name
    prefix = tf_bundle.latest_checkpoint(directory) if directory.is_dir() else None
    if prefix is not None:
        return tf_bundle.index_path(prefix)
    raise FileNotFoundError(
        f"{directory} has no weight file: neither {', '.join(WEIGHT_FILES + SHARD_INDEXES)} "
        f"nor a TensorFlow checkpoint (*.index)"
    )


def sha256_by_name(directory: Path, files: Iterable[Path]) -> dict[str, str]:
    """{name relative to `directory`, with `/`: SHA-256} of each of `files`, JSON-serialisable."""
    fingerprint = {}
    for path in files:
        with open(path, "rb") as f:
            fingerprint[path.relative_to(directory).as_posix()] = hashlib.file_digest(f, "sha256").hexdigest()
    return fingerprint


def normalise_names(weights: dict, config: BertConfig = BertConfig()) -> dict:
    """The same tensors under bare `BertModel` names, buffers dropped; a family member's (config.model_type) renamed
    to BERT's (tensors.bert_name).

    `bert.embeddings.LayerNorm.gamma` (the published bert-base-uncased) and
    `embeddings.LayerNorm.weight` (sentence-transformers) both become the latter, and so do the heads'
    LayerNorms (`cls.predictions.transform.LayerNorm.gamma`). Other extra tensors are kept;
    `load_weights` only picks the ones the encoder and its heads need.
    """
    normalised = {}
    for raw_name, tensor in weights.items():
        name = bert_name(raw_name, config)
        if name.endswith(BUFFER_SUFFIXES):
            continue
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
        if name in normalised:
            raise ValueError(
                f"two tensors in the checkpoint are both named {name!r} once normalised (one of them is {raw_name!r})"
            )
        normalised[name] = tensor
    return normalised


def _check_weights(
    weights: dict[str, np.ndarray], config: BertConfig, path: Path, raw_names: list[str]
) -> dict[str, np.ndarray]:
    """The tensors `config` needs, checked for presence, shape and dtype, then the heads', as float32.

    The checkpoint's layer count, read off its tensors' names, is checked against the config's first:
    the expected names are built from num_hidden_layers, which a config.json could set to a million.
    """
    if not any(name.startswith(("embeddings.", "encoder.layer.")) for name in weights):
        raise ValueError(
            f"{path} holds none of the BERT encoder tensors numbert expects "
            f"(such as 'embeddings.word_embeddings.weight'); {_naming_of(raw_names)}"
        )
    _check_layer_count(weights, config, path)
    expected = tensor_shapes(config)
    if not any(name in weights for name in POOLER):  # the pooler's tensors, and its task adapters (jina)
        expected = {name: shape for name, shape in expected.items() if not name.startswith(POOLER_NAME + ".")}
    missing = [name for name in expected if name not in weights]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ValueError(f"{path} is missing tensor {missing[0]!r} (expected shape {expected[missing[0]]}){more}")
    checked = {}
    for name, shape in expected.items():
        if weights[name].shape != shape:
            own = next((raw for raw in raw_names if raw != name and bert_name(raw, config) == name), None)
            named = f"{name!r}" if own is None else f"{name!r} ({own!r} in the file)"  # a family member's own name
            raise ValueError(f"{path}: tensor {named} has shape {weights[name].shape}, config.json expects {shape}")
    for name in [*expected, *(name for name in weights if name.startswith(HEAD_PREFIXES))]:
        tensor = weights[name]
        if not np.issubdtype(tensor.dtype, np.floating):
            raise ValueError(f"{path}: tensor {name!r} has dtype {tensor.dtype}; BERT weights must be floating point")
        checked[name] = tensor if tensor.dtype == np.float32 else read_only(tensor.astype(np.float32))
    return checked


def _check_layer_count(weights: dict[str, np.ndarray], config: BertConfig, path: Path) -> None:
    """The checkpoint holds tensors of encoder layers 0 to num_hidden_layers - 1, each, and of no other:
    so num_hidden_layers is at most its number of tensors, and the names it expects cost no more."""
    layers = sorted({int(m[1]) for m in map(re.compile(r"encoder\.layer\.(\d{1,9})\.").match, weights) if m})
    count = 1 + max(layers, default=-1)
    if count != config.num_hidden_layers:
        raise ValueError(
            f"{path} holds {count} encoder layers but config.json's num_hidden_layers is "
            f"{config.num_hidden_layers}: the config does not describe this checkpoint"
        )
    gap = next((i for i, layer in enumerate(layers) if layer != i), None)
    if gap is not None:
        raise ValueError(f"{path} holds no tensor of encoder layer {gap}, though it holds layers up to {count - 1}")


def _check_finite(path: Path, name: str, tensor: np.ndarray) -> None:
    """Refuse a tensor holding NaN or +-inf. Either makes the float32 sum non-finite, so only then is
    each element looked at (a sum of huge finite values can overflow too)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(tensor.sum(dtype=np.float32)) or np.isfinite(tensor).all():
            return
    where = tuple(int(i) for i in np.argwhere(~np.isfinite(tensor))[0])
    raise ValueError(
        f"{path}: tensor {name!r} holds NaN or infinite values (the first, {tensor[where]}, "
        f"at index {where}); the checkpoint is damaged or was saved after training diverged"
    )


def _naming_of(names: list[str]) -> str:
    """How a checkpoint names its tensors, to explain why none of them is a BERT encoder tensor."""
    if not names:
        return "it holds no tensors at all"
    prefixes = sorted({re.split(r"[./]", name)[0] for name in names})
    shown = ", ".join(repr(p) for p in prefixes[:8]) + (", ..." if len(prefixes) > 8 else "")
    return (
        f"its tensors are named like {sorted(names)[0]!r} (top-level prefixes: {shown}); "
        f"is it a BERT checkpoint in transformers naming?"
    )
