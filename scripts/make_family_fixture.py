"""Write tests/fixtures/family/: for each of BERT's relatives (RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA,
MPNet), a tiny random-weight masked-LM and sequence-classification checkpoint that transformers saves
(config.json, model.safetensors) with transformers' outputs on tests/test_family.py's padded batch
(expected.npz: hidden states, attentions, logits), for tests/test_family.py to check numbert without torch;
and for the two that frame text as BERT does (DistilBERT, ELECTRA), a WordPiece vocab.txt of the 64 ids
(tests/test_family.py's VOCABULARY), so they read text too.

    HF_HUB_OFFLINE=1 python scripts/make_family_fixture.py      # needs torch and transformers
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
from test_family import (  # noqa: E402
    FIXTURE_HEADS,
    FIXTURES,
    RELATIVES,
    VOCABULARY,
    save_relative,
    transformers_outputs,
)


def main() -> None:
    torch.set_num_threads(1)
    shutil.rmtree(FIXTURES, ignore_errors=True)
    for model_type in RELATIVES:
        for task in FIXTURE_HEADS:
            directory = FIXTURES / f"{model_type}-{task}"
            model = save_relative(transformers, torch, model_type, task, directory)
            np.savez_compressed(directory / "expected.npz", **transformers_outputs(torch, model, model_type, task))
            if model_type in ("distilbert", "electra"):
                (directory / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
    write_tokenizers()  # each directory complete: its tokenizer too
    size = sum(f.stat().st_size for f in FIXTURES.rglob("*") if f.is_file())
    print(f"wrote {FIXTURES} ({size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
