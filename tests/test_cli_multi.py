"""`numbert encode --multi` (a ragged .npz with offsets, or a directory of one .npy per text) and `numbert search
--multi-index` (MaxSim over the dense search's candidates), on the committed PyLate ColBERT and all-MiniLM-L6-v2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_cli import one_error_line
from test_late_interaction import DOCUMENTS, PYLATE_DIR

import numbert

ROOT = Path(__file__).resolve().parent.parent


def run(*args, model: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m numbert ARGS` of this checkout (whichever numbert the environment has installed)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    if model is not None:
        env["NUMBERT_MODEL"] = str(model)
    command = [sys.executable, "-m", "numbert", *map(str, args)]
    return subprocess.run(command, capture_output=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple:
    root = tmp_path_factory.mktemp("multi")
    (root / "corpus.txt").write_text("\n".join(DOCUMENTS) + "\n", encoding="utf-8")
    return root, root / "corpus.txt"


def test_encode_multi_writes_each_texts_token_vectors(corpus):
    root, texts = corpus
    colbert = numbert.load(PYLATE_DIR)
    want = colbert.embed_multi(DOCUMENTS)
    assert run("encode", "--multi", "--file", str(texts), "-o", str(root / "d.npz"), model=PYLATE_DIR).returncode == 0
    with np.load(root / "d.npz") as npz:
        offsets, vectors = npz["offsets"], npz["vectors"]
    assert offsets.tolist() == np.cumsum([0, *map(len, want)]).tolist() and vectors.dtype == np.float32
    for i, w in enumerate(want):
        np.testing.assert_allclose(vectors[offsets[i] : offsets[i + 1]], w, atol=1e-6)
    done = run("encode", "--multi", "--query", "--file", str(texts), "-o", str(root / "q") + "/", model=PYLATE_DIR)
    assert done.returncode == 0, done.stderr
    queries = colbert.embed_multi(DOCUMENTS, is_query=True)
    for i, w in enumerate(queries):
        np.testing.assert_allclose(np.load(root / "q" / f"{i:09d}.npy"), w, atol=1e-6)
    again = run("encode", "--multi", "--file", str(texts), "-o", str(root / "q") + "/", model=PYLATE_DIR)
    assert "is not empty" in one_error_line(again)
    wrong = run("encode", "--multi", "--file", str(texts), "-o", str(root / "v.npy"), model=PYLATE_DIR)
    assert "--multi writes -o OUT.npz" in one_error_line(wrong)
    pooled = run("encode", "--multi", "--pooling", "cls", "x", "-o", str(root / "p.npz"), model=PYLATE_DIR)
    assert "--pooling does not apply to --multi" in one_error_line(pooled)


def test_search_rescores_the_dense_candidates_by_maxsim(corpus, minilm_dir, minilm):
    root, texts = corpus
    run("encode", "--file", str(texts), "-o", str(root / "dense.npy"), model=minilm_dir)
    run("encode", "--multi", "--file", str(texts), "-o", str(root / "tokens.npz"), model=PYLATE_DIR)
    query = "who plays the violin"
    args = ("search", query, "--index", str(root / "dense.npy"), "--texts", str(texts), "--json")
    multi = ("--multi-index", str(root / "tokens.npz"), "--multi-model", str(PYLATE_DIR), "--candidates", "3")
    done = run(*args, *multi, "--top-k", "2", model=minilm_dir)
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    dense = numbert.semantic_search(minilm.embed([query]), np.load(root / "dense.npy"), top_k=3)[0]
    colbert = numbert.load(PYLATE_DIR)
    q = colbert.embed_multi(query, is_query=True)
    scores = {h["corpus_id"]: numbert.maxsim(q, colbert.embed_multi(DOCUMENTS[h["corpus_id"]])) for h in dense}
    best = sorted(scores, key=lambda i: -scores[i])[:2]
    assert [h["corpus_id"] for h in hits] == best and hits[0]["text"] == DOCUMENTS[best[0]]
    assert hits[0]["score"] == pytest.approx(scores[best[0]], abs=1e-4)
    plain = run(*args, "--multi-index", str(root / "tokens.npz"), model=minilm_dir)
    assert "needs a multi-vector model" in one_error_line(plain)
