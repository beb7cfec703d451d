"""Real PyTorch on the simulated GPU, with PyTorch's own allocator: the child side of
test_torch_native.py. Each scenario_<name>() runs in a fresh process started by
phasealloc-run --sim-gpu --native and returns what the pytest side asserts on."""

import os
import random
import resource
import sys
import time

from torch_harness import child_main
from simcuda.introspect import simulator

MIB = 1 << 20


def scenario_devices():
    import torch

    sim = simulator()
    props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
    copies = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.uint8, torch.bool):
        host = (torch.rand(1000, 37) * 100).to(dtype)
        on_device = host.to("cuda")
        back = on_device.cpu()
        pinned = host.pin_memory()
        async_copy = pinned.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
        d2d = on_device.clone()  # same-device copy: a device-to-device memcpy
        other = on_device.to("cuda:1")  # peer copy
        copies[str(dtype)] = bool(torch.equal(back, host) and torch.equal(async_copy.cpu(), host)
                                  and torch.equal(d2d.cpu(), host) and torch.equal(other.cpu(), host))
        del on_device, async_copy, d2d, other
    allocated_after = torch.cuda.memory_allocated(0) + torch.cuda.memory_allocated(1)
    return {
        "available": torch.cuda.is_available(),
        "count": torch.cuda.device_count(),
        "names": [p.name for p in props],
        "total_memory": [p.total_memory for p in props],
        "capability": [[p.major, p.minor] for p in props],
        "sms": [p.multi_processor_count for p in props],
        "mem_get_info_total": torch.cuda.mem_get_info(0)[1],
        "copies": copies,
        "allocated_after": allocated_after,
        "unemulated": sim.counters()["unemulated_calls"],
    }


def _check_books(torch, sim, start):
    """PyTorch's books against the simulator's, at one moment; returns the mismatches."""
    problems = []
    reserved = torch.cuda.memory_reserved()
    if reserved != sim.mapped(0):
        problems.append("memory_reserved %d != simulator mapped %d" % (reserved, sim.mapped(0)))
    stats = torch.cuda.memory_stats()
    c = sim.counters()
    if stats.get("num_device_alloc", 0) != c["device_mallocs"] - start["device_mallocs"]:
        problems.append("num_device_alloc %d != cudaMalloc calls %d" % (
            stats.get("num_device_alloc", 0), c["device_mallocs"] - start["device_mallocs"]))
    if stats.get("num_device_free", 0) != c["device_frees"] - start["device_frees"]:
        problems.append("num_device_free %d != cudaFree calls %d" % (
            stats.get("num_device_free", 0), c["device_frees"] - start["device_frees"]))
    segments = torch.cuda.memory_snapshot()
    if len(segments) != sim.live_allocations(0):
        problems.append("%d snapshot segments != %d live cudaMalloc allocations" % (len(segments), sim.live_allocations(0)))
    active = 0
    for seg in segments:
        kind, base, size, device = sim.pointer_range(seg["address"])
        if kind != 1 or base != seg["address"] or size != seg["total_size"] or device != seg["device"]:
            problems.append("segment %#x (%d B) is not a simulator allocation (%d, %#x, %d)" % (
                seg["address"], seg["total_size"], kind, base, size))
        active += sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
    if active != torch.cuda.memory_allocated():
        problems.append("active blocks %d != memory_allocated %d" % (active, torch.cuda.memory_allocated()))
    if stats["reserved_bytes.all.current"] != reserved:
        problems.append("memory_stats reserved disagrees with memory_reserved")
    return problems


def scenario_books():
    """1,200 random allocations and frees on two streams, with record_stream, in the simulator's
    deferred-event mode (cross-stream frees wait for their events)."""
    import torch

    sim = simulator()
    torch.cuda.init()
    start = sim.counters()
    rng = random.Random(1234)
    side = torch.cuda.Stream()
    live = []
    problems = []
    ops = 0
    for step in range(1200):
        if live and rng.random() < 0.45:
            tensor = live.pop(rng.randrange(len(live)))
            del tensor
        else:
            size = int(2 ** rng.uniform(0, 28))  # 1 B .. 256 MiB, log-uniform
            stream = side if rng.random() < 0.3 else torch.cuda.current_stream()
            with torch.cuda.stream(stream):
                tensor = torch.empty(size, dtype=torch.uint8, device="cuda")
            if stream is side and rng.random() < 0.7:
                tensor.record_stream(torch.cuda.current_stream())  # used on the other stream too
            live.append(tensor)
        if rng.random() < 0.01:
            torch.cuda.empty_cache()
        ops += 1
        if step % 100 == 99:
            problems += _check_books(torch, sim, start)
    del live
    torch.cuda.synchronize()
    problems += _check_books(torch, sim, start)
    torch.cuda.empty_cache()
    problems += _check_books(torch, sim, start)
    stats = torch.cuda.memory_stats()
    return {
        "ops": ops,
        "problems": problems[:20],
        "segments_allocated": stats["num_device_alloc"],
        "peak_reserved": stats["reserved_bytes.all.peak"],
        "peak_mapped": sim.lib.simcuda_peak_mapped_bytes(0),
        "reserved_after_empty_cache": torch.cuda.memory_reserved(),
        "mapped_after_empty_cache": sim.mapped(0),
        "unemulated": sim.counters()["unemulated_calls"],
    }


def scenario_interval_peaks():
    """Three intervals of the simulator's mapped bytes (take_interval_peak_mapped): 200 MiB held and
    returned, then nothing new, then 30 MiB on top of 2 MiB kept."""
    import torch

    sim = simulator()
    sim.take_interval_peak_mapped()  # start: what torch's start-up mapped
    big = torch.empty(200 * MIB, dtype=torch.uint8, device="cuda")
    del big
    torch.cuda.empty_cache()
    first = sim.take_interval_peak_mapped()
    second = sim.take_interval_peak_mapped()
    kept = torch.empty(MIB, dtype=torch.uint8, device="cuda")
    mapped_kept = sim.mapped()
    more = torch.empty(30 * MIB, dtype=torch.uint8, device="cuda")
    del more
    torch.cuda.empty_cache()
    third = sim.take_interval_peak_mapped()
    return {"first": first, "second": second, "third": third, "mapped_kept": mapped_kept, "mapped_end": sim.mapped(),
            "peak": sim.peak_mapped(), "kept": kept.numel()}


def scenario_expandable():
    import torch

    sim = simulator()
    tensors = [torch.empty(n * MIB + 12345, dtype=torch.uint8, device="cuda") for n in (1, 3, 30, 200, 700)]
    host = torch.randint(0, 255, (700 * MIB + 12345,), dtype=torch.uint8)
    tensors[-1].copy_(host)
    intact = bool(torch.equal(tensors[-1].cpu(), host))
    reserved_live = torch.cuda.memory_reserved()
    mapped_live = sim.mapped(0)
    del tensors
    reserved_cached = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    c = sim.counters()
    return {
        "intact": intact,
        "reserved_live": reserved_live,
        "mapped_live": mapped_live,
        "reserved_cached": reserved_cached,
        "reserved_after_empty_cache": torch.cuda.memory_reserved(),
        "mapped_after_empty_cache": sim.mapped(0),
        "cudaMalloc_calls": c["device_mallocs"],
        "vmm_maps": c["vmm_maps"],
        "vmm_unmaps": c["vmm_unmaps"],
        "unemulated": c["unemulated_calls"],
    }


def scenario_oom():
    import torch

    sim = simulator()
    keep = torch.empty(1536 * MIB, dtype=torch.uint8, device="cuda")
    message, kind = "", ""
    try:
        torch.empty(1024 * MIB, dtype=torch.uint8, device="cuda")
    except Exception as error:  # what it is, is the point
        kind = type(error).__module__ + "." + type(error).__qualname__
        message = str(error)
    still_works = torch.ones(10, device="cuda").shape[0] == 10
    del keep
    return {"kind": kind, "is_oom_error": kind.endswith("OutOfMemoryError"), "message": message,
            "still_works": still_works, "simulator_ooms": sim.counters()["out_of_memory"],
            "capacity": sim.lib.simcuda_capacity_bytes()}


def scenario_gpt2():
    import torch
    import transformers

    sim = simulator()
    started = time.time()
    config = transformers.GPT2Config()  # GPT-2 small: 12 layers, 768 wide, 124M parameters
    with torch.device("cuda"):
        model = transformers.GPT2LMHeadModel(config)  # random weights, initialised on the device
    parameters = sum(p.numel() for p in model.parameters())
    batch, length = 4, 128
    ids = torch.randint(0, config.vocab_size, (batch, length)).cuda()
    out = model(ids, labels=ids)
    logits_shape = list(out.logits.shape)
    out.loss.backward()
    grads = sum(1 for p in model.parameters() if p.grad is not None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    states = sum(len(s) for s in optimizer.state.values())
    del out
    after_training = torch.cuda.memory_allocated()
    model.eval()
    new_tokens = 16
    prompt = ids[:, :32]
    with torch.no_grad():  # greedy decoding of stand-in logits (zeros): token 0, never EOS, so max_new_tokens
        generated = model.generate(prompt, max_new_tokens=new_tokens, do_sample=False, use_cache=True,
                                   pad_token_id=0)
    c = sim.counters()
    return {
        "parameters": parameters,
        "logits_shape": logits_shape,
        "grads": grads,
        "optimizer_states": states,
        "generated_shape": list(generated.shape),
        "after_training_allocated": after_training,
        "peak_reserved": torch.cuda.max_memory_reserved(),
        "peak_allocated": torch.cuda.max_memory_allocated(),
        "seconds": time.time() - started,
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "kernel_launches": c["kernel_launches"],
        "library_calls": c["library_calls"],
        "unemulated": c["unemulated_calls"],
    }


def scenario_llama_bf16():
    """A Llama-style model in bf16 with autocast and fused AdamW: on an sm90 device PyTorch's
    attention would pick cuDNN, which the simulator does not run."""
    import torch
    import transformers

    sim = simulator()
    config = transformers.LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                                      num_attention_heads=8, num_key_value_heads=4, vocab_size=32000)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    ids = torch.randint(0, 32000, (2, 64)).cuda()
    result = {}
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(ids, labels=ids)
        out.loss.backward()
        torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True).step()
        result["trained"] = True
    except RuntimeError as error:
        result["trained"] = False
        result["error"] = str(error)
    result["unemulated"] = sim.counters()["unemulated_calls"]
    result["peak_allocated"] = torch.cuda.max_memory_allocated()
    return result


def scenario_fresh_memory():
    """What a new allocation holds: zeros, or SIMCUDA_GPU's fill byte (read through a real copy)."""
    import torch

    torch.cuda.set_per_process_memory_fraction(1.0)
    x = torch.empty(3 * MIB, dtype=torch.uint8, device="cuda")
    return {"bytes": sorted(set(x.cpu().tolist()))}


def scenario_cuda_graph():
    """torch.cuda.CUDAGraph on PyTorch's own allocator: a capture records a copy instead of doing
    it, each replay copies what the static input holds then (copies are real on the simulator;
    kernels are not, so the check is on a copy). A synchronize inside a capture fails as on a GPU."""
    import torch

    sim = simulator()
    n = 4096
    static_in = torch.arange(n, dtype=torch.float32).cuda()
    static_out = torch.full((n,), -1.0).cuda()
    warm = torch.empty(n, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as PyTorch's documentation does
        warm.copy_(static_in)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        capturing_inside = torch.cuda.is_current_stream_capturing()
        static_out.copy_(static_in)
        scratch = static_in * 2  # a kernel (skipped) and an allocation from the graph's private pool
    capturing_outside = torch.cuda.is_current_stream_capturing()
    after_capture = static_out.cpu()

    static_in.copy_(torch.arange(n, dtype=torch.float32) * 3)
    graph.replay()
    torch.cuda.synchronize()
    first = static_out.cpu()
    static_in.copy_(torch.full((n,), 7.0))
    graph.replay()
    second = static_out.cpu()
    pool_bytes = torch.cuda.memory_allocated()
    del scratch
    graph.reset()

    sync_errors = []
    try:
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            static_out.copy_(static_in)
            torch.cuda.synchronize()
    except RuntimeError as e:  # capture_end's error, raised in __exit__, over the synchronize's
        while e is not None:
            sync_errors.append(str(e).splitlines()[0])
            e = e.__context__
    static_in.copy_(torch.full((n,), 5.0))
    static_out.copy_(static_in)  # the stream works after the failed capture
    return {
        "capturing_inside": capturing_inside,
        "capturing_outside": capturing_outside,
        "unchanged_by_capture": bool(torch.equal(after_capture, torch.full((n,), -1.0))),
        "first_replay": bool(torch.equal(first, torch.arange(n, dtype=torch.float32) * 3)),
        "second_replay": bool(torch.equal(second, torch.full((n,), 7.0))),
        "allocated_with_graph": pool_bytes,
        "sync_errors": sync_errors,
        "works_after": bool(torch.equal(static_out.cpu(), torch.full((n,), 5.0))),
        "unemulated": sim.counters()["unemulated_calls"],
    }


def _consumer(queue, results):
    import torch

    tensor = queue.get()  # opened through cudaIpcOpenMemHandle in this process
    results.put((str(tensor.device), tensor.cpu().tolist()))
    del tensor


def scenario_ipc():
    """A CUDA tensor sent to another process with torch.multiprocessing: the receiver maps the
    sender's simulated device memory and reads the sender's bytes."""
    import torch
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    queue, results = context.Queue(), context.Queue()
    tensor = torch.arange(1000, dtype=torch.float32).cuda()
    child = context.Process(target=_consumer, args=(queue, results))
    child.start()
    queue.put(tensor)
    device, values = results.get(timeout=300)
    child.join(timeout=300)
    return {"device": device, "intact": values == list(range(1000)), "exit": child.exitcode}


if __name__ == "__main__":
    child_main(globals())
