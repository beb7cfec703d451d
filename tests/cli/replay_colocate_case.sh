#!/bin/sh
# Phasealloc replay --colocate on tests/data/colocate (actor.txt and rollout.txt,
# numbers derived in tests/unit/replay_colocate_test.cpp), and on bad input.
#
#   replay_colocate_case.sh CASE PHASEALLOC REPO_DIR WORK_DIR
set -u
case_name=$1 cli=$2 repo=$3 work=$4/$1
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
data=$repo/tests/data/colocate
failures=0

expect_seconds=60
. "$repo/tests/cli/expect.sh"

case $case_name in
  outcome)
    "$cli" replay --colocate "$data/actor.txt" "$data/rollout.txt" -p pytorch -p phasealloc --capacity 11GiB \
      --json -q >colocated.json || { echo "FAIL: replay --colocate --json exited $?"; exit 1; }
    # Compact the document so each field can be matched on one line.
    tr -d ' \n' <colocated.json >flat.json
    check() {
      if grep -Eq -- "$1" flat.json; then echo "ok: $2"; else echo "FAIL: $2 (/$1/)"; failures=$((failures + 1)); fi
    }
    # pytorch: the rollout engine (process 1) runs out of memory at its event 3, t=60, asking 6 GiB;
    # the actor peaks at 8 GiB, the rollout at 2 GiB, the device at 10 GiB (8 + 2 at t=20).
    check '"first_oom":\{"event":3,"process":1,"requested_bytes":6442450944,"time_ns":60,"trace":"rollout.txt"\},"modeled_device_time_ns":[0-9]+,"ooms":1,"peak_event":5,"peak_reserved_bytes":10737418240,"peak_time_ns":20,"policy":"pytorch"' \
      "pytorch: first OOM process 1 event 3 t=60 6 GiB, device peak 10 GiB at t=20"
    check '"peak_allocated_bytes":8589934592,"peak_requested_bytes":8589934592,"peak_reserved_bytes":8589934592,"process":0,"seeded_segments":0,"trace":"actor.txt"\},\{"device_allocs":1,"device_frees":0,"device_maps":0,"device_unmaps":0,"final_reserved_bytes":2147483648,"first_oom":\{[^}]*\},"ooms":1,"peak_allocated_bytes":2147483648' \
      "pytorch: actor peak 8 GiB, rollout peak 2 GiB with 1 OOM"
    # phasealloc: no OOM, both processes peak at 8 GiB, the device at 10 GiB.
    check '"first_oom":null,"modeled_device_time_ns":[0-9]+,"ooms":0,"peak_event":5,"peak_reserved_bytes":10737418240,"peak_time_ns":20,"policy":"phasealloc' \
      "phasealloc: no OOM, device peak 10 GiB"
    check '"ooms":0,"peak_allocated_bytes":8589934592,"peak_requested_bytes":8589934592,"peak_reserved_bytes":8589934592,"process":1,' \
      "phasealloc: the rollout engine peaks at 8 GiB"
    # The tables say the same.
    expect 0 "first out of memory: process 1 rollout.txt at event 3, t=60" \
      "$cli" replay --colocate "$data/actor.txt" "$data/rollout.txt" -p pytorch --capacity 11GiB -q
    expect 0 "first out of memory: none, every process fits" \
      "$cli" replay --colocate "$data/actor.txt" "$data/rollout.txt" -p phasealloc --capacity 11GiB -q
    ;;
  bad_input)
    printf '# phasealloc-trace v1\nstream_count 1\n0 alloc 0 1048576 0 0 0 -\n1 bogus 0 0 0 0 0 -\n' >malformed.txt
    expect 1 "trace 2 of 2 \('missing.txt'\): cannot read 'missing.txt': no such file" \
      "$cli" replay --colocate "$data/actor.txt" missing.txt -p pytorch -q
    expect 1 "trace 1 of 2 \('malformed.txt'\): malformed.txt:4: expected an op in column 2 .*found 'bogus'" \
      "$cli" replay --colocate malformed.txt "$data/rollout.txt" -p pytorch -q
    expect 1 "needs at least two traces, got 1" "$cli" replay --colocate "$data/actor.txt" -p pytorch -q
    expect 1 "unknown policy 'bogus'" \
      "$cli" replay --colocate "$data/actor.txt" "$data/rollout.txt" -p bogus -q
    expect 1 "give every trace after --colocate" \
      "$cli" replay "$data/actor.txt" --colocate "$data/rollout.txt" "$data/actor.txt" -p pytorch -q
    expect 1 "a trace is required" "$cli" replay -p pytorch -q
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
[ "$failures" = 0 ]
