"""FSDP2 training of a Llama on several GPUs, for planning a job's memory:
torchrun --nproc-per-node N -m phasealloc.examples.fsdp2_llama [--shape llama3-8b]

Each rank builds the model on the meta device (no memory anywhere), shards every decoder layer and
then the whole model with FSDP2 (`fully_shard`), materialises only its own shard on its GPU
(`to_empty`) and initialises it with random weights (nothing is downloaded), then runs training
steps: forward and backward over a batch of random token ids, then an AdamW step. The shapes are
Hugging Face LlamaConfig's; `llama3-8b` is Llama-3-8B's (32 layers, hidden 4096, MLP 14336, 32
heads, 8 KV heads, vocabulary 128256); `llama3-70b` is Llama-3-70B's (80 layers, hidden 8192, MLP
28672, 64 heads, 8 KV heads).

The script does not mention phasealloc. To ask whether it fits on 8 GPUs of 80 GiB without them:
  phasealloc dryrun --values off --gpu 80GiB --gpus 8 -- torchrun --nproc-per-node 8 -m phasealloc.examples.fsdp2_llama
(--values off: no kernel's values are computed, so the simulated GPUs' memory costs this machine
nothing; the job reads no device value.) A job of more GPUs than this machine can run whole runs a few
of its ranks, the others virtual:
  phasealloc dryrun --values off --gpu 80GiB --world-size 256 -- python -m phasealloc.examples.fsdp2_llama --shape llama3-70b
"""

import argparse
import os
import sys
import time

SHAPES = {
    # name: (layers, hidden, intermediate, heads, kv heads, vocabulary)
    "llama3-70b": (80, 8192, 28672, 64, 8, 128256),
    "llama3-8b": (32, 4096, 14336, 32, 8, 128256),
    "llama3-1b": (16, 2048, 8192, 32, 8, 128256),
    "tiny": (2, 64, 128, 4, 2, 256),
}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m phasealloc.examples.fsdp2_llama", description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="llama3-8b", help="model shape (default llama3-8b)")
    p.add_argument("--steps", type=int, default=2, help="training steps (default 2)")
    p.add_argument("--batch", type=int, default=1, help="sequences per rank per step (default 1)")
    p.add_argument("--seq", type=int, default=2048, help="tokens per sequence (default 2048)")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16",
                   help="parameter dtype (default bfloat16; AdamW keeps its state in it too)")
    args = p.parse_args(argv)
    for name in ("steps", "batch", "seq"):
        if getattr(args, name) <= 0:
            p.error("--%s must be positive" % name)
    return args


def build(shape, dtype, seq, torch):
    """A Llama of SHAPES[shape] on the meta device (no memory anywhere)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    layers, hidden, intermediate, heads, kv_heads, vocab = SHAPES[shape]
    config = LlamaConfig(num_hidden_layers=layers, hidden_size=hidden, intermediate_size=intermediate,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                         max_position_embeddings=max(seq, 128), tie_word_embeddings=False)
    with torch.device("meta"):
        return LlamaForCausalLM(config).to(getattr(torch, dtype))


def sharded(model, seed, torch):
    """Shards `model` with FSDP2 (each decoder layer, then the whole), materialises this rank's shards
    on its GPU and draws them from `seed` (random weights: nothing is downloaded)."""
    from torch.distributed.fsdp import fully_shard

    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    model.to_empty(device="cuda")  # this rank's shards only
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.to_local().fill_(1.0)
            else:
                parameter.to_local().normal_(0.0, 0.02)
        rotary = model.model.rotary_emb  # its buffers were left uninitialised by to_empty, like the weights
        fresh = type(rotary)(model.config)
        rotary.inv_freq.copy_(fresh.inv_freq)
        rotary.original_inv_freq.copy_(fresh.original_inv_freq)
    return model


def start(torch):
    """Joins the job's process group on this rank's GPU: (rank, world size)."""
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    return dist.get_rank(), dist.get_world_size()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    import torch.distributed as dist

    rank, world = start(torch)
    started = time.time()
    model = sharded(build(args.shape, args.dtype, args.seq, torch), 1234 + rank, torch)  # each rank its own shard
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    vocab = model.config.vocab_size
    for _ in range(args.steps):
        ids = torch.randint(0, vocab, (args.batch, args.seq), device="cuda")
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    shard = sum(p.to_local().numel() for p in model.parameters())
    print("rank %d/%d: %s, %d steps, %.2f B parameters (%.2f B in this shard), peak reserved %.2f GiB, %.1f s"
          % (rank, world, args.shape, args.steps, sum(p.numel() for p in model.parameters()) / 1e9, shard / 1e9,
             torch.cuda.max_memory_reserved() / 2**30, time.time() - started), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
