"""No green run by skipping: under PHASEALLOC_NO_SKIP=1 (tools/dev.sh test, so CI) a skipped test is
reported as failed, unless its reason is on the allowlist below.

A skip says "this was not checked". Outside CI that is often right (no venv for vLLM on a laptop, no
bridge built yet); in CI every piece is made by the run itself, so a skip there means a stage did
not provide what a test needs, and the run would otherwise pass without checking it.

The allowlist is short on purpose: only tests that can run on a real GPU alone. Their reasons begin
with REAL_GPU_ONLY, and nothing else is allowed.

The hook is imported by the conftest.py of each Python test tree (tests/, tools/simcuda/tests/).
"""

import os

import pytest

# The one prefix a CI skip may carry: the test needs a real GPU, which CI has not.
REAL_GPU_ONLY = "real GPU only:"


def required():
    return os.environ.get("PHASEALLOC_NO_SKIP") == "1"


def _reason(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not required() or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _reason(report)
    if reason.startswith("Skipped: "):
        reason = reason[len("Skipped: "):]
    if reason.startswith(REAL_GPU_ONLY):
        return
    report.outcome = "failed"
    report.longrepr = (
        "skipped under PHASEALLOC_NO_SKIP=1, and the reason is not on the allowlist (tests/harness/"
        "skip_policy.py: only '%s ...'): %s" % (REAL_GPU_ONLY, reason))
