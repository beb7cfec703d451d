"""GRPO with a reference model, both Llamas sharded with FSDP2 over several GPUs, for planning an RLHF
job's memory: torchrun --nproc-per-node N -m phasealloc.examples.fsdp2_grpo [--shape llama3-8b]

Each step does what a GRPO trainer does, in its phases:
  generation  the policy samples --group responses to each of --batch prompts (KV cache per token)
  inference   the frozen reference model scores the rollouts under no_grad
  training    the policy's clipped-ratio loss with a KL penalty to the reference, and backward
              (activation checkpointing: each layer's activations are recomputed in backward)
  optimizer   AdamW step and zero_grad
Rewards are random (a reward model is out of scope here); advantages are normalised per group. The
models are built on the meta device and each rank materialises only its shards with random weights
(the shapes are fsdp2_llama's: nothing is downloaded). The script does not mention phasealloc.

To ask whether Llama-3-70B's GRPO fits on 8 GPUs of 80 GiB, with and without offload, on one small
machine (two of the eight ranks run, the others virtual; --values off: no kernel computes, so the
simulated GPUs cost no memory here, and generation runs to --new-tokens):
  phasealloc dryrun --values off --gpu 80GiB --record-gpu 256GiB --world-size 8 -- \\
      python -m phasealloc.examples.fsdp2_grpo --shape llama3-70b
  PHASEALLOC_CONF=offload:auto phasealloc dryrun ... (the same)
"""

import argparse
import sys
import time

from .fsdp2_llama import SHAPES, build, sharded, start


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m phasealloc.examples.fsdp2_grpo", description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="llama3-8b", help="model shape (default llama3-8b)")
    p.add_argument("--steps", type=int, default=2, help="GRPO steps (default 2)")
    p.add_argument("--batch", type=int, default=1, help="prompts per rank per step (default 1)")
    p.add_argument("--group", type=int, default=8, help="responses sampled per prompt (default 8)")
    p.add_argument("--prompt-tokens", type=int, default=256, help="prompt length (default 256)")
    p.add_argument("--new-tokens", type=int, default=128, help="tokens generated per response (default 128)")
    p.add_argument("--beta", type=float, default=0.04, help="KL penalty weight (default 0.04)")
    p.add_argument("--no-checkpointing", dest="checkpointing", action="store_false",
                   help="keep every layer's activations for backward (default: recompute them, as GRPO trainers do)")
    args = p.parse_args(argv)
    for name in ("steps", "batch", "group", "prompt_tokens", "new_tokens"):
        if getattr(args, name) <= 0:
            p.error("--%s must be positive" % name.replace("_", "-"))
    return args


def token_logprobs(model, sequences, prompt_tokens, torch):
    """Log-probabilities of the generated tokens under `model` (one forward over whole sequences)."""
    logits = model(input_ids=sequences).logits[:, prompt_tokens - 1:-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, prompt_tokens:, None]).squeeze(-1)


def grpo_step(args, policy, reference, optimizer, torch):
    vocab = policy.config.vocab_size
    prompts = torch.randint(1, vocab, (args.batch, args.prompt_tokens), device="cuda")
    with torch.no_grad():
        sequences = policy.generate(prompts.repeat_interleave(args.group, 0), max_new_tokens=args.new_tokens,
                                    min_new_tokens=args.new_tokens, do_sample=True, top_k=0, pad_token_id=0)
        reference_logprobs = token_logprobs(reference, sequences, args.prompt_tokens, torch)
    rewards = torch.rand(args.batch, args.group, device="cuda")
    advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)).reshape(-1, 1)
    logprobs = token_logprobs(policy, sequences, args.prompt_tokens, torch)
    ratio = torch.exp(logprobs - logprobs.detach())
    to_reference = reference_logprobs - logprobs
    kl = torch.exp(to_reference) - to_reference - 1
    loss = (-ratio * advantages + args.beta * kl).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    import torch.distributed as dist

    rank, world = start(torch)
    started = time.time()
    seq = args.prompt_tokens + args.new_tokens
    policy = sharded(build(args.shape, "bfloat16", seq, torch), 1234 + rank, torch)
    if args.checkpointing:
        policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    reference = sharded(build(args.shape, "bfloat16", seq, torch), 4321 + rank, torch).eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-6)
    for _ in range(args.steps):
        grpo_step(args, policy, reference, optimizer, torch)
    torch.cuda.synchronize()
    print("rank %d/%d: GRPO %s, %d steps of %d x %d responses of %d+%d tokens, peak reserved %.2f GiB, %.1f s"
          % (rank, world, args.shape, args.steps, args.batch, args.group, args.prompt_tokens, args.new_tokens,
             torch.cuda.max_memory_reserved() / 2**30, time.time() - started), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
