"""Which tests a run holds: the per-submission tier (tools/dev.sh test, so CI) or the weekly one
(tools/dev.sh weekly, which sets PHASEALLOC_TIER=weekly).

Rationale: CI runs on 2 cores with a hard limit, and a test of the simulated GPU pays seconds of
PyTorch start-up per process. A test marked `@pytest.mark.weekly` repeats what a per-submission test
already checks at a larger scale: the second allocator of a comparison whose first is checked
against the CPU, a job at more ranks, a second start-up recipe of the same launcher, a longer random
run. The weekly tier runs everything.
Approach: outside the weekly tier such a test is deselected at collection (pytest reports "N
deselected"), never skipped: a skip in CI is a failure (skip_policy.py), and a deselection is a
decision of the tier, shown as one.
Limitations: the marker is per test (or per parametrized case, through pytest.param(...,
marks=pytest.mark.weekly)); a weekly test that broke shows in the next weekly run, not in CI.

The hooks are imported by the conftest.py of each Python test tree (tests/, tools/simcuda/tests/).
"""

import os

WEEKLY = "weekly"


def tier():
    """The tier this run holds: "weekly" (everything) or "ci" (the default: no weekly test)."""
    return WEEKLY if os.environ.get("PHASEALLOC_TIER") == WEEKLY else "ci"


def weekly():
    """Whether this run is the weekly tier (a test may size its work by it)."""
    return tier() == WEEKLY


def pytest_configure(config):
    config.addinivalue_line("markers", "weekly: run only in the weekly tier (PHASEALLOC_TIER=weekly; "
                                       "tests/harness/tiers.py)")


def pytest_collection_modifyitems(config, items):
    if weekly():
        return
    kept, left = [], []
    for item in items:
        (left if item.get_closest_marker(WEEKLY) else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
