#!/usr/bin/env bash
# Instructions per allocate + free pair on the hot-path pattern, counted by callgrind.
#
#   bench/callgrind_pairs.sh BUILD_DIR                 # prints a JSON object, one row per allocator
#   MAX_INSTRUCTIONS=800 bench/callgrind_pairs.sh BUILD_DIR   # also fails (exit 1) when a phasealloc
#                                                      # row (engine or capi) counts more per pair
#   PAIRS=20000 BYTES=512 bench/callgrind_pairs.sh BUILD_DIR
#
# Rows: engine with the phasealloc and pytorch policies, the C entry point (phasealloc_malloc /
# phasealloc_free, device:model) with the phasealloc policy, glibc malloc/free. Each row is one run of
# BUILD_DIR/bench/hot_path_pairs under callgrind, collecting only inside run_pairs_<mode> (N pairs
# after one warm-up pair); instructions per pair = callgrind's total / N.
# Also, per step of BM_Mixed's pattern (free a random block of a ring of 256, allocate a log-uniform
# size from 512 B to 1 MiB or 64 MiB), the engine with the phasealloc and pytorch policies: where the
# pools' best-fit index is exercised, which the one-size hot path never searches.
# A count, not a time: the same on a loaded machine, so CI can assert a ceiling on it.
set -euo pipefail

build="${1:?usage: callgrind_pairs.sh BUILD_DIR}"
binary="${build}/bench/hot_path_pairs"
pairs="${PAIRS:-20000}"
bytes="${BYTES:-512}"
max="${MAX_INSTRUCTIONS:-}"

if ! command -v valgrind >/dev/null; then
  echo "callgrind_pairs.sh: valgrind is not installed (apt-get install valgrind)" >&2
  exit 2
fi
[[ -x "${binary}" ]] || { echo "callgrind_pairs.sh: ${binary} is not built" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

count() {  # mode spec [bytes] -> instructions per pair (one decimal)
  local mode=$1 spec=$2 size=${3:-${bytes}} log="${work}/log"
  valgrind --tool=callgrind --callgrind-out-file="${work}/out" --collect-atstart=no \
    --toggle-collect="*run_pairs_${mode}*" "${binary}" "${mode}" "${spec}" "${size}" "${pairs}" \
    >"${work}/stdout" 2>"${log}" || { cat "${log}" "${work}/stdout" >&2; return 1; }
  local total
  total=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "${log}")
  [[ -n "${total}" ]] || { echo "callgrind_pairs.sh: no total in the callgrind log" >&2; cat "${log}" >&2; return 1; }
  awk -v t="${total}" -v n="${pairs}" 'BEGIN { printf "%.1f", t / n }'
}

build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "${build}/CMakeCache.txt" 2>/dev/null || true)
commit=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git -C "$(dirname "${BASH_SOURCE[0]}")" status --porcelain 2>/dev/null)" ]]; then
  commit="${commit} (with uncommitted changes)"
fi

engine_phasealloc=$(count engine phasealloc)
engine_pytorch=$(count engine pytorch)
capi_phasealloc=$(count capi phasealloc)
glibc=$(count glibc -)
mixed_phasealloc_1m=$(count mixed phasealloc 1048576)
mixed_pytorch_1m=$(count mixed pytorch 1048576)
mixed_phasealloc_64m=$(count mixed phasealloc 67108864)
mixed_pytorch_64m=$(count mixed pytorch 67108864)

cat <<EOF
{"bytes": ${bytes}, "pairs": ${pairs}, "build_type": "${build_type:-?}", "commit": "${commit}", "instructions_per_pair": {"engine/phasealloc": ${engine_phasealloc}, "engine/pytorch": ${engine_pytorch}, "capi/phasealloc": ${capi_phasealloc}, "glibc": ${glibc}}, "instructions_per_mixed_step": {"engine/phasealloc, max 1 MiB": ${mixed_phasealloc_1m}, "engine/pytorch, max 1 MiB": ${mixed_pytorch_1m}, "engine/phasealloc, max 64 MiB": ${mixed_phasealloc_64m}, "engine/pytorch, max 64 MiB": ${mixed_pytorch_64m}}}
EOF

if [[ -n "${max}" ]]; then
  status=0
  for row in "engine/phasealloc=${engine_phasealloc}" "capi/phasealloc=${capi_phasealloc}"; do
    name=${row%%=*}
    value=${row#*=}
    if awk -v v="${value}" -v m="${max}" 'BEGIN { exit !(v > m) }'; then
      echo "FAIL: ${name}: ${value} instructions per pair > ceiling ${max}" >&2
      status=1
    else
      echo "ok: ${name}: ${value} instructions per pair <= ceiling ${max}" >&2
    fi
  done
  exit "${status}"
fi
