#!/usr/bin/env python3
"""Runs a command and reports its wall time and the peak memory of its whole process tree: the
summed proportional set size (PSS: a page shared by k processes counts 1/k in each, so libraries
mapped by every rank are counted once), sampled every 0.5 s from /proc/PID/smaps_rollup. For jobs
of many processes (torchrun ranks), where the largest single RSS says little.

    bench/peak_pss.py -- COMMAND [ARGS...]

Prints one line on stderr at the end and exits with the command's status. Linux only; a peak
shorter than the sampling period can be missed.
"""

import os
import subprocess
import sys
import time


def children_of():
    """parent pid -> child pids, for every process now."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we looked
        table.setdefault(parent, []).append(int(name))
    return table


def tree_pss_kib(root):
    table, todo, total = children_of(), [root], 0
    while todo:
        pid = todo.pop()
        todo.extend(table.get(pid, []))
        try:
            with open("/proc/%d/smaps_rollup" % pid) as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration, ValueError):
            pass
    return total


def main(argv):
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.exit("usage: peak_pss.py -- COMMAND [ARGS...]")
    command = argv[argv.index("--") + 1:]
    started = time.time()
    try:
        job = subprocess.Popen(command)
    except OSError as error:
        sys.exit("peak_pss.py: cannot run %s: %s" % (command[0], error))
    peak = 0
    while job.poll() is None:
        peak = max(peak, tree_pss_kib(job.pid))
        time.sleep(0.5)
    print("peak_pss: wall %.1f s, peak PSS of the process tree %.2f GiB, exit %d"
          % (time.time() - started, peak / 2**20, job.returncode), file=sys.stderr)
    return job.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
