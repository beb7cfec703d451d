#!/usr/bin/env bash
# One pass of phasealloc's GPU checks on a real GPU: the tests/gpu suite (every scenario under
# PyTorch's allocator and under phasealloc), the RLHF PPO benchmark (native, expandable_segments,
# phasealloc), and two recordings of the same PPO job for offline replay: PyTorch's own memory
# snapshot with history (native allocator) and phasealloc's trace. Everything lands in OUT_DIR.
#
#   PHASEALLOC_LIBRARY=/path/to/libphasealloc_torch.so bench/gpu/device_run.sh OUT_DIR
#
# The library must be built against the torch that runs here (the c10 bridge checks that). Each
# part has its own time limit (PART_SECONDS, default 240 s for the tests, 200 s for the benchmark)
# so a slow part still leaves the others their time; a part that fails is reported, the rest run.
# bench/gpu/device-runs/ keeps what each run on a GPU machine produced, with its commands.
set -uo pipefail
out=${1:?usage: device_run.sh OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}
mkdir -p "$out"
: "${PHASEALLOC_LIBRARY:?set PHASEALLOC_LIBRARY to the libphasealloc_torch.so built for this torch}"
export PHASEALLOC_LIBRARY PHASEALLOC_GPU_TESTS=gpu PYTHONUNBUFFERED=1
status=0

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
  git -C "$root" rev-parse HEAD 2>/dev/null || true
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

echo "== tests/gpu on the GPU"
workers=()
"$python" -c 'import xdist' 2>/dev/null && workers=(-n "${TEST_WORKERS:-6}")
# Scenarios in parallel share one GPU's memory: a failure is run once more, alone, before it counts.
cache="$out/.pytest-cache"
if ! timeout "${TEST_SECONDS:-240}" "$python" -m pytest "$root/tests/gpu" -q -rfE -o cache_dir="$cache" "${workers[@]}" \
     --junitxml="$out/tests-gpu.xml" > "$out/tests-gpu.log" 2>&1; then
  echo "== tests/gpu: the failures again, one at a time" >> "$out/tests-gpu.log"
  timeout "${RETRY_SECONDS:-120}" "$python" -m pytest "$root/tests/gpu" -q -rfE -o cache_dir="$cache" --last-failed \
    --last-failed-no-failures none >> "$out/tests-gpu.log" 2>&1 || status=1
fi
rm -rf "$cache"
grep -E "^(FAILED|ERROR)|passed|failed|== tests" "$out/tests-gpu.log" | tail -n 40

echo "== bench/gpu: RLHF PPO step, three allocators"
timeout "${BENCH_SECONDS:-200}" "$python" "$here/rlhf_ppo.py" --allocator native --allocator native-expandable \
  --allocator phasealloc --model-size "${MODEL_SIZE:-medium}" --steps 5 --rounds 2 \
  --markdown "$out/ppo-results.md" --json "$out/ppo-results.json" > "$out/ppo.log" 2>&1 || status=1
tail -n 30 "$out/ppo.log"

echo "== recordings of the same job (native snapshot, phasealloc trace)"
timeout "${RECORD_SECONDS:-120}" "$python" "$here/rlhf_ppo.py" --allocator native --model-size "${MODEL_SIZE:-medium}" \
  --steps 3 --trace "$out/native-snapshot.pickle" >> "$out/ppo.log" 2>&1 || status=1
timeout "${RECORD_SECONDS:-120}" "$python" "$here/rlhf_ppo.py" --allocator phasealloc --model-size "${MODEL_SIZE:-medium}" \
  --steps 3 --trace "$out/phasealloc-%p.patrace" >> "$out/ppo.log" 2>&1 || status=1
for f in "$out"/native-snapshot.pickle "$out"/phasealloc-*.patrace; do [ -f "$f" ] && gzip -9 "$f"; done
ls -la "$out"
exit $status
