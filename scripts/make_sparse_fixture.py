"""Write tests/fixtures/sparse_expected.json: sentence-transformers' SparseEncoder.encode vectors (ids, weights) of
tests/test_sparse.py's texts on small random SPLADE directories (numbert.testing.write_random_splade, seed 0:
max pooling of log(1 + relu), and sum pooling of log(1 + log(1 + relu)); max_active_dims 16), for
tests/test_sparse.py to check numbert's sparse vectors without torch.

    HF_HUB_OFFLINE=1 python scripts/make_sparse_fixture.py      # needs torch and sentence-transformers
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers import minilm_or_exit  # noqa: E402
from test_sparse import FIXTURE, sparse_encoder_fixture_vectors  # noqa: E402


def main() -> None:
    minilm = minilm_or_exit()
    with tempfile.TemporaryDirectory() as tmp:
        vectors = sparse_encoder_fixture_vectors(Path(tmp), minilm / "vocab.txt")
    FIXTURE.write_text(json.dumps(vectors) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main()
