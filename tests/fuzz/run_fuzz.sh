#!/usr/bin/env bash
# Builds the libFuzzer targets with Clang (ASan + UBSan, coverage on the libraries) and runs each
# for N seconds (default 20) from a seed corpus: tests/fuzz/seeds, tests/data and the shared real
# snapshots. Exits non-zero when any fuzzer crashes; the crashing inputs are kept under
# <build>/fuzz-artifacts/ (replay one with: <build>/.../fuzz_<name> <file>).
#
#   tests/fuzz/run_fuzz.sh [seconds]
#
# Environment:
#   PHASEALLOC_FUZZ_BUILD_DIR    build folder (default: <repo>/build-fuzz)
#   PHASEALLOC_FUZZ_SOURCE_DIR   CMake source folder (default: <repo>); it must add tests/fuzz when
#                                configured with -DPHASEALLOC_FUZZ=ON
#   PHASEALLOC_SHARED_TRACES_DIR real snapshots for the pickle corpus (default: <repo>/../shared/traces)
#   JOBS                         build parallelism (default: 2)
#   PHASEALLOC_FUZZ_WERROR       ON: warnings fail the build (tools/dev.sh test sets it; default OFF)
set -euo pipefail

seconds="${1:-20}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${PHASEALLOC_FUZZ_BUILD_DIR:-$repo/build-fuzz}"
source_dir="${PHASEALLOC_FUZZ_SOURCE_DIR:-$repo}"
shared="${PHASEALLOC_SHARED_TRACES_DIR:-$repo/../shared/traces}"
jobs="${JOBS:-2}"
fuzzers=(fuzz_read_trace fuzz_pickle_reader fuzz_rmm_log fuzz_kineto fuzz_policy_spec fuzz_cli_options)

if ! command -v clang++ >/dev/null 2>&1; then
  echo "run_fuzz.sh: clang++ not found (libFuzzer needs Clang)" >&2
  exit 2
fi

echo "== configure $build (clang, address;undefined, fuzzer-no-link)"
CC=clang CXX=clang++ cmake -S "$source_dir" -B "$build" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPHASEALLOC_FUZZ=ON \
  -DPHASEALLOC_BUILD_TESTS=OFF -DPHASEALLOC_BUILD_BENCH=OFF -DPHASEALLOC_BUILD_TOOLS=OFF \
  -DPHASEALLOC_WITH_CUDA=OFF \
  -DPHASEALLOC_SANITIZE="address;undefined" \
  -DPHASEALLOC_WARNINGS_AS_ERRORS="${PHASEALLOC_FUZZ_WERROR:-OFF}" \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null

echo "== build ${fuzzers[*]}"
cmake --build "$build" -j "$jobs" --target "${fuzzers[@]}"

# Seed corpora: copied into a work folder that libFuzzer may add to.
corpus="$build/fuzz-corpus"
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
seed() {  # seed <fuzzer> <files...>
  local dir="$corpus/$1"
  shift
  mkdir -p "$dir"
  for f in "$@"; do
    [[ -f "$f" ]] && cp -f "$f" "$dir/"
  done
  return 0
}
seed fuzz_read_trace "$repo"/tests/fuzz/seeds/read_trace/*
seed fuzz_pickle_reader "$repo"/tests/fuzz/seeds/pickle/* "$shared"/*.pickle
seed fuzz_rmm_log "$repo"/tests/data/*.csv
seed fuzz_kineto "$repo"/tests/data/*.json
seed fuzz_policy_spec "$repo"/tests/fuzz/seeds/policy_spec/*
seed fuzz_cli_options "$repo"/tests/fuzz/seeds/cli_options/*

status=0
summary=()
for name in "${fuzzers[@]}"; do
  bin="$(find "$build" -type f -name "$name" -perm -u+x | head -n 1)"
  if [[ -z "$bin" ]]; then
    echo "run_fuzz.sh: $name was not built (is the compiler Clang and tests/fuzz added?)" >&2
    status=1
    summary+=("$name: NOT BUILT")
    continue
  fi
  echo "== $name for ${seconds}s"
  log="$build/$name.log"
  set +e
  extra=()
  # The real snapshots are 0.5 MB: mutating whole ones runs ~300/s. They are parsed whole by the
  # unit tests; here their first 64 KiB are enough next to the small seeds.
  [[ "$name" == fuzz_pickle_reader ]] && extra+=(-max_len=65536)
  "$bin" "$corpus/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$name-" "${extra[@]}" >"$log" 2>&1
  rc=$?
  set -e
  runs="$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?')"
  cov="$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1 || echo 'cov: ?')"
  if [[ $rc -ne 0 ]]; then
    status=1
    summary+=("$name: CRASH (exit $rc) after $runs runs; see $log and $artifacts")
    tail -n 40 "$log" >&2
  else
    summary+=("$name: ok, $runs runs, $cov")
  fi
done

echo "== summary"
printf '  %s\n' "${summary[@]}"
exit $status
