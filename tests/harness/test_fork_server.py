"""The harness's warm start (fork_server.py): a scenario run through it behaves as in a fresh
`python FILE SCENARIO` (value, output, exit code, exceptions, atexit, time limit), and it is warm."""

import atexit
import os
import subprocess
import sys

WARM_AT_START = "torch._dynamo" in sys.modules  # imported by the server before it forks

from torch_harness import child_main, run, scenarios  # noqa: E402


def scenario_describe():
    return {"argv": sys.argv[1:], "cwd": os.getcwd(), "name": __name__, "marker": os.environ.get("FORK_TEST_MARKER"),
            "warm": WARM_AT_START}


def scenario_says_and_exits():
    atexit.register(lambda: print("atexit ran", flush=True))
    print("to stdout")
    print("to stderr", file=sys.stderr)
    sys.exit(3)


def scenario_raises():
    raise ValueError("scenario raised on purpose")


def scenario_sleeps():
    import time

    time.sleep(60)


SCENARIOS = scenarios(globals())

if __name__ == "__main__":
    import torch  # noqa: F401  as every scenario file does (a forked child has it from the server)

    child_main(globals())
else:
    import pytest

    def _run(scenario, fork, env=None, **kwargs):
        previous = os.environ.get("PHASEALLOC_HARNESS_FORK")
        os.environ["PHASEALLOC_HARNESS_FORK"] = "1" if fork else "0"
        try:
            return run(__file__, scenario, sim_gpu="1GiB", env=dict(env or {}, FORK_TEST_MARKER="m"), **kwargs)
        finally:
            if previous is None:
                os.environ.pop("PHASEALLOC_HARNESS_FORK")
            else:
                os.environ["PHASEALLOC_HARNESS_FORK"] = previous

    def test_a_forked_scenario_sees_what_a_fresh_process_sees_and_is_warm():
        fresh = _run("describe", fork=False)
        forked = [_run("describe", fork=True) for _ in range(2)]
        assert fresh["warm"] is False and all(f["warm"] for f in forked), (fresh, forked)
        for value in forked:
            value["warm"] = False
            assert value == fresh

    @pytest.mark.parametrize("fork", [False, True])
    def test_output_exit_code_and_atexit_are_the_childs(fork):
        out = _run("says_and_exits", fork=fork, expect_ok=False)
        assert out.returncode == 3, out
        assert out.stdout.splitlines()[-2:] == ["to stdout", "atexit ran"], out.stdout
        assert "to stderr" in out.stderr.splitlines(), out.stderr

    @pytest.mark.parametrize("fork", [False, True])
    def test_an_exception_is_a_failure_with_its_traceback(fork):
        out = _run("raises", fork=fork, expect_ok=False)
        assert out.returncode == 1, out
        assert "ValueError: scenario raised on purpose" in out.stderr, out.stderr

    @pytest.mark.parametrize("fork", [False, True])
    def test_a_scenario_past_its_time_limit_is_stopped(fork):
        with pytest.raises(subprocess.TimeoutExpired):
            _run("sleeps", fork=fork, timeout=15)


def test_what_the_start_up_prints_is_in_every_childs_output():
    def said(fork):
        out = _run("says_and_exits", fork=fork, env={"SIMCUDA_GPU": "count:1"}, expect_ok=False)
        return [line for line in out.stderr.splitlines() if line.startswith("simcuda:")]

    fresh = said(False)
    assert fresh and said(True) == fresh and said(True) == fresh, (fresh, said(True))
