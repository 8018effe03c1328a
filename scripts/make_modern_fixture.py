"""Write tests/fixtures/modern/: for each of the modern family (ModernBERT, NomicBERT, GTE, jina-embeddings-v3), a
tiny random-weight masked-LM and sequence-classification checkpoint that transformers' own classes save
(config.json in transformers 5's shape, model.safetensors in the hub's tensor names) with transformers' outputs
(eager attention) on tests/test_modern.py's padded batch (expected.npz: hidden states, attentions, logits), for
tests/test_modern.py to check numbert without torch.

    HF_HUB_OFFLINE=1 python scripts/make_modern_fixture.py      # needs torch and transformers
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from make_fixture_tokenizers import write_tokenizers  # noqa: E402
from test_modern import FIXTURE_TASKS, FIXTURES, MODELS, batch, save_modern, transformers_outputs  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    shutil.rmtree(FIXTURES, ignore_errors=True)
    for model_type in MODELS:
        for task in FIXTURE_TASKS:
            directory = FIXTURES / f"{model_type}-{task}"
            model = save_modern(transformers, torch, model_type, task, directory, "eager")
            outputs = transformers_outputs(torch, model, model_type, task, batch(model_type), attentions=True)
            np.savez_compressed(directory / "expected.npz", **outputs)
    write_tokenizers()  # each directory complete: its tokenizer too
    size = sum(f.stat().st_size for f in FIXTURES.rglob("*") if f.is_file())
    print(f"wrote {FIXTURES} ({size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
