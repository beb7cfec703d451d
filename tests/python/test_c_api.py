"""The C entry points through ctypes, on the simulated device (configuration: conftest.MAIN_CONF)."""

import random

import pytest

from conftest import CTYPES_PRELUDE, DEVICES, MAIN_CONF, last_error, run_python, stats_of

MIB = 1 << 20


def round_block(size):
    """The basic policy's rounding: 512-byte multiples, at least 512."""
    return 512 if size < 512 else (size + 511) // 512 * 512


def test_thousands_of_mallocs_and_frees_with_phases_match_expected_bytes(lib):
    device = DEVICES["stats"]
    rng = random.Random(1234)
    live = {}  # ptr -> (size, rounded)
    expected = {"allocs": 0, "frees": 0, "peak": 0}
    per_phase = {}  # name -> {"allocs", "frees", "peak"}

    def allocated():
        return sum(r for _, r in live.values())

    def enter(name):
        p = per_phase.setdefault(name, {"allocs": 0, "frees": 0, "peak": 0})
        p["peak"] = max(p["peak"], allocated())  # a phase's peak includes the level it starts at
        return p

    phases = ["generation", "inference", "training", "optimizer"]
    for step in range(12):
        name = phases[step % len(phases)]
        assert lib.phasealloc_phase_begin(name.encode()) == 0
        p = enter(name)
        for _ in range(250):
            if live and rng.random() < 0.45:
                ptr = rng.choice(list(live))
                size, _ = live.pop(ptr)
                lib.phasealloc_free(ptr, size, device, None)
                p["frees"] += 1
                expected["frees"] += 1
            else:
                # Small requests are split to their rounded size exactly; large ones are multiples of 2 MiB
                # (less < 512 bytes), so every block is exactly its rounded size and the books are exact.
                size = rng.choice([rng.randint(0, 4096), rng.randint(4097, MIB),
                                   rng.randint(1, 12) * 2 * MIB - rng.randint(0, 511)])
                stream = rng.choice([0, 0x100, 0x200])
                ptr = lib.phasealloc_try_malloc(size, device, stream)
                assert ptr, last_error(lib)
                assert ptr not in live
                live[ptr] = (size, round_block(size))
                p["allocs"] += 1
                expected["allocs"] += 1
                expected["peak"] = max(expected["peak"], allocated())
                p["peak"] = max(p["peak"], allocated())
        assert lib.phasealloc_phase_end() == 0

    s = stats_of(lib, device)
    small = sum(r for _, r in live.values() if r <= MIB)
    assert s["allocated_bytes.all.current"] == allocated()
    assert s["allocated_bytes.small_pool.current"] == small
    assert s["allocated_bytes.large_pool.current"] == allocated() - small
    assert s["allocated_bytes.all.peak"] == expected["peak"]
    assert s["requested_bytes.all.current"] == sum(size for size, _ in live.values())
    assert s["allocation.all.current"] == len(live)
    assert s["allocation.all.allocated"] == expected["allocs"]
    assert s["allocation.all.freed"] == expected["frees"]
    assert s["reserved_bytes.all.current"] >= s["allocated_bytes.all.current"]
    assert s["reserved_bytes.all.current"] % (2 * MIB) == 0
    assert s["num_misuse"] == 0 and s["num_ooms"] == 0

    by_name = {p["name"]: p for p in s["phases"]}
    for name, p in per_phase.items():
        got = by_name[name]
        assert got["num_allocs"] == p["allocs"], name
        assert got["num_frees"] == p["frees"], name
        assert got["peak_allocated_bytes"] == p["peak"], name
        assert got["intervals"] == 3, name
        assert got["fragmentation"] == pytest.approx(1 - got["peak_allocated_bytes"] / got["peak_reserved_bytes"])
        assert set(got) >= {
            "peak_reserved_bytes", "peak_active_bytes", "peak_requested_bytes", "reserved_unallocated_at_peak_bytes",
            "largest_free_block_at_peak_bytes", "num_device_alloc", "num_device_free", "num_device_map",
            "num_device_unmap", "num_alloc_retries", "num_ooms", "released_bytes", "offloaded_bytes", "restored_bytes"}

    for ptr, (size, _) in list(live.items()):
        lib.phasealloc_free(ptr, size, device, None)
    s = stats_of(lib, device)
    assert s["allocated_bytes.all.current"] == 0 and s["active_bytes.all.current"] == 0
    assert s["reserved_bytes.all.current"] > 0  # cached
    lib.phasealloc_reset()  # torch.cuda.empty_cache()
    s = stats_of(lib, device)
    assert s["reserved_bytes.all.current"] == 0
    assert s["segment.all.current"] == 0


def test_bad_pointer_double_free_interior_pointer_and_size_mismatch_are_reported_and_counted(lib, capfd):
    device = DEVICES["misuse"]
    p = lib.phasealloc_try_malloc(4096, device, None)
    assert p
    before = stats_of(lib, device)["num_misuse"]

    lib.phasealloc_free(0xDEAD0000, 512, device, None)
    assert "unknown pointer" in last_error(lib)

    q = lib.phasealloc_try_malloc(8192, device, None)
    lib.phasealloc_free(q + 512, 8192, device, None)
    assert "interior pointer" in last_error(lib)
    lib.phasealloc_free(q, 8192, device, None)
    lib.phasealloc_free(q, 8192, device, None)
    assert "double free" in last_error(lib)

    lib.phasealloc_free(p, 1234, device, None)  # allocated with 4096: freed, and reported
    assert "size mismatch" in last_error(lib)

    s = stats_of(lib, device)
    assert s["num_misuse"] == before + 4
    assert s["allocated_bytes.all.current"] == 0  # the mismatched free still freed the block
    assert s["phasealloc"]["last_misuse"]["code"] == "size mismatch"
    err = capfd.readouterr().err
    assert "phasealloc: double free" in err and "phasealloc: unknown pointer" in err


def test_free_on_a_device_that_never_allocated_is_counted_by_the_interpose_layer(lib):
    before = stats_of(lib, 0)["phasealloc"]["interpose_misuse"]
    lib.phasealloc_free(0x1000, 16, 41, None)
    assert "device 41 never allocated" in last_error(lib)
    assert stats_of(lib, 0)["phasealloc"]["interpose_misuse"] == before + 1
    lib.phasealloc_free(None, 0, 0, None)  # NULL is a no-op, as free(NULL)


def test_try_malloc_out_of_memory_returns_null_and_the_per_phase_report(lib):
    device = DEVICES["oom"]
    lib.phasealloc_memory_fraction(0.001, device)  # 64 GiB * 0.001: a ~65 MiB limit
    assert stats_of(lib, device)["phasealloc"]["limit_bytes"] == int(0.001 * (64 << 30))
    assert lib.phasealloc_phase_begin(b"oom_phase") == 0
    try:
        small = lib.phasealloc_try_malloc(8 * MIB, device, None)
        assert small
        lib.phasealloc_clear_last_error()
        assert lib.phasealloc_try_malloc(1 << 30, device, None) is None
        error = last_error(lib)
    finally:
        assert lib.phasealloc_phase_end() == 0
    assert error.startswith("CUDA out of memory.")
    assert "Tried to allocate 1.00 GiB" in error
    assert "phase 'oom_phase'" in error
    assert "Per phase" in error and "phasealloc: out of memory" in error
    # PyTorch's wording, which tools and frameworks match on.
    assert "Tried to allocate 1.00 GiB. GPU %d has a total capacity of 64.00 GiB of which" % device in error
    assert "is reserved by PyTorch but unallocated." in error
    s = stats_of(lib, device)
    assert s["num_ooms"] == 1
    assert {p["name"]: p for p in s["phases"]}["oom_phase"]["num_ooms"] == 1
    lib.phasealloc_free(small, 8 * MIB, device, None)

    lib.phasealloc_memory_fraction(1.5, device)
    assert "must be in [0, 1]" in last_error(lib)
    lib.phasealloc_memory_fraction(0.0, device)  # PyTorch accepts 0: nothing fits
    assert stats_of(lib, device)["phasealloc"]["limit_bytes"] == 1
    assert lib.phasealloc_try_malloc(512, device, None) is None
    assert "CUDA out of memory." in last_error(lib)
    assert lib.phasealloc_set_limit_bytes(device, 3 * MIB) == 0
    assert stats_of(lib, device)["phasealloc"]["limit_bytes"] == 3 * MIB
    lib.phasealloc_memory_fraction(1.0, device)  # no limit
    assert stats_of(lib, device)["phasealloc"]["limit_bytes"] == 0


def test_the_pressure_handler_is_asked_once_on_out_of_memory_and_the_allocation_retried(lib):
    """phasealloc_set_pressure_handler: an allocation that runs out of memory calls the handler with
    its device and size; when the handler gives memory back (here: frees a block), the allocation is
    tried once more and succeeds. A handler that frees nothing leaves the failure as it was; an
    allocation inside the handler never re-enters it; with no handler nothing is called."""
    from phasealloc._library import PRESSURE_HANDLER

    device = DEVICES["pressure"]
    lib.phasealloc_memory_fraction(0.001, device)  # a ~65 MiB limit
    held = [lib.phasealloc_try_malloc(40 * MIB, device, None)]
    assert held[0]
    calls, nested = [], []

    def give_back(dev, nbytes):
        calls.append((dev, nbytes))
        nested.append(lib.phasealloc_try_malloc(1 << 30, dev, None))  # fails, without calling us again
        if not held:
            return 0
        lib.phasealloc_free(held.pop(), 40 * MIB, dev, None)
        return 1

    handler = PRESSURE_HANDLER(give_back)
    lib.phasealloc_set_pressure_handler(handler)
    try:
        second = lib.phasealloc_try_malloc(40 * MIB, device, None)  # does not fit beside the first
        assert second and calls == [(device, 40 * MIB)] and nested == [None], (calls, nested)
        assert lib.phasealloc_try_malloc(40 * MIB, device, None) is None  # nothing left to give back
        assert calls[-1] == (device, 40 * MIB) and len(calls) == 2, calls
        assert "CUDA out of memory." in last_error(lib)
        lib.phasealloc_set_pressure_handler(PRESSURE_HANDLER())  # NULL: none
        assert lib.phasealloc_try_malloc(40 * MIB, device, None) is None and len(calls) == 2, calls
    finally:
        lib.phasealloc_set_pressure_handler(PRESSURE_HANDLER())  # NULL: none
        lib.phasealloc_memory_fraction(1.0, device)
    lib.phasealloc_free(second, 40 * MIB, device, None)


def test_request_divisions_shape_blocks_and_keep_the_requested_size():
    """PyTorch's roundup_power2_divisions set at run time (the c10 bridge passes the table): blocks
    are PyTorch's rounded size, requested bytes the request's; zeros give the policy's sizing back.
    In its own process: the table is process-wide."""
    code = CTYPES_PRELUDE + '''
MIB = 1 << 20
table = (ctypes.c_size_t * 16)(*([4] * 16))
def grows(size):
    before = stats(1)
    p = lib.phasealloc_try_malloc(size, 1, None)
    after = stats(1)
    lib.phasealloc_free(p, size, 1, None)
    return (after["active_bytes.all.allocated"] - before["active_bytes.all.allocated"],
            after["requested_bytes.all.allocated"] - before["requested_bytes.all.allocated"])
size = 84 * MIB
print("default", *grows(size))
assert lib.phasealloc_set_request_divisions(table, 16) == 0
print("divided", *grows(size))
print("small", *grows(1000))  # 512 * 4 bytes and under: 512-byte rounding only, as in PyTorch
assert lib.phasealloc_set_request_divisions(table, 0) == 0
print("off", *grows(size))
assert lib.phasealloc_set_request_divisions(table, 17) == -1
print("error", err())
table[3] = 3
assert lib.phasealloc_set_request_divisions(table, 16) == -1
print("error", err())
'''
    out = run_python(code, conf=MAIN_CONF)
    assert out.returncode == 0, out.stderr
    lines = [line.split(" ", 1) for line in out.stdout.splitlines()]
    got = dict((k, v) for k, v in lines if k != "error")
    assert got["default"] == "%d %d" % (84 * MIB, 84 * MIB)
    assert got["divided"] == "%d %d" % (96 * MIB, 84 * MIB)  # 64 MiB + 2 * 16 MiB
    assert got["small"] == "1024 1000"
    assert got["off"] == "%d %d" % (84 * MIB, 84 * MIB)
    errors = [v for k, v in lines if k == "error"]
    assert "17 division intervals" in errors[0], errors
    assert "interval 3: 3 divisions" in errors[1], errors


def test_negative_zero_and_out_of_range_requests(lib):
    device = DEVICES["c_api"]
    assert lib.phasealloc_try_malloc(-1, device, None) is None
    assert "negative size" in last_error(lib)
    p = lib.phasealloc_try_malloc(0, device, None)
    assert p  # a unique block of the minimum size
    lib.phasealloc_free(p, 0, device, None)
    assert lib.phasealloc_try_malloc(16, 64, None) is None
    assert "out of range" in last_error(lib)
    assert lib.phasealloc_stats_json(99) is None
    assert "out of range" in last_error(lib)


def test_phase_control_api(lib):
    start = lib.phasealloc_current_phase().decode()
    assert lib.phasealloc_phase_begin(b"outer") == 0
    assert lib.phasealloc_phase_begin(b"inner") == 0
    assert lib.phasealloc_current_phase() == b"inner"
    assert lib.phasealloc_phase_set(b"replaced") == 0
    assert lib.phasealloc_current_phase() == b"replaced"
    assert lib.phasealloc_phase_end() == 0
    assert lib.phasealloc_current_phase() == b"outer"
    assert lib.phasealloc_phase_end() == 0
    assert lib.phasealloc_current_phase().decode() == start
    assert lib.phasealloc_phase_begin(None) == -1
    assert "NULL" in last_error(lib)
    assert lib.phasealloc_phase_begin(b"") == -1
    assert "empty" in last_error(lib)


def test_phase_end_without_begin_is_an_error_in_a_fresh_process(lib):
    out = run_python(CTYPES_PRELUDE + """
assert lib.phasealloc_phase_end() == -1
print(err())
assert lib.phasealloc_phase_set(b"generation") == 0
assert lib.phasealloc_current_phase() == b"generation"
# an engine created later starts in the current phase
p = lib.phasealloc_try_malloc(1000, 0, None)
print(stats(0)["phasealloc"]["current_phase"])
""", conf="device:model")
    assert out.returncode == 0, out.stderr
    assert "without a matching phase_begin" in out.stdout
    assert out.stdout.strip().endswith("generation")


def test_phases_apply_to_every_engine_including_later_ones(lib):
    a, b = DEVICES["c_api"], DEVICES["record_stream_other"]
    assert lib.phasealloc_try_malloc(512, a, None)
    assert lib.phasealloc_phase_begin(b"everywhere") == 0
    try:
        assert lib.phasealloc_try_malloc(512, b, None)
        assert stats_of(lib, a)["phasealloc"]["current_phase"] == "everywhere"
        assert stats_of(lib, b)["phasealloc"]["current_phase"] == "everywhere"
    finally:
        lib.phasealloc_phase_end()


def test_stats_json_shapes(lib):
    fresh = stats_of(lib, 33)  # never used: zeros, no engine
    assert fresh["phasealloc"]["engine"] is False
    assert fresh["allocated_bytes.all.current"] == 0 and fresh["phases"] == []
    device = DEVICES["c_api"]
    assert lib.phasealloc_try_malloc(4096, device, None)
    s = stats_of(lib, device)
    for key in ("active", "active_bytes", "allocated_bytes", "allocation", "inactive_split", "inactive_split_bytes",
                "requested_bytes", "reserved_bytes", "segment"):
        for pool in ("all", "small_pool", "large_pool"):
            for field in ("current", "peak", "allocated", "freed"):
                assert isinstance(s["%s.%s.%s" % (key, pool, field)], int)
    for key in ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free"):
        assert isinstance(s[key], int)
    info = s["phasealloc"]
    assert info["engine"] is True and info["device"] == "model" and info["policy"].startswith("basic:")
    assert info["capacity_bytes"] == 64 << 30
    everything = __import__("json").loads(lib.phasealloc_stats_json(-1).decode())
    assert str(device) in everything["devices"]


def test_reset_peak_and_accumulated_stats(lib):
    device = DEVICES["c_api"]
    p = lib.phasealloc_try_malloc(3 * MIB, device, None)
    lib.phasealloc_free(p, 3 * MIB, device, None)
    s = stats_of(lib, device)
    assert s["allocated_bytes.all.peak"] > s["allocated_bytes.all.current"]
    assert lib.phasealloc_reset_peak_stats(device) == 0
    s = stats_of(lib, device)
    assert s["allocated_bytes.all.peak"] == s["allocated_bytes.all.current"]
    assert lib.phasealloc_reset_accumulated_stats(device) == 0
    s = stats_of(lib, device)
    assert s["allocation.all.allocated"] == 0 and s["allocation.all.freed"] == 0
    assert lib.phasealloc_reset_peak_stats(-1) == 0
    assert lib.phasealloc_reset_peak_stats(-7) == -1


def test_record_stream_finds_the_owning_engine(lib):
    # Each model device has its own fake address range (one base per ordinal), as real GPUs of a
    # process share one virtual address space: the engine holding an address is never ambiguous.
    out = run_python(CTYPES_PRELUDE + """
MIB = 1 << 20
pa = lib.phasealloc_try_malloc(4096, 0, 0x10)
pb = lib.phasealloc_try_malloc(6 * MIB, 1, 0x10)
assert pb - pa >= 1 << 44, (hex(pa), hex(pb))
lib.phasealloc_record_stream(pa, 0x20)
lib.phasealloc_record_stream(pb, 0x30)
assert err() == "", err()
lib.phasealloc_free(pa, 4096, 0, 0x10)
lib.phasealloc_free(pb, 6 * MIB, 1, 0x10)
# The other streams' uses make the frees pending (active, not allocated) until the next allocation
# polls their events, which the model device completes at once.
assert stats(0)["allocated_bytes.all.current"] == 0 and stats(0)["active_bytes.all.current"] == 4096
assert stats(1)["allocated_bytes.all.current"] == 0 and stats(1)["active_bytes.all.current"] == 6 * MIB
lib.phasealloc_free(lib.phasealloc_try_malloc(512, 0, 0x10), 512, 0, 0x10)
assert stats(0)["active_bytes.all.current"] == 0
assert stats(0)["num_misuse"] == 0 and stats(1)["num_misuse"] == 0
lib.phasealloc_record_stream(0x123, 0x20)  # nobody's memory
print(err())
print(stats(0)["phasealloc"]["interpose_misuse"])
""", conf="device:model")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert "no device's engine holds" in lines[-2]
    assert lines[-1] == "1"


def test_record_stream_with_one_engine_is_answered_by_that_engine(lib):
    out = run_python(CTYPES_PRELUDE + """
p = lib.phasealloc_try_malloc(4096, 0, 0x10)
lib.phasealloc_free(p, 4096, 0, 0x10)
lib.phasealloc_record_stream(p, 0x20)  # a freed block: the engine says what it is
print(err())
print(stats(0)["num_misuse"])
""", conf="device:model")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert "double free" in lines[-2] and lines[-1] == "1"


def test_effective_config_and_configure_after_first_use(lib):
    config = lib.phasealloc_config().decode()
    assert config.startswith("device:model,policy:[basic:")
    assert "model_capacity:%d" % (64 << 30) in config and "check_invariants:true" in config
    assert lib.phasealloc_configure(MAIN_CONF.encode()) == 0  # the text in force: fine
    assert lib.phasealloc_configure(b"device:model,strict:true") == -1
    assert "too late" in last_error(lib)


def test_strict_mode_aborts_with_the_evidence(lib):
    out = run_python(CTYPES_PRELUDE + """
p = lib.phasealloc_try_malloc(1000, 0, None)
lib.phasealloc_free(p, 1000, 0, None)
sys.stdout.write("before\\n"); sys.stdout.flush()
lib.phasealloc_free(p, 1000, 0, None)
print("survived")
""", conf="device:model,strict:true")
    assert out.returncode != 0
    assert "before" in out.stdout and "survived" not in out.stdout
    assert "double free" in out.stderr and "strict" in out.stderr


def test_threads_race_to_create_an_engine_and_allocate(lib):
    import threading

    device = DEVICES["threads"]
    errors = []
    start = threading.Barrier(8)

    def worker(seed):
        rng = random.Random(seed)
        start.wait()
        held = []
        for _ in range(500):
            size = rng.randint(1, 3 * MIB)
            ptr = lib.phasealloc_try_malloc(size, device, 0x100 * (seed % 3))
            if not ptr:
                errors.append(last_error(lib))
                return
            held.append((ptr, size))
            if len(held) > 8:
                p, n = held.pop(rng.randrange(len(held)))
                lib.phasealloc_free(p, n, device, None)
        for p, n in held:
            lib.phasealloc_free(p, n, device, None)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    s = stats_of(lib, device)
    assert s["allocation.all.allocated"] == 8 * 500 and s["allocation.all.current"] == 0
    assert s["num_misuse"] == 0


def test_a_fork_before_any_engine_exists_may_allocate():
    """As PyTorch allows a fork before CUDA is initialised (a DataLoader made before the model moves
    to the GPU), a fork of a process that loaded phasealloc but made no engine allocates freely."""
    out = run_python(CTYPES_PRELUDE + """
lib.phasealloc_phase_begin(b"generation")   # the registry exists, no engine yet
pid = os.fork()
if pid == 0:
    p = lib.phasealloc_try_malloc(1 << 20, 0, None)
    code = 0 if p else 10
    if p: lib.phasealloc_free(p, 1 << 20, 0, None)
    os._exit(code)
_, status = os.waitpid(pid, 0)
print("child", os.WEXITSTATUS(status))
""", conf="device:model,policy:[phasealloc:release:all]")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["child", "0"], out.stdout + out.stderr


def test_a_forked_child_makes_no_device_call_and_takes_no_lock():
    """A fork of a process using phasealloc (a DataLoader worker): the child's allocation fails and
    says why, its frees of inherited blocks and its phase changes touch nothing, and the parent's
    books are as before."""
    out = run_python(CTYPES_PRELUDE + """
lib.phasealloc_phase_begin(b"generation")
p = lib.phasealloc_try_malloc(8 << 20, 0, None)
assert p
before = stats(0)["allocated_bytes.all.current"]
pid = os.fork()
if pid == 0:
    code = 0
    if lib.phasealloc_try_malloc(1 << 20, 0, None) is not None: code = 10
    failure = lib.phasealloc_last_malloc_failure(None).decode()
    if "forked from one that uses CUDA" not in failure: code = 11
    lib.phasealloc_free(p, 8 << 20, 0, None)              # the parent's block: forgotten, not freed
    if stats(0)["allocated_bytes.all.current"] != before: code = 12
    if lib.phasealloc_phase_end() != 0 or lib.phasealloc_phase_begin(b"training") != 0: code = 13
    lib.phasealloc_reset()
    if stats(0)["num_device_free"] != 0: code = 14
    os._exit(code)
_, status = os.waitpid(pid, 0)
print("child", os.WEXITSTATUS(status))
lib.phasealloc_free(p, 8 << 20, 0, None)
print("parent", stats(0)["allocated_bytes.all.current"])
""", conf="device:model,policy:[phasealloc:release:all]")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["child", "0", "parent", "0"], out.stdout + out.stderr


def test_offload_is_refused_with_the_reason_where_it_cannot_keep_the_address():
    """Same-address offload needs host-backed mappings (the model device has none here) and a process
    that owns the memory (a forked child does not): both are errors that say so, and nothing moves."""
    out = run_python(CTYPES_PRELUDE + """
p = lib.phasealloc_try_malloc(8 << 20, 0, None)
ptrs = (ctypes.c_void_p * 1)(p)
print(lib.phasealloc_offload(0, ptrs, 1, None), err())
print(lib.phasealloc_offload_kind(0), lib.phasealloc_offload_kind(99), "device 99 is out of range" in err() or err())
print(lib.phasealloc_restore(0, None, 0, None))                      # nothing offloaded: nothing to do
print(lib.phasealloc_offload(0, ptrs, 1, None) == -1 and stats(0)["offloaded_bytes.all.current"] == 0)
pid = os.fork()
if pid == 0:
    code = 0 if lib.phasealloc_offload(0, ptrs, 1, None) == -1 and "forked child" in err() else 10
    code += 0 if lib.phasealloc_offload_kind(0) == -1 and "forked child" in err() else 20
    os._exit(code)
_, status = os.waitpid(pid, 0)
print("child", os.WEXITSTATUS(status))
lib.phasealloc_free(p, 8 << 20, 0, None)
""", conf="device:model")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("-1 phasealloc_offload: device 0: device 'model' cannot offload"), lines
    assert lines[1] == "0 -1 True", lines  # the model device cannot offload; device 99 is refused, named
    assert lines[2:] == ["0", "True", "child 0"], lines


def test_peer_access_is_granted_before_or_after_the_engine_exists():
    out = run_python(CTYPES_PRELUDE + """
print(lib.phasealloc_enable_peer_access(3, 1))      # before device 3 has an engine: kept for it
p = lib.phasealloc_try_malloc(4 << 20, 3, None)
print(bool(p), lib.phasealloc_enable_peer_access(3, 2), lib.phasealloc_enable_peer_access(3, 2))
print(lib.phasealloc_enable_peer_access(3, 99), err())
lib.phasealloc_free(p, 4 << 20, 3, None)
""", conf="device:model")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "0" and lines[1] == "True 0 0", out.stdout
    assert lines[2].startswith("-1 phasealloc_enable_peer_access: device 3 or peer 99 is out of range"), lines[2]
