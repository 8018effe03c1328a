"""The corpus benchmark's peers in venvs of their own (scripts/bench/peer_fastembed.py): where fastembed's venv
cannot be made, its systems are skipped with the reason, never a traceback. No timing here: the figures are
docs/performance.md's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_fastembed_is_skipped_with_the_reason_when_its_venv_cannot_be_made(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import bench_workers
    from bench import peer_fastembed

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    venv = blocker / "fastembed-venv"  # under a file: `python -m venv` cannot make it
    python, why = peer_fastembed.ensure_venv(venv, sys.executable)
    assert python is None
    assert why.startswith(f"cannot make fastembed's venv at {venv}: ")

    monkeypatch.setattr(peer_fastembed, "venv_dir", lambda: venv)
    args = argparse.Namespace(model="minilm", repeats=1, timeout=60, reference=str(tmp_path / "reference.npy"), size=2)
    args.corpus = (["one sentence.", "another one."], [5, 5])  # the parent's corpus, built already
    assert bench_workers.run_system("fastembed int8", args) is None
    err = capsys.readouterr().err
    assert f"fastembed int8 skipped: cannot make fastembed's venv at {venv}: " in err
    assert "Traceback" not in err
    assert not (tmp_path / "reference.npy").exists()

    args.model = "bert-base"  # the export fastembed loads is of the packaged MiniLM only
    assert peer_fastembed.run("fastembed", args, args.corpus[0], Path(args.reference)) == {
        "skipped": "fastembed runs the packaged all-MiniLM-L6-v2 only (--model minilm)"
    }
