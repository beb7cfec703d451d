"""The c10 bridge against PyTorch's own allocator: CUDA graphs, cudagraph trees, memory pools and
copies between GPUs. Each scenario runs under both allocators (tests/harness/bridge_harness.py).
"""

import os

from bridge_harness import MIB, bridge_child_main, bridge_tests, on_device, phasealloc_active
from torch_harness import scenarios


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


SCENARIOS = scenarios(globals())

ENVIRONMENT = {
    "record_stream_on_a_pool_block": {"SIMCUDA_GPU": "quiet:1,events:sync"},
    "copies_between_two_gpus_reach_phaseallocs_pages": {"SIMCUDA_GPU": "quiet:1,count:2"},
    "a_phase_change_during_a_capture_frees_nothing": {"PHASEALLOC_CONF": "policy:[phasealloc:release:all]"}
}

if __name__ == "__main__":
    bridge_child_main(globals())
else:
    bridge_tests(globals(), ENVIRONMENT)
