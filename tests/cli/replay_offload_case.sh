#!/bin/sh
# phasealloc replay of a trace with recorded offload calls (tests/data/offload/idle_state.txt):
# will the job fit where the idle state leaves the GPU, and what do the copies cost at --link.
#
#   replay_offload_case.sh PHASEALLOC REPO_DIR
set -u
cli=$1 repo=$2
trace=$repo/tests/data/offload/idle_state.txt
failures=0
expect_seconds=60
. "$repo/tests/cli/expect.sh"

# 8 GiB of optimizer state and 6 GiB of generation on an 11 GiB GPU: only with the offload made.
expect 0 "^pytorch +8\.00 GiB .* 1 +0\.00 s" \
  "$cli" replay "$trace" -p pytorch -p phasealloc --capacity 11GiB -q
expect 0 "^phasealloc:release:adaptive +8\.00 GiB .* 0 +0\.00 s" \
  "$cli" replay "$trace" -p pytorch -p phasealloc --capacity 11GiB -q
# 8 GiB out and 8 GiB back at 25 GB/s: 0.687 s.
expect 0 "offload phasealloc:release:adaptive: 8\.00 GiB of pages to the host and 8\.00 GiB back .*: 0\.687 s of copies" \
  "$cli" replay "$trace" -p phasealloc --capacity 11GiB --link 25GB/s -q
expect 0 "offload pytorch: 2 recorded call\(s\) refused, the first: PyTorch's allocator has no same-address offload" \
  "$cli" replay "$trace" -p pytorch --capacity 11GiB -q
expect 0 '"modelled_copy_seconds": 0\.343' \
  "$cli" replay "$trace" -p phasealloc --capacity 11GiB --link 50GB/s --json -q
# The same recording without offload (--offload none): 14 GiB do not fit 11; under offload:pressure
# the call is made when generation's allocation runs out, and nothing moves on a GPU with room.
expect 0 "^phasealloc:release:adaptive +8\.00 GiB .* 1 +0\.00 s" \
  "$cli" replay "$trace" -p phasealloc --capacity 11GiB --offload none -q
expect 0 "offload phasealloc:release:adaptive: 8\.00 GiB of pages to the host and 8\.00 GiB back \(offload:pressure: 1 recorded call\(s\) made when an allocation ran out of memory, 1 allocation\(s\) fitted then\)" \
  "$cli" replay "$trace" -p phasealloc --capacity 11GiB --offload pressure -q
expect 0 "^phasealloc:release:adaptive +14\.00 GiB .* 0 +0\.00 s" \
  "$cli" replay "$trace" -p phasealloc --capacity 20GiB --offload pressure -q
expect 105 "--offload: sometimes not in \{recorded,pressure,none\}" "$cli" replay "$trace" -p phasealloc --offload sometimes -q
# tune tries each phasealloc configuration without offload, under pressure and as recorded.
expect 0 "paste:  PHASEALLOC=1 PHASEALLOC_CONF='offload:pressure'" \
  "$cli" tune "$trace" --gpu 11GiB -g pytorch -g phasealloc -q
expect 1 "--link: \"fast\" is not a positive byte rate" \
  "$cli" replay "$trace" -p phasealloc --link fast -q
expect 1 "--link: \"0GB/s\" is not a positive byte rate" \
  "$cli" replay "$trace" -p phasealloc --link 0GB/s -q
[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
