#!/usr/bin/env python3
"""Fails when a Google Benchmark JSON (file or stdin) has no rows for an expected allocator, or a row
that errored: the bench smoke runs assert that every allocator actually ran.

    phasealloc_torch_bench --benchmark_format=json ... | check_rows.py - torch capi phasealloc glibc
"""

import json
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    source = sys.stdin if sys.argv[1] == "-" else open(sys.argv[1], encoding="utf-8")
    data = json.load(source)
    rows = data.get("benchmarks", [])
    errors = [f"{b['name']}: {b.get('error_message', 'error')}" for b in rows if b.get("error_occurred")]
    ran = {b["name"].split("/")[1] for b in rows if "/" in b["name"] and not b.get("error_occurred")}
    missing = [a for a in sys.argv[2:] if a not in ran]
    for line in errors:
        print("error row:", line, file=sys.stderr)
    for a in missing:
        print("no row ran for allocator", a, file=sys.stderr)
    if errors or missing:
        sys.exit(1)
    print(f"{len(rows)} rows, allocators {sorted(ran)}: all ran")


if __name__ == "__main__":
    main()
