"""The c10 bridge against PyTorch's own allocator: memory history, snapshots and the profiler. Each
scenario runs under both allocators (tests/harness/bridge_harness.py).
"""

from bridge_harness import MIB, bridge_child_main, bridge_tests
from torch_harness import scenarios


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

ENVIRONMENT = {}

if __name__ == "__main__":
    bridge_child_main(globals())
else:
    bridge_tests(globals(), ENVIRONMENT)
