"""Find a model's files: a local directory as it is, or a Hugging Face hub id through the HF cache.

Only the files numbert reads are fetched: config, tokenizer files, the sentence-transformers
description (when there is one) and ONE weight file (model.safetensors, else pytorch_model.bin).
huggingface_hub does the work, so the usual cache, `HF_HOME`, `HF_HUB_CACHE` and
`HF_HUB_OFFLINE=1` all behave as they do for transformers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .checkpoint import WEIGHT_FILES

TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
MODEL_FILES = ("modules.json", "sentence_bert_config.json")  # besides config.json, fetched first


def model_dir(
    name_or_path: str | os.PathLike,
    *,
    weights: bool = True,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """A local directory holding the model's files: the path itself, or the hub id's snapshot.

    With `weights=False` only config.json and the tokenizer files are fetched (enough for `Tokenizer`).
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"a model name or path must be a str or path, not {type(name_or_path).__name__}")
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    name = str(name_or_path)
    if path.exists():
        raise FileNotFoundError(f"{name!r} is a file, not a model directory")
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise FileNotFoundError(f"{name!r} is not a model directory (no such directory)")
    return _download(name, weights, revision, cache_dir)


def _download(repo_id: str, weights: bool, revision: str | None, cache_dir) -> Path:
    """Fetch the files numbert needs from `repo_id` into the HF cache; return the snapshot directory."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    def fetch(filename: str) -> Path | None:
        """The cached file, or None when the repo has no such file."""
        try:
            return Path(hf_hub_download(repo_id, filename, revision=revision, cache_dir=cache_dir))
        except EntryNotFoundError:  # also LocalEntryNotFoundError: offline, a file never cached counts as absent
            return None

    try:
        config = Path(hf_hub_download(repo_id, "config.json", revision=revision, cache_dir=cache_dir))
    except HFValidationError as e:
        raise ValueError(f"{repo_id!r} is neither a model directory nor a valid hub id: {e}") from None
    except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: caught first
        raise OSError(
            f"cannot load model {repo_id!r}: it is not a local directory, it is not in the Hugging Face "
            f"cache, and the hub could not be reached"
            + (" (HF_HUB_OFFLINE is set)" if constants.is_offline_mode() else "")
        ) from None
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise OSError(f"cannot load model {repo_id!r}: {type(e).__name__}: {e}") from None
    except EntryNotFoundError:
        raise FileNotFoundError(f"model {repo_id!r} on the hub has no config.json") from None

    files = [*TOKENIZER_FILES, *MODEL_FILES] if weights else list(TOKENIZER_FILES)
    for filename in files:
        fetch(filename)
    modules = config.parent / "modules.json"
    if weights and modules.is_file():  # sentence-transformers: each module's own config
        for module in json.loads(modules.read_text(encoding="utf-8")):
            if module.get("path"):
                fetch(f"{module['path']}/config.json")
    if weights and not any(fetch(f) for f in WEIGHT_FILES):
        raise FileNotFoundError(f"model {repo_id!r} has neither {' nor '.join(WEIGHT_FILES)}")
    return config.parent
