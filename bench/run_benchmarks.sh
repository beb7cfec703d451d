#!/usr/bin/env bash
# Builds phasealloc_bench (Release, in build-bench), runs every suite with repetitions, writes
# bench/results.json, counts the hot path's instructions per pair with callgrind
# (bench/callgrind_pairs.sh -> bench/instructions.json; skipped without valgrind) and regenerates the
# results table in bench/README.md.
# Repetitions run in random order across all benchmarks (Google Benchmark's random interleaving),
# so a burst of load on a shared machine spreads over every row instead of hitting a few.
#
#   bench/run_benchmarks.sh                       # the defaults below
#   REPETITIONS=10 MIN_TIME=0.5 bench/run_benchmarks.sh
#   bench/run_benchmarks.sh --benchmark_filter=HotPath     # extra flags go to the binary
#   ALLOCATORS='phasealloc;pytorch;pytorch:expandable_segments:True;glibc' bench/run_benchmarks.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/.." && pwd)"
build="${BUILD_DIR:-${root}/build-bench}"
jobs="${JOBS:-2}"
repetitions="${REPETITIONS:-7}"
min_time="${MIN_TIME:-0.2}"            # seconds (Google Benchmark 1.7 takes a plain number)
allocators="${ALLOCATORS:-phasealloc;pytorch;glibc}"
results="${RESULTS:-${here}/results.json}"

generator=()
if [[ ! -f "${build}/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "${root}" -B "${build}" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DPHASEALLOC_BUILD_BENCH=ON >/dev/null
cmake --build "${build}" --target phasealloc_bench hot_path_pairs -j "${jobs}"

"${build}/bench/phasealloc_bench" \
  --allocators="${allocators}" \
  --benchmark_repetitions="${repetitions}" \
  --benchmark_report_aggregates_only=true \
  --benchmark_enable_random_interleaving=true \
  --benchmark_min_time="${min_time}" \
  --benchmark_out="${results}" \
  --benchmark_out_format=json \
  "$@"

instructions="${INSTRUCTIONS:-${here}/instructions.json}"
counts=()
if command -v valgrind >/dev/null; then
  "${here}/callgrind_pairs.sh" "${build}" > "${instructions}"
  counts=(--instructions "${instructions}")
else
  echo "run_benchmarks.sh: no valgrind: the instructions-per-pair table is left out" >&2
fi

python3 "${here}/make_table.py" "${results}" "${counts[@]}" --readme "${here}/README.md"
echo "wrote ${results} and the table in ${here}/README.md"
