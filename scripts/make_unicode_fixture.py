"""Write tests/fixtures/unicode_expected.json and tests/fixtures/tables_expected.json: what the Rust `tokenizers`
library gives on the cases of tests/test_tokenizer_unicode.py (each form's text and every character's original
span) and tests/test_tokenizer_tables.py (the fields of each accepted file's encodings), so that the tests check
numbert's numbers without the library too.

    python scripts/make_unicode_fixture.py      # needs tokenizers
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import tokenizers

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

import test_tokenizer_tables as tables  # noqa: E402
import test_tokenizer_unicode as forms  # noqa: E402


def main() -> None:
    expected = [
        {"input": text, "form": form, **forms.rust(tokenizers, text, form)}
        for text in forms.TEXTS
        for form in forms.FORMS
    ]
    path = TESTS / "fixtures" / "unicode_expected.json"
    path.write_text(json.dumps({"forms": expected}, ensure_ascii=False) + "\n")
    outputs = {}
    with tempfile.TemporaryDirectory() as directory:
        for name, (spec, texts, rust_spec) in tables.CASES.items():
            path = tables.write(Path(directory), name, rust_spec or spec)
            tok = tokenizers.Tokenizer.from_file(str(path))
            outputs[name] = [tables.encoded(tok, text) for text in texts]
    (TESTS / "fixtures" / "tables_expected.json").write_text(json.dumps(outputs, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
