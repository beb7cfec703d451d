"""The library's configuration from Python: set it before first use, read what is in force."""

from . import _library


def configure(conf):
    """Uses `conf` (PHASEALLOC_CONF grammar) instead of the environment variable. Must come before
    the first allocation or query; raises PhaseallocError on a bad text or when too late."""
    lib = _library.load()
    _library.check(lib.phasealloc_configure(conf.encode()), "phasealloc.configure(%r)" % conf)


def effective_config():
    """The configuration in force, every key spelled out; raises PhaseallocError when it is bad."""
    lib = _library.load()
    return _library.text(lib.phasealloc_config(), "phasealloc configuration")

