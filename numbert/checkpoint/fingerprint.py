"""A model's fingerprint: the SHA-256 of every file its vectors depend on, by file name.

A long job (`numbert encode --shard-lines`) records it in its manifest and refuses to resume when it
differs, naming the file: the same hub name or directory can hold other weights tomorrow, and one
changed shard of a sharded checkpoint would otherwise mix two models' vectors in one output.

The files: the encoder's checkpoint (its weight file, or a shard index and every shard, or a
TensorFlow `.index` and every `.data-*` shard) and its config; the tokenizer's files; the
sentence-transformers description (modules.json and its settings), each module's config.json and a
Dense module's weights; BGE-M3's two heads. Each is named relative to the model directory (`2_Dense/model.safetensors`).
"""

from __future__ import annotations

import os
from pathlib import Path

from .hub import MODEL_FILES, TOKENIZER_FILES, VOCAB_FILES, model_checkpoint
from .m3_heads import M3_HEAD_FILES
from .sentence_config import sentence_modules
from .weights import Checkpoint, sha256_by_name


def model_fingerprint(name_or_path: str | os.PathLike) -> dict[str, str]:
    """{file name relative to the model directory: SHA-256} of every file the model's vectors depend on.

    `name_or_path` is what numbert.load takes: a directory, a TensorFlow prefix, an archive or a hub id.
    """
    checkpoint = model_checkpoint(name_or_path)
    return checkpoint.fingerprint() | sha256_by_name(checkpoint.directory, beside_checkpoint(checkpoint.directory))


def beside_checkpoint(directory: Path) -> list[Path]:
    """The files of the model in `directory` besides its checkpoint that make its vectors, those that
    exist: the tokenizer's, the sentence-transformers description, each module's config and a Dense
    module's weights."""
    files = [directory / name for name in (*TOKENIZER_FILES, *VOCAB_FILES, *MODEL_FILES, *M3_HEAD_FILES)]
    for path, kind in sentence_modules(directory) or []:
        files.append(directory / path / "config.json")
        if kind == "Dense":
            files.extend(Checkpoint.find(directory / path).files)
    return [file for file in dict.fromkeys(files) if file.is_file()]
