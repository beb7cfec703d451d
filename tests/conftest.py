"""pytest's start-up for the Python tests under tests/: the shared harness (tests/harness/) is
importable from every test file."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness"))

# In CI a skip is a failure unless it is real-GPU-only (tests/harness/skip_policy.py).
from skip_policy import pytest_runtest_makereport  # noqa: E402,F401

# Tests marked weekly run only in the weekly tier (tests/harness/tiers.py).
from tiers import pytest_collection_modifyitems, pytest_configure  # noqa: E402,F401
