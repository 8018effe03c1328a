"""CI's rule that nothing is skipped (NUMBERT_REQUIRE_PARITY=1), run on a small pytest session of its own.

The example is three files: this suite's conftest.py, a module that skips itself while it is collected
(a module-level `pytest.importorskip` of a module that is not installed) and an ordinary test. Without
the flag the skip is allowed; with it, the run fails, whether the skip happens at collection (an error
that stops the run) or in a test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py").read_text(encoding="utf-8")


@pytest.fixture
def example(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_needs_missing="""
            import pytest

            missing = pytest.importorskip("numbert_no_such_module")


            def test_never_collected():
                assert missing
        """,
        test_plain="""
            def test_plain():
                assert 1 + 1 == 2
        """,
    )
    return pytester


def test_a_module_level_skip_passes_without_the_flag(example, monkeypatch):
    monkeypatch.delenv("NUMBERT_REQUIRE_PARITY", raising=False)
    result = example.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.OK


def test_a_module_level_skip_fails_the_run_under_the_flag(example, monkeypatch):
    monkeypatch.setenv("NUMBERT_REQUIRE_PARITY", "1")
    result = example.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)  # a collection error stops the run before any test, like a syntax error
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*skipped at collection under NUMBERT_REQUIRE_PARITY=1*numbert_no_such_module*"])


def test_a_skip_inside_a_test_fails_the_run_under_the_flag(pytester, monkeypatch):
    monkeypatch.setenv("NUMBERT_REQUIRE_PARITY", "1")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile("import pytest\n\ndef test_skips():\n    pytest.skip('no torch')\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*skipped under NUMBERT_REQUIRE_PARITY=1*no torch*"])
