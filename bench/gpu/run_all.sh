#!/bin/sh
# Runs the RLHF PPO workload once per allocator variant (each in a fresh process) and writes
# bench/gpu/results.md. Extra arguments go to rlhf_ppo.py (e.g. --model-size medium --batch 32).
#
#   bench/gpu/run_all.sh                      # small model, defaults
#   PHASEALLOC_LIBRARY=build/interpose/libphasealloc_torch.so bench/gpu/run_all.sh --model-size medium
#
# PHASEALLOC_VARIANTS overrides the list (space-separated; phasealloc:CONF entries allowed).
set -eu
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
python=${PYTHON:-python3}
variants=${PHASEALLOC_VARIANTS:-"native native-expandable native-empty-cache-at-phases phasealloc"}

for v in $variants; do
  set -- "$@" --allocator "$v"
done
exec "$python" "$here/rlhf_ppo.py" --markdown "$here/results.md" "$@"
