#!/bin/sh
# One case of the
# phasealloc CLI on a constructed input with a known answer.
#
#   replay_fidelity_case.sh CASE PHASEALLOC REPO_DIR WORK_DIR
set -u
case_name=$1 cli=$2 repo=$3 work=$4/$1
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
failures=0

. "$repo/tests/cli/expect.sh"

case $case_name in
  kineto)  # .json.gz as the profiler writes it; the busiest device; the baseline; recorded reserved
    gzip -c "$repo/tests/data/kineto_two_devices_baseline.json" >rank0.pt.trace.json.gz
    expect 0 "CUDA device 1 \(the most memory events; memory events per device 0:2,1:4" \
      "$cli" replay rank0.pt.trace.json.gz -p pytorch -q
    expect 0 "floor \(peak live bytes\) 7.50 GiB" "$cli" replay rank0.pt.trace.json.gz -p pytorch -q
    expect 0 "5.00 GiB live before the first event" "$cli" replay rank0.pt.trace.json.gz -p pytorch -q
    expect 0 "recorded \(kineto Total Reserved\): peak reserved 8.00 GiB" \
      "$cli" replay rank0.pt.trace.json.gz -p pytorch -q
    expect 0 "pytorch: peak reserved 7.50 GiB \(-6.250% vs recorded\)" \
      "$cli" replay rank0.pt.trace.json.gz -p pytorch -q
    expect 0 "CUDA device 0 \(asked for" "$cli" replay rank0.pt.trace.json.gz -p pytorch -q --recorded-gpu 0
    expect 0 '"peak_reserved_bytes": 20971520' "$cli" replay rank0.pt.trace.json.gz -p pytorch -q --recorded-gpu 0 --json
    expect 0 "model \(virtual memory\)" "$cli" replay rank0.pt.trace.json.gz -p pytorch -q --device vmm --json
    expect 105 "--device: x not in {auto,segments,vmm}" "$cli" replay rank0.pt.trace.json.gz -p pytorch --device x
    expect 105 "--recorded-gpu: expected a GPU index \\(0, 1, ...\\), not 'x'" "$cli" replay rank0.pt.trace.json.gz -p pytorch --recorded-gpu x
    ;;
  *)
    echo "unknown case $case_name"
    exit 2
    ;;
esac
[ "$failures" = 0 ]
