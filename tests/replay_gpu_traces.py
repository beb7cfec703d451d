#!/usr/bin/env python3
"""CI replays the native traces recorded on a real GPU (tools/data/real/gpu/*-native.patrace.gz) with
the pytorch model under torch 2.11's block order (the torch that recorded them): the model's peak
reserved bytes and its segments at the end must be those the GPU's allocator recorded, exactly.

    replay_gpu_traces.py PHASEALLOC_CLI TRACE...

Rationale: these are the only traces whose reserved memory was measured on a GPU rather than on the
simulator; the model matching them byte for byte is what the pytorch model's top-down placement and
block_order were tuned against (bench/gpu/device-runs/). A change to either shows here first.
Limitations: peaks and the final segment list only; a transient difference in the middle of a run
(the driver's placement is only mostly top-down) is reported by the replay but not checked.
"""

import json
import subprocess
import sys

POLICY = "pytorch:block_order:address"


def main():
    cli, traces = sys.argv[1], sys.argv[2:]
    if not traces:
        sys.exit("replay_gpu_traces.py: no traces given")
    failures = []
    for trace in traces:
        out = subprocess.run([cli, "replay", trace, "--json", "-q", "-p", POLICY], capture_output=True, text=True)
        if out.returncode != 0:
            failures.append("%s: exit %d: %s" % (trace, out.returncode, out.stderr.strip()[-500:]))
            continue
        result = json.loads(out.stdout)["results"][0]
        recorded = result.get("recorded")
        if not recorded:
            failures.append("%s: no recorded allocator state in the trace (not a converted GPU snapshot?)" % trace)
            continue
        for key in ("peak_reserved_bytes", "final_segments"):
            if result[key] != recorded[key]:
                failures.append("%s: %s %d under %s, recorded on the GPU %d" % (
                    trace, key, result[key], POLICY, recorded[key]))
        print("%s: peak reserved %d, %d segments (recorded %d, %d)" % (
            trace, result["peak_reserved_bytes"], result["final_segments"], recorded["peak_reserved_bytes"],
            recorded["final_segments"]))
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
