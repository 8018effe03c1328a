#!/usr/bin/env python
"""Soak the contract (docs/contract.md): tests/test_contract.py with random cases instead of CI's fixed ones.

    python scripts/fuzz_contract.py                       # 2000 random cases a property
    python scripts/fuzz_contract.py --examples 20000      # longer
    python scripts/fuzz_contract.py -k route              # one property (pytest's -k), or any other pytest option

Each property (a model's methods, numbert's functions, hostile model directories, commands, routes) runs
--examples random cases (NUMBERT_CONTRACT_EXAMPLES; CI's are derandomized, a few hundred); hypothesis prints
how many ran, and the first failing case shrunk to its simplest, with the input that failed. Run from the
checkout's root with the test dependencies installed (pip install -e '.[test]').
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000, help="random cases a property (default: 2000)")
    args, pytest_args = parser.parse_known_args()
    if args.examples < 1:
        parser.error("--examples must be at least 1")
    env = dict(os.environ, NUMBERT_CONTRACT_EXAMPLES=str(args.examples), HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:warnings", "--hypothesis-show-statistics"]
    command += [str(ROOT / "tests" / "test_contract.py"), *pytest_args]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
