"""phasealloc_snapshot_json: the shape of torch.cuda.memory_snapshot()."""

import json

from conftest import CTYPES_PRELUDE, DEVICES, run_python

MIB = 1 << 20
SEGMENT_KEYS = {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
                "segment_type", "segment_pool_id", "is_expandable", "frames", "pool", "blocks"}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
STATES = {"active_allocated", "active_pending_free", "inactive"}


def check_torch_shape(segments):
    assert isinstance(segments, list)
    addresses = [s["address"] for s in segments]
    assert addresses == sorted(addresses)
    for seg in segments:
        assert set(seg) == SEGMENT_KEYS
        assert seg["segment_type"] in ("small", "large")
        assert seg["segment_pool_id"] == [0, 0] or seg["segment_pool_id"] == (0, 0)
        address = seg["address"]
        for block in seg["blocks"]:
            assert set(block) == BLOCK_KEYS
            assert block["state"] in STATES
            assert block["address"] == address  # blocks tile the segment in address order
            address += block["size"]
        assert address == seg["address"] + seg["total_size"]
        allocated = sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
        active = sum(b["size"] for b in seg["blocks"] if b["state"] != "inactive")
        requested = sum(b["requested_size"] for b in seg["blocks"])
        assert (seg["allocated_size"], seg["active_size"], seg["requested_size"]) == (allocated, active, requested)


def test_snapshot_segments_and_blocks(lib):
    device = DEVICES["snapshot"]
    small = [lib.phasealloc_try_malloc(n, device, None) for n in (1000, 3000, 5000)]
    large = lib.phasealloc_try_malloc(8 * MIB, device, 0x40)
    lib.phasealloc_free(small[1], 3000, device, None)
    segments = json.loads(lib.phasealloc_snapshot_json(device).decode())
    check_torch_shape(segments)
    assert {s["device"] for s in segments} == {device}
    by_type = {s["segment_type"]: s for s in segments}
    assert by_type["small"]["total_size"] == 2 * MIB and by_type["small"]["stream"] == 0
    assert by_type["large"]["stream"] == 0x40 and by_type["large"]["pool"] == "large"
    states = [b["state"] for b in by_type["small"]["blocks"]]
    assert states[:4] == ["active_allocated", "inactive", "active_allocated", "inactive"]
    assert by_type["small"]["requested_size"] == 1000 + 5000
    lib.phasealloc_free(small[0], 1000, device, None)
    lib.phasealloc_free(small[2], 5000, device, None)
    lib.phasealloc_free(large, 8 * MIB, device, 0x40)


def test_snapshot_of_every_device_and_through_the_package(lib):
    import phasealloc

    assert lib.phasealloc_try_malloc(4096, DEVICES["snapshot"], None)
    everything = json.loads(lib.phasealloc_snapshot_json(-1).decode())
    check_torch_shape([s for s in everything if s["device"] == DEVICES["snapshot"]])
    assert json.loads(lib.phasealloc_snapshot_json(31).decode()) == []  # no engine: no segments
    segments = phasealloc.snapshot(DEVICES["snapshot"])
    assert segments and all(isinstance(s["segment_pool_id"], tuple) for s in segments)


def test_expandable_segments_show_only_their_mapped_ranges(lib):
    out = run_python(CTYPES_PRELUDE + """
MIB = 1 << 20
a = lib.phasealloc_try_malloc(6 * MIB, 0, None)
b = lib.phasealloc_try_malloc(10 * MIB, 0, None)
print(lib.phasealloc_snapshot_json(0).decode())
""", conf="device:model,model_capacity:4GiB,model_virtual_memory:true,policy:basic:expandable_large:true")
    assert out.returncode == 0, out.stderr
    segments = json.loads(out.stdout)
    check_torch_shape(segments)
    assert len(segments) == 1
    seg = segments[0]
    assert seg["is_expandable"] is True
    assert seg["total_size"] == 16 * MIB  # the mapped pages, not the reserved address space
    assert [b["size"] for b in seg["blocks"]] == [6 * MIB, 10 * MIB]
