"""verl's PPO trainer (verl.trainer.main_ppo, unmodified) on a tiny random Llama and a small local
dataset, as a user runs its GRPO quickstart: 2 GPUs, a local Ray cluster, FSDP actor and reference,
vLLM rollout (tests/gpu/test_verl.py starts it under phasealloc-run).

    python verl_ppo_job.py DIR [STEPS]

DIR gets the model (tests/harness/tiny_rlhf.py's Llama and word-level tokenizer, with a chat template:
verl's dataset applies it), train.parquet and val.parquet in verl's RL dataset layout (prompt
messages, data_source, reward_model.ground_truth), then this process becomes
`python -m verl.trainer.main_ppo` with the overrides below.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "harness"))

CHAT_TEMPLATE = ("{% for m in messages %}{{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}w0 {% endif %}")


def prepare(directory):
    import pandas
    from tiny_rlhf import prompts, tiny_llama_and_tokenizer

    model_dir, tokenizer = tiny_llama_and_tokenizer(directory)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(model_dir)
    rows = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": p}], "ability": "math",
             "reward_model": {"style": "rule", "ground_truth": "7"}, "extra_info": {"split": "train", "index": i}}
            for i, p in enumerate(prompts(16))]
    pandas.DataFrame(rows).to_parquet(os.path.join(directory, "train.parquet"))
    pandas.DataFrame(rows[:4]).to_parquet(os.path.join(directory, "val.parquet"))
    return model_dir


def overrides(directory, model_dir, steps):
    return [
        "algorithm.adv_estimator=grpo",
        "data.train_files=%s" % os.path.join(directory, "train.parquet"),
        "data.val_files=%s" % os.path.join(directory, "val.parquet"),
        "data.train_batch_size=4", "data.max_prompt_length=16", "data.max_response_length=8",
        "data.dataloader_num_workers=0",
        "actor_rollout_ref.model.path=%s" % model_dir,
        "actor_rollout_ref.model.use_remove_padding=False",
        # PyTorch attention: flash-attn is a CUDA kernel package, not installed (nor needed on the simulator).
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.25",
        # Greedy decoding: on the simulated GPU the sampler's argmax is computed (value mode), while
        # random sampling reads kernels' outputs that are not (token ids out of the vocabulary).
        "actor_rollout_ref.rollout.temperature=0",
        # The rollout's own log-probs (their token ids come from kernels the simulator does not
        # compute); the actor recomputes the old log-probs, as verl does by default.
        "actor_rollout_ref.rollout.calculate_log_probs=False",
        "actor_rollout_ref.rollout.enforce_eager=True",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        "algorithm.use_kl_in_reward=False",
        "trainer.logger=[console]", "trainer.n_gpus_per_node=2", "trainer.nnodes=1",
        "trainer.total_training_steps=%d" % steps, "trainer.save_freq=-1", "trainer.test_freq=-1",
        "trainer.val_before_train=False", "trainer.project_name=phasealloc", "trainer.experiment_name=tiny",
        "trainer.default_local_dir=%s" % os.path.join(directory, "checkpoints"),
        # The local cluster: CPUs to schedule every actor on, the (simulated) GPUs Ray cannot detect.
        "ray_kwargs.ray_init.num_cpus=16",  # logical: the trainer, TransferQueue and vLLM actors
        "+ray_kwargs.ray_init.num_gpus=2",
        # One agent-loop and one reward worker instead of 8 each, and no dashboard: every Ray worker
        # is a Python process with torch loaded (0.5-1 GB), and this host's memory is the limit.
        "actor_rollout_ref.rollout.agent.num_workers=1", "reward.num_workers=1",
        "+ray_kwargs.ray_init.include_dashboard=False",
    ]


def main():
    directory = os.path.abspath(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    os.makedirs(directory, exist_ok=True)
    model_dir = prepare(directory)
    argv = [sys.executable, "-m", "verl.trainer.main_ppo"] + overrides(directory, model_dir, steps)
    sys.stdout.flush()
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    main()
