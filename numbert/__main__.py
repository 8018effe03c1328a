"""`python -m numbert ...`: the `numbert` command."""

import sys

from numbert.cli import main

if __name__ == "__main__":
    sys.exit(main())
