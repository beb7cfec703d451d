"""A two-rank torchrun job on NCCL in which rank 1 holds far more memory than rank 0, for
test_dryrun_ranks.py: each rank holds BASE MiB, rank 1 also EXTRA MiB, and one all-reduce connects
NCCL (its buffers come from the device, outside PyTorch's allocator).

    python -m torch.distributed.run --nproc-per-node 2 uneven_ranks_job.py BASE_MIB EXTRA_MIB
"""

import os
import sys

import torch
import torch.distributed as dist

MIB = 1 << 20


def main(base_mib, extra_mib):
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    held = [torch.empty(base_mib * MIB, dtype=torch.uint8, device="cuda")]
    if dist.get_rank() == 1:
        held.append(torch.empty(extra_mib * MIB, dtype=torch.uint8, device="cuda"))
    probe = torch.ones(1, device="cuda")
    dist.all_reduce(probe)
    torch.cuda.synchronize()
    del held
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
