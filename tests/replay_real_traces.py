#!/usr/bin/env python3
"""CI replays every real-code trace (tools/data/real) under pytorch, expandable segments and phasealloc:
each must load, replay without an out-of-memory error on an 80 GiB GPU, keep its phases, and give
books that add up (peak reserved >= peak allocated >= the trace's floor of live bytes).

    replay_real_traces.py PHASEALLOC_CLI TRACE...
"""

import json
import subprocess
import sys

POLICIES = ["pytorch", "pytorch:expandable_segments:True", "phasealloc"]
PHASES = {"generation", "inference", "training", "optimizer"}


def main():
    cli, traces = sys.argv[1], sys.argv[2:]
    if not traces:
        sys.exit("replay_real_traces.py: no traces given")
    failures = []
    for trace in traces:
        args = [cli, "replay", trace, "--json", "-q"] + [x for p in POLICIES for x in ("-p", p)]
        out = subprocess.run(args, capture_output=True, text=True)
        if out.returncode != 0:
            failures.append("%s: exit %d: %s" % (trace, out.returncode, out.stderr.strip()[-500:]))
            continue
        doc = json.loads(out.stdout)
        for r in doc["results"]:
            name = "%s under %s" % (trace, r["policy"])
            if r["ooms"] != 0:
                failures.append("%s: %d out-of-memory errors on 80 GiB" % (name, r["ooms"]))
            if not r["peak_reserved_bytes"] >= r["peak_allocated_bytes"] >= doc["floor_bytes"] > 0:
                failures.append("%s: books do not add up: reserved %d, allocated %d, floor %d" % (
                    name, r["peak_reserved_bytes"], r["peak_allocated_bytes"], doc["floor_bytes"]))
            missing = PHASES - {p["name"] for p in r["phases"]}
            if missing:
                failures.append("%s: phases %s missing (the swap's detection did not mark them)" % (name, sorted(missing)))
        print("%s: %d events, %d policies replayed" % (trace, doc["events"], len(doc["results"])))
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
