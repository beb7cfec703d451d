"""One rank of test_nccl_jobs.py's torchrun jobs on NCCL: DDP, FSDP2 (fully_shard) or DeepSpeed ZeRO-2 /
ZeRO-3 of a tiny random Llama, 3 training steps, every rank from its own random init and its own
batches. What it writes can only come from real data movement and real arithmetic:

- collectives of known host-copied values give the exact result: all-reduce (float32, int64,
  bfloat16), all-gather and reduce-scatter (sum, average) into tensors, all-to-all;
- the parameters the job starts from are the ones the mode makes of the ranks' inits (DDP and ZeRO
  broadcast rank 0's; FSDP2 unshards one dim-0 chunk of each rank's init; ZeRO-3 gathers its
  partitions);
- after training, the full parameters against a CPU reference of the same training in one process
  (every rank's batch, the averaged gradient, DeepSpeed's gradient clipping for ZeRO, AdamW), each step's loss against the reference's, and
  a digest of the full parameters that the test compares across ranks;
- which allocator the process ran, asked inside it (PyTorch's backend name, phasealloc's enabled
  state), at the start and at the end; the steps counted.

The job runs at the simulator's exact value level (the test sets it), so products are computed.

It also reads the device's free memory around the first collective (NCCL's buffers are taken
there, outside PyTorch's allocator). Writes what it saw to <out_dir>/rank<N>.json.

    python -m torch.distributed.run --nproc-per-node N nccl_job_rank.py {ddp|fsdp2|zero2|zero3} OUT_DIR
"""

import hashlib
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


STEPS = 3
LR = 1e-3
# DeepSpeed clips the gradients' total norm at its config's gradient_clipping, 1.0 unless the config
# says otherwise (deepspeed/runtime/constants.py, GRADIENT_CLIPPING_DEFAULT); the ZeRO jobs write it
# out and the CPU reference clips as they do. DDP and FSDP2 train without clipping.
ZERO_CLIP_NORM = 1.0


def init_seed(rank):
    """Every rank starts from its own random init: a broadcast or a gather that moved nothing cannot
    pass for one that did."""
    return 1000 + rank


def rank_batches(rank):
    generator = torch.Generator().manual_seed(rank)
    return [torch.randint(0, 256, (2, 32), generator=generator) for _ in range(STEPS)]


def initial_full_params(mode, world):
    """The full parameters the job trains from, built on the CPU from every rank's init as the mode
    combines them: DDP and ZeRO broadcast rank 0's; FSDP2 shards each rank's own init along dim 0 and
    keeps rank r's r-th chunk, so unsharding assembles one chunk from each rank's init."""
    inits = [dict(tiny_llama(init_seed(r)).named_parameters()) for r in range(world)]
    if mode != "fsdp2":
        return {name: p.detach().clone() for name, p in inits[0].items()}
    return {name: torch.cat([torch.chunk(inits[r][name].detach(), world, dim=0)[r] for r in range(world)])
            for name in inits[0]}


def cpu_reference(initial, world, clip_norm=None):
    """The same training in one process on the CPU from the full parameters `initial`: per step,
    each rank's batch's loss divided by the world size (the data-parallel average of the gradients),
    the gradients' total norm clipped at clip_norm (None: not clipped), then AdamW. Returns the final
    parameters and each rank's per-step losses."""
    model = tiny_llama(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(initial[name])
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    batches = [rank_batches(r) for r in range(world)]
    losses = [[] for _ in range(world)]
    for step in range(STEPS):
        for r in range(world):
            loss = model(input_ids=batches[r][step], labels=batches[r][step]).loss
            (loss / world).backward()
            losses[r].append(loss.item())
        if clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        optimizer.zero_grad()
    return {name: p.detach().clone() for name, p in model.named_parameters()}, losses


def allocator_in_use():
    """Which allocator this process runs, asked inside it: PyTorch's backend name and phasealloc's
    enabled state (a process whose bridge was refused runs PyTorch's with the library mapped)."""
    phasealloc = sys.modules.get("phasealloc")
    return {"backend": torch.cuda.memory.get_allocator_backend(),
            "phasealloc_enabled": bool(phasealloc is not None and phasealloc.is_enabled())}


def compare_full_params(full, reference, initial):
    """The largest difference from the CPU reference, how far training moved the reference, and a
    digest of the full parameters (equal on every data-parallel rank)."""
    digest = hashlib.sha256()
    worst = moved = 0.0
    for name in sorted(reference):
        mine = full[name].detach().float().cpu()
        digest.update(mine.numpy().tobytes())
        worst = max(worst, (mine - reference[name]).abs().max().item())
        moved = max(moved, (reference[name] - initial[name]).abs().max().item())
    return {"max_abs_diff": worst, "reference_moved": moved, "digest": digest.hexdigest()}


def offload_counts():
    """offload:auto's counts when PHASEALLOC_CONF turned it on in this process, else {}."""
    auto = sys.modules.get("phasealloc._auto_offload")
    return dict(auto.counts) if auto is not None and auto._handles else {}


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
              "exact": exact_collectives(rank, world), "allocator": allocator_in_use()}

    module = tiny_llama(init_seed(rank))
    initial = initial_full_params(mode, world)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(module.cuda(), device_ids=[local_rank])
        result["params_match"] = all(torch.equal(p.detach().cpu(), initial[name]) for name, p in
                                     model.module.named_parameters())
    elif mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        model = module.cuda()
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        result["params_match"] = unsharded(model, lambda full: all(torch.equal(full[name].cpu(), initial[name])
                                                                   for name in initial))
    else:
        import deepspeed

        stage = {"zero2": 2, "zero3": 3}[mode]
        config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
                  "gradient_clipping": ZERO_CLIP_NORM,
                  "zero_optimization": {"stage": stage}, "zero_allow_untested_optimizer": True}
        model, _, _, _ = deepspeed.initialize(model=module, config=config,
                                              optimizer=torch.optim.AdamW(module.parameters(), lr=LR))
        result["params_match"] = zero_gathered(model, stage, lambda full: all(
            torch.equal(full[name].cpu(), initial[name]) for name in initial))

    losses = []
    if mode in ("ddp", "fsdp2"):
        optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    for ids in rank_batches(rank):
        ids = ids.cuda()
        loss = model(input_ids=ids, labels=ids).loss
        if mode in ("ddp", "fsdp2"):
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        else:
            model.backward(loss)
            model.step()
        losses.append(loss.item())
    torch.cuda.synchronize()
    result["steps"] = len(losses)
    result["losses"] = losses

    reference, reference_losses = cpu_reference(initial, world, ZERO_CLIP_NORM if mode.startswith("zero") else None)
    result["reference_losses"] = reference_losses[rank]
    if mode == "ddp":
        result["trained"] = compare_full_params(dict(model.module.named_parameters()), reference, initial)
    elif mode == "fsdp2":
        result["trained"] = unsharded(model, lambda full: compare_full_params(full, reference, initial))
    else:
        result["trained"] = zero_gathered(model, stage, lambda full: compare_full_params(
            full, reference, initial))
    result["allocator_at_end"] = allocator_in_use()
    result["offload"] = offload_counts()
    with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


def unsharded(model, read):
    """read(full parameters by name) with every FSDP2 module unsharded (an all-gather of the shards)."""
    modules = [model] + list(model.model.layers)
    for module in modules:
        module.unshard()
    try:
        full = {name: p.detach().full_tensor() if hasattr(p, "full_tensor") else p.detach()
                for name, p in model.named_parameters()}
        return read(full)
    finally:
        for module in reversed(modules):
            module.reshard()


def zero_gathered(model, stage, read):
    """read(full parameters by name) of a DeepSpeed engine; ZeRO-3 gathers its partitions first."""
    import deepspeed

    with deepspeed.zero.GatheredParameters(list(model.module.parameters()), enabled=stage == 3):
        return read({name: p.detach() for name, p in model.module.named_parameters()})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
