"""One rank of test_nccl_jobs.py's torchrun jobs on NCCL: DDP, FSDP2 (fully_shard) or DeepSpeed ZeRO-2 /
ZeRO-3 of a tiny random Llama, 3 training steps, after checks whose results only real data movement
can give:

- collectives of known host-copied values give the exact result: all-reduce (float32, int64,
  bfloat16), all-gather and reduce-scatter (sum, average) into tensors, all-to-all;
- DDP: the parameters after wrapping are rank 0's (every rank starts from its own seed; DDP
  broadcasts rank 0's);
- FSDP2: unsharding (all-gather of the shards) gives back the full parameters of the seeded init.
- ZeRO-2: as DDP (deepspeed.initialize broadcasts rank 0's parameters);
- ZeRO-3: gathering the partitioned parameters (deepspeed.zero.GatheredParameters) gives back the
  full parameters of the seeded init. DeepSpeed's own fused optimizers are CUDA extensions built at
  run time; the job uses torch.optim.AdamW, as DeepSpeed allows (zero_allow_untested_optimizer).

Both copy through kernels around the collectives, so the parameter checks hold on the simulator at
its default value level (values:observable computes copies) and on GPUs.

It also reads the device's free memory around the first collective (NCCL's buffers are taken
there, outside PyTorch's allocator). Writes what it saw to <out_dir>/rank<N>.json.

    python -m torch.distributed.run --nproc-per-node N nccl_job_rank.py {ddp|fsdp2|zero2|zero3} OUT_DIR
"""

import json
import os
import sys

import torch
import torch.distributed as dist


def tiny_llama(seed):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config)


def exact_collectives(rank, world):
    """Whether each collective of known host-copied values gives the exact result on this rank."""
    exact = {}
    base = torch.arange(4096, dtype=torch.int64) % 97
    small = base % 16  # partial sums stay below 256: exact in bfloat16 at every step
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        tensor = (small + rank * 3).to(dtype).cuda()
        dist.all_reduce(tensor)
        want = sum(small + r * 3 for r in range(world)).to(dtype)
        exact["all_reduce " + str(dtype)] = bool(torch.equal(tensor.cpu(), want))
    # FSDP2's pair: all-gather of the shards, reduce-scatter (sum and average) of the gradients.
    mine = (base + rank * 1000).float().cuda()
    gathered = torch.empty(world * base.numel(), device="cuda")
    dist.all_gather_into_tensor(gathered, mine)
    want = torch.cat([base + r * 1000 for r in range(world)]).float()
    exact["all_gather_into_tensor"] = bool(torch.equal(gathered.cpu(), want))
    full = torch.cat([base * (r + 1) + rank for r in range(world)]).float()
    for op, divide in ((dist.ReduceOp.SUM, 1), (dist.ReduceOp.AVG, world)):
        out = torch.empty(base.numel(), device="cuda")
        dist.reduce_scatter_tensor(out, (full * world).cuda(), op=op)
        want = sum((base * (rank + 1) + r) * world for r in range(world)).float() / divide
        exact["reduce_scatter_tensor " + str(op)] = bool(torch.equal(out.cpu(), want))
    # all-to-all goes through grouped ncclSend/ncclRecv.
    send = torch.cat([base[:64] + 100 * rank + d for d in range(world)]).float().cuda()
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send)
    want = torch.cat([base[:64] + 100 * r + rank for r in range(world)]).float()
    exact["all_to_all_single"] = bool(torch.equal(received.cpu(), want))
    return exact


def main(mode, out_dir):
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, world = dist.get_rank(), dist.get_world_size()

    probe = torch.ones(1).cuda()  # a real host-to-device copy
    torch.cuda.synchronize()
    free_before, _ = torch.cuda.mem_get_info()
    dist.all_reduce(probe)  # the communicator's first collective: NCCL connects here
    free_after, _ = torch.cuda.mem_get_info()
    result = {"rank": rank, "world": world, "nccl_bytes": free_before - free_after, "probe": probe.item(),
              "exact": exact_collectives(rank, world)}

    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = tiny_llama(seed=1000 + rank).cuda()  # every rank its own init
        model = DistributedDataParallel(model, device_ids=[local_rank])
        reference = tiny_llama(seed=1000)  # rank 0's, which DDP broadcasts
        result["params_match"] = all(torch.equal(p.detach().cpu(), q) for p, q in
                                     zip(model.module.parameters(), reference.parameters()))
    elif mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        model = tiny_llama(seed=7).cuda()
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        reference = dict(tiny_llama(seed=7).named_parameters())
        # Unsharding all-gathers every rank's shard back into the full parameters.
        modules = [model] + list(model.model.layers)
        for module in modules:
            module.unshard()
        result["params_match"] = all(torch.equal(p.detach().cpu(), reference[name]) for name, p in
                                     model.named_parameters())
        for module in reversed(modules):
            module.reshard()
    else:
        import deepspeed

        stage = {"zero2": 2, "zero3": 3}[mode]
        seed = 1000 + rank if stage == 2 else 7  # ZeRO-2 broadcasts rank 0's; ZeRO-3 partitions one init
        module = tiny_llama(seed=seed)
        config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
                  "zero_optimization": {"stage": stage}, "zero_allow_untested_optimizer": True}
        model, _, _, _ = deepspeed.initialize(model=module, config=config,
                                              optimizer=torch.optim.AdamW(module.parameters(), lr=1e-3))
        reference = dict(tiny_llama(seed=1000 if stage == 2 else 7).named_parameters())
        with deepspeed.zero.GatheredParameters(list(model.module.parameters()), enabled=stage == 3):
            result["params_match"] = all(torch.equal(p.detach().cpu(), reference[name]) for name, p in
                                         model.module.named_parameters())

    generator = torch.Generator().manual_seed(rank)
    if mode in ("ddp", "fsdp2"):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for _ in range(3):
            ids = torch.randint(0, 256, (2, 32), generator=generator).cuda()
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    else:
        for _ in range(3):
            ids = torch.randint(0, 256, (2, 32), generator=generator).cuda()
            loss = model(input_ids=ids, labels=ids).loss
            model.backward(loss)
            model.step()
    torch.cuda.synchronize()
    result["steps"] = 3
    with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
