"""A small PPO-style RLHF job on one GPU, for trying phasealloc: python -m phasealloc.examples.rlhf_step

Each step does what an RLHF trainer does, in its phases:
  generation  the policy generates responses to a batch of prompts (KV cache grows per token)
  inference   reference and reward models score the rollouts under no_grad
  training    the policy's loss (a KL-penalised, reward-weighted log-likelihood) and backward
  optimizer   AdamW step and zero_grad

Models are Hugging Face GPT-2s built from a config with random weights (nothing is downloaded). The
script does not mention phasealloc: run it under `PHASEALLOC=1` or `phasealloc-run` and phasealloc
detects the phases; it prints phasealloc's per-phase table when phasealloc is the allocator, and
torch's memory numbers either way. Without a GPU: `phasealloc-run --sim-gpu -- python -m ...`.
"""

import argparse
import os
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m phasealloc.examples.rlhf_step", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3, help="RLHF steps (default 3)")
    p.add_argument("--batch", type=int, default=8, help="prompts per step (default 8)")
    p.add_argument("--prompt-tokens", type=int, default=32, help="prompt length (default 32)")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens generated per prompt (default 32)")
    p.add_argument("--layers", type=int, default=4, help="GPT-2 layers (default 4)")
    p.add_argument("--width", type=int, default=256, help="GPT-2 hidden size (default 256)")
    p.add_argument("--vocab", type=int, default=8192, help="vocabulary size (default 8192)")
    args = p.parse_args(argv)
    for name in ("steps", "batch", "prompt_tokens", "new_tokens", "layers", "width", "vocab"):
        if getattr(args, name) <= 0:
            p.error("--%s must be positive" % name.replace("_", "-"))
    if args.width % 4:
        p.error("--width must be a multiple of 4 (4 attention heads)")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    import transformers

    if not torch.cuda.is_available():
        print("rlhf_step: no CUDA device (without a GPU: phasealloc-run --sim-gpu -- python -m "
              "phasealloc.examples.rlhf_step)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    # Under torchrun every rank runs the whole job on its own GPU (no collectives).
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    shape = dict(n_layer=args.layers, n_head=4, n_embd=args.width, vocab_size=args.vocab,
                 n_positions=args.prompt_tokens + args.new_tokens, bos_token_id=args.vocab - 1,
                 eos_token_id=args.vocab - 1, pad_token_id=0)
    policy = transformers.GPT2LMHeadModel(transformers.GPT2Config(**shape)).cuda()
    reference = transformers.GPT2LMHeadModel(transformers.GPT2Config(**shape)).cuda().eval()
    reward = transformers.GPT2ForSequenceClassification(transformers.GPT2Config(**shape, num_labels=1)).cuda().eval()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-5)

    for step in range(args.steps):
        started = time.perf_counter()
        prompts = torch.randint(1, args.vocab, (args.batch, args.prompt_tokens), device="cuda")
        rollout = policy.generate(prompts, max_new_tokens=args.new_tokens, do_sample=True, top_k=50,
                                  pad_token_id=0, attention_mask=torch.ones_like(prompts))
        with torch.no_grad():
            ref_logprobs = torch.log_softmax(reference(rollout).logits.float(), dim=-1)
            scores = reward(rollout).logits.squeeze(-1)
        logprobs = torch.log_softmax(policy(rollout).logits.float(), dim=-1)
        taken = rollout[:, 1:].unsqueeze(-1)
        token_logprobs = logprobs[:, :-1].gather(-1, taken).squeeze(-1)
        kl = (token_logprobs - ref_logprobs[:, :-1].gather(-1, taken).squeeze(-1)).mean(dim=1)
        loss = -((scores - 0.1 * kl).detach() * token_logprobs.mean(dim=1)).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        del rollout, ref_logprobs, scores, logprobs, token_logprobs, kl, loss
        torch.cuda.synchronize()
        print("step %d: %.2f s, allocated %.1f MiB, reserved %.1f MiB, peak allocated %.1f MiB" % (
            step, time.perf_counter() - started, torch.cuda.memory_allocated() / 2**20,
            torch.cuda.memory_reserved() / 2**20, torch.cuda.max_memory_allocated() / 2**20))

    import phasealloc

    if phasealloc.is_enabled():
        print(phasealloc.summary())
    else:
        print("allocator: PyTorch's own (%s); run under PHASEALLOC=1 or phasealloc-run for phasealloc's per-phase "
              "table" % torch.cuda.get_allocator_backend())
    return 0


if __name__ == "__main__":
    sys.exit(main())
