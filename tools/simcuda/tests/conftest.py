"""pytest's start-up for simcuda's PyTorch tests: the project's scenario harness
(tests/harness/torch_harness.py, which starts a scenario under phasealloc-run --sim-gpu) is
importable here."""

import os
import sys

_repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(_repo, "tests", "harness"))
