"""Same-address offload (phasealloc.offload / phasealloc.restore) under the c10 bridge, device:cuda_vmm:
live tensors leave the GPU for host memory mapped at their addresses and come back there.

Each scenario runs in a fresh process started through phasealloc-run (tests/harness/torch_harness.py)
on simcuda, whose books say what moved (its copies' bytes, its host-located memory, its VMM calls),
or on a GPU where the machine has one (the simulator's books are then skipped, not the values).
Contents are compared with copies kept on the CPU, never with another run of the simulator.
"""

import re

from torch_harness import MIB, child_main, free_port, gpu_skip_reason, run, scenarios

FIELDS = ("blocks", "ranges", "page_bytes", "copied_bytes", "kept_bytes")

CONF = "device:cuda_vmm"


def _simulator():
    try:
        from simcuda.introspect import loaded, simulator
    except ImportError:
        return None
    return simulator() if loaded() else None


def _random_tensor(torch, nbytes, generator):
    """nbytes of random bytes, made on the CPU (the reference) and copied to the GPU."""
    host = torch.empty(nbytes, dtype=torch.uint8).random_(0, 256, generator=generator)
    return host, host.cuda()


# --- scenarios (run in the child, with phasealloc enabled by the start-up hook) -----------------

def scenario_contents_survive_cycles(torch, phasealloc):
    """Blocks of 512 B to 1 GiB on two streams, three offload/restore cycles, some freed while away:
    every byte is the CPU's copy afterwards; the copies move the live bytes only."""
    g = torch.Generator().manual_seed(1234)
    side = torch.cuda.Stream()
    sizes = [512, 4096, 100_000, 1 * MIB, 3 * MIB + 512, 8 * MIB, 20 * MIB, 64 * MIB + 4096, 256 * MIB, 1024 * MIB]
    tensors = {}
    for i, n in enumerate(sizes):
        with torch.cuda.stream(side if i % 2 else torch.cuda.current_stream()):
            tensors[i] = _random_tensor(torch, n, g)
    torch.cuda.synchronize()
    sim = _simulator()
    for cycle in range(3):
        names = sorted(tensors)
        reserved = phasealloc.stats()["reserved_bytes.all.current"]
        before = sim.counters() if sim else None
        out = phasealloc.offload([tensors[k][1] for k in names])
        assert out["page_bytes"] > 0 and out["ranges"] >= 1, out
        s = phasealloc.stats()
        assert s["offloaded_bytes.all.current"] == out["page_bytes"], (s["offloaded_bytes.all.current"], out)
        assert s["reserved_bytes.all.current"] == reserved - out["page_bytes"], (reserved, s["reserved_bytes.all.current"], out)
        live = sum(tensors[k][1].untyped_storage().nbytes() for k in names)
        assert out["copied_bytes"] <= live, (out, live)  # never a free cached byte
        if sim:
            after = sim.counters()
            assert after["memcpy_bytes"] - before["memcpy_bytes"] == out["copied_bytes"], (before, after, out)
            assert sim.host_located() >= out["page_bytes"], (sim.host_located(), out)
        # Free one block while it is away (its host bytes go when its range has no live block).
        victim = names[cycle + 3]
        del tensors[victim]
        # Values read over the link while offloaded (a kernel reads host-backed memory).
        k = names[-2]
        assert torch.equal(tensors[k][1][:4096].cpu(), tensors[k][0][:4096]), "read while offloaded differs"
        back = phasealloc.restore([tensors[k][1] for k in sorted(tensors)])
        assert back["ranges"] >= 1, back
        for key, (host, device_copy) in tensors.items():
            assert torch.equal(device_copy.cpu(), host), "tensor %d (%d bytes) differs after cycle %d" % (
                key, host.numel(), cycle)
        # A new tensor in the freed space gets correct bytes too.
        tensors[victim] = _random_tensor(torch, sizes[victim], g)
    s = phasealloc.stats()
    assert s["offloaded_bytes.all.current"] == 0 and s["num_offloads"] >= 3 and s["num_restores"] >= 3, s
    by_phase = [(p["offloaded_bytes"], p["restored_bytes"]) for p in s["phases"]]
    assert sum(o for o, _ in by_phase) == s["offloaded_bytes.all.allocated"] > 0, (by_phase, s)
    assert 0 < sum(r for _, r in by_phase) <= s["offloaded_bytes.all.freed"], (by_phase, s)
    return {"offloads": s["num_offloads"], "kept": s["offload_kept_bytes"]}


def scenario_kernels_compute_on_offloaded_tensors(torch, phasealloc):
    """At values:exact, kernels that read and write an offloaded tensor give the CPU's results."""
    g = torch.Generator().manual_seed(7)
    a_host = torch.randn(4 * MIB // 4, generator=g)
    b_host = torch.randn(4 * MIB // 4, generator=g)
    a, b = a_host.cuda(), b_host.cuda()
    out = phasealloc.offload(a)
    assert out["page_bytes"] >= 2 * MIB, out
    c = a * 2 + b  # reads a over the link
    a.add_(1.5)    # writes it there
    assert torch.equal(c.cpu(), a_host * 2 + b_host)
    phasealloc.restore(a)
    assert torch.equal(a.cpu(), a_host + 1.5)
    return out


def scenario_restore_without_memory_keeps_the_bytes(torch, phasealloc):
    """A restore the GPU has no room for leaves the bytes on the host, correct, and succeeds later."""
    g = torch.Generator().manual_seed(3)
    host, x = _random_tensor(torch, 64 * MIB, g)
    phasealloc.offload(x)
    total = torch.cuda.get_device_properties(0).total_memory
    reserved = phasealloc.stats()["reserved_bytes.all.current"]
    torch.cuda.set_per_process_memory_fraction((reserved + 64 * MIB) / total)
    filler = torch.empty(48 * MIB, dtype=torch.uint8, device="cuda")  # leaves less than x needs
    try:
        phasealloc.restore(x)
        raise AssertionError("restore with no room did not fail")
    except phasealloc.OffloadOutOfMemory as e:
        assert "stay on the host" in str(e), str(e)
    assert phasealloc.stats()["offloaded_bytes.all.current"] > 0
    assert torch.equal(x.cpu(), host), "bytes changed while the restore failed"
    del filler
    phasealloc.restore(x)
    assert phasealloc.stats()["offloaded_bytes.all.current"] == 0
    assert torch.equal(x.cpu(), host)
    return phasealloc.stats()["num_restore_ooms"]


def scenario_the_host_memory_is_reused_across_cycles(torch, phasealloc):
    """The second offload of the same blocks makes no new host memory (the first restore kept it)."""
    sim = _simulator()
    x = torch.ones(32 * MIB, dtype=torch.uint8, device="cuda")
    creates = []
    for _ in range(2):
        before = sim.counters()["vmm_creates"]
        phasealloc.offload(x)
        creates.append(sim.counters()["vmm_creates"] - before)
        phasealloc.restore(x)
    assert creates[0] >= 1 and creates[1] == 0, creates
    assert bool((x == 1).all())
    return creates


def scenario_a_restored_range_moves_in_chunks_and_is_released_in_them(torch, phasealloc):
    """A restore brings a range back in 64 MiB handles (a few VMM calls per GiB, not two per 2 MiB
    page); once its tensor is freed and part of it reused, empty_cache gives back the chunks that are
    wholly free and keeps the one still partly in use, whole (the driver unmaps a handle whole); an
    offload of blocks in such a range leaves with the chunks they cover whole."""
    sim = _simulator()
    g = torch.Generator().manual_seed(5)
    host, x = _random_tensor(torch, 256 * MIB, g)
    phasealloc.offload(x)
    before = sim.counters() if sim else None
    phasealloc.restore(x)
    if sim:
        after = sim.counters()
        calls = sum(after[k] - before[k] for k in ("vmm_creates", "vmm_maps", "vmm_unmaps"))
        # 4 chunks made and mapped, the host mapping and the staging one unmapped, one staging map.
        assert calls == 4 + 4 + 2 + 1, (before, after)
    assert torch.equal(x.cpu(), host)
    del x, host
    y = torch.ones(100 * MIB, dtype=torch.uint8, device="cuda")  # chunks 0 and 1 (in part)
    # An offload leaves whole chunks only: chunk 0; y's 36 MiB in chunk 1 stay on the GPU.
    out = phasealloc.offload(y)
    assert (out["page_bytes"], out["kept_bytes"]) == (64 * MIB, 36 * MIB), out
    reserved = phasealloc.stats()["reserved_bytes.all.current"]
    phasealloc.restore(y)  # maps chunk 0 again, first giving back as much of the free cache
    torch.cuda.empty_cache()  # and this the rest
    released = reserved + 64 * MIB - phasealloc.stats()["reserved_bytes.all.current"]
    assert released == 128 * MIB, released  # chunks 2 and 3; chunk 1's free 28 MiB stays with it
    assert bool((y == 1).all())
    del y
    torch.cuda.empty_cache()
    assert phasealloc.stats()["reserved_bytes.all.current"] == 0, phasealloc.stats()
    return released


def scenario_ipc_export_of_an_offloaded_tensor(torch, phasealloc):
    """Exporting an offloaded storage (what torch.multiprocessing does) moves its bytes, read over the
    link, to PyTorch's allocator; phasealloc's block is freed while away and its host memory goes."""
    g = torch.Generator().manual_seed(11)
    host, x = _random_tensor(torch, 16 * MIB, g)
    out = phasealloc.offload(x)
    assert out["page_bytes"] > 0, out
    before = x.data_ptr()
    x.untyped_storage()._share_cuda_()
    assert x.data_ptr() != before, "the storage was not moved to PyTorch's allocator before the export"
    assert torch.equal(x.cpu(), host), "the exported storage lost its bytes"
    s = phasealloc.stats()
    assert s["offloaded_bytes.all.current"] == 0 and s["allocated_bytes.all.current"] == 0, s
    return out


def scenario_storages_of_pytorchs_own_allocator(torch, phasealloc):
    """A private pool's storage is PyTorch's native allocator's under the c10 bridge: naming it is an
    error that names the address; offload:auto's variant leaves it and moves the rest."""
    from phasealloc import _same_address

    ours = torch.ones(8 * MIB, dtype=torch.uint8, device="cuda")
    with torch.cuda.use_mem_pool(torch.cuda.MemPool()):
        native = torch.ones(8 * MIB, dtype=torch.uint8, device="cuda")
    try:
        phasealloc.offload([ours, native])
        raise AssertionError("a storage phasealloc does not hold was accepted")
    except phasealloc.PhaseallocError as e:
        assert "%#x" % native.data_ptr() in str(e) and "no allocated block starts there" in str(e), str(e)
    assert phasealloc.stats()["offloaded_bytes.all.current"] == 0  # nothing moved
    out = _same_address.offload_ours([ours, native])
    assert out["blocks"] == 1 and out["page_bytes"] == 8 * MIB, out
    assert bool((native == 1).all()) and bool((ours == 1).all())
    return out


def scenario_unmapping_offload_moves_the_bytes_and_says_so(torch, phasealloc):
    """A driver that cannot map host memory at device addresses (simcuda's host_vmm:0): offload still
    moves the bytes, into page-locked host memory, and unmaps the range; the first offload says so
    once; a copy from an offloaded tensor is an error, not stale bytes; restore brings every byte back."""
    import warnings

    assert phasealloc.offload_kind() == "unmapping", phasealloc.offload_kind()
    g = torch.Generator().manual_seed(99)
    tensors = [_random_tensor(torch, n, g) for n in (4096, 3 * MIB + 512, 40 * MIB)]
    torch.cuda.synchronize()
    sim = _simulator()
    pinned_before = sim.pinned_host() if sim else 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = phasealloc.offload([d for _, d in tensors])
        phasealloc.restore([d for _, d in tensors])
        out = phasealloc.offload([d for _, d in tensors])
    said = [str(w.message) for w in caught
            if issubclass(w.category, RuntimeWarning) and "cannot map host memory" in str(w.message)]
    assert len(said) == 1, [str(w.message) for w in caught]
    assert "%#x" % tensors[0][1].untyped_storage().data_ptr() in said[0], said  # it names the blocks
    assert out["page_bytes"] > 0 and out["copied_bytes"] == sum(h.numel() for h, _ in tensors), out
    s = phasealloc.stats()
    assert s["offloaded_bytes.all.current"] == out["page_bytes"], (s["offloaded_bytes.all.current"], out)
    if sim:
        assert sim.host_located() == 0, sim.host_located()
        assert sim.pinned_host() - pinned_before >= out["copied_bytes"], (sim.pinned_host(), pinned_before, out)
    try:
        tensors[1][1][:16].cpu()
        refused = None
    except RuntimeError as e:  # simcuda refuses a copy from an unmapped range; a GPU faults
        refused = str(e)
    assert refused is not None, "a copy from an unmapped offloaded tensor succeeded"
    # A restore that finds the device full says the range stays unmapped (not "correct, slower").
    filler = []
    try:
        while True:
            filler.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError:
        pass
    try:
        phasealloc.restore([d for _, d in tensors])
        full = None
    except phasealloc.OffloadOutOfMemory as e:
        full = str(e)
    assert full is not None and "the range unmapped" in full, full
    del filler
    torch.cuda.empty_cache()
    phasealloc.restore([d for _, d in tensors])
    for host, device_copy in tensors:
        assert torch.equal(device_copy.cpu(), host), "an unmapping offload lost bytes"
    return {"refused": refused[:200]}


def scenario_a_kernel_on_an_unmapped_offloaded_tensor_faults(torch, phasealloc):
    """The stray access the unmapping offload cannot serve: a kernel on the tensor while it is away is an
    illegal address (simcuda names the address and kills the process, as a GPU does)."""
    t = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
    phasealloc.offload(t)
    print("offloaded %#x" % t.data_ptr(), flush=True)
    t.add_(1)
    torch.cuda.synchronize()
    return "survived"


def scenario_a_dtensor_moves_its_local_shard(torch, phasealloc):
    """A DTensor (FSDP2's parameters and their optimizer state) has no storage of its own: offload
    and restore move its local shard's, at the same address, and the values come back."""
    import os

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1")
    dist.init_process_group("nccl")
    try:
        mesh = init_device_mesh("cuda", (1,))
        host = torch.randn(1024, 1024, generator=torch.Generator().manual_seed(3))
        dt = distribute_tensor(host.cuda(), mesh, [Shard(0)])
        local = dt.to_local()
        address = local.data_ptr()
        out = phasealloc.offload(dt)
        assert out["copied_bytes"] == local.numel() * local.element_size() and out["page_bytes"] > 0, out
        assert phasealloc.stats()["offloaded_bytes.all.current"] == out["page_bytes"]
        back = phasealloc.restore(dt)
        assert back["copied_bytes"] == out["copied_bytes"], (out, back)
        assert dt.to_local().data_ptr() == address and torch.equal(dt.full_tensor().cpu(), host)
    finally:
        dist.destroy_process_group()
    return out["copied_bytes"]


def scenario_bad_requests_are_named(torch, phasealloc):
    x = torch.ones(1024, device="cuda")
    neighbour = torch.ones(1024, device="cuda")  # live on x's page: the page cannot leave
    try:
        phasealloc.offload(torch.ones(4))
        raise AssertionError("a CPU tensor was accepted")
    except phasealloc.PhaseallocError as e:
        assert "not a CUDA tensor" in str(e), str(e)
    assert phasealloc.offload([]) == dict.fromkeys(("blocks", "ranges", "page_bytes", "copied_bytes", "kept_bytes"), 0)
    out = phasealloc.offload(x)  # 4 KiB on a page shared with a live block: nothing leaves, the books say it stayed
    assert out["page_bytes"] == 0 and out["kept_bytes"] > 0, out
    assert bool((neighbour == 1).all())
    return out


def scenario_a_tag_moves_its_blocks_whole_pages_and_nothing_else(torch, phasealloc):
    """Tensors made under phasealloc.tag("adam"), interleaved with untagged ones of the same sizes:
    offload(tag="adam") moves exactly them, whole pages (nothing kept: the tag has pages of its own),
    copying their bytes only; a nested tag is its own; restore(tag=) brings back only its blocks."""
    g = torch.Generator().manual_seed(21)
    sizes = [512, 4096, 300_000, 3 * MIB + 512, 8 * MIB]
    tagged, plain = [], []
    for n in sizes:
        with phasealloc.tag("adam"):
            tagged.append(_random_tensor(torch, n, g))
            with phasealloc.tag("inner"):
                inner = _random_tensor(torch, 1 * MIB, g)
        plain.append(_random_tensor(torch, n, g))
    torch.cuda.synchronize()
    sim = _simulator()
    before = sim.counters() if sim else None
    out = phasealloc.offload(tag="adam")
    assert out["blocks"] == len(sizes) and out["kept_bytes"] == 0, out
    owner = phasealloc.load().phasealloc_owner_device
    assert [owner(t.data_ptr()) for _, t in tagged] == [0] * len(sizes), "offloaded blocks no longer phasealloc's"
    assert out["copied_bytes"] == sum(sizes), (out, sum(sizes))
    s = phasealloc.stats()
    assert s["offloaded_bytes.all.current"] == out["page_bytes"] > 0, (s["offloaded_bytes.all.current"], out)
    if sim:
        assert sim.counters()["memcpy_bytes"] - before["memcpy_bytes"] == sum(sizes)
        assert sim.host_located() == out["page_bytes"], (sim.host_located(), out)
    inner_out = phasealloc.offload(tag="inner")  # the last one made: only that block is still live
    assert inner_out["blocks"] == 1 and inner_out["copied_bytes"] == 1 * MIB and inner_out["kept_bytes"] == 0, inner_out
    away = phasealloc.offload([plain[-1][1]])  # an untagged block, by pointer (it may share pages: kept)
    assert away["blocks"] == 1 and away["page_bytes"] > 0, away
    back = phasealloc.restore(tag="adam")
    assert back["copied_bytes"] == sum(sizes), back
    assert phasealloc.restore(tag="never-used") == dict.fromkeys(FIELDS, 0)  # not every range
    with phasealloc.tag("third") as third, phasealloc.tag("inner") as inner_number:
        assert third == inner_number + 1, (third, inner_number)  # looking "never-used" up numbered nothing
    assert phasealloc.stats()["offloaded_bytes.all.current"] == inner_out["page_bytes"] + away["page_bytes"]
    for host, device_copy in tagged + plain + [inner]:
        assert torch.equal(device_copy.cpu(), host), "a %d-byte tensor differs" % host.numel()
    phasealloc.restore()
    assert phasealloc.stats()["offloaded_bytes.all.current"] == 0
    # Allocations outside every tag block carry none again.
    untagged = torch.ones(4 * MIB, dtype=torch.uint8, device="cuda")
    assert phasealloc.offload(tag="adam")["blocks"] == len(sizes)
    assert bool((untagged == 1).all())
    for bad, words in (("", "empty tag name"), ("a\nb", "control character")):
        try:
            with phasealloc.tag(bad):
                pass
            raise AssertionError("tag %r was accepted" % bad)
        except phasealloc.PhaseallocError as e:
            assert words in str(e), str(e)
    try:
        phasealloc.offload()
        raise AssertionError("offload of nothing named was accepted")
    except phasealloc.PhaseallocError as e:
        assert "name the tensors, a tag or a pool" in str(e), str(e)
    return out


def scenario_a_graph_pool_moves_with_its_contents_and_the_graph_replays(torch, phasealloc):
    """A CUDA graph captured into phasealloc.graph_pool(): offload(pool=) moves the pool's segments
    with their contents and gives their pages back, copying only the blocks PyTorch's allocator
    holds in them (the graph's freed scratch is not copied); the graph replays while they are away
    (over the link) and after restore(pool=), to the CPU's result each time. The simulated GPU runs a replay's
    copies and memsets (not its kernels), so the graph is made of copies: an input buffer into the
    pool, a part of it over another part, the pool's buffer out."""
    g = torch.Generator().manual_seed(21)
    n = 6 * MIB
    first, source = _random_tensor(torch, n, g)
    sink = torch.empty(n, dtype=torch.uint8, device="cuda")
    pool = phasealloc.graph_pool()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool.id):
        staged = source.clone()             # in the pool: the graph's own memory
        scratch = staged.clone()            # freed below: scratch the graph writes before it reads
        staged[: n // 3].copy_(scratch[n // 3: 2 * n // 3])
        del scratch
        sink.copy_(staged)

    def expected(host):
        out = host.clone()
        out[: n // 3] = host[n // 3: 2 * n // 3]
        return out

    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(sink.cpu(), expected(first)) and torch.equal(staged.cpu(), expected(first))
    segments = pool.snapshot()
    assert segments and all(phasealloc._same_address.load().phasealloc_owner_device(s["address"]) >= 0
                            for s in segments), segments
    reserved = phasealloc.stats()["reserved_bytes.all.current"]
    sim = _simulator()
    copied_before = sim.counters()["memcpy_bytes"] if sim else 0
    out = phasealloc.offload(pool=pool)
    pool_bytes = sum(s["total_size"] for s in segments)
    held = sum(b["size"] for s in segments for b in s["blocks"] if b["state"] == "active_allocated")
    assert out["page_bytes"] == pool_bytes and out["kept_bytes"] == 0, (out, pool_bytes)
    assert out["copied_bytes"] == held < pool_bytes - n, (out, held, pool_bytes)  # the scratch stayed behind
    if sim:
        assert sim.counters()["memcpy_bytes"] - copied_before == held
    assert phasealloc.stats()["reserved_bytes.all.current"] == reserved - pool_bytes
    assert torch.equal(staged.cpu(), expected(first)), "the pool's contents changed when they left"
    second = torch.empty(n, dtype=torch.uint8).random_(0, 256, generator=g)
    source.copy_(second.cuda())
    graph.replay()                          # the pool is on the host: slow, still right
    torch.cuda.synchronize()
    assert torch.equal(sink.cpu(), expected(second))
    back = phasealloc.restore(pool=pool)
    assert back["page_bytes"] == pool_bytes and back["copied_bytes"] == held, (back, held)
    assert torch.equal(staged.cpu(), expected(second)), "the pool's contents changed when they came back"
    third = torch.empty(n, dtype=torch.uint8).random_(0, 256, generator=g)
    source.copy_(third.cuda())
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(sink.cpu(), expected(third))
    # A pool PyTorch's allocator holds itself cannot move, and says so.
    native_pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(native_pool):
        kept = torch.ones(MIB, dtype=torch.uint8, device="cuda")
    try:
        phasealloc.offload(pool=native_pool)
        raise AssertionError("offload of a pool of PyTorch's own memory was accepted")
    except phasealloc.PhaseallocError as e:
        assert "graph_pool()" in str(e), str(e)
    del graph, staged, kept
    return out


SCENARIOS = scenarios(globals())


# --- pytest side ---------------------------------------------------------------------------------

try:
    import pytest
except ImportError:
    pytest = None

if pytest is not None and __name__ != "__main__":
    _REASON = gpu_skip_reason()
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]
    EXACT = {"SIMCUDA_GPU": "quiet:1,values:exact"}

    def _sim_only():
        from torch_harness import on_simulator

        if not on_simulator():
            pytest.skip("counts the simulator's VMM calls: simulator only")

    def test_contents_survive_offload_cycles():
        r = run(__file__, "contents_survive_cycles", sim_gpu=None, native=False, conf=CONF, bridge="c10")
        assert r["offloads"] >= 3

    def test_kernels_compute_on_offloaded_tensors_at_exact():
        run(__file__, "kernels_compute_on_offloaded_tensors", sim_gpu="16GiB", native=False, conf=CONF,
            bridge="c10", env=EXACT)

    def test_restore_without_memory_keeps_the_bytes_and_succeeds_later():
        assert run(__file__, "restore_without_memory_keeps_the_bytes", sim_gpu=None, native=False, conf=CONF,
                   bridge="c10") >= 1

    def test_the_host_memory_is_reused_across_cycles():
        _sim_only()
        run(__file__, "the_host_memory_is_reused_across_cycles", sim_gpu=None, native=False, conf=CONF, bridge="c10")

    def test_a_restored_range_moves_in_chunks_and_is_released_in_them():
        run(__file__, "a_restored_range_moves_in_chunks_and_is_released_in_them", sim_gpu=None, native=False,
            conf=CONF, bridge="c10")

    def test_a_graph_pool_moves_with_its_contents_and_the_graph_replays():
        run(__file__, "a_graph_pool_moves_with_its_contents_and_the_graph_replays", sim_gpu=None, native=False,
            conf=CONF, bridge="c10")

    def test_ipc_export_of_an_offloaded_tensor_keeps_its_bytes():
        run(__file__, "ipc_export_of_an_offloaded_tensor", sim_gpu=None, native=False, conf=CONF, bridge="c10")

    def test_storages_of_pytorchs_own_allocator_are_named_or_left():
        run(__file__, "storages_of_pytorchs_own_allocator", sim_gpu=None, native=False, conf=CONF, bridge="c10")

    def test_a_tag_moves_its_blocks_whole_pages_and_nothing_else():
        run(__file__, "a_tag_moves_its_blocks_whole_pages_and_nothing_else", sim_gpu=None, native=False, conf=CONF,
            bridge="c10")

    UNMAPPING = {"SIMCUDA_GPU": "quiet:1,host_vmm:0"}

    def test_an_unmapping_offload_moves_the_bytes_and_says_so():
        _sim_only()
        r = run(__file__, "unmapping_offload_moves_the_bytes_and_says_so", sim_gpu=None, native=False, conf=CONF,
                bridge="c10", env=UNMAPPING)
        assert r["refused"], r

    def test_a_kernel_on_an_unmapped_offloaded_tensor_is_an_illegal_address():
        _sim_only()
        out = run(__file__, "a_kernel_on_an_unmapped_offloaded_tensor_faults", sim_gpu=None, native=False,
                  conf=CONF, bridge="c10", env=UNMAPPING, expect_ok=False)
        assert out.returncode != 0, out.stdout[-2000:]
        at = out.stdout.split("offloaded ")[1].split()[0]
        assert "simcuda: illegal address" in out.stderr, out.stderr[-4000:]
        # (threads of one CPU kernel may fault at once: their lines interleave, so read the addresses)
        faults = [int(a, 16) for a in re.findall(r"0x[0-9a-f]{16}", out.stderr)]
        assert faults and all(int(at, 16) <= f < int(at, 16) + (4 << 20) for f in faults), (at, out.stderr[-2000:])

    def test_a_dtensor_moves_its_local_shard():
        assert run(__file__, "a_dtensor_moves_its_local_shard", sim_gpu=None, native=False, conf=CONF,
                   bridge="c10") == 4 << 20

    def test_bad_requests_are_named():
        run(__file__, "bad_requests_are_named", sim_gpu=None, native=False, conf=CONF, bridge="c10")


if __name__ == "__main__":
    child_main(globals(), "torch", "phasealloc")
