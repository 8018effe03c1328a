"""Write tests/fixtures/decoder/: for Qwen3 and Gemma3 (EmbeddingGemma's bidirectional shape), a tiny random-weight
checkpoint transformers' own Qwen3Model / Gemma3TextModel save (config.json, model.safetensors) with transformers'
hidden states (eager attention) on tests/test_decoder_family.py's right- and left-padded batches (expected.npz), for
that test to check numbert without torch.

    HF_HUB_OFFLINE=1 python scripts/make_decoder_fixture.py      # needs torch and transformers
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from test_decoder_family import FIXTURES, MODELS, SIDES, batch, save_decoder, transformers_hidden_states  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    shutil.rmtree(FIXTURES, ignore_errors=True)
    for model_type in MODELS:
        directory = FIXTURES / model_type
        model = save_decoder(transformers, torch, model_type, directory)
        arrays = {}
        for side in SIDES:
            ids, mask = batch(side)
            arrays |= {f"input_ids_{side}": ids, f"attention_mask_{side}": mask}
            arrays[f"hidden_states_{side}"] = transformers_hidden_states(torch, model, ids, mask)
        np.savez_compressed(directory / "expected.npz", **arrays)
    size = sum(f.stat().st_size for f in FIXTURES.rglob("*") if f.is_file())
    print(f"wrote {FIXTURES} ({size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
