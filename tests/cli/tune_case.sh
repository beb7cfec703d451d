#!/bin/sh
# phasealloc tune on tests/data/tune/split_segment.txt (PyTorch's allocator reserves 3.5 GiB for
# 2.5 GiB live, expandable segments 2.5 GiB; see the trace's header), and on bad input.
#
#   tune_case.sh CASE PHASEALLOC REPO_DIR WORK_DIR
set -u
case_name=$1 cli=$2 repo=$3 work=$4/$1
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
trace=$repo/tests/data/tune/split_segment.txt
failures=0

. "$repo/tests/cli/expect.sh"

case $case_name in
  outcome)
    # On a 3 GiB GPU PyTorch's default runs out: refused; expandable segments is recommended.
    expect 0 "refused 1 configuration" "$cli" tune "$trace" --gpu 3GiB -g pytorch -g pytorch:expandable_segments:True -q
    expect 0 "paste:  PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'" \
      "$cli" tune "$trace" --gpu 3GiB -g pytorch -g pytorch:expandable_segments:True -q
    "$cli" tune "$trace" --gpu 3GiB -g pytorch -g pytorch:expandable_segments:True -g 'phasealloc:release:{adaptive,all}' \
      -j 2 --json >tune.json || { echo "FAIL: tune --json exited $?"; exit 1; }
    tr -d ' \n' <tune.json >flat.json
    check() {
      if grep -Eq -- "$1" flat.json; then echo "ok: $2"; else echo "FAIL: $2 (/$1/)"; failures=$((failures + 1)); fi
    }
    check '"ooms":1,"peak_reserved_bytes":[0-9]+,"per_trace":\[[^]]*\],"policy":"pytorch","refused":true' \
      "pytorch is refused at 3 GiB"
    check '"peak_reserved_bytes":2684354560,"per_trace":\[[^]]*\],"policy":"pytorch:expandable_segments:True","refused":false' \
      "expandable segments peaks at 2.5 GiB"
    check '"recommended":"pytorch:expandable_segments:True"' "the lowest peak with the fewest calls is recommended"
    # The whole default space on a bundled trace, in parallel.
    "$cli" tune "$repo/tools/data/ppo-125m.patrace" -j 2 -q >default.txt 2>&1 || { echo "FAIL: tune exited $?"; exit 1; }
    for pattern in "^tune +1 trace\(s\), [0-9]+ configurations" "^refused 0 configuration" "^Pareto front" \
                   "^recommended \(--weight calls=0" "^paste:  (PHASEALLOC=1|PYTORCH_CUDA_ALLOC_CONF=)"; do
      if grep -Eq -- "$pattern" default.txt; then echo "ok: default space: /$pattern/"
      else echo "FAIL: default space: no /$pattern/"; cat default.txt; failures=$((failures + 1)); fi
    done
    ;;
  bad_input)
    expect 1 "every configuration runs out of memory at --gpu 2.00 GiB" \
      "$cli" tune "$trace" --gpu 2GiB -g pytorch -g pytorch:expandable_segments:True -q
    expect 1 "--weight \"bytes=1\": unknown measure \"bytes\"" "$cli" tune "$trace" --weight bytes=1 -g pytorch -q
    expect 1 "--weight \"calls=-1\": \"-1\" is not a finite number >= 0" "$cli" tune "$trace" --weight calls=-1 -q
    expect 1 "unknown policy 'bogus'" "$cli" tune "$trace" -g bogus -q
    expect 1 "'\{' at offset [0-9]+ is never closed" "$cli" tune "$trace" -g 'pytorch:max_split_size_mb:{1' -q
    expect 1 "--jobs 0: at least one replay must run" "$cli" tune "$trace" -g pytorch -j 0 -q
    expect 1 "[Cc]apacity|--gpu|size" "$cli" tune "$trace" --gpu 0 -g pytorch -q
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
[ "$failures" = 0 ]
