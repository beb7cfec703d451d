"""tiers.py: a test marked weekly is deselected (not skipped) outside the weekly tier, and runs in it."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

SUITE = '''
import pytest

def test_each_submission():
    pass

@pytest.mark.weekly
def test_weekly_only():
    pass

@pytest.mark.parametrize("case", [1, pytest.param(2, marks=pytest.mark.weekly)])
def test_cases(case):
    pass
'''

CONFTEST = '''
import sys
sys.path.insert(0, %r)
from tiers import pytest_collection_modifyitems, pytest_configure  # noqa: F401
''' % HERE


def _run(tmp_path, tier):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if k not in ("PHASEALLOC_TIER", "PYTEST_ADDOPTS")}
    if tier:
        env["PHASEALLOC_TIER"] = tier
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
                         env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.splitlines()[-1]


def test_weekly_tests_are_deselected_outside_the_weekly_tier(tmp_path):
    summary = _run(tmp_path, None)
    assert "2 passed" in summary and "2 deselected" in summary and "skipped" not in summary, summary


def test_the_weekly_tier_runs_every_test(tmp_path):
    summary = _run(tmp_path, "weekly")
    assert "4 passed" in summary and "deselected" not in summary, summary
