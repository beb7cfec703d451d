"""Non-blocking same-address offload (phasealloc.offload / restore with non_blocking=True) under the
c10 bridge, device:cuda_vmm: the calls return once the copies are enqueued, with a move_handle.

An offload's device pages stay (and stay counted) until its move finishes: at handle.wait(), or when
an allocation needs them. A restore's pages are the GPU's at once and the current stream is ordered
after its copies. On simcuda (events:sync) an event completes only at a synchronize, so a move stays
in flight until something waits for it, as a long copy would on a GPU; its stream waits are counted.
Contents are compared with copies kept on the CPU.
"""

from torch_harness import MIB, child_main, gpu_skip_reason, run, scenarios

CONF = "device:cuda_vmm"


def _simulator():
    try:
        from simcuda.introspect import loaded, simulator
    except ImportError:
        return None
    return simulator() if loaded() else None


def _random_tensor(torch, nbytes, generator):
    host = torch.empty(nbytes, dtype=torch.uint8).random_(0, 256, generator=generator)
    return host, host.cuda()


def _levels(phasealloc):
    s = phasealloc.stats()
    return s["reserved_bytes.all.current"], s["offloaded_bytes.all.current"]


# --- scenarios (run in the child, with phasealloc enabled by the start-up hook) -----------------

def scenario_an_offload_gives_its_pages_back_when_it_finishes(torch, phasealloc):
    """In flight the pages are still the device's (reserved, not offloaded); wait() finishes the move:
    the pages go back, the books say offloaded, and the bytes come back bit-exact."""
    g = torch.Generator().manual_seed(11)
    blocks = [_random_tensor(torch, n, g) for n in (3 * MIB + 512, 40 * MIB, 1000, 64 * MIB)]
    torch.cuda.synchronize()
    reserved, offloaded = _levels(phasealloc)
    assert offloaded == 0
    handle = phasealloc.offload([d for _, d in blocks], non_blocking=True)
    moved = handle.outcome
    assert moved["page_bytes"] > 0 and moved["copied_bytes"] > 0, moved
    assert _levels(phasealloc) == (reserved, 0), "an offload in flight already gave its pages back"
    assert not handle.done(), "the copies were done before anything waited for them (events:sync)"
    assert _levels(phasealloc) == (reserved, 0)
    assert handle.wait() == moved
    assert handle.done()
    assert _levels(phasealloc) == (reserved - moved["page_bytes"], moved["page_bytes"]), (_levels(phasealloc), moved)
    back = phasealloc.restore([d for _, d in blocks])
    assert back["page_bytes"] == moved["page_bytes"], (back, moved)
    for host, dev in blocks:
        assert torch.equal(dev.cpu(), host), "a block of %d bytes differs after the cycle" % host.numel()
    return moved


def scenario_an_allocation_that_needs_the_pages_waits_for_the_copies(torch, phasealloc):
    """Under a memory fraction that leaves no room, an allocation finishes the offload in flight
    (it would otherwise run out of memory) and gets the pages; the bytes stay correct."""
    g = torch.Generator().manual_seed(12)
    host, x = _random_tensor(torch, 256 * MIB, g)
    torch.cuda.synchronize()
    total = torch.cuda.get_device_properties(0).total_memory
    reserved, _ = _levels(phasealloc)
    torch.cuda.set_per_process_memory_fraction((reserved + 64 * MIB) / total)
    handle = phasealloc.offload(x, non_blocking=True)
    assert _levels(phasealloc)[0] == reserved
    y = torch.empty(200 * MIB, dtype=torch.uint8, device="cuda")  # fits only in x's pages
    y.fill_(7)
    _, offloaded = _levels(phasealloc)
    assert offloaded == handle.outcome["page_bytes"] > 0, (offloaded, handle.outcome)
    assert handle.done(), "the allocation landed the move: nothing is left in flight"
    assert torch.equal(x.cpu(), host), "the offloaded bytes changed"
    del y
    torch.cuda.set_per_process_memory_fraction(1.0)
    phasealloc.restore(x)
    assert torch.equal(x.cpu(), host)
    return offloaded


def scenario_a_restore_orders_the_current_stream_after_its_copies(torch, phasealloc):
    """restore(non_blocking) maps the pages at once, makes the current stream wait for the copies on
    the device (stream waits a blocking restore does not make), and a kernel queued next reads the
    CPU's values; wait_stream orders another stream; nothing is in flight after wait()."""
    sim = _simulator()
    g = torch.Generator().manual_seed(13)
    a_host, b_host = torch.randn(2 * MIB, generator=g), torch.randn(2 * MIB, generator=g)
    a, b = a_host.cuda(), b_host.cuda()
    waits = []
    for non_blocking in (False, True):
        phasealloc.offload(a)
        reserved, offloaded = _levels(phasealloc)
        before = sim.counters()["stream_waits"] if sim else 0
        got = phasealloc.restore(a, non_blocking=non_blocking)
        if sim:
            waits.append(sim.counters()["stream_waits"] - before)
        now = _levels(phasealloc)
        assert now[1] == 0, "the restored pages are not booked at once"
        if non_blocking:  # (a blocking restore first gives back free cache, as much as it maps)
            assert now[0] == reserved + offloaded, "the restored pages are not booked at once"
        c = a * 2 + b
        assert torch.equal(c.cpu(), a_host * 2 + b_host), "a kernel after the restore read other bytes"
    handle = got
    side = torch.cuda.Stream()
    before = sim.counters()["stream_waits"] if sim else 0
    handle.wait_stream(side)
    if sim:
        assert sim.counters()["stream_waits"] - before == 1, "wait_stream did not order the side stream"
    with torch.cuda.stream(side):
        d = a - b
    side.synchronize()
    assert torch.equal(d.cpu(), a_host - b_host)
    handle.wait()
    before = sim.counters()["stream_waits"] if sim else 0
    handle.wait_stream(side)  # nothing in flight: nothing to order
    if sim:
        assert sim.counters()["stream_waits"] == before
        assert waits[1] > waits[0], "the non-blocking restore did not order the current stream: %s" % waits
    return waits


def scenario_blocks_freed_and_reused_while_moves_are_in_flight(torch, phasealloc):
    """A block freed while its offload is in flight, and one freed while its restore is, leave the
    books exact (the engine checks its invariants after every call here); memory reused after the
    restore holds what is written to it, and the block that stayed keeps its bytes."""
    g = torch.Generator().manual_seed(14)
    with phasealloc.tag("moving"):
        keep_host, keep = _random_tensor(torch, 8 * MIB, g)
        _, drop = _random_tensor(torch, 8 * MIB, g)
    torch.cuda.synchronize()
    handle = phasealloc.offload(tag="moving", non_blocking=True)
    del drop  # while its copies are in flight
    handle.wait()
    assert torch.equal(keep.cpu(), keep_host)
    with phasealloc.tag("moving"):
        other_host, other = _random_tensor(torch, 8 * MIB, g)
    torch.cuda.synchronize()
    phasealloc.offload(tag="moving")
    handle = phasealloc.restore(tag="moving", non_blocking=True)
    del other  # while the restore's copies are in flight
    reuse = torch.full((8 * MIB,), 3, dtype=torch.uint8, device="cuda")
    handle.wait()
    assert bool((reuse == 3).all()), "memory reused after a restore in flight lost its bytes"
    assert torch.equal(keep.cpu(), keep_host)
    s = phasealloc.stats()
    assert s["offloaded_bytes.all.current"] == 0, s["offloaded_bytes.all.current"]
    return s["num_offloads"]


def scenario_bad_move_requests_are_named(torch, phasealloc):
    """Bad devices, mixed selectors and spans out of order are refused with what was wrong; a block
    whose offload is in flight is not moved twice."""
    x = torch.ones(4 * MIB, dtype=torch.uint8, device="cuda")
    lib = phasealloc._library.load()
    assert lib.phasealloc_finish_moves(99, 0, 1) == -1
    assert "99" in phasealloc._library.last_error(), phasealloc._library.last_error()
    try:
        phasealloc.offload(x, tag="t", non_blocking=True)
        raise AssertionError("offload of tensors and a tag at once was not refused")
    except phasealloc.PhaseallocError as e:
        assert "one of the three" in str(e), str(e)
    import ctypes

    ptrs = (ctypes.c_void_p * 1)(x.data_ptr())
    spans = (ctypes.c_void_p * 2)(x.data_ptr() + 4096, x.data_ptr())  # not in address order
    sizes = (ctypes.c_size_t * 2)(4096, 4096)
    assert lib.phasealloc_move_lent(0, 0, 0, ptrs, 1, spans, sizes, 2, None, None) == -1
    assert "address order" in phasealloc._library.last_error(), phasealloc._library.last_error()
    handle = phasealloc.offload(x, non_blocking=True)
    assert phasealloc.offload(x, non_blocking=True).outcome["blocks"] == 0, "an offload in flight was moved twice"
    handle.wait()
    assert bool((x == 1).all())
    return True


SCENARIOS = scenarios(globals())


# --- pytest side ---------------------------------------------------------------------------------

try:
    import pytest
except ImportError:
    pytest = None

if pytest is not None and __name__ != "__main__":
    _REASON = gpu_skip_reason()
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]
    # Events complete only at a synchronize: a move stays in flight until something waits for it.
    SYNC = {"SIMCUDA_GPU": "quiet:1,events:sync"}
    CHECKED = CONF + ",check_invariants:1"

    def _sim_only():
        from torch_harness import on_simulator

        if not on_simulator():
            pytest.skip("needs copies that stay in flight until waited for (simcuda events:sync): simulator only")

    def test_an_offload_gives_its_pages_back_when_it_finishes():
        _sim_only()
        run(__file__, "an_offload_gives_its_pages_back_when_it_finishes", sim_gpu=None, native=False, conf=CHECKED,
            bridge="c10", env=SYNC)

    def test_an_allocation_that_needs_the_pages_waits_for_the_copies():
        _sim_only()
        assert run(__file__, "an_allocation_that_needs_the_pages_waits_for_the_copies", sim_gpu="16GiB", native=False,
                   conf=CHECKED, bridge="c10", env=SYNC) > 0

    def test_a_restore_orders_the_current_stream_after_its_copies():
        run(__file__, "a_restore_orders_the_current_stream_after_its_copies", sim_gpu=None, native=False, conf=CONF,
            bridge="c10", env={"SIMCUDA_GPU": "quiet:1,values:exact,events:sync"})

    def test_blocks_freed_and_reused_while_moves_are_in_flight():
        run(__file__, "blocks_freed_and_reused_while_moves_are_in_flight", sim_gpu=None, native=False, conf=CHECKED,
            bridge="c10", env=SYNC)

    def test_bad_move_requests_are_named():
        run(__file__, "bad_move_requests_are_named", sim_gpu=None, native=False, conf=CONF,
            bridge="c10")


if __name__ == "__main__":
    child_main(globals(), "torch", "phasealloc")
