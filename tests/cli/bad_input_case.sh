#!/bin/sh
# One row of the bad-input table: a bad input to the phasealloc CLI gives a clear error and exit status
# 1 (never a signal, a hang or all of memory), or a correct result.
#
#   bad_input_case.sh CASE PHASEALLOC REPO_DIR WORK_DIR
set -u
case_name=$1 cli=$2 repo=$3 work=$4/$1
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
trace=$repo/tools/data/ppo-125m.patrace
failures=0

expect_seconds=60 expect_memory_kib=4194304
. "$repo/tests/cli/expect.sh"

# A text trace with the given event lines.
text_trace() {
  printf '# phasealloc-trace v1\nstream_count 1\n'
  printf '%s\n' "$@"
}

case $case_name in
  huge_alloc)  # an allocation size near 2^64: invalid for inspect, refused by replay, no abort without validation
    text_trace "0 alloc 1 18446744073709551000 0 0 0 -" "1 alloc 2 1048576 0 0 0 -" \
               "2 free 1 18446744073709551000 0 0 0 -" >huge.txt
    expect 0 "valid +event 0 \(alloc\): 18446744073709551000 bytes is above the largest size a trace may hold, 1 PiB" \
      "$cli" inspect huge.txt
    expect 1 "huge.txt: not a valid trace: event 0 \(alloc\): 18446744073709551000 bytes is above" \
      "$cli" replay huge.txt -p pytorch -q
    expect 0 '"ooms": 1' "$cli" replay huge.txt -p pytorch -p phasealloc -p pytorch:expandable_segments:True \
      --no-validate --json -q
    ;;
  synth_vocab_overflow)
    expect 1 "synth job: actor.vocab: 18446744073709551615 is above the bound of 16777216" \
      "$cli" synth ppo-125m,actor.vocab:18446744073709551615 -o v.patrace
    [ ! -e v.patrace ] || { echo "FAIL: v.patrace was written"; failures=$((failures + 1)); }
    expect 1 "actor: the fp32 logits of a batch .* above the bound of 1 PiB" \
      "$cli" synth ppo-125m,batch:65536,prompt_len:1048576,models.vocab:16777216 -o v.patrace
    ;;
  memory_fraction_nan)
    expect 1 "bad value for 'memory_fraction': \"nan\" is not a finite number" \
      "$cli" replay "$trace" -p phasealloc:memory_fraction:nan -q
    expect 1 "bad value for 'per_process_memory_fraction': \"inf\" is not a finite number" \
      "$cli" replay "$trace" -p pytorch:per_process_memory_fraction:inf -q
    expect 1 "bad value for 'memory_fraction': \"-nan\" is not a finite number" \
      "$cli" sweep "$trace" -g phasealloc:memory_fraction:-nan -q
    ;;
  memory_fraction_tiny)  # below 1/capacity: an error; just above it: a limit of one byte, and a 70 GiB request fails
    text_trace "0 alloc 1 75161927680 0 0 0 -" "1 free 1 75161927680 0 0 0 -" >big.txt
    expect 1 "memory fraction 1e-11 of a 85899345920-byte device is less than one byte" \
      "$cli" replay big.txt -p phasealloc:memory_fraction:1e-11 -q
    expect 1 "memory fraction 1e-11 of a 85899345920-byte device is less than one byte" \
      "$cli" replay big.txt -p pytorch:per_process_memory_fraction:1e-11 -q
    expect 0 '"ooms": 1' "$cli" replay big.txt -p phasealloc:memory_fraction:2e-11 --json -q
    expect 0 '"peak_reserved_bytes": 75161927680' "$cli" replay big.txt -p phasealloc --json -q
    ;;
  sweep_jobs)
    expect 1 "--jobs 1000000: this machine has [0-9]+ hardware thread\(s\); use at most [0-9]+" \
      "$cli" sweep "$trace" -g pytorch -j 1000000 -q
    expect 1 "--jobs 0: at least one replay must run" "$cli" sweep "$trace" -g pytorch -j 0 -q
    expect 0 "pytorch" "$cli" sweep "$trace" -g pytorch -j 1 -q
    ;;
  synth_layers)  # refused before anything is allocated (the 4 GiB ulimit would catch the old behaviour)
    expect 1 "synth job: actor.layers: 100000000 is above the bound of 1024" \
      "$cli" synth ppo-125m,actor.layers:100000000 -o l.patrace
    expect 1 "synth job: max_events: 1000000000 is above the bound of 100000000" \
      "$cli" synth ppo-125m,max_events:1000000000 -o l.patrace
    ;;
  invalid_traces)  # replay, report, sweep and export check the trace first and name the first bad event
    text_trace "0 alloc 1 4096 0 0 0 -" "1 free 7 4096 0 0 0 -" >bad.txt
    bad="bad.txt: not a valid trace: event 1 \(free\): allocation id 7 is not live \(never allocated\)"
    expect 1 "$bad" "$cli" replay bad.txt -p pytorch -q
    expect 1 "$bad" "$cli" report bad.txt -p pytorch -o bad.html -q
    expect 1 "$bad" "$cli" sweep bad.txt -g pytorch -q
    expect 1 "$bad" "$cli" export bad.txt bad.pickle
    expect 0 "peak reserved" "$cli" replay bad.txt -p pytorch -q --no-validate
    ;;
  empty_inputs)
    : >empty.csv
    echo '[]' >empty.json
    echo '{"traceEvents": [1, "x", {}]}' >shape.json
    python3 -c "print('[' * 20000 + ']' * 20000)" >deep.json
    printf 'Thread,Time,Action,Pointer,Size,Stream\n' >header.csv
    text_trace >none.txt
    expect 1 "'empty.csv' is empty \(0 bytes\): there is no trace in it" "$cli" replay empty.csv -p pytorch -q
    expect 1 "'empty.json' is a JSON document with no memory events .*: nothing to replay" \
      "$cli" replay empty.json -p pytorch -q
    expect 1 "'shape.json' is a JSON document with no memory events" "$cli" inspect shape.json
    expect 1 "'deep.json' is a JSON document with no memory events" "$cli" sweep deep.json -g pytorch -q
    expect 1 "'header.csv' is an RMM log with no allocations or frees: nothing to replay" \
      "$cli" replay header.csv -p pytorch -q
    expect 1 "'none.txt' is a phasealloc trace with no events: nothing to replay" "$cli" replay none.txt -p pytorch -q
    ;;
  not_regular_files)
    mkdir adir
    mkfifo fifo
    expect 1 "cannot read 'adir': it is a directory, not a trace file" "$cli" replay adir -p pytorch -q
    expect 1 "cannot read '/dev/null': it is a character device, not a regular file" "$cli" inspect /dev/null
    expect 1 "cannot read 'fifo': it is a FIFO \(named pipe\), not a regular file" "$cli" replay fifo -p pytorch -q
    expect 1 "cannot read 'missing.patrace': no such file" "$cli" inspect missing.patrace
    ;;
  gzip)  # PyTorch's profiler writes .json.gz: compressed inputs are read
    gzip -c "$repo/tests/data/kineto_memory_profile.json" >profile.json.gz
    gzip -c "$trace" >ppo.patrace.gz
    "$cli" inspect "$repo/tests/data/kineto_memory_profile.json" | grep '^events' >plain.events
    expect 0 "$(sed 's/[()]/./g' plain.events)" "$cli" inspect profile.json.gz
    expect 0 "events +400798 " "$cli" inspect ppo.patrace.gz
    head -c 100 profile.json.gz >truncated.json.gz
    expect 1 "'truncated.json.gz': the gzip data is truncated" "$cli" inspect truncated.json.gz
    printf '\037\213garbage' >corrupt.gz
    expect 1 "'corrupt.gz': byte [0-9]+: bad gzip data" "$cli" inspect corrupt.gz
    ;;
  *)
    echo "unknown case $case_name"
    exit 2
    ;;
esac
[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
