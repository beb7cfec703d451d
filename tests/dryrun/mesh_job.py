"""A job on a 2-D device mesh (data parallel x tensor parallel pairs) for test_dryrun_virtual_ranks.py:
the default group is bound to its device (init_process_group with device_id), so torch makes the
mesh's groups by splitting its communicator; each rank all-reduces over both dimensions and holds
8 MiB more per tensor-parallel position, so ranks differ by where they sit in the mesh.

    python -m torch.distributed.run --nproc-per-node N mesh_job.py   (N even)
"""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

MIB = 1 << 20


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    world = dist.get_world_size()
    mesh = init_device_mesh("cuda", (world // 2, 2), mesh_dim_names=("dp", "tp"))
    held = torch.empty((8 + 8 * mesh.get_local_rank("tp")) * MIB, dtype=torch.uint8, device="cuda")
    x = torch.ones(MIB, device="cuda")
    dist.all_reduce(x, group=mesh.get_group("dp"))
    dist.all_reduce(x, group=mesh.get_group("tp"))
    torch.cuda.synchronize()
    del held
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
