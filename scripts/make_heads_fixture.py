"""Write tests/fixtures/heads_expected.json: transformers' fill-mask pipeline guesses and next-sentence probability
on the random bert-base (numbert.testing, seed 0, with bert-base-uncased's pre-training heads), for
tests/test_heads.py to check numbert's heads without torch.

    HF_HUB_OFFLINE=1 python scripts/make_heads_fixture.py      # needs torch and transformers
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers import minilm_or_exit  # noqa: E402
from test_heads import FIXTURE, transformers_outputs  # noqa: E402

from numbert.testing import write_random_bert  # noqa: E402


def main() -> None:
    minilm = minilm_or_exit()
    with tempfile.TemporaryDirectory() as tmp:
        outputs = transformers_outputs(write_random_bert(Path(tmp) / "bert-base", minilm / "vocab.txt"))
    FIXTURE.write_text(json.dumps(outputs, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main()
