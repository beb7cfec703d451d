"""One process of test_accelerate_jobs.py's job: TRL's GRPOTrainer, unmodified, on a tiny random Llama,
3 steps, started by `accelerate launch --multi_gpu --num_processes N` (DDP over NCCL). Each process
generates completions for its share of the prompts and scores them with a Python reward; the
trainer gathers the rewards of all processes to compute the group advantages, so the metrics it
logs are the same on every process only if the gather moved the real values. Writes the trainer's
log history and the rewards this process computed, step by step, to <out_dir>/rank<N>.json.
With --cpu the same job trains on the CPU (started by torchrun: accelerate's state is multi-CPU, DDP
over gloo; GRPOConfig's use_cpu), the reference the test compares the device's job with.

    accelerate launch --multi_gpu --num_processes N trl_grpo_rank.py OUT_DIR
    torchrun --nproc-per-node N trl_grpo_rank.py OUT_DIR --cpu
"""

import json
import os
import sys

from tiny_rlhf import common_args, prompts, reward_length, tiny_llama_and_tokenizer  # tests/harness, on PYTHONPATH


def main(out_dir, use_cpu):
    import torch
    from accelerate import PartialState
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from transformers import AutoTokenizer

    state = PartialState(cpu=use_cpu)  # on the CPU: gloo, the trainer's own state is this one
    with state.main_process_first():  # one process writes the model, the others then read it
        if state.is_main_process:
            model_dir, tokenizer = tiny_llama_and_tokenizer(out_dir)
        else:
            model_dir = os.path.join(out_dir, "model")
            tokenizer = AutoTokenizer.from_pretrained(model_dir)
    args = GRPOConfig(num_generations=4, max_completion_length=16, use_cpu=use_cpu, **common_args(model_dir))
    local_rewards = []  # per generation step, the rewards of this process's completions

    def reward(completions, **kwargs):
        rewards = reward_length(completions, **kwargs)
        local_rewards.append(rewards)
        return rewards

    trainer = GRPOTrainer(model=model_dir, reward_funcs=reward, args=args,
                          train_dataset=Dataset.from_dict({"prompt": prompts()}), processing_class=tokenizer)
    trainer.train()
    result = {"rank": state.process_index, "world": state.num_processes, "steps": trainer.state.global_step,
              "log": [h for h in trainer.state.log_history if "loss" in h], "local_rewards": local_rewards,
              "ddp": type(trainer.model_wrapped).__name__, "allocator": torch.cuda.get_allocator_backend()}
    with open(os.path.join(out_dir, "rank%d.json" % state.process_index), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["--cpu"])
