"""One rank of test_jobs.py's torchrun job: the start-up hook swaps the allocator in every rank;
the ranks all_reduce through gloo (CPU tensors, filled from and copied back to the GPU) and write
what they saw to <out_dir>/rank<N>.json."""

import json
import os
import sys

import torch
import torch.distributed as dist

import phasealloc


def main(out_dir):
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    on_gpu = torch.full((1000,), float(rank + 1)).cuda()
    host = on_gpu.cpu()
    dist.all_reduce(host)
    reduced = host.cuda()
    result = {
        "rank": rank,
        "world": world,
        "enabled": phasealloc.is_enabled(),
        "backend": torch.cuda.get_allocator_backend(),
        "sum": float(reduced.cpu().sum()),
        "ours": phasealloc.stats()["allocated_bytes.all.current"],
    }
    with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
        json.dump(result, f)
    # gloo's worker thread drops a finished collective (and its tensors' Python objects) after the
    # caller's wait returns; if that drop comes while the interpreter finalizes, it aborts the
    # process (a PyTorch race, in both allocators). A barrier holds no tensors, and its completion
    # means the worker has dropped the all_reduce.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
