"""model_dir: local directories, the Hugging Face cache offline (cache_dir and HF_HOME), and its refusals."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import zipfile
from types import SimpleNamespace

import huggingface_hub
import huggingface_hub.constants
import numpy as np
import pytest
from helpers import fake_hub
from safetensors.numpy import save

from numbert.checkpoint.hub import model_dir
from numbert.checkpoint.model_config import read_config
from numbert.checkpoint.weights import load_weights
from numbert.model.config import BertConfig
from numbert.testing import random_weights

SMALL = BertConfig(
    vocab_size=8,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=8,
)
COMMIT = "0123456789abcdef0123456789abcdef01234567"
VOCAB = "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s"]) + "\n"


def model_files(weights: bool = True, weight_file: str = "model.safetensors") -> dict[str, bytes]:
    files = {"config.json": json.dumps(SMALL.to_dict()).encode(), "vocab.txt": VOCAB.encode()}
    if weights:
        files[weight_file] = save(random_weights(SMALL))
    return files


def fake_hf_cache(cache, repo_id: str, files: dict[str, bytes], commit: str = COMMIT, ref: str = "main"):
    """The layout huggingface_hub writes: blobs by hash, snapshot symlinks, and refs/<ref> holding the commit."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / ref).write_text(commit)  # no newline, as huggingface_hub writes it
    return snapshot


@pytest.fixture
def offline(monkeypatch):
    """HF_HUB_OFFLINE=1 for this test. huggingface_hub reads the variable once, at import, into
    `constants.HF_HUB_OFFLINE`, and checks that constant before every request, so patch the constant."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def test_local_directory_resolves_as_itself(tmp_path):
    for name, data in model_files().items():
        (tmp_path / name).write_bytes(data)
    assert model_dir(tmp_path) == tmp_path
    assert model_dir(str(tmp_path), weights=False) == tmp_path


def test_hf_cache_resolves_offline_with_cache_dir(tmp_path, offline):
    snapshot = fake_hf_cache(tmp_path, "org/name", model_files())
    directory = model_dir("org/name", cache_dir=tmp_path)
    assert directory == snapshot
    weights = load_weights(directory, read_config(directory / "config.json"))
    np.testing.assert_array_equal(weights["pooler.dense.weight"], random_weights(SMALL)["pooler.dense.weight"])


def test_hf_cache_resolves_revisions_offline(tmp_path, offline):
    snapshot = fake_hf_cache(tmp_path, "org/name", model_files(), ref="v1")
    assert model_dir("org/name", revision="v1", cache_dir=tmp_path) == snapshot
    assert model_dir("org/name", revision=COMMIT, cache_dir=tmp_path) == snapshot
    with pytest.raises(OSError, match="could not be reached"):
        model_dir("org/name", revision="v2", cache_dir=tmp_path)


def test_hf_home_is_honoured_in_a_fresh_process(tmp_path):
    """HF_HOME is read when huggingface_hub is imported, so only a fresh process tests it truthfully."""
    snapshot = fake_hf_cache(tmp_path / "home" / "hub", "org/name", model_files())
    env = os.environ | {"HF_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    env.pop("HUGGINGFACE_HUB_CACHE", None)
    result = subprocess.run(
        [sys.executable, "-c", "from numbert.checkpoint.hub import model_dir; print(model_dir('org/name'))"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(snapshot)


def test_weights_false_needs_only_tokenizer_files(tmp_path, offline):
    snapshot = fake_hf_cache(tmp_path, "org/name", model_files(weights=False))
    assert model_dir("org/name", weights=False, cache_dir=tmp_path) == snapshot
    with pytest.raises(OSError, match="cannot load model 'org/name'.*could not be reached .HF_HUB_OFFLINE is set"):
        model_dir("org/name", cache_dir=tmp_path)  # offline, the weights were never fetched (not known absent)


def test_pytorch_model_bin_alone_is_enough(tmp_path, offline):
    snapshot = fake_hf_cache(tmp_path, "org/name", model_files(weight_file="pytorch_model.bin"))
    assert model_dir("org/name", cache_dir=tmp_path) == snapshot


def test_unknown_hub_id_offline_names_the_id(tmp_path, offline):
    with pytest.raises(OSError) as e:
        model_dir("nobody/no-such-model", cache_dir=tmp_path)
    assert "'nobody/no-such-model'" in str(e.value)
    assert "the hub could not be reached" in str(e.value) and "HF_HUB_OFFLINE" in str(e.value)


@pytest.mark.parametrize("name", ["./no-such-dir", "/no/such/dir", "~/no-such-dir-numbert", "a/b/c"])
def test_path_like_names_that_do_not_exist_are_not_hub_ids(name):
    with pytest.raises(FileNotFoundError, match="not a model directory"):
        model_dir(name)


def test_a_file_is_not_a_model_directory(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="is a file"):
        model_dir(tmp_path / "config.json")


def test_invalid_hub_id_and_wrong_type(offline):
    with pytest.raises(ValueError, match="neither a model directory nor a valid hub id"):
        model_dir("org/bad name!")
    with pytest.raises(TypeError):
        model_dir(42)


def test_only_the_files_numbert_reads_are_downloaded(tmp_path, monkeypatch):
    """A sentence-transformers repo: config, tokenizer, module configs, and ONE weight file."""
    repo = {
        **model_files(),
        "pytorch_model.bin": b"",
        "tf_model.h5": b"",
        "onnx/model.onnx": b"",
        "modules.json": json.dumps(
            [
                {"path": ""},
                {"path": "1_Pooling"},
                {"path": "2_Dense", "type": "sentence_transformers.models.Dense"},
                {"path": "3_Normalize"},
            ]
        ).encode(),
        "1_Pooling/config.json": b"{}",
        "tokenizer_config.json": b"{}",
        "2_Dense/config.json": b"{}",
        "2_Dense/model.safetensors": b"",
        "2_Dense/pytorch_model.bin": b"",
    }
    requested = fake_hub(monkeypatch, repo, tmp_path)
    assert model_dir("org/st-model") == tmp_path
    assert set(requested) == {
        "config.json",
        "vocab.txt",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "colbert_linear.pt",  # BGE-M3's heads, asked for (absent here: not a BGE-M3 repo)
        "sparse_linear.pt",
        "1_Pooling/config.json",
        "2_Dense/config.json",
        "2_Dense/model.safetensors",
        "3_Normalize/config.json",
        "model.safetensors",
    }
    requested.clear()
    model_dir("org/st-model", weights=False)
    assert set(requested) == {"config.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"}


def test_cached_model_loads_at_once_when_the_hub_does_not_answer(tmp_path, monkeypatch):
    """No HF_HUB_OFFLINE, but nothing listens at the endpoint: one failed request, then only the cache
    (huggingface_hub alone would retry each file for about 20 s)."""
    snapshot = fake_hf_cache(tmp_path, "org/name", model_files())
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused
    monkeypatch.setattr(
        huggingface_hub.constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        "http://127.0.0.1:9/{repo_id}/resolve/{revision}/{filename}",
    )
    calls = []
    real = huggingface_hub.hf_hub_download

    def spy(*args, **kwargs):
        calls.append(kwargs.get("local_files_only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", spy)
    assert model_dir("org/name", cache_dir=tmp_path) == snapshot
    assert calls == []  # everything was in the cache: not even a download call, let alone a request
    (snapshot / "model.safetensors").unlink()  # now the cache is incomplete: one failed request, then the cache
    with pytest.raises(OSError, match=r"could not be reached \(http://127.0.0.1:9: "):
        model_dir("org/name", cache_dir=tmp_path)
    assert calls and all(calls)  # every file asked of the cache only, none of the hub
    with pytest.raises(OSError, match=r"not in the Hugging Face cache.*could not be reached \(http://127.0.0.1:9: "):
        model_dir("org/other", cache_dir=tmp_path)


# --- archives: only the model's files, bounded, nothing left of a refused one -----------------------------


@pytest.fixture
def archives(tmp_path, monkeypatch):
    """numbert's archive cache under tmp_path (empty until something is unpacked)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "numbert" / "archives"


def write_zip(path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def left_in(cache) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_an_archive_unpacks_only_the_model_files(tmp_path, archives):
    files = model_files() | {"1_Pooling/config.json": b"{}", "modules.json": b"[]"}
    extras = {"README.md": b"hi", "bert_model.ckpt.meta": b"graph", "logs/events.out": b"x", "a/b/c/vocab.txt": b"deep"}
    archive = write_zip(tmp_path / "model.zip", {f"m/{k}": v for k, v in (files | extras).items()})
    directory = model_dir(archive)
    kept = sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())
    assert kept == sorted(files) and (directory / "vocab.txt").read_bytes() == files["vocab.txt"]
    assert load_weights(directory, SMALL)  # the model loads from the unpacked copy


def test_a_zip_bomb_is_refused_by_the_declared_sizes_before_anything_is_written(tmp_path, archives):
    """2 MB of zeros deflate to 2 kB: a model file 1000 times its archive is no BERT checkpoint."""
    archive = write_zip(tmp_path / "bomb.zip", model_files(weights=False) | {"model.safetensors": bytes(2 << 20)})
    assert archive.stat().st_size < 10_000
    with pytest.raises(ValueError, match=r"bomb.zip: refusing to unpack it: with member 'model.safetensors' .*50 time"):
        model_dir(archive)
    assert left_in(archives) == []


def test_the_limit_and_the_free_disk_bound_the_unpacked_size(tmp_path, archives, monkeypatch):
    import numbert.checkpoint.hub

    archive = write_zip(tmp_path / "model.zip", model_files(), zipfile.ZIP_STORED)
    monkeypatch.setattr(numbert.checkpoint.hub, "UNPACK_LIMIT", 1000)
    with pytest.raises(
        ValueError, match=r"more than 1000 bytes, numbert's limit \(numbert.checkpoint.hub.UNPACK_LIMIT\)"
    ):
        model_dir(archive)
    assert left_in(archives) == []
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    free = numbert.checkpoint.hub.DISK_RESERVE + 100
    monkeypatch.setattr(numbert.checkpoint.hub.shutil, "disk_usage", lambda path: SimpleNamespace(free=free))
    with pytest.raises(ValueError, match=r"more than 100 bytes, the space free on the disk of .*/archives, less 1024"):
        model_dir(archive)
    assert left_in(archives) == []


def test_a_member_holding_more_than_it_declares_is_stopped_while_written(tmp_path):
    """zipfile and tarfile themselves read no more than a member declares; the copy checks it again."""
    from numbert.checkpoint.hub import _Budget, _Member, _write_members

    archive = write_zip(tmp_path / "small.zip", {"x": b""})
    liar = _Member("config.json", 10, "file", lambda: io.BytesIO(bytes(5 << 20)), read_through=False)
    with pytest.raises(ValueError, match=r"small.zip: member 'config.json' holds more than the 10 bytes it says"):
        _write_members(archive, [liar], tmp_path / "out", _Budget(archive, tmp_path))
    assert (tmp_path / "out" / "config.json").stat().st_size <= 10


def tar_with(path, member: tarfile.TarInfo, data: bytes = b""):
    with tarfile.open(path, "w:gz") as t:
        for name, content in model_files().items():
            info = tarfile.TarInfo(f"m/{name}")
            info.size = len(content)
            t.addfile(info, io.BytesIO(content))
        t.addfile(member, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    "kind, words",
    [
        (tarfile.SYMTYPE, "is a symbolic link; numbert unpacks folders and regular files only"),
        (tarfile.LNKTYPE, "is a hard link"),
        (tarfile.FIFOTYPE, "is a special file"),
    ],
)
def test_links_and_special_files_refuse_a_tar(tmp_path, archives, kind, words):
    member = tarfile.TarInfo("m/vocab2.txt")
    member.type, member.linkname = kind, "/etc/passwd"
    archive = tar_with(tmp_path / "model.tar.gz", member)
    with pytest.raises(ValueError, match=f"member 'm/vocab2.txt' {words}"):
        model_dir(archive)
    assert left_in(archives) == []


@pytest.mark.parametrize("name", ["../outside.json", "/etc/config.json", "m/../../config.json"])
def test_a_tar_member_leading_out_is_refused(tmp_path, archives, name):
    member = tarfile.TarInfo(name)
    member.size = 2
    with pytest.raises(ValueError, match="would be written outside the archive's folder"):
        model_dir(tar_with(tmp_path / "model.tgz", member, b"{}"))
    assert left_in(archives) == [] and not (tmp_path / "outside.json").exists()


def test_a_symbolic_link_in_a_zip_is_refused(tmp_path, archives):
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name, data in model_files().items():
            z.writestr(name, data)
        link = zipfile.ZipInfo("tokenizer.json")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(link, "/etc/passwd")
    with pytest.raises(ValueError, match="member 'tokenizer.json' is a symbolic link"):
        model_dir(archive)
    assert left_in(archives) == []


def test_a_tar_is_read_through_so_its_skipped_members_count(tmp_path, archives):
    member = tarfile.TarInfo("m/README.md")
    member.size = 2 << 20
    with pytest.raises(ValueError, match=r"with member 'm/README.md' \(2097152 bytes\)"):
        model_dir(tar_with(tmp_path / "model.tar.gz", member, bytes(2 << 20)))
    assert left_in(archives) == []


def test_an_archive_without_a_model_leaves_nothing_in_the_cache(tmp_path, archives):
    archive = write_zip(tmp_path / "notes.zip", {"vocab.txt": VOCAB.encode(), "notes.txt": b"x"})
    with pytest.raises(FileNotFoundError, match="notes.zip holds no model folder"):
        model_dir(archive)
    assert left_in(archives) == []


def test_a_killed_unpackings_scratch_is_removed_by_the_next_one(tmp_path, archives):
    """SIGKILL mid-unpack runs no `finally`: the next unpacking removes the dead process's scratch, not a
    live one's."""
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    archives.mkdir(parents=True)
    for pid in (int(ended.stdout), os.getpid()):
        (archives / f".unpacking-{pid}-abc").mkdir()
        (archives / f".unpacking-{pid}-abc" / "model.safetensors").write_bytes(b"half")
    model_dir(write_zip(tmp_path / "model.zip", model_files()))
    assert [p for p in left_in(archives) if p.startswith(".")] == [f".unpacking-{os.getpid()}-abc"]
