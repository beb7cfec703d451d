"""Offloading chunks through phasealloc's host buffer pool (phasealloc.chunk_offloader), on a real GPU.

Run (from the repository root, after building libphasealloc_torch.so):

    PHASEALLOC_LIBRARY=build/interpose/libphasealloc_torch.so python -m pytest tests/gpu/test_offload.py -v

Skips with the reason when torch, CUDA or the library is missing. Like test_torch_swap.py, every
scenario runs in a fresh process started through phasealloc-run (PHASEALLOC=1: phasealloc is the
CUDA allocator), with its own host_budget; the test file runs itself as
`python test_offload.py <scenario>`, the scenario asserts inside the child, which prints its RESULT
line when it returns (tests/harness/torch_harness.py). Scenarios run on device:cuda_vmm and device:cuda_runtime.
"""

import sys

from torch_harness import DEVICES, MIB, child_main, gpu_skip_reason, run, scenarios

CHUNK_BYTES = 4 * MIB
CHUNKS = 6


# --- scenarios (run in the child, with phasealloc already enabled by the start-up hook) ----------

def _chunks(torch, seed):
    """CHUNKS tensors of CHUNK_BYTES each, of several dtypes and shapes, different every seed."""
    g = torch.Generator().manual_seed(seed)  # made on the host, copied: real bytes on any GPU
    n32 = CHUNK_BYTES // 4
    out = [
        torch.randn(n32, generator=g),
        torch.randn(CHUNK_BYTES // 2, generator=g).half().view(1024, -1),
        torch.randn(CHUNK_BYTES // 2, generator=g).to(torch.bfloat16),
        torch.randint(-2**40, 2**40, (CHUNK_BYTES // 8,), generator=g, dtype=torch.int64),
        torch.randn(n32, generator=g).view(256, 16, -1),
        torch.randint(0, 255, (CHUNK_BYTES,), generator=g, dtype=torch.uint8),
    ]
    assert len(out) == CHUNKS and all(t.numel() * t.element_size() == CHUNK_BYTES for t in out)
    return [t.to("cuda") for t in out]


def scenario_round_trip(torch, phasealloc):
    # host_budget is exactly CHUNKS buffers (see CONF): every iteration must reuse them.
    off = phasealloc.chunk_offloader()
    copy_stream = off.copy_stream(0)
    allocs_after_first = None
    for iteration in range(8):
        chunks = _chunks(torch, iteration)
        expected = [t.cpu() for t in chunks]
        torch.cuda._sleep(20_000_000)  # the producer is still busy: the copies must wait for it
        handles = [off.offload(t) for t in chunks]
        del chunks  # the GPU memory goes back: reused only after the copies read it
        # Written through host copies: real on a simulated GPU too (a fill kernel would not run there).
        clobber = [torch.full((CHUNK_BYTES // 4,), -1.0).to("cuda") for _ in range(CHUNKS)]
        assert all(h.pinned and h.host.is_pinned() for h in handles), [h.pinned for h in handles]
        with torch.cuda.stream(copy_stream):
            torch.cuda._sleep(20_000_000)  # slow reload copies: their buffers must not be reused early
        reloaded = [off.reload(h) for h in handles]
        for i, (got, want) in enumerate(zip(reloaded, expected)):
            assert got.device.type == "cuda" and got.dtype == want.dtype and got.shape == want.shape, i
            assert torch.equal(got.cpu(), want), "iteration %d chunk %d differs after the round trip" % (iteration, i)
        del clobber
        host = phasealloc.host_stats(0)
        if allocs_after_first is None:
            allocs_after_first = host["num_host_alloc"]
            assert allocs_after_first == CHUNKS, host
        assert host["num_host_alloc"] == allocs_after_first, (iteration, host)
        assert host["active_requests.current"] == 0, host
    host = phasealloc.host_stats(0)
    assert host["num_host_free"] == 0 and host["num_reuses"] == CHUNKS * 7, host
    assert host["allocated_bytes.peak"] == CHUNKS * CHUNK_BYTES, host
    assert off.fallbacks == 0 and off.offloads == off.reloads == CHUNKS * 8
    print("host", host)


def scenario_over_budget_falls_back_to_pageable(torch, phasealloc):
    # host_budget holds 2 buffers (see CONF): the other offloads go to pageable memory.
    off = phasealloc.chunk_offloader()
    chunks = _chunks(torch, 1)
    expected = [t.cpu() for t in chunks]
    handles = [off.offload(t) for t in chunks]
    del chunks
    assert [h.pinned for h in handles] == [True, True] + [False] * (CHUNKS - 2)
    assert off.fallbacks == CHUNKS - 2 and "budget" in off.last_fallback_error, off.last_fallback_error
    handles[0].wait()
    assert torch.equal(handles[0].host, expected[0])  # readable on the CPU after wait()
    reloaded = [off.reload(h, device="cuda:0") for h in handles]
    for i, (got, want) in enumerate(zip(reloaded, expected)):
        assert torch.equal(got.cpu(), want), i
    host = phasealloc.host_stats(0)
    assert host["num_over_budget"] == CHUNKS - 2 and host["active_requests.current"] == 0, host
    again = off.offload(reloaded[0])  # the budget is free again
    assert again.pinned
    off.discard(again)
    try:
        off.reload(again)
    except phasealloc.PhaseallocError as e:
        assert "already reloaded or discarded" in str(e)
    else:
        raise AssertionError("a discarded chunk was reloaded")
    torch.cuda.synchronize()  # trim frees idle buffers only: let the copies that hold them finish
    phasealloc.trim_host(0)
    assert phasealloc.host_stats(0)["allocated_bytes.current"] == 0


def scenario_host_buffer(torch, phasealloc):
    s = torch.cuda.Stream()
    src = torch.arange(CHUNK_BYTES // 4, dtype=torch.float32).to("cuda")
    for _ in range(4):
        buf = phasealloc.host_buffer(CHUNK_BYTES)
        host = buf.tensor(torch.float32)
        assert host.is_pinned()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            host.copy_(src, non_blocking=True)
        s.synchronize()
        assert torch.equal(host, src.cpu())
        buf.release(s)
    assert phasealloc.host_stats()["num_host_alloc"] == 1
    # The views share the buffer's memory: a float32 view and the raw bytes (uint8) over the same
    # address, what one writes the other reads; after release, tensor() is refused with the reason.
    buf = phasealloc.host_buffer(4 * 1000 + 2)
    floats = buf.tensor(torch.float32)
    assert floats.shape == (1000,) and floats.data_ptr() == buf.ptr and floats.device.type == "cpu"
    floats.copy_(torch.arange(1000, dtype=torch.float32))
    raw = buf.tensor()
    assert raw.dtype == torch.uint8 and raw.numel() == 4002 and raw.data_ptr() == buf.ptr
    assert bytes(raw[28:32].tolist()) == torch.tensor([7.0]).numpy().tobytes()
    raw[0:4] = torch.tensor([0, 0, 128, 63], dtype=torch.uint8)  # 1.0f, little endian
    assert float(floats[0]) == 1.0
    buf.release()
    try:
        buf.tensor()
        raise AssertionError("tensor() of a released host buffer was not refused")
    except phasealloc.PhaseallocError as e:
        assert "after release" in str(e), str(e)


SCENARIOS = scenarios(globals())
CONF = {
    "round_trip": "host_budget:%d" % (CHUNKS * CHUNK_BYTES),
    "over_budget_falls_back_to_pageable": "host_budget:%d" % (2 * CHUNK_BYTES),
    # One buffer: a request at the budget waits for the pending copy instead of allocating again.
    "host_buffer": "host_budget:%d" % CHUNK_BYTES,
}


# --- pytest side ---------------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # the child does not need pytest
    pytest = None

if pytest is not None and __name__ != "__main__":
    _REASON = gpu_skip_reason()
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    @pytest.mark.parametrize("device", DEVICES)
    @pytest.mark.parametrize("scenario", sorted(SCENARIOS))
    def test_offload(scenario, device):
        run(__file__, scenario, sim_gpu=None, native=False, conf="device:%s,%s" % (device, CONF[scenario]))


if __name__ == "__main__":
    child_main(globals(), "torch", "phasealloc")
