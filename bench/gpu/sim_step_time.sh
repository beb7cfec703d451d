#!/bin/sh
# sim_step_time.sh: PPO step time on the simulated GPU, native vs native-expandable vs
# phasealloc, in one run of bench/gpu/rlhf_ppo.py, then rewrites bench/README.md's step-time section
# (between <!-- step-time:begin --> and <!-- step-time:end -->; appended at the end when absent).
#
#   bench/gpu/sim_step_time.sh                              # small model, 3 rounds x 5 steps
#   BUILD_DIR=build-dev bench/gpu/sim_step_time.sh --steps 8 --rounds 2
#   RESULTS_JSON=run.json bench/gpu/sim_step_time.sh        # no run: the section from a saved run
#
# The variants run interleaved: each round runs native, native-expandable and phasealloc once, each
# in a fresh process, the order rotated by one per round (rlhf_ppo.py --rounds). Kernels are skipped
# on the simulator, so a step's time is host time. Extra arguments go to rlhf_ppo.py after the
# defaults (--model-size small --steps 5 --rounds 3), so they override them.
#
# Environment: BUILD_DIR (default build; relative to the repository) holds
# interpose/libphasealloc_torch.so and simcuda/lib; PYTHON (default
# ~/.cache/phasealloc/venv-torch2.15/bin/python) has torch and transformers; SIM_GPU (default 80GiB)
# is the simulated GPU's memory; README (default bench/README.md) is the file rewritten; JSON_OUT
# (default a file under $TMPDIR) keeps the run's JSON; RESULTS_JSON renders that file instead of
# running. The numbers in the section come from that JSON only.
set -eu
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
repo=$(CDPATH='' cd -- "$here/../.." && pwd)
python=${PYTHON:-$HOME/.cache/phasealloc/venv-torch2.15/bin/python}
readme=${README:-$repo/bench/README.md}
sim_gpu=${SIM_GPU:-80GiB}
build_dir=${BUILD_DIR:-build}
case "$build_dir" in /*) ;; *) build_dir="$repo/$build_dir" ;; esac

if [ -n "${RESULTS_JSON:-}" ]; then
  exec "$python" "$repo/bench/gpu/step_time_readme.py" "$RESULTS_JSON" "$readme"
fi

library="$build_dir/interpose/libphasealloc_torch.so"
sim_dir="$build_dir/simcuda/lib"
for need in "$library" "$sim_dir/libcudart.so.13"; do
  if [ ! -f "$need" ]; then
    echo "sim_step_time: $need not found (build the tree: tools/dev.sh build, or set BUILD_DIR)" >&2
    exit 2
  fi
done
if [ ! -x "$python" ]; then
  echo "sim_step_time: no Python at $python (set PYTHON to an interpreter with torch and transformers)" >&2
  exit 2
fi

# The command as given, for the README: the settings that came from the environment, then the arguments.
command="bench/gpu/sim_step_time.sh"
for arg in "$@"; do command="$command $arg"; done
for var in SIM_GPU PYTHON BUILD_DIR; do
  eval "value=\${$var:-}"
  [ -n "$value" ] && command="$var=$value $command"
done

json=${JSON_OUT:-}
if [ -z "$json" ]; then
  json=$(mktemp "${TMPDIR:-/tmp}/sim_step_time.XXXXXX.json")
fi

cd "$repo"
# values:off (unless SIMCUDA_GPU says otherwise): host time is the allocators' and PyTorch's, not the
# value mode's CPU work, and generate() decodes the fixed length the benchmark asks for.
SIMCUDA_GPU="values:off,quiet:1${SIMCUDA_GPU:+,$SIMCUDA_GPU}" \
PHASEALLOC_LIBRARY="$library" PHASEALLOC_SIMCUDA_DIR="$sim_dir" \
  "$repo/interpose/python/bin/phasealloc-run" --sim-gpu="$sim_gpu" --native -- \
  "$python" "$repo/bench/gpu/rlhf_ppo.py" \
    --allocator native --allocator native-expandable --allocator phasealloc \
    --model-size small --steps 5 --rounds 3 "$@" \
    --json "$json" --step-time-readme "$readme" --command "$command"
echo "sim_step_time: the run's JSON is $json; the section is in $readme" >&2
