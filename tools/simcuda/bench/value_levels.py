"""What each value level costs: wall time and peak RSS of two jobs on the simulated GPU, and which
operations fell back to the stand-in (values.py's design note keeps the table this prints).

  tools/simcuda/bench/value_levels.py [--levels off,observable,exact] [--jobs grpo,gpt2,rloo,sft,dpo]

The jobs are test scenarios, run as the tests run them (phasealloc-run --sim-gpu --native, PyTorch's
allocator, with the torch of this interpreter): `grpo` is TRL's GRPOTrainer, 3 steps on a tiny
random Llama (tests/values_scenarios.py); `gpt2` is GPT-2 small, a training step and a 16-token
generate() (tests/torch_scenarios.py); `rloo`, `sft`, `dpo` are TRL's other trainers, 3 steps each.
Each run is timed in its own process: its time is the whole
command's, start-up included, and its RSS the largest of its processes'.
"""

import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "tests", "harness"))
import torch_harness  # noqa: E402

JOBS = {"grpo": ("values_scenarios.py", "trl_grpo_three_steps"), "gpt2": ("torch_scenarios.py", "gpt2"),
        "rloo": ("values_scenarios.py", "trl_rloo_three_steps"), "sft": ("values_scenarios.py", "trl_sft_three_steps"),
        "dpo": ("values_scenarios.py", "trl_dpo_three_steps")}
def measure(job, level):
    test_file, scenario = JOBS[job]
    env = dict(torch_harness.child_env(sim=True), SIMCUDA_GPU="quiet:1,values:" + level)
    command = torch_harness.launcher("80GiB") + ["--native", "--", sys.executable, os.path.join(TESTS, test_file), scenario]
    timer = ("import resource, subprocess, sys, time\n"
             "t = time.time()\n"
             "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "sys.stderr.write(r.stderr)\n"
             "print(time.time() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, r.returncode)\n")
    out = subprocess.run([sys.executable, "-c", timer] + command, env=env, capture_output=True, text=True)
    seconds, rss, status = out.stdout.split()[-3:]
    fell_back = sorted(set(re.findall(r"simcuda: values: (\S+) has no CPU kernel", out.stderr)))
    return float(seconds), int(rss), int(status), fell_back


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="off,observable,exact")
    parser.add_argument("--jobs", default=",".join(JOBS))
    args = parser.parse_args()
    why = torch_harness.missing()
    if why:
        sys.exit("value_levels.py: " + why)
    print("| job | level | wall time | peak RSS | result | fell back to the stand-in |")
    print("|---|---|---:|---:|---|---|")
    for job in args.jobs.split(","):
        for level in args.levels.split(","):
            seconds, rss, status, fell_back = measure(job, level)
            print("| %s | %s | %.1f s | %.0f MiB | %s | %s |" % (
                job, level, seconds, rss / 2**20, "ran" if status == 0 else "failed (exit %d)" % status,
                ", ".join(fell_back) or "none"), flush=True)


if __name__ == "__main__":
    main()
