"""The reward of the OpenRLHF GRPO job (tests/gpu/openrlhf_grpo.py): OpenRLHF loads a Python file given
as --reward.remote_url and calls its reward_func(queries, prompts, labels) for each sample. The reward
is the completion's length in words past the prompt, over 10, so that samples of one prompt differ
and GRPO's group-normalised advantages are not all zero."""

import torch


def reward_func(queries, prompts, labels):
    rewards = torch.tensor([max(len(q.split()) - len(p.split()), 0) / 10.0 for q, p in zip(queries, prompts)])
    return {"rewards": rewards, "scores": rewards, "extra_logs": {"completion_words": rewards * 10.0}}
