"""Write the multi-vector fixtures that need PyLate or FlagEmbedding, neither of which runs beside the test
environment's torch and transformers (PyLate 1.6 pins transformers <= 5.3 and sentence-transformers 5.3;
FlagEmbedding 1.4 imports what transformers 5 removed), so each runs in a venv of its own:

  pylate   tests/fixtures/colbert_pylate/ (a tiny random BERT, tests/test_late_interaction.py's VOCABULARY, made a
           ColBERT and saved by PyLate's ColBERT.save: "[Q] " and "[D] " added, a 32 -> 16 Dense) and
           tests/fixtures/colbert_pylate_expected.npz (ColBERT.encode of the test's QUERIES and DOCUMENTS, for each
           of its VARIANTS of the saved settings, their MaxSim scores and rankings)
  bge-m3   tests/fixtures/bge_m3/ (a tiny random XLM-RoBERTa, the Unigram tokenizer of tests/fixtures/xlmr_spm.json,
           with colbert_linear.pt and sparse_linear.pt as FlagEmbedding's M3 model saves them) and
           tests/fixtures/bge_m3_expected.json (BGEM3FlagModel.encode with return_dense, return_sparse and
           return_colbert_vecs, and compute_score, of tests/test_m3.py's texts and pairs)

    python3 -m venv /tmp/venv-pylate && /tmp/venv-pylate/bin/pip install torch==2.13.0 transformers==5.3.0 \\
        sentence-transformers==5.3.0 scipy pandas datasets accelerate ujson pytest \\
        && /tmp/venv-pylate/bin/pip install --no-deps pylate==1.6.0
    HF_HUB_OFFLINE=1 /tmp/venv-pylate/bin/python scripts/make_multi_vector_fixtures.py pylate

    python3 -m venv /tmp/venv-flag && /tmp/venv-flag/bin/pip install torch==2.13.0 'transformers<5' \\
        'sentence-transformers<5.2' datasets accelerate peft sentencepiece protobuf pytest \\
        && /tmp/venv-flag/bin/pip install --no-deps FlagEmbedding==1.4.2 ir-datasets
    HF_HUB_OFFLINE=1 /tmp/venv-flag/bin/python scripts/make_multi_vector_fixtures.py bge-m3
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
import torch  # noqa: E402


def pylate() -> None:
    from dataclasses import replace

    from pylate import models
    from test_late_interaction import (
        PYLATE_DIR,
        PYLATE_EXPECTED,
        PYLATE_SETTINGS,
        TINY,
        VARIANTS,
        VOCABULARY,
        pylate_outputs,
        variant_directory,
    )

    from numbert.testing import write_random_bert

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        vocab = Path(tmp) / "vocab.txt"
        vocab.write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
        bert = write_random_bert(Path(tmp) / "bert", vocab, replace(TINY, vocab_size=len(VOCABULARY)), seed=3)
        shutil.rmtree(PYLATE_DIR, ignore_errors=True)
        models.ColBERT(str(bert), device="cpu", **PYLATE_SETTINGS).save(str(PYLATE_DIR))
        (PYLATE_DIR / "README.md").unlink(missing_ok=True)
        arrays = {}
        for variant in VARIANTS:
            directory = variant_directory(Path(tmp), variant)
            arrays |= {f"{variant}/{k}": v for k, v in pylate_outputs(torch, models.ColBERT, directory).items()}
    np.savez_compressed(PYLATE_EXPECTED, **arrays)
    size = sum(f.stat().st_size for f in PYLATE_DIR.rglob("*") if f.is_file())
    print(f"wrote {PYLATE_DIR} ({size / 1e3:.0f} kB) and {PYLATE_EXPECTED}")


def bge_m3() -> None:
    import json

    from test_m3 import M3_DIR, M3_EXPECTED, flagembedding_outputs, save_m3

    torch.manual_seed(0)
    shutil.rmtree(M3_DIR, ignore_errors=True)
    save_m3(torch, M3_DIR)
    M3_EXPECTED.write_text(json.dumps(flagembedding_outputs(M3_DIR)) + "\n", encoding="utf-8")
    size = sum(f.stat().st_size for f in M3_DIR.rglob("*") if f.is_file())
    print(f"wrote {M3_DIR} ({size / 1e3:.0f} kB) and {M3_EXPECTED}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    jobs = {"pylate": pylate, "bge-m3": bge_m3}
    if len(sys.argv) != 2 or sys.argv[1] not in jobs:
        sys.exit(f"usage: {sys.argv[0]} {' | '.join(jobs)}")
    jobs[sys.argv[1]]()
