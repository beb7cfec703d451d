"""The c10 bridge against PyTorch's own allocator: the per-process memory fraction and the peak
statistics. Each scenario runs under both allocators (tests/harness/bridge_harness.py).
"""

import os

from bridge_harness import MIB, bridge_child_main, bridge_tests
from torch_harness import scenarios


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


SCENARIOS = scenarios(globals())

ENVIRONMENT = {
    "memory_fraction_from_the_environment_caps_the_process": {"PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction:0.5"}
}

if __name__ == "__main__":
    bridge_child_main(globals())
else:
    bridge_tests(globals(), ENVIRONMENT)
