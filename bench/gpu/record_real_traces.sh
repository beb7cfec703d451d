#!/usr/bin/env bash
# Records the real-code traces in tools/data/real/: bench/gpu/rlhf_job.py, a plain RLHF job on
# Hugging Face models with random weights, run by `phasealloc dryrun` on a simulated 80 GiB GPU
# (phases as the env-var swap detects them), each trace gzip-compressed. Every trace's command is
# the line below that made it; tools/data/real/README.md lists them with their sizes.
#
#   bench/gpu/record_real_traces.sh [NAME...]        # default: all of them
#
# Environment: PHASEALLOC_CLI (default build/tools/cli/phasealloc), PYTHON (the venv's python).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cli=${PHASEALLOC_CLI:-$root/build/tools/cli/phasealloc}
python=${PYTHON:-$HOME/.cache/phasealloc/venv-torch2.15/bin/python}
out=$root/tools/data/real
job=$root/bench/gpu/rlhf_job.py

declare -A jobs=(
  [ppo-gpt2-small]="--algo ppo --arch gpt2 --size small --steps 4"
  [ppo-gpt2-1.3b]="--algo ppo --arch gpt2 --size 1.3b --steps 3"
  [ppo-llama-7b-lora]="--algo ppo --arch llama --size 7b --lora --steps 2"
  [grpo-gpt2-small]="--algo grpo --arch gpt2 --size small --steps 4"
  [grpo-gpt2-1.3b]="--algo grpo --arch gpt2 --size 1.3b --steps 3"
  [ppo-gpt2-1.3b-offload-reference]="--algo ppo --arch gpt2 --size 1.3b --offload reference --steps 3"
  [ppo-gpt2-small-offload-optimizer]="--algo ppo --arch gpt2 --size small --offload optimizer --steps 4"
  [ppo-gpt2-small-lora]="--algo ppo --arch gpt2 --size small --lora --steps 4"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(ppo-gpt2-small ppo-gpt2-1.3b ppo-llama-7b-lora grpo-gpt2-small grpo-gpt2-1.3b
                                 ppo-gpt2-1.3b-offload-reference ppo-gpt2-small-offload-optimizer ppo-gpt2-small-lora)
mkdir -p "$out"
for name in "${names[@]}"; do
  args=${jobs[$name]:?"unknown trace $name (known: ${!jobs[*]})"}
  dir=$(mktemp -d)
  echo "== $name: rlhf_job.py $args" >&2
  # shellcheck disable=SC2086
  "$cli" dryrun --gpu 80GiB --html "" -q --trace-dir "$dir/t" -- "$python" "$job" $args >&2
  traces=("$dir"/t/*.patrace)
  [ ${#traces[@]} -eq 1 ] || { echo "$name: expected one process's trace, got ${#traces[@]}" >&2; exit 1; }
  gzip -9 -n -c "${traces[0]}" > "$out/$name.patrace.gz"
  rm -rf "$dir"
  echo "$name $(stat -c %s "$out/$name.patrace.gz") bytes: python bench/gpu/rlhf_job.py $args" >&2
done
