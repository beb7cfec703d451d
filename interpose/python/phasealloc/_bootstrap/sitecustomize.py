"""phasealloc-run's start-up hook for an uninstalled phasealloc.

phasealloc-run puts this folder first on PYTHONPATH, so Python imports this file as
`sitecustomize` at start-up (in every child process too, since they inherit PYTHONPATH). It loads
phasealloc's autoload hook, then the sitecustomize this one shadows, if any (the ddtrace-run
recipe). Never raises.
"""

import importlib
import os
import sys


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        import phasealloc._autoload  # noqa: F401  (registers the torch import hook)
    except Exception as exc:
        print("phasealloc: start-up hook failed (%s: %s)" % (type(exc).__name__, exc), file=sys.stderr)
    this = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if getattr(exc, "name", None) != "sitecustomize":
            print("phasealloc: the shadowed sitecustomize failed (%s)" % exc, file=sys.stderr)
    except Exception as exc:
        print("phasealloc: the shadowed sitecustomize failed (%s: %s)" % (type(exc).__name__, exc), file=sys.stderr)
    finally:
        sys.path[:] = saved
        if this is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = this


_chain()
