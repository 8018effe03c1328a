"""`python scripts/bench ...` or, from scripts/, `python -m bench ...`: see bench/__init__.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # scripts/, so that `bench` imports as a package

from bench.command import main  # noqa: E402

main()
