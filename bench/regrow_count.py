#!/usr/bin/env python3
"""Release-and-regrow within a step: unmap calls whose pages are mapped again in the same step.

Reads what `phasealloc export TRACE out.pickle -p POLICY` writes (PyTorch's snapshot layout, each
device-trace entry tagged with its phase in `user_metadata`) and prints, per trace, the unmap calls
by cause and how many of them the same step maps again (any later map that overlaps the unmapped
range before the step ends), and the unmap calls per transition release.

A step is one cycle of the job's phases, taken from the trace's own phase sequence: it begins each
time the job enters the phase its first transition entered (e.g. generation in PPO), so no constant
of a trace is assumed. What is before the first phase (model load) is step 0.

Cause of an unmap, from where the engine emits it (a transition release runs before the new phase
begins, so its unmaps are the last entries of the ending phase; hole reclaim runs inside a growth,
so its unmaps are followed by that growth's map):
  transition  the entries after it up to the next phase are all unmaps
  reclaim     the next entry that is not an unmap is a map of the same phase
  other       anything else (an out-of-memory release, a same-phase transition)

    python3 bench/regrow_count.py out1.pickle [out2.pickle ...]
"""
import argparse
import bisect
import collections
import pickle
import sys


def entries_of(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    traces = [t for t in snap["device_traces"] if t]
    if len(traces) != 1:
        sys.exit(f"{path}: expected one device with a trace, found {len(traces)}")
    return traces[0]


def steps_of(entries):
    """Step number of every entry: a step begins at each entry into the cycle's first phase."""
    first = None
    step, prev, out = 0, None, []
    for e in entries:
        phase = e.get("user_metadata", "")
        if phase != prev and phase:
            if first is None:
                first = phase
            if phase == first:
                step += 1
        prev = phase
        out.append(step)
    return out


def cause_of(entries, i):
    phase = entries[i].get("user_metadata", "")
    for e in entries[i + 1:]:
        if e["action"] == "segment_unmap":
            if e.get("user_metadata", "") != phase:
                return "transition"
            continue
        if e.get("user_metadata", "") != phase:
            return "transition"
        return "reclaim" if e["action"] in ("segment_map", "segment_alloc") else "other"
    return "transition"


def analyse(path):
    entries = entries_of(path)
    steps = steps_of(entries)
    maps = collections.defaultdict(list)  # step -> [(index, lo, hi)]
    for i, e in enumerate(entries):
        if e["action"] in ("segment_map", "segment_alloc"):
            maps[steps[i]].append((i, e["addr"], e["addr"] + e["size"]))
    unmaps = collections.Counter()
    regrown = collections.Counter()
    regrown_next = collections.Counter()
    regrown_bytes = collections.Counter()
    per_transition = []  # each transition release: (phase, unmap calls, regrown in the step, touching)
    run, run_regrown, run_ranges = 0, 0, []
    for i, e in enumerate(entries):
        if e["action"] != "segment_unmap":
            continue
        cause = cause_of(entries, i)
        unmaps[cause] += 1
        lo, hi = e["addr"], e["addr"] + e["size"]
        later = maps[steps[i]]
        k = bisect.bisect_right([m[0] for m in later], i)
        again = any(m_lo < hi and lo < m_hi for _, m_lo, m_hi in later[k:])
        if again:
            regrown[cause] += 1
            regrown_bytes[cause] += e["size"]
        elif any(m_lo < hi and lo < m_hi for _, m_lo, m_hi in maps[steps[i] + 1]):
            regrown_next[cause] += 1
        if cause == "transition":
            run += 1
            run_regrown += again
            run_ranges.append((lo, hi))
            if i + 1 >= len(entries) or entries[i + 1]["action"] != "segment_unmap":
                # Unmapped ranges that touch another of the same release: one call could have
                # returned both.
                run_ranges.sort()
                touching = sum(a[1] == b[0] for a, b in zip(run_ranges, run_ranges[1:]))
                per_transition.append((e.get("user_metadata", ""), run, run_regrown, touching))
                run, run_regrown, run_ranges = 0, 0, []
    return entries, unmaps, regrown, regrown_next, regrown_bytes, per_transition


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pickles", nargs="+")
    args = parser.parse_args()
    print("| trace | maps | unmaps: transition (regrown in the step; in the next) | reclaim (same) | other (same) "
          "| regrown in the step, MiB | transition releases: ending phase, unmaps (regrown in the step, touching another) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for path in args.pickles:
        entries, unmaps, regrown, regrown_next, regrown_bytes, per_transition = analyse(path)
        maps = sum(e["action"] in ("segment_map", "segment_alloc") for e in entries)
        name = path.rsplit("/", 1)[-1].removesuffix(".pickle")
        cells = [f"{unmaps[c]} ({regrown[c]}; {regrown_next[c]})" for c in ("transition", "reclaim", "other")]
        releases = ", ".join(f"{p} {n} ({r}, {t})" for p, n, r, t in per_transition)
        mib = sum(regrown_bytes.values()) / 2**20
        print(f"| {name} | {maps} | {' | '.join(cells)} | {mib:.0f} | {releases} |")


if __name__ == "__main__":
    main()
