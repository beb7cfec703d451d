"""The environment-variable swap: PHASEALLOC=1 makes every Python process enable phasealloc as soon
as it imports torch, before anything can initialise CUDA.

How it runs: phasealloc_autoload.pth (installed next to this package in site-packages) holds one
line, `import phasealloc._autoload`, which site.py executes at interpreter start-up; the
phasealloc-run launcher gets the same effect without an install through a sitecustomize on
PYTHONPATH (_bootstrap/). Every process that inherits the environment (torchrun ranks, Ray
workers, multiprocessing spawn children) runs it again, and each swaps its own allocator (one swap
per process is all PyTorch allows).

Without PHASEALLOC=1 this module does nothing but read environment variables. (The simulated GPU's
adaptations are simcuda's own start-up, simcuda/_startup: this package never imports the simulator.)
It must never break the process: every failure is caught and printed as one line on stderr.
PHASEALLOC_CONF configures the library; PHASEALLOC_DETECT=0 turns phase detection off;
PHASEALLOC_TEST_RECORD_DIR (tests only) has each process record which allocator it runs (_test_record).
"""

import os
import sys

_ENABLED_VALUES = ("1", "true", "True", "yes", "on")


def _say(message):
    try:
        print("phasealloc: " + message, file=sys.stderr)
    except Exception:
        pass


def _on_torch_imported(_module):
    try:
        import phasealloc

        detect = os.environ.get("PHASEALLOC_DETECT", "1") not in ("0", "false", "False", "no", "off")
        phasealloc.enable(detect_phases=detect)
    except Exception as exc:  # never break the program: it runs on the native allocator
        _say("not enabled (%s: %s); this process uses PyTorch's own allocator" % (type(exc).__name__, exc))


def _main():
    if os.environ.get("PHASEALLOC", "") in _ENABLED_VALUES:
        try:
            from phasealloc import _import_hooks

            _import_hooks.when_imported("torch", _on_torch_imported)
        except Exception as exc:
            _say("start-up hook failed (%s: %s); this process uses PyTorch's own allocator" % (type(exc).__name__, exc))
    if os.environ.get("PHASEALLOC_TEST_RECORD_DIR"):  # tests: which allocator ran, asked inside (_test_record)
        try:
            from phasealloc import _import_hooks, _test_record

            _import_hooks.when_imported("torch", _test_record.on_torch_imported)
        except Exception as exc:
            _say("test record hook failed (%s: %s)" % (type(exc).__name__, exc))


_main()
