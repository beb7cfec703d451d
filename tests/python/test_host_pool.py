"""The host buffer pool for offload copies: phasealloc_host_alloc / _free / _trim through ctypes, the
"host" stats object, the host_budget key, and the package's phasealloc.host_buffers (model device).

In this process the budget is the default (2 GiB; conftest.MAIN_CONF names none) and requests stay
small; tests that need another budget or strict mode run a subprocess.
"""

import ctypes
import json

import pytest

from conftest import CTYPES_PRELUDE, DEVICES, last_error, run_python, stats_of

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
DEFAULT_BUDGET = 2 * GIB

HOST_KEYS = [
    "%s.%s" % (name, field)
    for name in ("allocations", "allocated_bytes", "active_requests", "active_bytes")
    for field in ("current", "peak", "allocated", "freed")
] + ["num_host_alloc", "num_host_free", "num_reuses", "num_waits", "num_over_budget", "budget_bytes"]


def host_of(lib, device):
    return stats_of(lib, device)["host"]


def interpose_misuse(lib):
    return stats_of(lib, 0)["phasealloc"]["interpose_misuse"]


def run_ok(code, conf):
    out = run_python(CTYPES_PRELUDE + code, conf=conf)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


# --- the C API, in this process -----------------------------------------------------------------

def test_host_memory_is_writable_and_reads_back(lib):
    device = DEVICES["host"]
    size = 3 * 4096 + 100
    ptr = lib.phasealloc_host_alloc(size, device)
    assert ptr, last_error(lib)
    payload = bytes(range(256)) * (size // 256) + b"\x5a" * (size % 256)
    ctypes.memmove(ptr, payload, size)
    assert ctypes.string_at(ptr, size) == payload
    ctypes.memset(ptr + size - 1, 0xA5, 1)  # the last byte asked for is ours too
    assert ctypes.string_at(ptr + size - 1, 1) == b"\xa5"
    host = host_of(lib, device)
    assert host["active_requests.current"] >= 1
    assert host["active_bytes.current"] >= 4 * 4096  # rounded up to whole 4 KiB pages
    assert lib.phasealloc_host_free(ptr, device, None) == 0
    assert host_of(lib, device)["active_requests.current"] == host["active_requests.current"] - 1


def test_a_freed_buffer_is_reused_for_the_next_request(lib):
    device = DEVICES["host"]
    before = host_of(lib, device)
    p = lib.phasealloc_host_alloc(64 * KIB, device)
    assert p
    assert lib.phasealloc_host_free(p, device, 0x100) == 0  # the model device's events complete at once
    q = lib.phasealloc_host_alloc(64 * KIB - 10, device)
    assert q == p
    after = host_of(lib, device)
    assert after["num_reuses"] >= before["num_reuses"] + 1
    assert after["num_host_alloc"] - before["num_host_alloc"] <= 1
    assert lib.phasealloc_host_free(q, device, None) == 0


def test_double_free_and_unknown_pointer_return_minus_one_and_count_as_misuse(lib, capfd):
    device = DEVICES["host"]
    p = lib.phasealloc_host_alloc(8 * KIB, device)
    assert p
    misuse = interpose_misuse(lib)
    active = host_of(lib, device)["active_requests.current"]

    assert lib.phasealloc_host_free(p, device, None) == 0
    assert lib.phasealloc_host_free(p, device, None) == -1
    error = last_error(lib)
    assert "double free" in error and "phasealloc_host_free" in error and "device %d" % device in error

    local = ctypes.create_string_buffer(64)
    assert lib.phasealloc_host_free(ctypes.addressof(local), device, None) == -1
    assert "unknown pointer" in last_error(lib)

    assert interpose_misuse(lib) == misuse + 2
    assert host_of(lib, device)["active_requests.current"] == active - 1  # the bad frees changed nothing
    err = capfd.readouterr().err
    assert "phasealloc: phasealloc_host_free" in err and "double free" in err and "unknown pointer" in err


def test_a_buffer_freed_to_another_device_is_unknown_there(lib):
    mine, other = DEVICES["host"], DEVICES["host_other"]
    theirs = lib.phasealloc_host_alloc(4 * KIB, other)  # the other device has a pool too
    p = lib.phasealloc_host_alloc(4 * KIB, mine)
    assert theirs and p
    assert lib.phasealloc_host_free(p, other, None) == -1
    assert "unknown pointer" in last_error(lib) and "device %d" % other in last_error(lib)
    assert lib.phasealloc_host_free(p, mine, None) == 0
    assert lib.phasealloc_host_free(theirs, other, None) == 0
    # A device that never made a pool knows no pointer, and an ordinal out of range neither.
    assert lib.phasealloc_host_free(p, 40, None) == -1
    assert "device 40 has no host buffer pool" in last_error(lib)
    assert lib.phasealloc_host_free(p, 99, None) == -1
    assert lib.phasealloc_host_free(None, mine, None) == 0  # NULL is a no-op


def test_bad_requests_return_null_with_the_reason(lib):
    device = DEVICES["host"]
    assert lib.phasealloc_host_alloc(0, device) is None
    assert "size 0" in last_error(lib)
    assert lib.phasealloc_host_alloc(3 * GIB, device) is None
    error = last_error(lib)
    assert "host buffer of %d bytes" % (3 * GIB) in error and "budget is %d bytes" % DEFAULT_BUDGET in error
    assert lib.phasealloc_host_alloc(4096, 64) is None
    assert "out of range" in last_error(lib)
    assert lib.phasealloc_host_alloc(4096, -1) is None
    assert "out of range" in last_error(lib)


def test_trim_frees_idle_buffers_and_keeps_active_ones(lib):
    device = DEVICES["host_trim"]
    ptrs = [lib.phasealloc_host_alloc(size, device) for size in (16 * KIB, 32 * KIB, 3 * MIB)]
    assert all(ptrs), last_error(lib)
    held = 16 * KIB + 32 * KIB + 4 * MIB  # 3 MiB rounds to 2 MiB multiples
    assert host_of(lib, device)["allocated_bytes.current"] == held
    for p in ptrs[1:]:
        assert lib.phasealloc_host_free(p, device, None) == 0
    assert host_of(lib, device)["allocated_bytes.current"] == held  # cached, not freed
    assert lib.phasealloc_host_trim(device) == 0
    host = host_of(lib, device)
    assert host["allocated_bytes.current"] == 16 * KIB  # the active buffer stays
    assert host["num_host_free"] == 2 and host["allocations.current"] == 1
    assert lib.phasealloc_host_free(ptrs[0], device, None) == 0
    assert lib.phasealloc_host_trim(-1) == 0  # every device
    host = host_of(lib, device)
    assert host["allocated_bytes.current"] == 0 and host["allocations.current"] == 0
    assert host["num_host_free"] == 3
    assert host["allocated_bytes.peak"] == held
    assert lib.phasealloc_reset_peak_stats(device) == 0  # torch.cuda.reset_peak_memory_stats
    assert host_of(lib, device)["allocated_bytes.peak"] == 0
    assert lib.phasealloc_host_trim(-7) == -1
    assert "out of range" in last_error(lib)
    assert lib.phasealloc_host_trim(45) == 0  # no engine there: nothing to free


def test_stats_json_has_the_host_object(lib):
    fresh = host_of(lib, 34)  # no engine: zeros, the configured budget
    assert sorted(fresh) == sorted(HOST_KEYS)
    assert fresh["budget_bytes"] == DEFAULT_BUDGET
    assert all(fresh[k] == 0 for k in HOST_KEYS if k != "budget_bytes")

    device = DEVICES["host"]
    p = lib.phasealloc_host_alloc(5000, device)
    assert p
    host = host_of(lib, device)
    assert sorted(host) == sorted(HOST_KEYS)
    assert all(isinstance(host[k], int) for k in HOST_KEYS)
    assert host["budget_bytes"] == DEFAULT_BUDGET
    assert host["allocations.current"] >= 1 and host["num_host_alloc"] >= 1
    assert host["active_bytes.peak"] >= host["active_bytes.current"] >= 8 * KIB
    everything = json.loads(lib.phasealloc_stats_json(-1).decode())
    assert everything["devices"][str(device)]["host"]["active_requests.current"] == host["active_requests.current"]
    assert lib.phasealloc_host_free(p, device, None) == 0


def test_the_host_object_stays_out_of_torch_memory_stats(lib):
    from phasealloc import _torch_api

    raw = stats_of(lib, DEVICES["host"])
    assert "host" in raw
    flat = _torch_api._torch_flat(raw)
    assert "host" not in flat
    assert not any(isinstance(v, (dict, list)) for v in flat.values())


# --- other configurations, in subprocesses ------------------------------------------------------

def test_protrain_loop_reuses_the_same_three_buffers():
    # 6 chunks offloaded and reloaded every iteration through a budget of 3 buffers: at most 3 are
    # in use at once (the prefetch depth), each freed on the copy stream after its reload.
    out = run_ok("""
import collections
MIB = 1 << 20
COPY_STREAM = 0x700
window, seen = collections.deque(), set()
def pattern(chunk, it): return bytes([chunk * 16 + it % 16]) * 4096
for it in range(10):
    for chunk in range(6):
        if len(window) == 3:
            ptr, c, i = window.popleft()
            assert ctypes.string_at(ptr, 4096) == pattern(c, i), "reload read other bytes"
            assert lib.phasealloc_host_free(ptr, 0, COPY_STREAM) == 0, err()
        ptr = lib.phasealloc_host_alloc(MIB, 0)
        assert ptr, err()
        ctypes.memmove(ptr, pattern(chunk, it), 4096)
        seen.add(ptr)
        window.append((ptr, chunk, it))
held = [p for p, _, _ in window]
assert lib.phasealloc_host_alloc(MIB, 0) is None  # a fourth would exceed the budget
print("OVER", err())
for p in held:
    assert lib.phasealloc_host_free(p, 0, COPY_STREAM) == 0
print("SEEN", len(seen))
print("HOST", json.dumps(stats(0)["host"]))
""", conf="device:model,host_budget:3MiB")
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["SEEN"] == "3"
    host = json.loads(lines["HOST"])
    assert host["num_host_alloc"] == 3 and host["num_host_free"] == 0
    assert host["num_reuses"] == 60 - 3
    assert host["allocated_bytes.peak"] == 3 * MIB and host["allocated_bytes.current"] == 3 * MIB
    assert host["active_requests.current"] == 0 and host["active_requests.allocated"] == 60
    assert host["num_over_budget"] == 1 and host["budget_bytes"] == 3 * MIB
    over = lines["OVER"]
    assert "phasealloc_host_alloc(%d) on device 0" % MIB in over
    assert "host buffer of %d bytes" % MIB in over and "%d-byte budget" % (3 * MIB) in over


def test_over_budget_frees_idle_buffers_before_refusing():
    out = run_ok("""
KIB = 1 << 10
a = lib.phasealloc_host_alloc(40 * KIB, 0)
b = lib.phasealloc_host_alloc(40 * KIB, 0)
assert a and b
assert lib.phasealloc_host_free(a, 0, None) == 0
c = lib.phasealloc_host_alloc(60 * KIB, 0)  # 40 + 40 + 60 > 100: a's idle buffer is freed first
print("C", bool(c))
d = lib.phasealloc_host_alloc(8 * KIB, 0)   # b and c are active: 100 KiB left is 0
print("D", d is None)
print("ERR", err())
print("HOST", json.dumps(stats(0)["host"]))
""", conf="device:model,host_budget:100KiB")
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["C"] == "True" and lines["D"] == "True"
    assert "%d-byte budget" % (100 * KIB) in lines["ERR"] and "2 active buffers" in lines["ERR"]
    host = json.loads(lines["HOST"])
    assert host["num_host_free"] == 1 and host["num_over_budget"] == 1
    assert host["allocated_bytes.current"] == 100 * KIB


def test_host_budget_zero_disables_the_pool():
    out = run_ok("""
print("ALLOC", lib.phasealloc_host_alloc(4096, 0))
print("ERR", err())
print("FREE", lib.phasealloc_host_free(None, 0, None))
print("TRIM", lib.phasealloc_host_trim(0))
p = lib.phasealloc_try_malloc(4096, 0, None)  # the GPU side works as before
print("DEVICE", bool(p))
print("HOST", json.dumps(stats(0)["host"]))
print("CONFIG", lib.phasealloc_config().decode())
""", conf="device:model,host_budget:0")
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["ALLOC"] == "None"
    assert "disabled" in lines["ERR"] and "host_budget:0" in lines["ERR"]
    assert lines["FREE"] == "0" and lines["TRIM"] == "0" and lines["DEVICE"] == "True"
    host = json.loads(lines["HOST"])
    assert host["budget_bytes"] == 0 and host["num_host_alloc"] == 0
    assert "host_budget:0" in lines["CONFIG"].split(",")


def test_host_budget_is_spelled_out_and_round_trips():
    out = run_ok("""
print(lib.phasealloc_config().decode())
print(stats(5)["host"]["budget_bytes"])
""", conf="device:model,host_budget:512MiB")
    config, budget = out.stdout.strip().splitlines()
    assert "host_budget:%d" % (512 * MIB) in config.split(",")
    assert budget == str(512 * MIB)
    again = run_ok("print(lib.phasealloc_config().decode())", conf=config)
    assert again.stdout.strip() == config
    default = run_ok("print(lib.phasealloc_config().decode())", conf="device:model")
    assert "host_budget:%d" % DEFAULT_BUDGET in default.stdout.strip().split(",")


def test_a_bad_host_budget_fails_host_alloc_with_the_key_named():
    out = run_ok("""
print(lib.phasealloc_host_alloc(4096, 0))
print(err())
""", conf="device:model,host_budget:plenty")
    first, error = out.stdout.strip().splitlines()
    assert first == "None"
    assert "'host_budget'" in error and "\"plenty\" is not a byte size" in error


def test_strict_mode_aborts_on_a_host_double_free():
    out = run_python(CTYPES_PRELUDE + """
p = lib.phasealloc_host_alloc(4096, 0)
assert lib.phasealloc_host_free(p, 0, None) == 0
sys.stdout.write("before\\n"); sys.stdout.flush()
lib.phasealloc_host_free(p, 0, None)
print("survived")
""", conf="device:model,strict:true")
    assert out.returncode != 0
    assert "before" in out.stdout and "survived" not in out.stdout
    assert "double free" in out.stderr and "strict" in out.stderr


# --- the package: phasealloc.host_buffers ------------------------------------------------------------

def test_host_buffer_view_release_and_double_release(lib):
    import phasealloc

    device = DEVICES["host_package"]
    before = phasealloc.host_stats(device)
    misuse = interpose_misuse(lib)
    buf = phasealloc.host_buffer(10000, device)
    assert buf.nbytes == 10000 and buf.device == device and buf.ptr
    view = buf.view()
    assert len(view) == 10000 and not view.readonly
    view[:5] = b"hello"
    view[-3:] = b"end"
    assert ctypes.string_at(buf.ptr, 5) == b"hello"
    assert ctypes.string_at(buf.ptr + 9997, 3) == b"end"
    ctypes.memmove(buf.ptr + 100, b"written by C", 12)
    assert bytes(view[100:112]) == b"written by C"
    assert phasealloc.host_stats(device)["active_requests.current"] == before["active_requests.current"] + 1

    buf.release(0x300)
    assert buf.released
    with pytest.raises(phasealloc.PhaseallocError, match="already released"):
        buf.release()
    with pytest.raises(phasealloc.PhaseallocError, match="after release"):
        buf.view()
    after = phasealloc.host_stats(device)
    assert after["active_requests.current"] == before["active_requests.current"]
    assert after["active_requests.freed"] == before["active_requests.freed"] + 1  # one C free, not two
    assert interpose_misuse(lib) == misuse


def test_host_buffer_context_manager_and_stream_arguments(lib):
    import phasealloc

    device = DEVICES["host_package"]
    active = phasealloc.host_stats(device)["active_requests.current"]
    with phasealloc.host_buffer(4096, device) as buf:
        assert phasealloc.host_stats(device)["active_requests.current"] == active + 1
    assert buf.released
    assert phasealloc.host_stats(device)["active_requests.current"] == active

    with phasealloc.host_buffer(4096, device) as buf:
        buf.release(type("stream", (), {"cuda_stream": 0x1234})())  # torch.cuda.Stream-like
    assert buf.released  # released inside: the block's end does not release again

    buf = phasealloc.host_buffer(4096, device)
    with pytest.raises(TypeError, match="stream"):
        buf.release("not a stream")
    assert not buf.released  # nothing happened
    with pytest.raises(ValueError):
        buf.release(-5)
    buf.release(7)
    assert phasealloc.host_stats(device)["active_requests.current"] == active


def test_host_buffer_errors_carry_the_library_message(lib):
    import phasealloc

    device = DEVICES["host_package"]
    with pytest.raises(phasealloc.PhaseallocError, match="budget is %d bytes" % DEFAULT_BUDGET):
        phasealloc.host_buffer(3 * GIB, device)
    with pytest.raises(phasealloc.PhaseallocError, match="out of range"):
        phasealloc.host_buffer(4096, 70)
    with pytest.raises(ValueError, match="positive size"):
        phasealloc.host_buffer(0, device)
    with pytest.raises(ValueError, match="positive size"):
        phasealloc.host_buffer(-1, device)


def test_host_stats_and_trim_host_from_the_package(lib):
    import phasealloc

    device = DEVICES["host_package"]
    buffers = [phasealloc.host_buffer(n, device) for n in (4096, 8192)]
    for b in buffers:
        b.release()
    assert phasealloc.host_stats(device) == stats_of(lib, device)["host"]
    assert phasealloc.host_stats(device)["allocated_bytes.current"] > 0
    assert phasealloc.host_stats(-1)[device]["budget_bytes"] == DEFAULT_BUDGET
    phasealloc.trim_host(device)
    assert phasealloc.host_stats(device)["allocated_bytes.current"] == 0
    phasealloc.trim_host()  # every device
    with pytest.raises(phasealloc.PhaseallocError, match="out of range"):
        phasealloc.trim_host(-3)
