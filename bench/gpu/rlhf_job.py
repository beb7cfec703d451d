#!/usr/bin/env python3
"""A plain RLHF training job, as users write them, for dry runs and real-code traces.

    phasealloc dryrun --gpu 80GiB -- python bench/gpu/rlhf_job.py --algo ppo --arch llama --size 7b --lora

Hugging Face models built from configs with random weights, directly on the GPU and in the
training dtype, so nothing is downloaded and initialisation touches no memory on the simulated GPU:

  ppo   actor (trained), reference (frozen), critic (value head, trained), reward model (frozen);
        one step: generate -> log-probs, values, rewards (no grad) -> PPO loss, backward -> AdamW
  grpo  group sampling: each prompt is answered --group times; advantages are the rewards
        normalised within each group; no critic; KL to the reference in the loss

  --lora     PEFT LoRA adapters on the trained models (the actor's frozen base doubles as the
             reference: adapters disabled), as a single-GPU 7B job needs to fit
  --offload  reference: the reference model lives on the host between inference phases;
             optimizer: AdamW's states live on the host between optimizer steps

Generation always runs exactly --gen-len new tokens. Nothing here marks phases: phasealloc's
env-var swap detects them (generate, no-grad forwards, backward, optimizer.step), as it does in any
unmodified job. The job prints one line per step.
"""

import argparse
import sys
import time

GPT2_SIZES = {"tiny": (2, 128, 4), "small": (12, 768, 12), "1.3b": (24, 2048, 16)}  # layers, hidden, heads
LLAMA_SIZES = {"tiny": (2, 256, 4, 688), "7b": (32, 4096, 32, 11008)}  # layers, hidden, heads, intermediate


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algo", choices=("ppo", "grpo"), default="ppo")
    p.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2")
    p.add_argument("--size", default="small", help="gpt2: tiny, small, 1.3b; llama: tiny, 7b")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--batch", type=int, default=8, help="prompts per step")
    p.add_argument("--group", type=int, default=4, help="grpo: answers per prompt")
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--gen-len", type=int, default=128)
    p.add_argument("--minibatches", type=int, default=2)
    p.add_argument("--lora", action="store_true")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--offload", choices=("none", "reference", "optimizer"), default="none")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    sizes = GPT2_SIZES if args.arch == "gpt2" else LLAMA_SIZES
    if args.size not in sizes:
        p.error("--size %s: %s has %s" % (args.size, args.arch, ", ".join(sizes)))
    if args.lora and args.offload == "reference":
        p.error("--lora already shares the reference with the actor's base: nothing to offload")
    return args


def build(args, torch):
    """(actor, reference, critic or None, reward, config): on the GPU, in the training dtype."""
    import transformers

    transformers.logging.set_verbosity_error()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    if args.arch == "gpt2":
        from transformers import GPT2Config as Config, GPT2ForSequenceClassification as Scorer
        from transformers import GPT2LMHeadModel as CausalLM, GPT2Model as Body

        layers, hidden, heads = GPT2_SIZES[args.size]
        vocab = 1000 if args.size == "tiny" else 50257
        config = Config(n_layer=layers, n_embd=hidden, n_head=heads, vocab_size=vocab,
                        n_positions=max(1024, args.prompt_len + args.gen_len), pad_token_id=vocab - 1,
                        bos_token_id=vocab - 1, eos_token_id=vocab - 1)
    else:
        from transformers import LlamaConfig as Config, LlamaForCausalLM as CausalLM
        from transformers import LlamaForSequenceClassification as Scorer, LlamaModel as Body

        layers, hidden, heads, inter = LLAMA_SIZES[args.size]
        vocab = 1000 if args.size == "tiny" else 32000
        config = Config(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                        num_key_value_heads=heads, intermediate_size=inter, vocab_size=vocab,
                        max_position_embeddings=max(2048, args.prompt_len + args.gen_len), pad_token_id=0,
                        bos_token_id=1, eos_token_id=2)
    config.num_labels = 1

    class Critic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = Body(config)
            self.value_head = torch.nn.Linear(config.hidden_size, 1)

        def forward(self, input_ids, attention_mask):
            h = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return self.value_head(h).squeeze(-1)

    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("cuda"):  # built in place: no host copy, no fp32 detour
            actor = CausalLM(config)
            reference = None if args.lora else CausalLM(config).eval().requires_grad_(False)
            critic = Critic() if args.algo == "ppo" else None
            reward = Scorer(config).eval().requires_grad_(False)
    finally:
        torch.set_default_dtype(previous)
    if args.lora:
        from peft import LoraConfig, get_peft_model

        targets = ["c_attn", "c_proj"] if args.arch == "gpt2" else ["q_proj", "k_proj", "v_proj", "o_proj"]
        lora = LoraConfig(r=args.lora_rank, lora_alpha=2 * args.lora_rank, target_modules=targets, lora_dropout=0.0)
        actor = get_peft_model(actor, lora)
        if critic is not None:
            critic.body = get_peft_model(critic.body, lora)
    if args.offload == "reference":
        reference.to("cpu")
    return actor, reference, critic, reward, config


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch

    torch.manual_seed(args.seed)
    actor, reference, critic, reward, config = build(args, torch)
    trained = [p for p in actor.parameters() if p.requires_grad]
    if critic is not None:
        trained += [p for p in critic.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=1e-6)
    vocab = config.vocab_size
    device = torch.device("cuda")

    def logprobs_of(logits, tokens):
        return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

    def reference_logits(sequences, mask):
        if reference is None:  # LoRA: the actor's base without its adapters
            with actor.disable_adapter():
                return actor(sequences, attention_mask=mask).logits
        if args.offload == "reference":
            reference.to(device)
        logits = reference(sequences, attention_mask=mask).logits
        if args.offload == "reference":
            reference.to("cpu")
        return logits

    def move_optimizer_state(to):
        for state in optimizer.state.values():
            for key, value in state.items():
                if torch.is_tensor(value) and value.dim() > 0:
                    state[key] = value.to(to, non_blocking=False)

    def step():
        rows = args.batch * (args.group if args.algo == "grpo" else 1)
        prompts = torch.randint(3, vocab - 1, (args.batch, args.prompt_len), device=device)
        if args.algo == "grpo":
            prompts = prompts.repeat_interleave(args.group, dim=0)
        with torch.no_grad():
            sequences = actor.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=True,
                                       top_k=0, max_new_tokens=args.gen_len, min_new_tokens=args.gen_len,
                                       use_cache=True, pad_token_id=config.pad_token_id)
        mask = torch.ones_like(sequences)
        response = sequences[:, args.prompt_len:]
        start = args.prompt_len - 1
        with torch.no_grad():
            old_logprobs = logprobs_of(actor(sequences, attention_mask=mask).logits[:, start:-1], response)
            ref_logprobs = logprobs_of(reference_logits(sequences, mask)[:, start:-1], response)
            scores = reward(sequences, attention_mask=mask).logits.squeeze(-1).float()
            if args.algo == "ppo":
                values = critic(sequences, mask)[:, start:-1].float()
                rewards = -0.05 * (old_logprobs - ref_logprobs)
                rewards[:, -1] += scores
                advantages = torch.zeros_like(rewards)
                last = torch.zeros(rows, device=device)
                for t in reversed(range(rewards.shape[1])):  # GAE, gamma 1, lambda 0.95
                    following = values[:, t + 1] if t + 1 < rewards.shape[1] else 0.0
                    last = rewards[:, t] + following - values[:, t] + 0.95 * last
                    advantages[:, t] = last
                returns = advantages + values
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            else:
                grouped = scores.view(args.batch, args.group)
                normalised = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-6)
                advantages = normalised.reshape(rows, 1).expand_as(old_logprobs)
        size = max(1, rows // args.minibatches)
        for m in range(0, rows, size):
            part = slice(m, m + size)
            logits = actor(sequences[part], attention_mask=mask[part]).logits[:, start:-1]
            new_logprobs = logprobs_of(logits, response[part])
            ratio = torch.exp(new_logprobs - old_logprobs[part])
            loss = -torch.min(ratio * advantages[part], ratio.clamp(0.8, 1.2) * advantages[part]).mean()
            if args.algo == "ppo":
                value = critic(sequences[part], mask[part])[:, start:-1].float()
                loss = loss + 0.5 * (value - returns[part]).pow(2).mean()
            else:
                kl = torch.exp(ref_logprobs[part] - new_logprobs) - (ref_logprobs[part] - new_logprobs) - 1
                loss = loss + 0.04 * kl.mean()
            loss.backward()
            del logits, new_logprobs, ratio, loss
            if args.offload == "optimizer":
                move_optimizer_state(device)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if args.offload == "optimizer":
                move_optimizer_state("cpu")

    params = sum(p.numel() for p in actor.parameters())
    print("rlhf_job: %s %s-%s, %d parameters per model, %s, lora %s, offload %s" % (
        args.algo, args.arch, args.size, params, args.dtype, args.lora, args.offload), flush=True)
    for s in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        print("rlhf_job: step %d: %.2f s, peak allocated %.2f GiB" % (
            s, time.perf_counter() - t0, torch.cuda.max_memory_allocated() / 2**30), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
