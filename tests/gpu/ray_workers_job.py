"""A Ray job whose GPU actors report which CUDA allocator their process has (tests/gpu/test_ray_workers.py).

    python ray_workers_job.py local OUT.json [ROLE...]     ray.init() starts a local cluster of 2 GPUs
    python ray_workers_job.py ADDRESS OUT.json [ROLE...]   joins a cluster started with `ray start`,
                                                            passing PHASEALLOC=1 (and PHASEALLOC_LIBRARY
                                                            when set) in the job's runtime_env
    python ray_workers_job.py submitted OUT.json [ROLE...] the entrypoint of `ray job submit
                                                            --runtime-env-json ...`: joins the cluster
                                                            the job was submitted to, whose runtime_env
                                                            the submission gave

One actor per ROLE (default: trainer rollout), each with num_gpus=1 and, when ROLE is not "-", its
own runtime_env {"env_vars": {"PHASEALLOC_ROLE": ROLE}}; each imports torch, allocates on its GPU and
reports its pid, torch's allocator backend, phasealloc's effective configuration, the Ray GPU ids and
the GPUs torch sees (Ray sets CUDA_VISIBLE_DEVICES per actor).
"""

import json
import os
import sys

import ray


@ray.remote(num_gpus=1)
class GpuWorker:
    def report(self):
        import torch

        x = torch.ones(1 << 20, device="cuda")
        y = (x * 2).cpu()  # a kernel and a copy back: the GPU works, not only its allocator
        assert y.shape == (1 << 20,)
        report = {"pid": os.getpid(), "backend": torch.cuda.get_allocator_backend(),
                  "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                  "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                  "device_count": torch.cuda.device_count(),
                  "uuid": str(torch.cuda.get_device_properties(0).uuid),
                  "role": os.environ.get("PHASEALLOC_ROLE"), "config": None}
        if report["backend"] == "phasealloc":
            import phasealloc

            report["config"] = phasealloc.config()
        return report


def main():
    where, out_path = sys.argv[1], sys.argv[2]
    roles = sys.argv[3:] or ["trainer", "rollout"]
    if where == "local":
        # A user with (simulated) GPUs that Ray does not detect tells it how many.
        ray.init(num_gpus=2, num_cpus=2, include_dashboard=False)
    elif where == "submitted":
        ray.init()  # the job's runtime_env (from `ray job submit`) applies to its actors
    else:
        # docs/frameworks.md's recipe for a cluster started separately; a source tree also names its library
        # (an installed phasealloc has it in its package).
        env_vars = {"PHASEALLOC": "1"}
        if os.environ.get("PHASEALLOC_LIBRARY"):
            env_vars["PHASEALLOC_LIBRARY"] = os.environ["PHASEALLOC_LIBRARY"]
        ray.init(address=where, runtime_env={"env_vars": env_vars})
    workers = [GpuWorker.options(runtime_env={"env_vars": {"PHASEALLOC_ROLE": role}}) if role != "-" else GpuWorker
               for role in roles]
    reports = ray.get([w.remote().report.remote() for w in workers])
    with open(out_path, "w") as out:
        json.dump({"driver_pid": os.getpid(), "workers": reports}, out)
    ray.shutdown()


if __name__ == "__main__":
    main()
