#!/usr/bin/env bash
# Builds phasealloc_torch_bench (Release, in build-bench) against the venv's torch, runs the pattern
# suites on PyTorch's own allocator (libc10_cuda.so), phasealloc's C entry point, the engine and
# glibc, on the simulated GPU (or a real one: SIMCUDA=0), writes bench/torch_results.json and
# regenerates the "Against PyTorch's own allocator" table in bench/README.md.
#
#   bench/run_torch_benchmarks.sh
#   REPETITIONS=3 MIN_TIME=0.1 bench/run_torch_benchmarks.sh --benchmark_filter=HotPath
#   PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True bench/run_torch_benchmarks.sh   # torch's config
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/.." && pwd)"
build="${BUILD_DIR:-${root}/build-bench}"
jobs="${JOBS:-2}"
repetitions="${REPETITIONS:-5}"
min_time="${MIN_TIME:-0.2}"
allocators="${ALLOCATORS:-capi;torch;phasealloc;glibc}"
results="${RESULTS:-${here}/torch_results.json}"
venv="${PHASEALLOC_VENV:-$HOME/.cache/phasealloc/venv-torch2.15}"

torch_dir=$("${venv}/bin/python" -c 'import importlib.util as u; s = u.find_spec("torch"); print(s.submodule_search_locations[0] if s else "")')
if [[ -z "${torch_dir}" ]]; then
  echo "run_torch_benchmarks.sh: no torch in ${venv} (tools/dev.sh venv makes it)" >&2
  exit 2
fi
generator=()
if [[ ! -f "${build}/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "${root}" -B "${build}" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DPHASEALLOC_BUILD_BENCH=ON \
  -DPHASEALLOC_TORCH_DIR="${torch_dir}" >/dev/null
cmake --build "${build}" --target phasealloc_torch_bench simcuda_cudart simcuda_cuda hot_path_pairs -j "${jobs}"
if [[ ! -x "${build}/bench/phasealloc_torch_bench" ]]; then
  echo "run_torch_benchmarks.sh: phasealloc_torch_bench was not built (needs torch's c10 and the CUDA toolkit)" >&2
  exit 2
fi

env=()
if [[ "${SIMCUDA:-1}" != 0 ]]; then
  sim="${build}/simcuda/lib"
  env=(LD_LIBRARY_PATH="${sim}" LD_PRELOAD="${sim}/libcudart.so.13:${sim}/libcuda.so.1"
       SIMCUDA_GPU="${SIMCUDA_GPU:-quiet:1,memory:80GiB}")
fi
env "${env[@]}" "${build}/bench/phasealloc_torch_bench" \
  --allocators="${allocators}" \
  --benchmark_repetitions="${repetitions}" \
  --benchmark_report_aggregates_only=true \
  --benchmark_enable_random_interleaving=true \
  --benchmark_min_time="${min_time}" \
  --benchmark_context=device="$([[ "${SIMCUDA:-1}" != 0 ]] && echo "simcuda (simulated GPU)" || echo "CUDA GPU")" \
  --benchmark_out="${results}" \
  --benchmark_out_format=json \
  "$@"

# Instructions per hot-path pair, engine and C entry point: bench/callgrind_pairs.sh.
instructions="${INSTRUCTIONS:-${here}/instructions.json}"
counts=()
if command -v valgrind >/dev/null; then
  "${here}/callgrind_pairs.sh" "${build}" > "${instructions}"
  counts=(--instructions "${instructions}")
fi
python3 "${here}/make_table.py" "${results}" "${counts[@]}" --anchor torch --markers torch-results --readme "${here}/README.md"
echo "wrote ${results} and the table in ${here}/README.md"
