"""phasealloc-run's start-up hook for an uninstalled phasealloc.

phasealloc-run puts this folder first on PYTHONPATH, so Python imports this file as
`sitecustomize` at start-up (in every child process too, since they inherit PYTHONPATH). It loads
phasealloc's autoload hook, then the sitecustomize this one shadows, if any. Never raises.
"""

import os
import sys


def _start():
    try:
        import phasealloc._autoload  # noqa: F401  (registers the torch import hook)
    except Exception as exc:
        print("phasealloc: start-up hook failed (%s: %s)" % (type(exc).__name__, exc), file=sys.stderr)
    try:
        from phasealloc._startup_chain import run_shadowed

        run_shadowed(os.path.dirname(os.path.abspath(__file__)), "phasealloc")
    except Exception as exc:
        print("phasealloc: start-up hook failed (%s: %s)" % (type(exc).__name__, exc), file=sys.stderr)


_start()
