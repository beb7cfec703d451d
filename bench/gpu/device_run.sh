#!/usr/bin/env bash
# One pass of phasealloc's GPU checks on a real GPU: the tests/gpu suite (every scenario under
# PyTorch's allocator and under phasealloc), the RLHF PPO benchmark (native, expandable_segments,
# phasealloc), and two recordings of the same PPO job for offline replay: PyTorch's own memory
# snapshot with history (native allocator) and phasealloc's trace. Everything lands in OUT_DIR.
#
#   PHASEALLOC_LIBRARY=/path/to/libphasealloc_torch.so bench/gpu/device_run.sh OUT_DIR
#
# The library must be built against the torch that runs here (the c10 bridge checks that). Each
# part has its own time limit (TEST_SECONDS 240, RETRY_SECONDS 120, BENCH_SECONDS 200,
# RECORD_SECONDS 120 each recording, REPLAY_SECONDS 60) so a slow part still leaves the others
# their time; a part that fails is reported, the rest run. MODEL_SIZE (medium), BENCH_STEPS (5),
# BENCH_ROUNDS (2) and RECORD_STEPS (2) size the job. PyTorch's memory history keeps its last
# 1,000,000 entries (rlhf_ppo.py) and GPT-2 medium makes about 350,000 a step: 3 steps lose the
# start of the history (the trace then starts from the recorded layout), 2 steps do not.
# With PHASEALLOC_CLI (the `phasealloc` command line tool) the native snapshot is also converted
# to a trace (native.patrace.gz) and replayed through this machine's PyTorch allocator
# (torch-replay-on-gpu.json), the oracle the model is checked against.
# The PPO job also runs under offload:auto beside phasealloc without offload (ppo-offload-auto.*).
# With OFFLOAD_BENCH (the offload_bench binary of a build) it also runs the same-address offload
# benchmark (1-32 GiB against a plain pinned copy; offload-bench.json).
# PHASEALLOC_GPU_TESTS=sim runs it all on the simulated GPU instead (a rehearsal).
# bench/gpu/device-runs/ keeps what each run on a GPU machine produced, with its commands.
set -uo pipefail
out=${1:?usage: device_run.sh OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}
mkdir -p "$out"
: "${PHASEALLOC_LIBRARY:?set PHASEALLOC_LIBRARY to the libphasealloc_torch.so built for this torch}"
export PHASEALLOC_LIBRARY PHASEALLOC_GPU_TESTS=${PHASEALLOC_GPU_TESTS:-gpu} PYTHONUNBUFFERED=1
size=${MODEL_SIZE:-medium}
launch=()  # the Python jobs: directly on a GPU, through the simulator's launcher in a rehearsal
[ "$PHASEALLOC_GPU_TESTS" = sim ] && launch=("$root/interpose/python/bin/phasealloc-run" --sim-gpu --native --)
status=0

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$python" -c 'import sys; print("python", sys.version.split()[0], sys.executable)'
  "${launch[@]}" "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "nccl", ".".join(map(str, torch.cuda.nccl.version())), torch.cuda.get_device_name(0))'
  for package in transformers accelerate trl vllm deepspeed peft pytest-xdist; do
    version=$("$python" -m pip show "$package" 2>/dev/null | sed -n 's/^Version: //p')
    printf '%s %s\n' "$package" "${version:-absent}"
  done
  df -h "$root" /tmp | sed 1d
  git -C "$root" rev-parse HEAD 2>/dev/null || true
  git -C "$root" status --short 2>/dev/null | sed 's/^/changed: /'
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
"$python" -m pip list > "$out/pip-list.txt" 2>&1

echo "== tests/gpu on the GPU"
workers=()
"$python" -c 'import xdist' 2>/dev/null && workers=(-n "${TEST_WORKERS:-6}")
# Scenarios in parallel share one GPU's memory: a failure is run once more, alone, before it counts
# (the memory-fraction and out-of-memory scenarios take 40-60% of the GPU each). A run stopped by
# TEST_SECONDS leaves no record of its failures, so that is said instead. pytest-benchmark, where
# installed, only warns under xdist: it is left out.
cache="$out/.pytest-cache"
timeout "${TEST_SECONDS:-240}" "$python" -m pytest "$root/tests/gpu" -q -rfE -p no:benchmark -o cache_dir="$cache" \
  "${workers[@]}" --junitxml="$out/tests-gpu.xml" > "$out/tests-gpu.log" 2>&1
tests_rc=$?
if [ "$tests_rc" = 124 ]; then
  echo "== tests/gpu: stopped after TEST_SECONDS=${TEST_SECONDS:-240} s, unfinished: raise it" >> "$out/tests-gpu.log"
  status=1
elif [ "$tests_rc" != 0 ]; then
  echo "== tests/gpu: the failures again, one at a time" >> "$out/tests-gpu.log"
  timeout "${RETRY_SECONDS:-120}" "$python" -m pytest "$root/tests/gpu" -q -rfE -p no:benchmark -o cache_dir="$cache" \
    --last-failed --last-failed-no-failures none --junitxml="$out/tests-gpu-retry.xml" >> "$out/tests-gpu.log" 2>&1 ||
    status=1
fi
rm -rf "$cache"
grep -E "^(FAILED|ERROR)|passed|failed|== tests" "$out/tests-gpu.log" | tail -n 40

echo "== bench/gpu: RLHF PPO step, three allocators"
timeout "${BENCH_SECONDS:-200}" "${launch[@]}" "$python" "$here/rlhf_ppo.py" \
  --allocator native --allocator native-expandable --allocator phasealloc \
  --model-size "$size" --steps "${BENCH_STEPS:-5}" --rounds "${BENCH_ROUNDS:-2}" \
  --markdown "$out/ppo-results.md" --json "$out/ppo-results.json" > "$out/ppo.log" 2>&1 || status=1
tail -n 30 "$out/ppo.log"

# offload:auto (the optimizers' state and the frozen models leave the GPU in the phases that do not
# use them) against phasealloc without offload: peak reserved per phase and step time.
echo "== bench/gpu: RLHF PPO step, offload:auto against no offload"
timeout "${OFFLOAD_AUTO_SECONDS:-240}" "${launch[@]}" "$python" "$here/rlhf_ppo.py" \
  --allocator native-expandable --allocator phasealloc:device:cuda_vmm \
  --allocator "phasealloc:device:cuda_vmm,offload:auto" \
  --model-size "$size" --steps "${BENCH_STEPS:-5}" --rounds "${BENCH_ROUNDS:-2}" \
  --markdown "$out/ppo-offload-auto.md" --json "$out/ppo-offload-auto.json" > "$out/ppo-offload-auto.log" 2>&1 || status=1
tail -n 8 "$out/ppo-offload-auto.log"

if [ -n "${OFFLOAD_BENCH:-}" ]; then
  # Same-address offload (bench/offload_bench.cpp) against a plain pinned copy of the same bytes.
  echo "== same-address offload against a plain pinned copy"
  timeout "${OFFLOAD_SECONDS:-240}" "$OFFLOAD_BENCH" --benchmark_counters_tabular=true \
    --benchmark_out="$out/offload-bench.json" --benchmark_out_format=json > "$out/offload-bench.log" 2>&1 || status=1
  tail -n 20 "$out/offload-bench.log"
fi

echo "== recordings of the same job (native snapshot, phasealloc trace)"
timeout "${RECORD_SECONDS:-120}" "${launch[@]}" "$python" "$here/rlhf_ppo.py" --allocator native \
  --model-size "$size" --steps "${RECORD_STEPS:-2}" --trace "$out/native-snapshot.pickle" >> "$out/ppo.log" 2>&1 ||
  status=1
timeout "${RECORD_SECONDS:-120}" "${launch[@]}" "$python" "$here/rlhf_ppo.py" --allocator phasealloc \
  --model-size "$size" --steps "${RECORD_STEPS:-2}" --trace "$out/phasealloc-%p.patrace" >> "$out/ppo.log" 2>&1 ||
  status=1
if [ -n "${PHASEALLOC_CLI:-}" ] && [ -f "$out/native-snapshot.pickle" ]; then
  echo "== the native snapshot as a trace, replayed through this machine's PyTorch allocator"
  "$PHASEALLOC_CLI" convert "$out/native-snapshot.pickle" "$out/native.patrace" > "$out/replay.log" 2>&1 &&
    "$PHASEALLOC_CLI" convert --records "$out/native.patrace" "$out/native.records" >> "$out/replay.log" 2>&1 &&
    (cd "$root/interpose/python" &&
     timeout "${REPLAY_SECONDS:-60}" "${launch[@]}" "$python" -m phasealloc.torch_replay "$out/native.records" \
       --out "$out/torch-replay-on-gpu.json") >> "$out/replay.log" 2>&1 || status=1
  rm -f "$out/native.records"
  tail -n 5 "$out/replay.log"
fi
# The snapshot (about 0.5 GB for GPT-2 medium, 3 steps) at gzip's default level: -9 takes much
# longer for a few percent; the traces at -9, as tools/data/real keeps them.
[ -f "$out/native-snapshot.pickle" ] && gzip "$out/native-snapshot.pickle"
for f in "$out"/native.patrace "$out"/phasealloc-*.patrace; do [ -f "$f" ] && gzip -9 "$f"; done
ls -la "$out"
exit $status
