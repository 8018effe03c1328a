"""BLAS settings: numbert's own processes (the `numbert` command) set OpenBLAS's thread timeout before NumPy
loads; `import numbert` loads no NumPy and sets nothing; `numbert.threads(n)` limits a user's process on request."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import numbert

# Runs `numbert ARGS...` as the installed script does (numbert.__main__.command) and reports on stderr what the
# environment held at the moment NumPy was first imported, seen by an import hook placed before anything loads.
COMMAND_WITH_SPY = """if True:
    import json, os, sys
    class Spy:
        seen = None
        def find_spec(self, name, path=None, target=None):
            if name == "numpy" and Spy.seen is None:
                Spy.seen = {k: os.environ.get(k) for k in ("OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_NUM_THREADS")}
    sys.meta_path.insert(0, Spy())
    import numbert.__main__
    assert "numpy" not in sys.modules, "importing the command loaded NumPy"
    sys.argv = ["numbert", *sys.argv[1:]]
    status = numbert.__main__.command()
    print(json.dumps(Spy.seen), file=sys.stderr)
    sys.exit(status)
"""


def run_python(args: list[str], **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"} | {"HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=environ | env, timeout=120)


def numpy_saw(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stderr.strip().splitlines()[-1])


def test_the_command_sets_the_thread_timeout_before_numpy_loads(minilm_dir):
    args = ["-c", COMMAND_WITH_SPY, "similarity", "A man is eating.", "A man eats.", "--model", str(minilm_dir)]
    assert numpy_saw(run_python(args))["OPENBLAS_THREAD_TIMEOUT"] == numbert.runtime.blas.THREAD_TIMEOUT
    assert numpy_saw(run_python(args, OPENBLAS_THREAD_TIMEOUT="9"))["OPENBLAS_THREAD_TIMEOUT"] == "9"  # the user's wins


def test_import_numbert_loads_no_numpy_and_sets_nothing():
    code = """if True:
        import os, sys
        before = dict(os.environ)
        import numbert
        assert "numpy" not in sys.modules, "import numbert loaded NumPy"
        assert dict(os.environ) == before, "import numbert changed the environment"
        from numbert import Bert, Tokenizer  # the public names load on first use
        assert numbert.Bert is Bert and callable(numbert.load) and numbert.Tokenizer is Tokenizer
        assert "numpy" in sys.modules and numbert.model.pooling.sentence_vectors
        assert dict(os.environ) == before
    """
    result = run_python(["-c", code])
    assert result.returncode == 0, result.stderr


def test_every_public_name_resolves_and_a_missing_one_is_an_attribute_error():
    assert all(getattr(numbert, name) is not None for name in numbert.__all__)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        numbert.no_such_name  # noqa: B018


def test_threads_limits_blas_within_the_block_and_restores_it():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    blas = lambda: [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    before = blas()
    with numbert.threads(1):
        assert blas() and set(blas()) == {1}
    assert blas() == before
    with pytest.raises(ValueError, match="threads must be an integer >= 1"):
        numbert.threads(0)


def test_the_environment_of_numberts_own_processes():
    from numbert.runtime import blas

    assert blas.process_environment({}) == {"OPENBLAS_THREAD_TIMEOUT": blas.THREAD_TIMEOUT}  # threads: BLAS's default
    env = blas.process_environment({"OPENBLAS_THREAD_TIMEOUT": "9"}, 1)
    assert env["OPENBLAS_THREAD_TIMEOUT"] == "9" and all(env[name] == "1" for name in blas.THREAD_VARIABLES)
