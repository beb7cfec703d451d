"""Runs the sitecustomize a start-up folder's own sitecustomize shadows (the ddtrace-run recipe), for
the start-up files that launchers put first on PYTHONPATH: phasealloc-run's (_bootstrap/) and the
simulated GPU's (simcuda/_startup/). Never raises."""

import importlib
import os
import sys


def run_shadowed(here, who):
    """Imports `sitecustomize` again with `here` (the calling file's folder) off sys.path, so the next
    one on the path runs; `who` names the caller in the one line a failure prints."""
    this = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if getattr(exc, "name", None) != "sitecustomize":
            print("%s: the shadowed sitecustomize failed (%s)" % (who, exc), file=sys.stderr)
    except Exception as exc:
        print("%s: the shadowed sitecustomize failed (%s: %s)" % (who, type(exc).__name__, exc), file=sys.stderr)
    finally:
        sys.path[:] = saved
        if this is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = this
