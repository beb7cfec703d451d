"""TRL's GRPOTrainer with vLLM colocated in the trainer's process and vLLM's sleep mode on, unmodified
(`use_vllm=True, vllm_mode="colocate", vllm_enable_sleep_mode=True`), on the tiny Llama of
tiny_rlhf.py, 3 steps: the child of test_trl_colocate.py, and the command behind docs/frameworks.md's
colocation table (the vLLM venv's interpreter; tests/harness on PYTHONPATH):

    phasealloc-run --sim-gpu=4GiB [--native] -- python tests/gpu/trl_colocate.py colocate

Each step TRL empties the trainer's cache, wakes vLLM's weights (sleep level 2 dropped them), loads
the trainer's weights into the engine, wakes the KV cache, generates, puts the engine to sleep
(level 2), then scores (inference), trains and steps the optimizer. TRL starts the engine itself
with vLLM's `external_launcher` backend, a torch.distributed world of 1 whose RANK, WORLD_SIZE and
MASTER_ADDR/PORT it sets, as it does for a user.

What is measured, per phase (the phases phasealloc's detection sets, observed here under every
allocator through phasealloc._phase_detect's observers):
  device   the simulated GPU's mapped bytes at their peak (simcuda's books: every mapping of the
           process, whoever made it), the device total;
  trainer  the peak of torch.cuda.max_memory_reserved() less vLLM's sleep-pool segments: the
           process's caching allocator (the trainer, and vLLM's own tensors outside its pool);
           torch counts the pool's segments as reserved whether they are mapped or asleep;
  pool     vLLM's CuMemAllocator pool, the bytes it holds mapped (its own books).
and at each wake of the KV cache (the engine whole again): the device total and what the trainer's
allocator holds then. The figures are JSON on the RESULT line; a table goes to stderr.

At exit, while vLLM's CuMemAllocator releases its pool (asleep allocations among them), its C
extension prints "CUDA Error: invalid argument at .../cumem_allocator.cpp:245". The exit status is
0 and every figure is taken before; which call the simulator refused there is not traced yet (an
unmap of what sleep already unmapped is the likely one), nor compared with a GPU.
"""

import functools
import json
import os
import sys
import tempfile

from torch_harness import child_main
from tiny_rlhf import common_args, prompts, reward_length, tiny_llama_and_tokenizer

MIB = 1 << 20
PHASES = ("generation", "sleep", "inference", "training", "optimizer")


class colocation_meter:
    """Per-phase peaks of the device total, the trainer's allocator and vLLM's sleep pool, sampled at
    every phase change and around the pool's sleep and wake-up (the only places it changes)."""

    def __init__(self, torch, sim, pool):
        self.torch, self.sim, self.pool = torch, sim, pool
        self.phase = "start"
        self.phases = {}     # name -> {"device", "trainer", "pool"}: peaks in bytes
        self.sequence = []   # phases in the order they were entered (repeats collapsed)
        self.wakes = []      # at each wake-up of the KV cache: device, trainer, pool, phase
        self.pool_segments = set()  # the pool's segment bytes at each sample (torch's books count them)
        self.sample()        # starts the intervals

    def pool_mapped(self):
        return sum(d.handle[1] for d in self.pool.pointer_to_data.values() if not d.is_asleep)

    def pool_reserved(self):
        return sum(d.handle[1] for d in self.pool.pointer_to_data.values())

    def trainer_reserved(self):
        return self.torch.cuda.memory_reserved() - self.pool_reserved()

    def trainer_allocated(self):
        """Bytes allocated in the caching allocator's segments outside the pool (torch's snapshot)."""
        pool = self.pool.pointer_to_data
        return sum(s["allocated_size"] for s in self.torch.cuda.memory_snapshot() if s["address"] not in pool)

    def sample(self):
        cuda = self.torch.cuda
        device_peak = self.sim.take_interval_peak_mapped()
        reserved_peak = cuda.max_memory_reserved()
        cuda.reset_peak_memory_stats()
        segments = self.pool_reserved()
        self.pool_segments.add(segments)
        peaks = self.phases.setdefault(self.phase, {"device": 0, "trainer": 0, "pool": 0})
        peaks["device"] = max(peaks["device"], device_peak)
        peaks["trainer"] = max(peaks["trainer"], reserved_peak - segments)
        peaks["pool"] = max(peaks["pool"], self.pool_mapped())

    def on_phase(self, name):
        self.sample()
        self.phase = name
        if not self.sequence or self.sequence[-1] != name:
            self.sequence.append(name)
        peaks = self.phases.setdefault(name, {"device": 0, "trainer": 0, "pool": 0})
        peaks["pool"] = max(peaks["pool"], self.pool_mapped())
        peaks["device"] = max(peaks["device"], self.sim.mapped())
        peaks["trainer"] = max(peaks["trainer"], self.trainer_reserved())

    def wrap_pool(self):
        """Samples before the pool sleeps (at its fullest) and after each wake-up."""
        cls = type(self.pool)
        sleep, wake_up = cls.sleep, cls.wake_up
        meter = self

        @functools.wraps(sleep)
        def measured_sleep(pool, *args, **kwargs):
            meter.sample()
            return sleep(pool, *args, **kwargs)

        @functools.wraps(wake_up)
        def measured_wake_up(pool, tags=None, *args, **kwargs):
            out = wake_up(pool, tags, *args, **kwargs)
            meter.sample()
            if tags is None or "kv_cache" in tags:
                meter.torch.cuda.synchronize()
                meter.wakes.append({"device": meter.sim.mapped(), "trainer": meter.trainer_reserved(),
                                    "trainer_allocated": meter.trainer_allocated(), "pool": meter.pool_mapped(),
                                    "nccl": meter.sim.nccl(), "phase": meter.phase})
            return out

        cls.sleep, cls.wake_up = measured_sleep, measured_wake_up


def table(report):
    rows = ["%-11s %12s %12s %12s" % ("phase", "device MiB", "trainer MiB", "vLLM pool MiB")]
    for name in PHASES:
        p = report["phases"].get(name)
        if p:
            rows.append("%-11s %12.1f %12.1f %12.1f" % (name, p["device"] / MIB, p["trainer"] / MIB, p["pool"] / MIB))
    for i, w in enumerate(report["wakes"]):
        rows.append("wake %d: device %.1f MiB, trainer %.1f MiB (%.1f MiB allocated), vLLM pool %.1f MiB" % (
            i + 1, w["device"] / MIB, w["trainer"] / MIB, w["trainer_allocated"] / MIB, w["pool"] / MIB))
    return "\n".join(rows)


def _offload_counts():
    """offload:auto / offload:pressure's counts, when PHASEALLOC_CONF turned one on."""
    from phasealloc import _auto_offload

    return dict(_auto_offload.counts) if _auto_offload._handles else {}


def scenario_colocate():
    import torch
    from datasets import Dataset
    from simcuda.introspect import simulator
    from trl import GRPOConfig, GRPOTrainer

    from phasealloc import _phase_detect

    _phase_detect.install()  # done by enable() under phasealloc; here too under PyTorch's allocator
    phasealloc = sys.modules.get("phasealloc")
    with tempfile.TemporaryDirectory(prefix="trl-colocate-") as out:
        # TRL_COLOCATE_LLAMA (JSON: LlamaConfig fields) and TRL_COLOCATE_UTILIZATION (vLLM's
        # gpu_memory_utilization) size the job for the pressure test; the defaults, the tiny Llama.
        model_dir, tokenizer = tiny_llama_and_tokenizer(out, **json.loads(os.environ.get("TRL_COLOCATE_LLAMA", "{}")))
        engine_share = {"vllm_gpu_memory_utilization": float(os.environ["TRL_COLOCATE_UTILIZATION"])} \
            if "TRL_COLOCATE_UTILIZATION" in os.environ else {}
        args = GRPOConfig(use_vllm=True, vllm_mode="colocate", vllm_enable_sleep_mode=True, num_generations=4,
                          max_completion_length=16, **engine_share, **common_args(model_dir))
        scored = []  # completions scored, per step

        def reward(completions, **kwargs):
            scored.append(len(completions))
            return reward_length(completions, **kwargs)

        trainer = GRPOTrainer(model=model_dir, reward_funcs=reward, args=args,
                              train_dataset=Dataset.from_dict({"prompt": prompts()}), processing_class=tokenizer)
        from vllm.device_allocator.cumem import CuMemAllocator

        engine = trainer.vllm_generation.llm
        config = engine.llm_engine.vllm_config
        meter = colocation_meter(torch, simulator(), CuMemAllocator.get_instance())
        meter.wrap_pool()
        _phase_detect.add_observer(meter.on_phase)
        trainer.train()
        meter.on_phase("end")
    report = {
        "allocator": torch.cuda.get_allocator_backend(),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "steps": trainer.state.global_step,
        "completions": scored,
        "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
        "phases": {k: v for k, v in meter.phases.items() if k in PHASES},
        "sequence": meter.sequence,
        "wakes": meter.wakes,
        "pool_segments": sorted(meter.pool_segments),
        "kv_cache_blocks": config.cache_config.num_gpu_blocks,
        "cudagraph_mode": str(config.compilation_config.cudagraph_mode),
        "capacity": torch.cuda.mem_get_info()[1],
        # phasealloc's own books (its engine only, without the pool PyTorch serves): intervals and peaks.
        "library_phases": {p["name"]: {"intervals": p["intervals"], "peak_reserved": p["peak_reserved_bytes"]}
                           for p in phasealloc.stats().get("phases", []) if p["intervals"]}
                          if phasealloc.is_enabled() else {},
        "offloads": phasealloc.stats()["num_offloads"] if phasealloc.is_enabled() else 0,
        "offload_counts": _offload_counts(),
    }
    print(table(report), file=sys.stderr, flush=True)
    return report


if __name__ == "__main__":
    child_main(globals())
