"""The c10 bridge against PyTorch's own allocator: out of memory, the allocator settings set at run
time, the backend. Each scenario runs under both allocators (tests/harness/bridge_harness.py).
"""

from bridge_harness import MIB, bridge_child_main, bridge_tests, phasealloc_active
from torch_harness import scenarios


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


SCENARIOS = scenarios(globals())

ENVIRONMENT = {}

if __name__ == "__main__":
    bridge_child_main(globals())
else:
    bridge_tests(globals(), ENVIRONMENT)
