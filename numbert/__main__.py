"""The `numbert` command's process: `python -m numbert ...` and the installed `numbert` script (`command`)."""

import sys


def command() -> int:
    """Run `numbert` in a process of its own: numbert's BLAS settings first, before NumPy loads
    (numbert.runtime.blas), then the command line (numbert.cli.main)."""
    from .runtime.blas import configure_own_process

    configure_own_process()
    from .cli import main

    return main()


if __name__ == "__main__":
    sys.exit(command())
