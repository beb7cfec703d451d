#!/usr/bin/env bash
# phasealloc developer entry point: the README's two commands and CI run through here.
#
#   tools/dev.sh demo    install what is missing, build, replay the bundled RLHF trace (main job)
#   tools/dev.sh test    what CI runs (the per-submission tier): install what is missing, build, run
#                        every test but those marked weekly (tests/harness/tiers.py): unit,
#                        conformance, scenario, python, bench smoke, the swap suite on the oldest
#                        torch release the frameworks pin (2.11.0; the main venv's 2.15 is the
#                        newest), vLLM; then ASan+UBSan and TSan runs of the engine tests
#                        (fuzzing is weekly; FUZZ_SECONDS=N adds it). Each stage is timed; every stage runs even
#                        after one failed, and the run ends with the table of stage times and what
#                        failed (also $build_dir/stage-times.txt)
#   tools/dev.sh test --quick  the edit-compile-test loop: the build, the C++ suites (every ctest
#                        test but the Python ones) and the swap suite on the main venv's torch
#   tools/dev.sh weekly  the weekly tier: what `test` runs, the tests marked weekly
#                        (PHASEALLOC_TIER=weekly), the swap suite on torch 2.11.0, 2.13.0 and
#                        2.14.0, every checked-in wheel surface compared, verl's and OpenRLHF's
#                        whole jobs, 60 s of libFuzzer per parser
#   tools/dev.sh deps    only install the Debian packages
#   tools/dev.sh venv    only make (or update) the Python venv with the torch wheel
#   tools/dev.sh build   only configure and build (build/)
#   tools/dev.sh matrix  the swap suite on each other torch release the frameworks pin: 2.11.0 and
#                        2.13.0 in small venvs of their own (~/.cache/phasealloc/venv-swap-torchX.Y.Z,
#                        from tests/requirements-swap.txt), 2.14.0 in vLLM's venv; the bridge built
#                        against each, the suite and the wheel-surface test on the release build's
#                        simulated GPU; `test` runs 2.11.0's unless SKIP_MATRIX=1
#   tools/dev.sh vllm    vLLM 0.33 as a rollout engine on the simulated GPU: its venv
#                        (PHASEALLOC_VLLM_VENV, default ~/.cache/phasealloc/venv-vllm0.33, from
#                        tests/requirements-vllm.txt), the bridge built against its torch, and
#                        tests/gpu/test_vllm.py, test_trl_colocate.py (TRL's GRPO with vLLM
#                        colocated) and test_vllm_ipc.py (IPC weight sync to an engine in another
#                        process) under both allocators; part of `test` unless SKIP_VLLM=1
#   tools/dev.sh verl    verl 0.9.1 (vLLM 0.24, torch 2.11) PPO on 2 simulated GPUs under both
#                        allocators: its venv (PHASEALLOC_VERL_VENV, default
#                        ~/.cache/phasealloc/venv-verl0.9.1, from tests/requirements-verl.txt) and
#                        tests/gpu/test_verl.py; part of `weekly`
#   tools/dev.sh openrlhf  OpenRLHF 0.11.2 (vLLM 0.29, torch 2.13.0, DeepSpeed, Ray) on 2 simulated
#                        GPUs: its venv (PHASEALLOC_OPENRLHF_VENV, default
#                        ~/.cache/phasealloc/venv-openrlhf0.11.2, from tests/requirements-openrlhf.txt),
#                        the bridge built against its torch, and tests/gpu/test_openrlhf.py (about 6
#                        minutes; needs 5 to 8 GiB of free host memory); part of `weekly`
#   tools/dev.sh frameworks  both of the above, one after the other
#   tools/dev.sh smoke   the frameworks' smoke: verl's and OpenRLHF's jobs under phasealloc until
#                        every worker holds device memory, each with phasealloc loaded (a few
#                        minutes once their venvs exist; `weekly` runs the whole jobs)
#
# Environment: JOBS (parallel jobs, default: nproc), BUILD_DIR (default build),
# FUZZ_SECONDS (per fuzzer; `weekly` 60 by default, `test` fuzzes only when it is set), SKIP_SANITIZERS=1, SKIP_FUZZ=1,
# PHASEALLOC_VENV (default ~/.cache/phasealloc/venv-torch2.15: kept between runs and checkouts),
# SKIP_MATRIX=1, PHASEALLOC_VLLM_VENV, SKIP_VLLM=1, PHASEALLOC_VERL_VENV, PHASEALLOC_OPENRLHF_VENV,
# PHASEALLOC_TIER=weekly (the weekly tier's tests in any pytest run).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${JOBS:-$(nproc)}
build_dir=${BUILD_DIR:-build}

packages=(cmake ninja-build g++ clang libclang-rt-dev libfmt-dev libcli11-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev python3 python3-pytest python3-venv chromium fonts-dejavu-core
          valgrind ccache)
venv_dir=${PHASEALLOC_VENV:-$HOME/.cache/phasealloc/venv-torch2.15}
venv_requirements=tests/requirements.txt

log() { printf '\n== %s\n' "$*"; }

# Every compile (the release build, pip's builds, the bridges, the sanitizer and fuzz builds) goes
# through ccache, whose cache is kept between runs and checkouts: CI clones afresh for each run, and
# without it each run compiled the tree about seven times over. Sources are hashed relative to the
# checkout (CCACHE_BASEDIR), so another clone's compile is a hit.
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/phasealloc/ccache} CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1 \
  CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-10G}
export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
# One compiler name for every build: ccache hashes it, and CMake alone finds `c++` in one build and
# `g++` in pip's (the same compiler: their compiles would miss each other's cache).
export CC=${CC:-gcc} CXX=${CXX:-g++}

deps() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "Debian packages: all present"
    return
  fi
  log "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# The venv of the PyTorch-on-simulator tests: the torch wheel without its nvidia-* CUDA wheels (the
# simulator stands in for them), its pure-Python dependencies, transformers and pytest. Cached
# outside the checkout; redone when the requirements file changes.
venv() {
  local stamp="$venv_dir/.phasealloc-requirements"
  if [ -x "$venv_dir/bin/python" ] && [ -f "$stamp" ] && cmp -s "$stamp" "$venv_requirements"; then
    log "venv: $venv_dir (cached)"
    return
  fi
  log "venv: making $venv_dir (torch without its CUDA wheels)"
  [ -x "$venv_dir/bin/python" ] || python3 -m venv "$venv_dir"
  "$venv_dir/bin/python" -m pip install -q --upgrade pip
  "$venv_dir/bin/python" -m pip install -q --no-deps "$(grep -m1 '^torch==' "$venv_requirements")"
  # Packages that depend on torch come without their dependencies too: pip would otherwise follow
  # torch's own and fetch the CUDA wheels. What they need besides torch is listed in the file.
  grep -E '^(peft|accelerate|trl|ray)==' "$venv_requirements" | xargs -r "$venv_dir/bin/python" -m pip install -q --no-deps
  grep -v -E -e '^(torch|peft|accelerate|trl|deepspeed|ray)==' -e '^#' -e '^$' "$venv_requirements" |
    xargs "$venv_dir/bin/python" -m pip install -q
  # DeepSpeed ships as a source package whose setup imports torch: built against the venv's torch,
  # with none of its CUDA extensions compiled ahead (DS_BUILD_OPS=0; the jobs use torch's optimizers).
  grep -E '^deepspeed==' "$venv_requirements" |
    DS_BUILD_OPS=0 xargs -r "$venv_dir/bin/python" -m pip install -q --no-deps --no-build-isolation
  cp "$venv_requirements" "$stamp"
}

# Zero warnings is a rule, and every build here enforces it: a compile that prints a warning
# (FILE:LINE:COLUMN: warning:, what -Werror would stop) fails the build (configure_and_build reads the build's output; ccache replays a cached compile's
# warnings). Not with -Werror in the flags: the release build then compiles exactly as `pip install .`
# does (Release, the same flags), so the installs' compiles are ccache hits of the release build's.
# `demo` and `test` configure the release build alike, so that one build serves both.
build_type=Release

# `test` registers every test or fails the configure step (CMakeLists.txt), and fails on a skip whose
# reason is not real-GPU-only (tests/harness/skip_policy.py).
require_all=OFF
require_every_test() {
  require_all=ON
  export PHASEALLOC_NO_SKIP=1 SIMCUDA_REQUIRE=1
}

configure_and_build() {  # dir, extra cmake args..., -- targets...
  local dir=$1
  shift
  local args=() targets=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  targets=("$@")
  cmake -S . -B "$dir" -G Ninja "${args[@]}" >/dev/null
  local log_file="$dir/build-output.txt"
  ninja -C "$dir" -j "$jobs" "${targets[@]}" 2>&1 | tee "$log_file"
  if grep -q -E ':[0-9]+:[0-9]+: warning: ' "$log_file"; then
    echo "$dir: the build printed warnings (zero warnings is the rule):" >&2
    grep -E ':[0-9]+:[0-9]+: warning: ' "$log_file" | sort -u >&2
    return 1
  fi
}

build() {  # targets... (default: all)
  log "build ($build_dir)"
  local python_arg=()
  if [ -x "$venv_dir/bin/python" ]; then
    # The venv's torch: the simulator tests run with it, and the OOM companion is built against its
    # c10 (found without importing torch, which needs a GPU or the simulator to load).
    local torch_dir
    torch_dir=$("$venv_dir/bin/python" -c 'import importlib.util as u; s = u.find_spec("torch"); print(s.submodule_search_locations[0] if s else "")')
    python_arg=("-DPHASEALLOC_TEST_PYTHON=$venv_dir/bin/python")
    [ -n "$torch_dir" ] && python_arg+=("-DPHASEALLOC_TORCH_DIR=$torch_dir")
  fi
  configure_and_build "$build_dir" -DCMAKE_BUILD_TYPE=$build_type "-DPHASEALLOC_REQUIRE_ALL_TESTS=$require_all" \
    "${python_arg[@]}" -- "$@"
}

# --- stages: each timed, each run even when an earlier one failed, the table printed at the end ---
stage_logs=$(mktemp -d)
trap 'rm -rf "$stage_logs"' EXIT
stage_rows=()    # "seconds|name|status" per stage, in the order they ended
stage_failed=()
declare -A stage_pid=() stage_start=()

stage_record() {  # name, seconds, status
  stage_rows+=("$2|$1|$3")
  [ "$3" = ok ] || stage_failed+=("$1")
}

# A stage in the foreground: a subshell of its own (so `set -e` holds inside it), timed.
stage() {  # name, command...
  local name=$1 start=$SECONDS status=0
  shift
  log "stage: $name"
  ( "$@" ) &
  wait $! || status=$?
  stage_record "$name" $((SECONDS - start)) "$([ $status = 0 ] && echo ok || echo "FAILED ($status)")"
  return 0
}

# A stage beside the next ones: its output goes to a log printed by stage_join.
stage_begin() {  # name, command...
  local name=$1
  shift
  log "stage: $name (started beside the next stages; its output follows when it ends)"
  ( "$@" ) > "$stage_logs/${name//\//_}.log" 2>&1 &
  stage_pid[$name]=$!
  stage_start[$name]=$SECONDS
}

stage_join() {  # name
  local name=$1 status=0
  wait "${stage_pid[$name]}" || status=$?
  log "stage: $name (ended)"
  cat "$stage_logs/${name//\//_}.log"
  stage_record "$name (beside others)" $((SECONDS - ${stage_start[$name]})) \
    "$([ $status = 0 ] && echo ok || echo "FAILED ($status)")"
}

# The table of stage times, printed at the end of every run and kept in $build_dir/stage-times.txt
# (so a stage that grew shows in the next CI log, not when a run hits CI's limit); the exit status.
stage_summary() {
  local row table
  table=$(
    printf '%8s  %-60s %s\n' seconds stage status
    for row in "${stage_rows[@]}"; do
      IFS='|' read -r seconds name status <<< "$row"
      printf '%8s  %-60s %s\n' "$seconds" "$name" "$status"
    done
    printf '%8s  %-60s\n' "$SECONDS" "whole run (wall)")
  log "stage times"
  echo "$table"
  mkdir -p "$build_dir" && echo "$table" > "$build_dir/stage-times.txt"
  if [ ${#stage_failed[@]} -gt 0 ]; then
    echo "failed stages: ${stage_failed[*]}" >&2
    return 1
  fi
  log "all tests passed"
}

# The torch releases RLHF frameworks pin besides the main venv's: verl's vLLM extra 2.11.0, OpenRLHF
# (vLLM 0.29) 2.13.0, vLLM 0.33 2.14.0. The swap suite runs on each, with the bridge built against it
# ($build_dir/torch-X.Y.Z, inside the release build so that nothing looking for "the" build
# (build*/interpose) finds it; interpose/c10/torch_features.cmake leaves out what that torch lacks),
# on the release build's simulated GPU, whose stand-ins export every checked-in wheel surface.
# 2.11.0 and 2.13.0 get a small venv of their own (the torch wheel and tests/requirements-swap.txt:
# a minute to make, where a framework's venv takes many); 2.14.0 is vLLM's venv. `test` runs the
# oldest release (2.11.0; the main venv's 2.15 is the newest, vLLM's stage builds against 2.14.0);
# `weekly` runs all three.
swap_requirements=tests/requirements-swap.txt
swap_venv_dir() { echo "$HOME/.cache/phasealloc/venv-swap-torch$1"; }  # version

# A small venv with torch VERSION without its CUDA wheels (--no-deps) and what the swap suite needs.
swap_venv() {  # version
  local venv stamp
  venv=$(swap_venv_dir "$1")
  stamp="$venv/.phasealloc-requirements"
  if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] &&
     cmp -s "$stamp" <(echo "torch==$1"; cat "$swap_requirements"); then
    return
  fi
  log "swap venv: making $venv (torch $1 without its CUDA wheels)"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q --no-deps "torch==$1"
  grep -v -E -e '^#' -e '^$' "$swap_requirements" | xargs "$venv/bin/python" -m pip install -q
  no_cuda_wheels "swap venv $1" "$venv"
  { echo "torch==$1"; cat "$swap_requirements"; } > "$stamp"
}

# The venvs of the matrix: per submission (test) the oldest release, weekly all three.
ci_matrix_venvs() { swap_venv_dir 2.11.0; }
weekly_matrix_venvs() { swap_venv_dir 2.11.0; swap_venv_dir 2.13.0; echo "$vllm_venv_dir"; }

torch_version() {  # venv
  "$1/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))'
}

matrix() {  # venvs...
  local venv version failed=() release logs
  release=$(realpath -m "$build_dir")
  logs=$(mktemp -d)
  # The swap suites, $jobs at a time: each is one Python process after another, a core's work, and
  # the suites share nothing (their files are named by pid), so they overlap; each one's output is
  # printed when it ends.
  for venv in "$@"; do
    version=$(torch_version "$venv")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    log "matrix: torch $version ($venv): the swap suite (started)"
    (PHASEALLOC_LIBRARY="$release/torch-$version/interpose/libphasealloc_torch.so" \
      PHASEALLOC_SIMCUDA_DIR="$release/simcuda/lib" PHASEALLOC_GPU_TESTS=sim \
      "$venv/bin/python" -m pytest -q -p no:cacheprovider \
      tests/gpu/test_torch_swap.py tests/gpu/test_bridge_*.py tests/gpu/test_backend_choice.py \
      tools/simcuda/tests/test_surface.py \
      > "$logs/$version.log" 2>&1
     echo $? > "$logs/$version.status") &
  done
  wait
  for venv in "$@"; do
    version=$(torch_version "$venv")
    log "matrix: torch $version: the swap suite"
    cat "$logs/$version.log"
    [ "$(cat "$logs/$version.status" 2>/dev/null)" = 0 ] || failed+=("$version")
  done
  rm -rf "$logs"
  if [ ${#failed[@]} -gt 0 ]; then
    echo "matrix: the swap suite failed on torch ${failed[*]}" >&2
    return 1
  fi
}

demo() {
  build phasealloc
  log "main job: replay of the bundled RLHF PPO trace"
  "$build_dir/tools/cli/phasealloc" replay tools/data/ppo-125m.patrace \
    --policy pytorch --policy pytorch:expandable_segments:True --policy phasealloc \
    --capacity 80GiB --html "$build_dir/ppo-125m-report.html"
  log "report written to $build_dir/ppo-125m-report.html"
}

# pip install . into the venv, the way a user installs phasealloc (tests/packaging/test_pip_install.py
# runs the installed commands, and builds an isolated wheel too). Without build isolation here: the
# venv has the build tools already, and the isolated path is the test's.
pip_install() {
  # In build-pip, beside the release build (ccache hashes paths relative to the build folder, so a
  # folder as deep as build/ makes the same compiles: hits of the release build's), where
  # tests/packaging's isolated wheel builds again.
  "$venv_dir/bin/python" -m pip install -q --no-build-isolation --no-deps --config-settings=build-dir="$root/build-pip" "$root"
}

release_tests() {  # extra ctest arguments...
  cd "$build_dir" && ctest --output-on-failure -j "$jobs" --timeout 1800 "$@"
}

# The swap suite (phasealloc swapped into real PyTorch, the bridge's own tests) on the main venv's
# torch, the quick tier's share of the Python tests.
swap_suite() {
  PHASEALLOC_LIBRARY="$root/$build_dir/interpose/libphasealloc_torch.so" \
    PHASEALLOC_SIMCUDA_DIR="$root/$build_dir/simcuda/lib" PHASEALLOC_GPU_TESTS=sim \
    "$venv_dir/bin/python" -m pytest -q -p no:cacheprovider tests/gpu/test_torch_swap.py tests/gpu/test_bridge_*.py \
    tests/gpu/test_backend_choice.py
}

# The venvs `test` uses besides the main one (the oldest release's swap venv, vLLM's) and the bridge
# built against each one's torch. Mostly downloads and unpacking: `test` runs it beside the release
# tests.
ci_envs() {
  swap_venv 2.11.0
  pinned_venv vllm "$vllm_venv_dir" "$vllm_requirements" "$vllm_no_deps"
  local venv
  for venv in $(ci_matrix_venvs) "$vllm_venv_dir"; do venv_bridge "$(basename "$venv")" "$venv"; done
}

# The matrix's venvs (the three releases') and the bridge against each one's torch; the frameworks'
# stages make their own (verl_env, openrlhf_env).
matrix_envs() {
  swap_venv 2.11.0
  swap_venv 2.13.0
  pinned_venv vllm "$vllm_venv_dir" "$vllm_requirements" "$vllm_no_deps"
  local venv
  for venv in $(weekly_matrix_venvs); do venv_bridge "$(basename "$venv")" "$venv"; done
}

sanitizers() {
  local engine_tests=(engine_test conf_test engine_scenario_test engine_stress_test model_device_test growth_style_test
                      model_device_conformance_test host_pool_test phasealloc_policy_test engine_offload_test)
  log "address + undefined-behaviour sanitizers (engine tests)"
  configure_and_build build-asan -DCMAKE_BUILD_TYPE=Debug "-DPHASEALLOC_SANITIZE=address;undefined" \
    -DPHASEALLOC_BUILD_BENCH=OFF -- "${engine_tests[@]}"
  (cd build-asan && PHASEALLOC_SCENARIO_OPS=200000 ctest --output-on-failure -j "$jobs" \
    -R "^($(IFS='|'; echo "${engine_tests[*]}"))\$")
  log "thread sanitizer (engine tests)"
  configure_and_build build-tsan -DCMAKE_BUILD_TYPE=Debug -DPHASEALLOC_SANITIZE=thread \
    -DPHASEALLOC_BUILD_BENCH=OFF -- engine_stress_test engine_test
  (cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -R '^(engine_stress_test|engine_test)$')
}

fuzz() {
  PHASEALLOC_FUZZ_WERROR=ON tests/fuzz/run_fuzz.sh "${FUZZ_SECONDS:-60}"
}

# The first stages of `test` and `weekly`: what every test needs (packages, the main venv, the
# release build, phasealloc pip-installed into the venv). Ends the run after the table of stage
# times when the build did not come out (nothing after it could run). Called as a plain command: in
# a `||` list bash would switch off `set -e` inside every stage it runs.
installed_and_built() {
  # Every pytest run lists what it skipped and why (its short summary), so a skip shows in the log.
  export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} -rs"
  require_every_test
  export PHASEALLOC_SURFACES_CHECKED="$root/$build_dir/surfaces-checked.txt"
  mkdir -p "$build_dir" && : > "$PHASEALLOC_SURFACES_CHECKED"
  stage "Debian packages" deps
  stage "main venv (torch 2.15)" venv
  stage "release build ($build_dir)" build
  if [ ${#stage_failed[@]} -gt 0 ]; then stage_summary; exit 1; fi
  stage "pip install . into the main venv" pip_install
  export PHASEALLOC_REQUIRE_PIP_INSTALL=1
}

# What CI runs (the per-submission tier). The stages that need the build run after it; torch
# 2.11.0's and vLLM's venvs and bridges are made beside the release tests (downloads and unpacking
# beside test processes); the stages that need those venvs follow. A failed stage does not stop the
# later ones: the run ends with the table of stage times and fails if any stage did.
test_all() {
  installed_and_built
  local envs=1
  [ "${SKIP_MATRIX:-0}${SKIP_VLLM:-0}" = 11 ] && envs=0
  [ $envs = 0 ] || stage_begin "venvs and bridges (torch 2.11.0, vLLM 0.33)" ci_envs
  stage "release tests (ctest)" release_tests
  # The stages after the release tests are a core's work each (the sanitizers' compiles are ccache
  # hits when warm; the swap suite and vLLM's tests are one Python process after another): they run
  # beside each other, the sanitizers and the matrix in the background, vLLM's tests in front.
  local sanitize=0 matrix_beside=0
  if [ "${SKIP_SANITIZERS:-0}" != 1 ]; then
    sanitize=1
    stage_begin "sanitizers (ASan+UBSan, TSan)" sanitizers
  fi
  if [ $envs = 1 ]; then
    stage_join "venvs and bridges (torch 2.11.0, vLLM 0.33)"
    if [ "${SKIP_MATRIX:-0}" != 1 ]; then
      matrix_beside=1
      stage_begin "matrix: swap suite on torch 2.11.0" matrix $(ci_matrix_venvs)
    fi
    [ "${SKIP_VLLM:-0}" = 1 ] || stage "vLLM 0.33 (rollouts, TRL colocated, IPC)" vllm_test
    [ $matrix_beside = 0 ] || stage_join "matrix: swap suite on torch 2.11.0"
  fi
  [ $sanitize = 0 ] || stage_join "sanitizers (ASan+UBSan, TSan)"
  # Fuzzing is weekly (a Clang build of its own, 5.5 min of a cold run for 15 s per parser here);
  # FUZZ_SECONDS=N runs it here too.
  if [ -n "${FUZZ_SECONDS:-}" ] && [ "${SKIP_FUZZ:-0}" != 1 ]; then
    stage "fuzzing the parsers (${FUZZ_SECONDS} s each)" fuzz
  fi
  stage_summary
}

# The weekly tier: what `test` runs, with the tests marked weekly (tests/harness/tiers.py), the swap
# suite on every pinned torch release, every checked-in surface compared, and the frameworks' whole
# jobs (verl, OpenRLHF); about two hours on 2 cores with the venvs made.
test_weekly() {
  export PHASEALLOC_TIER=weekly FUZZ_SECONDS=${FUZZ_SECONDS:-60}
  installed_and_built
  stage_begin "the matrix's venvs and bridges (torch 2.11.0, 2.13.0, vLLM's 2.14.0)" matrix_envs
  stage "release tests (ctest, weekly tier)" release_tests
  stage_join "the matrix's venvs and bridges (torch 2.11.0, 2.13.0, vLLM's 2.14.0)"
  stage "matrix: swap suite on torch 2.11.0, 2.13.0, 2.14.0" matrix $(weekly_matrix_venvs)
  stage "vLLM 0.33 (rollouts, TRL colocated, IPC)" vllm_test
  stage "verl 0.9.1's PPO job (both allocators)" verl_test
  stage "OpenRLHF 0.11.2's GRPO job (both allocators)" openrlhf_test
  stage "surfaces: every checked-in wheel surface against its wheel" surfaces_checked
  stage "sanitizers (ASan+UBSan, TSan)" sanitizers
  stage "fuzzing the parsers (${FUZZ_SECONDS} s each)" fuzz
  stage_summary
}

# The edit-compile-test loop: the build, every ctest test but the Python ones, the swap suite.
test_quick() {
  require_every_test
  stage "Debian packages" deps
  stage "main venv (torch 2.15)" venv
  stage "release build ($build_dir)" build
  if [ ${#stage_failed[@]} -gt 0 ]; then stage_summary; return 1; fi
  stage "C++ suites (ctest -LE python)" release_tests -LE python
  stage "swap suite on torch 2.15" swap_suite
  stage_summary
}

# No CUDA library wheel in a venv: the simulator stands in for them, and a real one would be loaded
# in its place. nvidia-ml-py is NVML's Python binding (ctypes over libnvidia-ml.so.1, which is the
# simulator's), not a CUDA library: pynvml, which OpenRLHF requires, is built on it.
no_cuda_wheels() {  # label, venv
  local found
  found=$("$2/bin/python" -m pip list 2>/dev/null | grep -E -i '^(nvidia-|cuda-toolkit )' | grep -v -E -i '^nvidia-ml-py ' || true)
  if [ -n "$found" ]; then
    echo "$found"
    echo "$1: a CUDA wheel came in through a dependency (listed above): install its requirer --no-deps" >&2
    return 1
  fi
}

# A framework's venv from its pinned requirements file: the packages matching NO_DEPS (torch and
# those that require it) without dependencies, so no nvidia-* CUDA wheel comes in (the simulator
# replaces them), then the rest of the file; remade when the file changed (a stamp copy of it).
pinned_venv() {  # label, venv, requirements file, NO_DEPS regex
  local label=$1 venv=$2 requirements=$3 no_deps=$4 stamp="$2/.phasealloc-requirements"
  if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$stamp" "$requirements"; then
    return
  fi
  log "$label: making $venv (torch and what requires it without their CUDA wheels)"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  grep -E "$no_deps" "$requirements" | xargs "$venv/bin/python" -m pip install -q --no-deps
  grep -v -E -e "$no_deps" -e '^#' -e '^$' "$requirements" | xargs "$venv/bin/python" -m pip install -q
  no_cuda_wheels "$label" "$venv"
  cp "$requirements" "$stamp"
}

# vLLM pins its own torch (0.33: 2.14.0), so it gets its own venv: vLLM, torch and the packages
# that require torch without dependencies (no nvidia-* CUDA wheels: the simulator replaces them),
# then the rest of tests/requirements-vllm.txt; the bridge is built against that torch inside the
# release build ($build_dir/torch-X.Y.Z, as `matrix` does).
vllm_venv_dir=${PHASEALLOC_VLLM_VENV:-$HOME/.cache/phasealloc/venv-vllm0.33}
vllm_requirements=tests/requirements-vllm.txt
vllm_no_deps='^(vllm|torch|torchvision|compressed-tensors|xgrammar|trl|accelerate)=='
vllm_env() {
  pinned_venv vllm "$vllm_venv_dir" "$vllm_requirements" "$vllm_no_deps"
  venv_bridge vllm "$vllm_venv_dir"
}

# The bridge built against a venv's torch, inside the release build ($build_dir/torch-X.Y.Z, as
# `matrix` does).
venv_bridge() {  # label, venv
  local version torch_dir
  version=$(torch_version "$2")
  torch_dir=$("$2/bin/python" -c 'import importlib.util as u; print(u.find_spec("torch").submodule_search_locations[0])')
  log "$1: the bridge built against torch $version ($build_dir/torch-$version)"
  configure_and_build "$build_dir/torch-$version" -DCMAKE_BUILD_TYPE=$build_type "-DPHASEALLOC_TORCH_DIR=$torch_dir" \
    -DPHASEALLOC_BUILD_BENCH=OFF -- phasealloc_torch phasealloc_torch_oom phasealloc_c10
}

# The checked-in surfaces (tools/simcuda/surface) of what a framework's venv installed are the
# installed ones: tools/simcuda/tests/test_surface.py run by that venv's interpreter.
venv_surfaces() {  # label, venv
  log "$1: the checked-in surfaces of the venv's torch, vLLM, Triton and torchvision are the installed ones"
  PHASEALLOC_SIMCUDA_DIR="$root/$build_dir/simcuda/lib" SIMCUDA_REQUIRE=1 \
    "$2/bin/python" -m pytest -q -p no:cacheprovider tools/simcuda/tests/test_surface.py
}

# Every checked-in surface compared with an installed wheel: the surface tests ran in each framework's
# venv (with the matrix's swap suite) and in the main venv (ctest's simcuda_torch); none is left that
# none of them compared.
surfaces_checked() {
  local surface missing=()
  for surface in tools/simcuda/surface/torch-*.txt tools/simcuda/surface/package-*.txt; do
    grep -qxF "$(basename "$surface")" "$PHASEALLOC_SURFACES_CHECKED" || missing+=("$surface")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "surfaces no installed wheel was compared with (install the wheel in a venv of tools/dev.sh, or remove the file): ${missing[*]}" >&2
    return 1
  fi
}

vllm_test() {
  vllm_env
  local version
  version=$(grep -m1 '^torch==' "$vllm_requirements" | cut -d= -f3)
  log "vllm: tests/gpu/test_vllm.py, test_trl_colocate.py and test_vllm_ipc.py on the simulated GPU"
  PHASEALLOC_VLLM_VENV="$vllm_venv_dir" PHASEALLOC_VLLM_LIBRARY="$build_dir/torch-$version/interpose/libphasealloc_torch.so" \
    PHASEALLOC_SIMCUDA_DIR="$root/$build_dir/simcuda/lib" PHASEALLOC_GPU_TESTS=sim \
    "$venv_dir/bin/python" -m pytest -q -p no:cacheprovider tests/gpu/test_vllm.py tests/gpu/test_trl_colocate.py \
    tests/gpu/test_vllm_ipc.py
}

# verl 0.9.1 with its `vllm` extra (torch 2.11.0, vLLM 0.24.0) in its own venv, the bridge built
# against that torch, and its PPO job on 2 simulated GPUs under both allocators
# (tests/gpu/test_verl.py): too long for CI's budget on a 2-core machine, so a weekly-shaped target of
# its own, part of `weekly`.
verl_venv_dir=${PHASEALLOC_VERL_VENV:-$HOME/.cache/phasealloc/venv-verl0.9.1}
verl_requirements=tests/requirements-verl.txt
verl_no_deps='^(verl|vllm|torch|torchvision|compressed-tensors|xgrammar|tensordict|torchdata|peft|accelerate|transferqueue)=='
verl_env() {
  pinned_venv verl "$verl_venv_dir" "$verl_requirements" "$verl_no_deps"
  venv_bridge verl "$verl_venv_dir"
}

verl_test() {
  verl_env
  local version
  version=$(torch_version "$verl_venv_dir")
  venv_surfaces verl "$verl_venv_dir"
  log "verl: verl's PPO job on 2 simulated GPUs, both allocators (tests/gpu/test_verl.py)"
  PHASEALLOC_VERL_VENV="$verl_venv_dir" PHASEALLOC_VERL_LIBRARY="$root/$build_dir/torch-$version/interpose/libphasealloc_torch.so" \
    PHASEALLOC_SIMCUDA_DIR="$root/$build_dir/simcuda/lib" PHASEALLOC_GPU_TESTS=sim SIMCUDA_REQUIRE=1 \
    "$venv_dir/bin/python" -m pytest -q -p no:cacheprovider tests/gpu/test_verl.py
}

# OpenRLHF 0.11.2 (vLLM 0.29, torch 2.13.0, DeepSpeed 0.19.6, Ray 2.55) gets its own venv the way
# vLLM's does: the packages that require torch without dependencies, DeepSpeed and flash-attn built
# against that torch without build isolation (DeepSpeed without its CUDA ops, flash-attn as its
# Python part only), then the rest of tests/requirements-openrlhf.txt; the bridge is built against
# torch 2.13.0 inside the release build.
openrlhf_venv_dir=${PHASEALLOC_OPENRLHF_VENV:-$HOME/.cache/phasealloc/venv-openrlhf0.11.2}
openrlhf_requirements=tests/requirements-openrlhf.txt
openrlhf_no_deps='^(openrlhf|vllm|torch|torchvision|compressed-tensors|xgrammar|accelerate|peft|bitsandbytes|optimum|torchdata|torchmetrics|transformers-stream-generator)=='
openrlhf_built='^(deepspeed|flash-attn)=='
openrlhf_env() {
  openrlhf_venv
  venv_bridge openrlhf "$openrlhf_venv_dir"
}

openrlhf_venv() {
  local stamp="$openrlhf_venv_dir/.phasealloc-requirements" venv="$openrlhf_venv_dir" req="$openrlhf_requirements"
  if ! { [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$stamp" "$req"; }; then
    log "openrlhf: making $venv (OpenRLHF, vLLM and torch without their CUDA wheels)"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    grep -E "$openrlhf_no_deps" "$req" | xargs "$venv/bin/python" -m pip install -q --no-deps
    grep -v -E -e "$openrlhf_no_deps" -e "$openrlhf_built" -e '^#' -e '^$' "$req" | xargs "$venv/bin/python" -m pip install -q
    # Their setup scripts import torch, whose CUDA libraries are the simulator's: built under it.
    grep -E "$openrlhf_built" "$req" | DS_BUILD_OPS=0 FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE FLASH_ATTENTION_FORCE_BUILD=TRUE \
      PHASEALLOC_SIMCUDA_DIR="$root/$build_dir/simcuda/lib" SIMCUDA_GPU=quiet:1 \
      xargs interpose/python/bin/phasealloc-run --sim-gpu --native -- "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation
    no_cuda_wheels openrlhf "$venv"
    cp "$req" "$stamp"
  fi
}

openrlhf_test() {
  openrlhf_env
  local version
  version=$(grep -m1 '^torch==' "$openrlhf_requirements" | cut -d= -f3)
  venv_surfaces openrlhf "$openrlhf_venv_dir"
  log "openrlhf: tests/gpu/test_openrlhf.py (OpenRLHF's GRPO on 2 simulated GPUs and a local Ray cluster)"
  PHASEALLOC_OPENRLHF_VENV="$openrlhf_venv_dir" \
    PHASEALLOC_OPENRLHF_LIBRARY="$build_dir/torch-$version/interpose/libphasealloc_torch.so" \
    PHASEALLOC_SIMCUDA_DIR="$root/$build_dir/simcuda/lib" PHASEALLOC_GPU_TESTS=sim \
    "$venv_dir/bin/python" -m pytest -q -p no:cacheprovider tests/gpu/test_openrlhf.py
}

# The smoke of verl's and OpenRLHF's jobs (the whole jobs, both allocators, are `tools/dev.sh verl`
# and `tools/dev.sh openrlhf`, in `weekly`): each job runs under phasealloc until its
# workers hold device memory (verl: 2 FSDP workers and 2 vLLM workers; OpenRLHF: 2 actor and 2
# reference DeepSpeed ranks, 2 vLLM engine cores), and every process that holds any has phasealloc
# loaded. About 3 minutes with the venvs cached.
frameworks_smoke() {
  local verl_version openrlhf_version
  verl_env
  openrlhf_env
  verl_version=$(torch_version "$verl_venv_dir")
  openrlhf_version=$(torch_version "$openrlhf_venv_dir")
  log "frameworks: verl's and OpenRLHF's workers swap in phasealloc (the smokes of test_verl.py, test_openrlhf.py)"
  PHASEALLOC_VERL_VENV="$verl_venv_dir" PHASEALLOC_VERL_LIBRARY="$root/$build_dir/torch-$verl_version/interpose/libphasealloc_torch.so" \
    PHASEALLOC_OPENRLHF_VENV="$openrlhf_venv_dir" \
    PHASEALLOC_OPENRLHF_LIBRARY="$root/$build_dir/torch-$openrlhf_version/interpose/libphasealloc_torch.so" \
    PHASEALLOC_SIMCUDA_DIR="$root/$build_dir/simcuda/lib" PHASEALLOC_GPU_TESTS=sim SIMCUDA_REQUIRE=1 \
    "$venv_dir/bin/python" -m pytest -q -p no:cacheprovider tests/gpu/test_verl.py tests/gpu/test_openrlhf.py \
    -k test_workers_swap_in_phasealloc
}

case "${1:-}" in
  deps) deps ;;
  venv) deps; venv ;;
  build) deps; build ;;
  demo) deps; demo ;;
  test)
    case "${2:-}" in
      "") test_all ;;
      --quick) test_quick ;;
      *) echo "tools/dev.sh test: unknown option '$2' (only --quick)" >&2; exit 2 ;;
    esac ;;
  weekly) test_weekly ;;
  matrix) deps; venv; build; matrix_envs; matrix $(weekly_matrix_venvs) ;;
  vllm) deps; venv; build; vllm_test ;;
  verl) deps; venv; build; verl_test ;;
  openrlhf) deps; venv; build; openrlhf_test ;;
  frameworks) deps; venv; build; verl_test; openrlhf_test ;;
  smoke) deps; venv; build; frameworks_smoke ;;
  *) sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
