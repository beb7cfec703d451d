"""pytest's start-up for the Python tests under tests/: the shared harness (tests/harness/) is
importable from every test file."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness"))
