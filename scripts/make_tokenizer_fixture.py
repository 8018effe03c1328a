"""Write tests/fixtures/tokenizer_expected.json: what the Rust tokenizer (transformers' BertTokenizerFast)
gives on the cases of tests/test_tokenizer_parity.py, for tests/test_tokenizer.py to check without transformers.

    HF_HUB_OFFLINE=1 python scripts/make_tokenizer_fixture.py      # needs transformers
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers import minilm_or_exit  # noqa: E402
from test_tokenizer_parity import FIXTURE, fixture_cases, hf_pair, rust_windows  # noqa: E402


def main() -> None:
    import transformers

    minilm = minilm_or_exit()
    cases = fixture_cases()
    for case in cases:
        rust, _ = hf_pair(transformers, minilm / "vocab.txt", **case.get("options", {}))
        kwargs = {k: case[k] for k in ("max_length", "truncation", "stride") if k in case}
        case["expected"] = [
            {k: v for k, v in enc.items() if k in ("ids", "tokens", "type_ids", "offsets", "word_ids")}
            for enc in rust_windows(rust, case["text"], case.get("pair"), **kwargs)
        ]
    FIXTURE.write_text("[\n" + ",\n".join(json.dumps(c, ensure_ascii=True) for c in cases) + "\n]\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {FIXTURE}")


if __name__ == "__main__":
    main()
