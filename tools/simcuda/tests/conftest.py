"""pytest's start-up for simcuda's PyTorch tests: the project's scenario harness
(tests/harness/torch_harness.py, which starts a scenario under phasealloc-run --sim-gpu) is
importable here."""

import os
import sys

_repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(_repo, "tests", "harness"))

# In CI a skip is a failure unless it is real-GPU-only (tests/harness/skip_policy.py).
from skip_policy import pytest_runtest_makereport  # noqa: E402,F401

# Tests marked weekly run only in the weekly tier (tests/harness/tiers.py).
from tiers import pytest_collection_modifyitems, pytest_configure  # noqa: E402,F401
