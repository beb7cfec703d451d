"""The c10 bridge against PyTorch's own allocator: each scenario runs twice, under PyTorch's
native allocator and under phasealloc (the c10 bridge), and asserts what PyTorch does. A
scenario that passes natively and fails under phasealloc is a difference to fix.

Run like the other GPU tests (tests/gpu/test_torch_swap.py); on the simulated GPU without a GPU.
Contents are never read through kernels (the simulated GPU skips them); copies are real.
"""

import os
import subprocess
import sys


from torch_harness import bridge_built, child_env, child_main, gpu_skip_reason, launcher, run, scenarios

MIB = 1 << 20
GIB = 1 << 30


def on_device(torch, host):
    """`host` copied to the GPU: a real write on a real or a simulated GPU."""
    return host.to("cuda")


def phasealloc_active(torch):
    return torch.cuda.memory.get_allocator_backend() == "phasealloc"


# --- CUDA graphs and cudagraph trees --------------------------------------------------------------


def scenario_graph_pool_storages_have_the_standard_deleter(torch, phasealloc):
    """cudagraph trees free a path's outputs with _free_And_Remove_DeleterFn, which requires the
    allocator's raw_deleter() on the storage ("Expected standard deleter" otherwise)."""
    n = 1 << 20
    static_in = torch.zeros(n, device="cuda")
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        out = torch.empty(n, device="cuda")
        out.copy_(static_in)
    storage = out.untyped_storage()
    assert torch._C._has_Standard_Deleter(storage._cdata)
    before = torch.cuda.memory_allocated()
    torch._C._free_And_Remove_DeleterFn(storage._cdata)  # frees the block, leaves the storage dangling
    assert before - torch.cuda.memory_allocated() == 4 * n
    del out, storage
    g.reset()


def scenario_a_checkpointed_pool_state_frees_a_later_graphs_outputs(torch, phasealloc):
    """cudagraph trees' checkpoint path: a pool's state is taken, another graph records into the same
    pool, and restoring the state frees that graph's outputs (their storages lose the allocator's
    raw deleter: PyTorch swaps exactly that one out, "could not swap function" otherwise)."""
    def record(pool=None):
        g = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(g, pool=pool):
            out = torch.empty(512, dtype=torch.uint8, device="cuda")
        return g, out

    g1, out1 = record()
    pool = g1.pool()
    state = torch._C._cuda_getCheckpointState(out1.device.index, pool)
    before = sorted((s["address"], s["allocated_size"]) for s in torch.cuda.memory_snapshot()
                    if tuple(s["segment_pool_id"]) == tuple(pool))
    g2, out2 = record(pool)
    torch._C._cuda_setCheckpointPoolState(out1.device.index, state, [out2.untyped_storage()._cdata], [])
    del out2
    after = sorted((s["address"], s["allocated_size"]) for s in torch.cuda.memory_snapshot()
                   if tuple(s["segment_pool_id"]) == tuple(pool))
    assert after == before, (before, after)
    del out1, g1, g2


def scenario_record_stream_on_a_pool_block(torch, phasealloc):
    """A private pool's block under the bridge's deleter still reaches native's record_stream: once
    freed, it is not handed out again until the side stream's work is done (SIMCUDA_GPU=events:sync
    on the simulated GPU: events complete at a synchronize)."""
    pool = torch.cuda.MemPool()
    side = torch.cuda.Stream()
    with torch.cuda.use_mem_pool(pool):
        a = torch.empty(8 * MIB, dtype=torch.uint8, device="cuda")
        with torch.cuda.stream(side):
            a.fill_(1)  # work of the side stream on the block
        a.record_stream(side)
        address = a.data_ptr()
        del a
        b = torch.empty(8 * MIB, dtype=torch.uint8, device="cuda")
        assert b.data_ptr() != address, "a block in use by another stream was handed out again"
        torch.cuda.synchronize()
        del b
    del pool


def scenario_compiled_cudagraphs_training_keeps_outputs_alive(torch, phasealloc):
    """torch.compile(backend="cudagraphs") trained with SGD, an earlier step's output still alive
    when the next generation starts (cudagraph trees free the old path's storages)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 8)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = torch.compile(model, backend="cudagraphs")
    previous = None
    for _ in range(6):
        torch.compiler.cudagraph_mark_step_begin()
        out = step(torch.randn(32, 64, device="cuda"))
        out.float().sum().backward()
        opt.step()
        opt.zero_grad()
        previous = out  # alive across the next step
    # The steps ran as recorded CUDA graphs (cudagraph trees), in their private pool.
    from torch._inductor import cudagraph_trees

    manager = cudagraph_trees.get_container(torch.cuda.current_device()).tree_manager
    assert manager is not None and sum(len(nodes) for nodes in manager.roots.values()) >= 1
    pool = manager.cuda_graphs_thread_pool
    assert any(tuple(s["segment_pool_id"]) == tuple(pool) for s in torch.cuda.memory_snapshot())
    assert tuple(previous.shape) == (32, 8)
    del previous


def scenario_a_phase_change_during_a_capture_frees_nothing(torch, phasealloc):
    """PHASEALLOC_CONF=policy:[phasealloc:release:all] (set by the test) releases cached memory at
    every phase change, except while a CUDA graph capture runs: PyTorch's allocator frees nothing
    then either (a free synchronises, which a capture forbids)."""
    static = torch.zeros(1024, device="cuda")
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.graph(g, capture_error_mode="relaxed"):  # empties the cache, then captures
        with torch.cuda.stream(side):  # not captured: served by phasealloc, then cached
            x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
            del x
        before = torch.cuda.memory_reserved()
        with phasealloc.phase("generation"):
            out = static * 2
        with phasealloc.phase("training"):
            out2 = out * 2
        assert torch.cuda.memory_reserved() >= before, "memory was freed during a capture"
    if phasealloc_active(torch):
        with phasealloc.phase("generation"):  # after the capture, releases happen again
            pass
        assert torch.cuda.memory_reserved() < before - (512 << 20), (torch.cuda.memory_reserved(), before)
    g.replay()
    del out, out2
    g.reset()


def scenario_a_mempool_around_the_current_allocator_serves_allocations(torch, phasealloc):
    """MemPool(torch.cuda.memory._get_current_allocator().allocator()): a private pool whose segments
    come from the process's allocator itself (under phasealloc: from its engine, not recursing), and
    go back to it only when the pool gives them up."""
    torch.empty(1, device="cuda")
    pool = torch.cuda.MemPool(torch.cuda.memory._get_current_allocator().allocator())
    with torch.cuda.use_mem_pool(pool):
        x = on_device(torch, torch.full((1 << 20,), 7.0))
    assert len(pool.snapshot()) == 1, pool.snapshot()
    assert torch.equal(x.cpu(), torch.full((1 << 20,), 7.0))
    # x is native's block at the start of the segment phasealloc lent: freeing it gives the block
    # back to the pool, not the segment to phasealloc (the same address names both).
    ours = os.environ["PHASEALLOC_TEST_ALLOCATOR"] == "phasealloc"
    lent = pool.snapshot()[0]["total_size"]
    held = phasealloc.stats()["allocated_bytes.all.current"] if ours else 0
    assert held >= lent or not ours, (held, lent)
    del x
    if ours:
        assert phasealloc.stats()["allocated_bytes.all.current"] == held, "native's block freed phasealloc's segment"
    assert len(pool.snapshot()) == 1, pool.snapshot()
    del pool
    torch.cuda.empty_cache()  # now native gives the segment back
    if ours:
        assert phasealloc.stats()["allocated_bytes.all.current"] == held - lent, phasealloc.stats()
    else:  # phasealloc.graph_pool() lends phasealloc's memory: none to lend under PyTorch's allocator
        try:
            phasealloc.graph_pool()
            raise AssertionError("graph_pool() under PyTorch's allocator was accepted")
        except phasealloc.PhaseallocError as e:
            assert "not this process's CUDA allocator" in str(e), str(e)


def scenario_copies_between_two_gpus_reach_phaseallocs_pages(torch, phasealloc):
    """Two GPUs (SIMCUDA_GPU=count:2 on the simulated GPU): PyTorch enables peer access for the pair
    (the bridge maps phasealloc's pages for the peer) and copies by kernel or by memcpyAsync."""
    if torch.cuda.device_count() < 2:
        return
    host = torch.arange(1 << 20, dtype=torch.float32)
    x = host.to("cuda:0")
    y = x.to("cuda:1")  # a peer copy
    z = y.to("cuda:0")
    assert torch.equal(z.cpu(), host) and torch.equal(y.cpu(), host)
    del x, y, z


# --- the per-process memory fraction --------------------------------------------------------------


def scenario_memory_fraction_zero_is_accepted_and_read_back(torch, phasealloc):
    torch.cuda.set_per_process_memory_fraction(0.0)
    assert torch.cuda.get_per_process_memory_fraction(0) == 0.0
    try:
        torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")  # more than any cached block
    except torch.cuda.OutOfMemoryError:
        pass
    else:
        raise AssertionError("an allocation succeeded under a memory fraction of 0")
    torch.cuda.set_per_process_memory_fraction(1.0)
    assert torch.cuda.get_per_process_memory_fraction(0) == 1.0
    x = torch.empty(1024, device="cuda")
    del x


def scenario_memory_fraction_from_the_environment_caps_the_process(torch, phasealloc):
    """PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:0.5 (set by the test)."""
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "per_process_memory_fraction:0.5"
    total = torch.cuda.get_device_properties(0).total_memory
    assert torch.cuda.get_per_process_memory_fraction(0) == 0.5
    try:
        torch.empty(int(total * 0.6), dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError:
        pass
    else:
        raise AssertionError("60% of the device was allocated under a fraction of 0.5")
    x = torch.empty(int(total * 0.4), dtype=torch.uint8, device="cuda")
    del x


def scenario_memory_fraction_caps_default_and_pool_memory_together(torch, phasealloc):
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(0.5)
    outside = torch.empty(int(total * 0.3), dtype=torch.uint8, device="cuda")
    pool = torch.cuda.MemPool()
    try:
        with torch.cuda.use_mem_pool(pool):
            torch.empty(int(total * 0.3), dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError:
        pass
    else:
        raise AssertionError("a pool allocation took the process past its memory fraction")
    with torch.cuda.use_mem_pool(pool):
        inside = torch.empty(int(total * 0.1), dtype=torch.uint8, device="cuda")
    try:
        torch.empty(int(total * 0.15), dtype=torch.uint8, device="cuda")  # 0.3 + 0.1 + 0.15 > 0.5
    except torch.cuda.OutOfMemoryError:
        pass
    else:
        raise AssertionError("an allocation outside the pool took the process past its memory fraction")
    assert torch.cuda.memory_reserved() <= total * 0.5, torch.cuda.memory_reserved()
    del outside, inside, pool


def scenario_pool_memory_stays_counted_after_reset_accumulated_stats(torch, phasealloc):
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        x = torch.empty(8 * MIB, dtype=torch.uint8, device="cuda")
    y = torch.empty(8 * MIB, dtype=torch.uint8, device="cuda")
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    assert allocated >= 16 * MIB, allocated
    torch.cuda.reset_accumulated_memory_stats()
    assert torch.cuda.memory_allocated() == allocated
    assert torch.cuda.memory_reserved() == reserved
    del x, y, pool


def scenario_max_memory_allocated_is_the_peak_of_the_sum(torch, phasealloc):
    """A pool's block freed before a larger phase begins: the process's peak is the larger of the
    two, not their sum (under the bridge the two allocators keep separate peaks)."""
    torch.empty(1, device="cuda")
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        a = torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")
    del a
    b = torch.empty(96 * MIB, dtype=torch.uint8, device="cuda")
    assert torch.cuda.max_memory_allocated() - base == 96 * MIB, (torch.cuda.max_memory_allocated() - base) / MIB
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()
    del b, pool


def scenario_max_memory_reserved_is_the_peak_of_the_sum(torch, phasealloc):
    """Default memory reserved, freed and given back before a pool reserves: the process's peak of
    reserved bytes is the larger of the two (under the bridge they are two allocators), and a later
    rise of default memory while the pool holds its own counts both."""
    torch.empty(1, device="cuda")
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_reserved()

    def peak():
        stats_peak = torch.cuda.memory_stats()["reserved_bytes.all.peak"]
        assert stats_peak == torch.cuda.max_memory_reserved(), (stats_peak, torch.cuda.max_memory_reserved())
        return stats_peak - base

    a = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
    first = torch.cuda.memory_reserved() - base
    assert first >= 256 * MIB, first / MIB
    del a
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == base, (torch.cuda.memory_reserved() - base) / MIB
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        b = torch.empty(192 * MIB, dtype=torch.uint8, device="cuda")
    second = torch.cuda.memory_reserved() - base
    assert 192 * MIB <= second < first, second / MIB
    assert peak() == first, (peak() / MIB, first / MIB)  # not first + second
    c = torch.empty(128 * MIB, dtype=torch.uint8, device="cuda")
    third = torch.cuda.memory_reserved() - base
    assert third > first, (third / MIB, first / MIB)
    assert peak() == third, (peak() / MIB, third / MIB)
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_reserved() == torch.cuda.memory_reserved()
    del b, c, pool


# --- out of memory ----------------------------------------------------------------------------------


def scenario_out_of_memory_speaks_pytorchs_words(torch, phasealloc):
    tensor = torch.zeros(1024, device="cuda")
    try:
        torch.empty(1024 * 1024 * 1024 * 800000000, dtype=torch.int8, device="cuda")
    except torch.cuda.OutOfMemoryError as e:
        assert "Tried to allocate 800000000.00 GiB. GPU 0 has a total capacity of" in str(e), str(e)
    else:
        raise AssertionError("no out-of-memory error")
    try:
        torch.empty(1024 * 1024 * 1024 * 8000000000, dtype=torch.int8, device="cuda")
    except torch.cuda.OutOfMemoryError as e:
        assert "Tried to allocate more than 1EB memory" in str(e), str(e)
    else:
        raise AssertionError("no out-of-memory error")
    del tensor


def scenario_out_of_memory_frees_a_reset_graphs_cache_first(torch, phasealloc):
    """A reset graph's private pool stays cached by PyTorch's allocator, which frees it before it
    reports out of memory; so must the bridge, for an allocation phasealloc serves."""
    total = torch.cuda.get_device_properties(0).total_memory
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        x = torch.empty(int(total * 0.6), dtype=torch.uint8, device="cuda")
    del x
    g.reset()  # the pool is released, its segment still cached
    assert torch.cuda.memory_reserved() >= total * 0.6
    y = torch.empty(int(total * 0.6), dtype=torch.uint8, device="cuda")
    del y


def scenario_a_use_on_oom_pool_serves_what_the_device_cannot(torch, phasealloc):
    """MemPool(use_on_oom=True): once the process is out of memory, its free blocks serve ordinary
    allocations; a pool without it never does."""
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_reserved() + 80 * MIB) / total)
    try:
        keep_out = torch.cuda.MemPool()
        fallback = torch.cuda.MemPool(use_on_oom=True)
        with torch.cuda.use_mem_pool(keep_out):
            a = torch.empty(40 * MIB, dtype=torch.uint8, device="cuda")
        with torch.cuda.use_mem_pool(fallback):
            b = torch.empty(40 * MIB, dtype=torch.uint8, device="cuda")
        b_address = b.data_ptr()
        try:
            torch.empty(40 * MIB, dtype=torch.uint8, device="cuda")
        except torch.cuda.OutOfMemoryError:
            pass
        else:
            raise AssertionError("80 MiB allowed, 80 MiB in pools, and 40 MiB more succeeded")
        del a, b
        c = torch.empty(30 * MIB, dtype=torch.uint8, device="cuda")  # from the use_on_oom pool
        assert c.data_ptr() == b_address, (hex(c.data_ptr()), hex(b_address))
        try:
            torch.empty(30 * MIB, dtype=torch.uint8, device="cuda")  # the other pool is not used
        except torch.cuda.OutOfMemoryError:
            pass
        else:
            raise AssertionError("a pool without use_on_oom served an allocation")
        del c, keep_out, fallback
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)


def scenario_the_backend_cannot_change_at_run_time(torch, phasealloc):
    torch.empty(1, device="cuda")
    try:
        torch.cuda.memory._set_allocator_settings("backend:cudaMallocAsync")
    except RuntimeError as e:
        if phasealloc_active(torch):
            assert "cannot change the backend at run time" in str(e), str(e)
    else:
        raise AssertionError("the allocator backend changed at run time")
    torch.cuda.memory._set_allocator_settings("expandable_segments:False")  # other keys are still taken


def power2_division(size, divisions):
    """PyTorch's test_allocator_settings' model of roundup_power2_divisions: the next power of two
    P, then the smallest P/2 + k * P/2/divisions that holds `size`."""
    power = 1
    while power < size:
        power *= 2
    if power == size:
        return power
    step, rounded = power // 2 // divisions, power // 2
    while rounded < size:
        rounded += step
    return rounded


def scenario_roundup_power2_divisions_set_at_run_time_shape_blocks(torch, phasealloc):
    """test/test_cuda.py's test_allocator_settings: roundup_power2_divisions set at run time rounds
    the blocks (active bytes) while requested bytes stay the request's; settings without the key
    reset it; the list syntax; bad settings raise ValueError."""
    nbytes = 4 * 21 * MIB
    nbytes_big = 4 * 100 * MIB
    active, requested = "active_bytes.all.allocated", "requested_bytes.all.allocated"

    def grows(key, allocate):
        before = torch.cuda.memory_stats()[key]
        kept = allocate()
        return torch.cuda.memory_stats()[key] - before, kept

    def floats(n):
        return lambda: torch.rand(n, device="cuda")

    torch.cuda.memory.empty_cache()
    torch.cuda.memory._set_allocator_settings("")
    grown, x = grows(active, floats(nbytes // 4))
    assert grown == nbytes, grown

    torch.cuda.memory._set_allocator_settings("roundup_power2_divisions:4")
    before_requested = torch.cuda.memory_stats()[requested]
    grown, y = grows(active, floats(nbytes // 4))
    assert grown == power2_division(nbytes, 4), (grown, power2_division(nbytes, 4))
    assert torch.cuda.memory_stats()[requested] - before_requested == nbytes

    torch.cuda.memory._set_allocator_settings("garbage_collection_threshold:0.5")
    torch.cuda.memory._set_allocator_settings("garbage_collection_threshold:0.5,max_split_size_mb:40")
    torch.cuda.memory.empty_cache()
    grown, z = grows(active, floats(nbytes // 4))  # the divisions were reset
    assert grown == nbytes, grown

    torch.cuda.memory.empty_cache()
    torch.cuda.memory._set_allocator_settings(
        "garbage_collection_threshold:0.5,roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]")
    grown, w = grows(active, floats(nbytes // 4))
    assert grown == power2_division(nbytes, 8), (grown, power2_division(nbytes, 8))
    torch.cuda.memory.empty_cache()
    grown, v = grows(active, floats(nbytes_big // 4))
    assert grown == power2_division(nbytes_big, 2), (grown, power2_division(nbytes_big, 2))

    torch.cuda.memory.empty_cache()
    torch.cuda.memory._set_allocator_settings("release_lock_on_cudamalloc:True")
    grown, u = grows(active, floats(nbytes // 4))
    assert grown == nbytes, grown

    for bad in ("foo:1,bar:2", "garbage_collection_threshold:1.2", "max_split_size_mb:2"):
        torch.cuda.memory._set_allocator_settings("roundup_power2_divisions:4")
        try:
            torch.cuda.memory._set_allocator_settings(bad)
        except ValueError:
            pass
        else:
            raise AssertionError("settings %r were accepted" % bad)
        grown, t = grows(active, floats(nbytes // 4))  # PyTorch reset the divisions before refusing
        assert grown == nbytes, (bad, grown)
        del t
    torch.cuda.memory._set_allocator_settings("")
    del x, y, z, w, v, u


# --- memory history and the profiler ----------------------------------------------------------------


def snapshot_text(torch):
    import json

    return json.dumps(torch.cuda.memory._snapshot())


def scenario_history_is_emptied_when_recording_stops(torch, phasealloc):
    import json

    def recorded_first():
        return torch.empty(3 * MIB, dtype=torch.uint8, device="cuda")

    try:
        torch.cuda.memory._record_memory_history("all", context="all", stacks="python")
        x = recorded_first()
        assert "recorded_first" in snapshot_text(torch)
        torch.cuda.memory._record_memory_history(None)
        torch.cuda.memory._record_memory_history("all", context=None, stacks="python")
        y = torch.empty(5 * MIB, dtype=torch.uint8, device="cuda")
        traces = json.dumps(torch.cuda.memory._snapshot()["device_traces"])
        assert "recorded_first" not in traces, "the history of the previous recording was kept"
        assert str(5 * MIB) in traces
        del x, y
    finally:
        torch.cuda.memory._record_memory_history(None)


def scenario_free_and_alloc_stacks_follow_the_context_setting(torch, phasealloc):
    for context in ("alloc", "all", "state"):
        try:
            torch.cuda.memory.empty_cache()
            torch.cuda.memory._record_memory_history(context=context, stacks="python")
            held = []

            def allocating_here():
                held.append(torch.empty(3 * MIB, dtype=torch.uint8, device="cuda"))

            def freeing_here():
                held.clear()

            allocating_here()
            freeing_here()
            text = snapshot_text(torch)
            assert ("freeing_here" in text) == (context == "all"), context
            assert ("allocating_here" in text) == (context != "state"), context
        finally:
            torch.cuda.memory._record_memory_history(None)


def scenario_segment_frees_of_a_cache_release_carry_the_stack_under_all(torch, phasealloc):
    for context in ("alloc", "all", "state"):
        try:
            torch.cuda.memory.empty_cache()
            torch.cuda.memory._record_memory_history(context=context, stacks="python")
            x = torch.empty(3 * MIB, dtype=torch.uint8, device="cuda")
            del x
            torch.cuda.memory.empty_cache()
            assert ("empty_cache" in snapshot_text(torch)) == (context == "all"), context
        finally:
            torch.cuda.memory._record_memory_history(None)


def scenario_user_metadata_is_on_every_history_entry(torch, phasealloc):
    # The query came after torch 2.11 (with supportsUserMetadata()); torch 2.11 records the metadata
    # without it, so the entries are checked on every torch.
    if hasattr(torch._C, "_cuda_memoryMetadataSupported"):
        assert torch._C._cuda_memoryMetadataSupported()
    try:
        torch.cuda.memory.empty_cache()
        torch.cuda.memory._set_memory_metadata("rollout 7")
        torch.cuda.memory._record_memory_history(context="all", stacks="python")
        x = torch.empty(3 * MIB, dtype=torch.uint8, device="cuda")
        del x
        torch.cuda.memory.empty_cache()
        torch.cuda.memory._set_memory_metadata("")
        events = torch.cuda.memory._snapshot()["device_traces"][0]
        assert len(events) >= 3, events
        assert all(e["user_metadata"] == "rollout 7" for e in events), [e["user_metadata"] for e in events]
    finally:
        torch.cuda.memory._record_memory_history(None)


def scenario_the_oom_history_entry_has_the_callers_frames(torch, phasealloc):
    import json

    def runs_out_here():
        try:
            torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
        except torch.cuda.OutOfMemoryError:
            return
        raise AssertionError("no out-of-memory error")

    try:
        torch.cuda.memory._record_memory_history(context="all", stacks="python")
        runs_out_here()
        ooms = [e for e in torch.cuda.memory._snapshot()["device_traces"][0] if e["action"] == "oom"]
        assert len(ooms) == 1, ooms
        assert "runs_out_here" in json.dumps(ooms[0]["frames"]), ooms[0]
    finally:
        torch.cuda.memory._record_memory_history(None)


def scenario_a_free_block_shows_its_last_requested_size(torch, phasealloc):
    """While recording, the snapshot's free block keeps the size last requested of it, as PyTorch's
    does (memory_viz's plots, which drop freed trace entries, still show it)."""
    try:
        torch.cuda.memory.empty_cache()
        torch.cuda.memory._record_memory_history("all", context=None, stacks="python")
        x = torch.empty(65536 + 4, dtype=torch.uint8, device="cuda")
        del x
        blocks = [b for s in torch.cuda.memory._snapshot()["segments"] for b in s["blocks"]
                  if b["state"] == "inactive"]
        assert any(b["requested_size"] == 65536 + 4 for b in blocks), blocks
    finally:
        torch.cuda.memory._record_memory_history(None)


def scenario_gpu_trace_callbacks_see_allocations_and_frees(torch, phasealloc):
    """What torch.cuda._sanitizer (CSAN) builds on: every allocation and free reaches the callbacks."""
    from torch.cuda import _gpu_trace

    seen = {"alloc": [], "free": []}
    _gpu_trace.register_callback_for_memory_allocation(seen["alloc"].append)
    _gpu_trace.register_callback_for_memory_deallocation(seen["free"].append)
    torch._C._activate_gpu_trace()
    x = torch.empty(3 * MIB, dtype=torch.uint8, device="cuda")
    address = x.data_ptr()
    del x
    assert address in seen["alloc"] and address in seen["free"], (hex(address), seen)


def scenario_the_profiler_sees_allocations_with_stacks(torch, phasealloc):
    import json

    from torch.cuda._memory_viz import _profile_to_snapshot

    def profiled_region():
        x = torch.rand(128, 128, device="cuda")
        return x * x + x * x

    with torch.profiler.profile(with_stack=True, profile_memory=True, record_shapes=True) as prof:
        profiled_region()
    snapshot = _profile_to_snapshot(prof)
    entries = [e for trace in snapshot["device_traces"] for e in trace]
    assert len(entries) >= 6, entries  # the input, two products, the sum: allocated and freed
    assert "profiled_region" in json.dumps(snapshot)


SCENARIOS = scenarios(globals())

ENVIRONMENT = {
    "memory_fraction_from_the_environment_caps_the_process": {"PYTORCH_CUDA_ALLOC_CONF":
                                                              "per_process_memory_fraction:0.5"},
    "record_stream_on_a_pool_block": {"SIMCUDA_GPU": "quiet:1,events:sync"},
    "copies_between_two_gpus_reach_phaseallocs_pages": {"SIMCUDA_GPU": "quiet:1,count:2"},
    "a_phase_change_during_a_capture_frees_nothing": {"PHASEALLOC_CONF": "policy:[phasealloc:release:all]"},
}

try:
    import pytest
except ImportError:  # the child does not need pytest
    pytest = None

if pytest is not None and __name__ != "__main__":
    _REASON = gpu_skip_reason()
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    @pytest.mark.parametrize("allocator", ["native", "phasealloc"])
    @pytest.mark.parametrize("scenario", sorted(SCENARIOS))
    def test_bridge_matches_pytorch(scenario, allocator):
        if allocator == "phasealloc" and not bridge_built():
            pytest.skip("the c10 bridge was not built")
        env = dict(ENVIRONMENT.get(scenario, {}), PHASEALLOC_TEST_ALLOCATOR=allocator)
        run(__file__, scenario, sim_gpu=None, native=allocator == "native", conf="", bridge="c10", env=env)


    def test_an_explicit_pytorch_backend_is_kept():
        """PYTORCH_ALLOC_CONF=...backend:cudaMallocAsync... set by the job itself: PyTorch's choice wins
        over PHASEALLOC=1, with a warning that says why phasealloc is not enabled."""
        code = ("import os\n"
                "os.environ['PYTORCH_ALLOC_CONF'] = 'max_split_size_mb:20,backend:cudaMallocAsync'\n"
                "import torch\n"
                "torch.cuda.init()\n"
                "print(torch.cuda.get_allocator_backend())\n")
        out = subprocess.run(launcher() + ["--", sys.executable, "-c", code], env=child_env("", "c10"),
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "cudaMallocAsync", out.stdout + out.stderr
        assert "asks for PyTorch's 'cudaMallocAsync' allocator backend" in out.stderr, out.stderr


    # Which of PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF names the backend, when both are set:
    # PyTorch's own choice (under --native) is the judge of what phasealloc must agree with.
    ALLOC_CONF_CASES = {
        "cuda_variable_only": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
        "generic_variable_only": {"PYTORCH_ALLOC_CONF": "max_split_size_mb:20,backend:cudaMallocAsync"},
        "cuda_variable_names_async_generic_native": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync",
                                                     "PYTORCH_ALLOC_CONF": "backend:native"},
        "cuda_variable_without_backend_generic_async": {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:20",
                                                        "PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync"},
        "empty_cuda_variable_generic_async": {"PYTORCH_CUDA_ALLOC_CONF": "",
                                              "PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync"},
    }

    @pytest.mark.parametrize("case", sorted(ALLOC_CONF_CASES))
    def test_the_allocator_variables_are_read_as_pytorch_reads_them(case):
        """PyTorch 2.11 to 2.15 take their allocator settings from the first of PYTORCH_CUDA_ALLOC_CONF
        and PYTORCH_ALLOC_CONF that is set; phasealloc steps aside exactly when the backend PyTorch
        chose from them is not its native one, and names the variable it read."""
        code = "import torch\ntorch.cuda.init()\nprint('BACKEND', torch.cuda.get_allocator_backend())\n"

        def backend(native):
            env = child_env("", "c10")
            env.update(ALLOC_CONF_CASES[case])
            command = launcher() + (["--native"] if native else []) + ["--", sys.executable, "-c", code]
            out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr
            return [line.split()[1] for line in out.stdout.splitlines() if line.startswith("BACKEND ")][0], out.stderr

        pytorchs, _ = backend(native=True)
        ours, stderr = backend(native=False)
        if pytorchs == "native":
            assert ours == "phasealloc", stderr
        else:
            assert ours == pytorchs, stderr
            variable = [v for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF") if v in ALLOC_CONF_CASES[case]][0]
            assert "%s asks for PyTorch's %r allocator backend" % (variable, pytorchs) in stderr, stderr

    def test_a_bridge_built_for_another_torch_build_is_refused():
        """Same version string, another commit: another class layout. Both the package and the
        library itself refuse it, naming what differs."""
        if not bridge_built():
            pytest.skip("the c10 bridge was not built")
        code = ("import ctypes, types, torch, phasealloc\n"
                "from phasealloc import _bridge, _library\n"
                "_library.load()\n"
                "other = types.SimpleNamespace(__version__=torch.__version__, _C=torch._C,\n"
                "    version=types.SimpleNamespace(cuda=torch.version.cuda, git_version='0' * 40))\n"
                "try:\n"
                "    _bridge.install(other, _library.library_path())\n"
                "except _bridge.BridgeUnavailable as e:\n"
                "    print('PACKAGE', e)\n"
                "lib = ctypes.CDLL(_bridge.bridge_path(_library.library_path()))\n"
                "lib.phasealloc_c10_install.restype = ctypes.c_char_p\n"
                "lib.phasealloc_c10_install.argtypes = [ctypes.c_char_p]\n"
                "print('LIBRARY', lib.phasealloc_c10_install(b'version=2.0.0;git=x;cuda=13;abi=1').decode())\n"
                "print('BACKEND', torch.cuda.get_allocator_backend())\n")
        env = child_env("", "c10")
        out = subprocess.run(launcher() + ["--native", "--", sys.executable, "-c", code], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
        assert "was built for torch git=" in lines["PACKAGE"] and "this is torch git=" + "0" * 40 in lines["PACKAGE"]
        assert "the c10 bridge was built for torch version=" in lines["LIBRARY"], lines
        assert "this is torch version=2.0.0;git=x" in lines["LIBRARY"], lines
        assert lines["BACKEND"] == "native", lines


if __name__ == "__main__":
    import torch

    expected = os.environ["PHASEALLOC_TEST_ALLOCATOR"]  # a fallback to another allocator fails the test
    torch.empty(1, device="cuda")
    backend = torch.cuda.memory.get_allocator_backend()
    assert backend == expected, "expected %s as the allocator, got %s" % (expected, backend)
    child_main(globals(), "torch", "phasealloc")
