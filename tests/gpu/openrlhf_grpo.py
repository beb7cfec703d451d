"""OpenRLHF 0.11.2's GRPO, unmodified, colocated on 2 simulated GPUs: the job's files and its command.

    python openrlhf_grpo.py WORKDIR        # writes WORKDIR/model, WORKDIR/prompts.jsonl
    python openrlhf_grpo.py WORKDIR --print-command    # the job's command line, one argument a line

The job is OpenRLHF's own CLI, `python -m openrlhf.cli.train_ppo_ray`, as its GRPO examples run it:
group-normalised advantages (--algo.advantage.estimator group_norm) with the KL as a loss against a
reference model, every model colocated on the same GPUs (--train.colocate_all: 2 DeepSpeed ZeRO-2
actors, 2 reference models and 2 vLLM engines share 2 GPUs through one Ray placement group), vLLM's
and DeepSpeed's sleep modes on (--vllm.enable_sleep, --ds.enable_sleep), and the actor's weights
sent to the engines over CUDA IPC after each step. OpenRLHF 0.11 spells the flags of its older
documentation (--colocate_all_models, --vllm_enable_sleep) with dotted groups.

The model is tests/harness/tiny_rlhf.py's random Llama and word-level tokenizer, with head_dim 64
(vLLM's FLASH_ATTN wants it); the reward is tests/gpu/openrlhf_reward.py (a Python reward_func file,
--reward.remote_url). Sizes: 8 prompts, 4 a rollout, 2 samples each, so 2 steps of one optimizer step
each; 8 new tokens a sample. Attention in DeepSpeed's models is PyTorch's SDPA (flash-attn is installed
without its CUDA module: tests/requirements-openrlhf.txt). vLLM runs eager (--vllm.enforce_eager):
capturing its graphs is covered by tests/gpu/test_vllm.py and costs minutes of CPU here.

Run by tests/gpu/test_openrlhf.py (tools/dev.sh openrlhf) under phasealloc-run --sim-gpu with
SIMCUDA_GPU=count:2, the OpenRLHF venv's interpreter; the test starts the job and reads what each
process left behind.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPTS = 8
ROLLOUT_BATCH = 4
SAMPLES_PER_PROMPT = 2
NEW_TOKENS = 8
GPUS = 2
STEPS = PROMPTS // ROLLOUT_BATCH


def prepare(workdir):
    """The tiny model and tokenizer (WORKDIR/model) and the prompt file (WORKDIR/prompts.jsonl)."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "harness"))
    from tiny_rlhf import prompts, tiny_llama_and_tokenizer

    os.makedirs(workdir, exist_ok=True)
    tiny_llama_and_tokenizer(workdir, hidden_size=128, intermediate_size=256, num_attention_heads=2,
                             num_key_value_heads=2, head_dim=64, max_position_embeddings=256)
    with open(os.path.join(workdir, "prompts.jsonl"), "w") as out:
        for text in prompts(PROMPTS):
            out.write(json.dumps({"prompt": text, "label": ""}) + "\n")


def command(workdir, python=sys.executable):
    """OpenRLHF's CLI with the job's arguments."""
    return [python, "-m", "openrlhf.cli.train_ppo_ray",
            "--actor.model_name_or_path", os.path.join(workdir, "model"),
            "--reward.remote_url", os.path.join(HERE, "openrlhf_reward.py"),
            "--data.prompt_dataset", os.path.join(workdir, "prompts.jsonl"),
            "--data.input_key", "prompt", "--data.label_key", "label",
            "--data.max_len", "64", "--rollout.max_new_tokens", str(NEW_TOKENS),
            "--rollout.batch_size", str(ROLLOUT_BATCH), "--rollout.micro_batch_size", "2",
            "--rollout.n_samples_per_prompt", str(SAMPLES_PER_PROMPT),
            "--train.batch_size", str(ROLLOUT_BATCH * SAMPLES_PER_PROMPT), "--train.micro_batch_size", "2",
            "--train.num_episodes", "1", "--train.max_epochs", "1", "--train.seed", "42",
            "--algo.advantage.estimator", "group_norm",
            "--algo.kl.init_coef", "0.001", "--algo.kl.use_loss", "--algo.kl.estimator", "k3",
            "--actor.num_nodes", "1", "--actor.num_gpus_per_node", str(GPUS),
            "--ref.num_nodes", "1", "--ref.num_gpus_per_node", str(GPUS),
            "--vllm.num_engines", str(GPUS), "--vllm.tensor_parallel_size", "1",
            "--vllm.gpu_memory_utilization", "0.2", "--vllm.enforce_eager",
            "--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep",
            "--ds.zero_stage", "2", "--ds.attn_implementation", "sdpa",
            "--actor.adam.lr", "1e-6",
            "--ckpt.output_dir", os.path.join(workdir, "ckpt"),
            "--ckpt.path", os.path.join(workdir, "ckpt", "checkpoints"),
            "--logger.logging_steps", "1"]


if __name__ == "__main__":
    if "--print-command" in sys.argv[2:]:
        print("\n".join(command(os.path.abspath(sys.argv[1]))))
    else:
        prepare(os.path.abspath(sys.argv[1]))
