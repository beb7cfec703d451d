"""The simulated GPU's start-up for Python processes: phasealloc-run --sim-gpu puts this folder first
on PYTHONPATH, so Python imports this file as `sitecustomize` at start-up, in every process the job
starts too (they inherit PYTHONPATH). It installs what PyTorch jobs need adapted on the simulated GPU
(simcuda.torch_adapt: the value mode, ...) unless PHASEALLOC_SIM_ADAPT=0, with phasealloc's
post-import hook, then runs the sitecustomize it shadows (phasealloc-run's own, for an uninstalled
phasealloc). phasealloc's package never imports simcuda: the simulator arranges its own start-up.
Never raises.
"""

import os
import sys

_OFF = ("0", "false", "False", "no", "off")


def _start():
    if os.environ.get("PHASEALLOC_SIM_ADAPT", "1") not in _OFF:
        try:
            import simcuda.torch_adapt
            from phasealloc import _import_hooks

            simcuda.torch_adapt.install(_import_hooks.when_imported)
        except Exception as exc:
            print("simcuda: the simulated GPU's adaptations are not installed (%s: %s)" % (type(exc).__name__, exc),
                  file=sys.stderr)
    try:
        from phasealloc._startup_chain import run_shadowed

        run_shadowed(os.path.dirname(os.path.abspath(__file__)), "simcuda")
    except Exception as exc:
        print("simcuda: start-up failed (%s: %s)" % (type(exc).__name__, exc), file=sys.stderr)


_start()
