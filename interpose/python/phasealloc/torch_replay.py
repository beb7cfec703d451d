"""Replays a phasealloc trace through PyTorch's own CUDA caching allocator: the oracle the `pytorch`
model is checked against. `phasealloc replay TRACE --engine torch` runs it on the simulated GPU.

    phasealloc convert --records TRACE T.records
    phasealloc-run --sim-gpu=80GiB --native -- python -m phasealloc.torch_replay T.records --out R.json

Rationale: every number phasealloc reports is "versus the pytorch model"; the model must make the
decisions PyTorch's allocator makes. The real allocator runs here on the simulated GPU, so the
model is checked against it operation by operation, not only against recorded snapshots.
Approach: each trace event becomes the PyTorch call a program would make: alloc ->
torch.empty(bytes, dtype=uint8) on the event's stream, free -> dropping the tensor, record_stream
-> Tensor.record_stream, empty_cache -> torch.cuda.empty_cache(), phase -> the per-phase books are
closed (peaks read from torch.cuda.memory_stats(), then reset). Segment events come from PyTorch's
own memory history (segment actions only, alloc/free actions skipped) and are written in order,
as the model's replay writes its own. The allocator configuration is PYTORCH_CUDA_ALLOC_CONF,
set by the caller. An allocation that raises torch.cuda.OutOfMemoryError is counted, and its free
is skipped, as the model's replay does.
The trace comes as records (one JSON header line, then fixed-width records: read with json and
struct, so the trace grammar has one parser, phasealloc's C++ one); `phasealloc convert --records`
writes them from any input, `replay --engine torch` writes them itself.
Limitations: one device; events of the recording allocator (segment_*, oom) are not followed.
"""

import argparse
import glob
import json
import os
import struct
import sys
import time

SEGMENT_ACTIONS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")


class TraceError(Exception):
    """A records file that cannot be read, or an event the replay cannot follow; the message says which."""


RECORDS_FORMAT = "phasealloc-trace-records"
RECORDS_VERSION = 1
# The record fields the replay uses; a records file names its fields, and may have more.
FIELDS = ("time_ns", "op", "alloc_id", "bytes", "stream", "tag", "name")


def read_trace_records(path):
    """(strings, events) of a records file (`phasealloc convert --records`, trace_records.hpp: one
    JSON header line, then fixed-width records that struct reads): nothing here parses the trace
    grammar, which has one parser, phasealloc's. Events are (time_ns, op, alloc_id, bytes, stream,
    tag, name) tuples, op by name."""
    with open(path, "rb") as f:
        first = f.readline(1 << 26)
        try:
            header = json.loads(first)
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("format") != RECORDS_FORMAT:
            raise TraceError("%s: not a phasealloc trace records file (a JSON line with \"format\": \"%s\" first): "
                             "write one with `phasealloc convert --records TRACE OUT`" % (path, RECORDS_FORMAT))
        if header.get("version") != RECORDS_VERSION:
            raise TraceError("%s: records version %r, this reader reads version %d" % (path, header.get("version"),
                                                                                         RECORDS_VERSION))
        body = f.read()
    try:
        record = struct.Struct(header["record"])
        column = [header["fields"].index(name) for name in FIELDS]
        ops, strings, count = header["ops"], header["strings"], int(header["events"])
    except (KeyError, ValueError, TypeError, struct.error) as exc:
        raise TraceError("%s: a records header without a usable %s" % (path, exc))
    if record.size != header.get("record_bytes") or len(body) != count * record.size:
        raise TraceError("%s: %d bytes of records, expected %d events of %d bytes" % (path, len(body), count,
                                                                                       record.size))
    t, o, a, b, s, g, n = column
    try:
        events = [(r[t], ops[r[o]], r[a], r[b], r[s], r[g], r[n]) for r in record.iter_unpack(body)]
    except IndexError:
        raise TraceError("%s: an event's op is not one of the header's %d ops" % (path, len(ops)))
    return strings, events


class phase_books:
    """Per-phase numbers in the replay JSON's shape (phase_stats of the model's replay)."""

    def __init__(self, name):
        self.name = name
        self.intervals = 0
        self.peak_allocated_bytes = 0
        self.peak_reserved_bytes = 0
        self.peak_active_bytes = 0
        self.peak_requested_bytes = 0
        self.num_allocs = 0
        self.num_frees = 0
        self.num_alloc_retries = 0
        self.num_ooms = 0

    def as_json(self):
        frag = 0.0 if self.peak_reserved_bytes == 0 else 1.0 - self.peak_allocated_bytes / self.peak_reserved_bytes
        return {"name": self.name, "intervals": self.intervals, "peak_allocated_bytes": self.peak_allocated_bytes,
                "peak_reserved_bytes": self.peak_reserved_bytes, "peak_active_bytes": self.peak_active_bytes,
                "peak_requested_bytes": self.peak_requested_bytes, "num_allocs": self.num_allocs,
                "num_frees": self.num_frees, "num_alloc_retries": self.num_alloc_retries, "num_ooms": self.num_ooms,
                "fragmentation": frag}


def block_order(torch):
    """How this torch orders equal-size free blocks: "segment_age" (oldest segment first, then
    address: BlockComparatorSizeCounterAddress, torch 2.15) or "address" (BlockComparatorSize,
    torch 2.11). Read from the comparator's name in libc10_cuda; "" when neither is there."""
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    for path in sorted(glob.glob(os.path.join(lib_dir, "libc10_cuda.so*"))):
        with open(path, "rb") as f:
            data = f.read()
        if b"BlockComparatorSizeCounterAddress" in data:
            return "segment_age"
        if b"BlockComparatorSize" in data:
            return "address"
    return ""


def replay(torch, strings, events):
    """Runs the events through torch's allocator; returns the result document."""
    if torch.cuda.get_allocator_backend() != "native":
        raise RuntimeError("phasealloc.torch_replay needs PyTorch's own allocator, not %r (run it without "
                           "PHASEALLOC=1: phasealloc-run --native)" % torch.cuda.get_allocator_backend())
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=1 << 40,
                                             skip_actions=["alloc", "free_requested", "free_completed"])
    streams = {0: torch.cuda.current_stream()}
    tensors, failed = {}, set()
    phases = {}
    order = []
    current = None
    ooms = 0
    last = {"num_alloc_retries": 0, "num_ooms": 0}

    def books(name):
        if name not in phases:
            phases[name] = phase_books(name)
            order.append(name)
        return phases[name]

    def close(name):
        """Closes the interval of `name`: its peaks since the last reset, then reset."""
        s = torch.cuda.memory_stats()
        b = books(name)
        b.peak_allocated_bytes = max(b.peak_allocated_bytes, s.get("allocated_bytes.all.peak", 0))
        b.peak_reserved_bytes = max(b.peak_reserved_bytes, s.get("reserved_bytes.all.peak", 0))
        b.peak_active_bytes = max(b.peak_active_bytes, s.get("active_bytes.all.peak", 0))
        b.peak_requested_bytes = max(b.peak_requested_bytes, s.get("requested_bytes.all.peak", 0))
        for key in ("num_alloc_retries", "num_ooms"):
            now = s.get(key, 0)
            setattr(b, key, getattr(b, key) + now - last[key])
            last[key] = now
        torch.cuda.reset_peak_memory_stats()

    def stream_of(ordinal):
        if ordinal not in streams:
            streams[ordinal] = torch.cuda.Stream()
        return streams[ordinal]

    started = time.perf_counter()
    current = "unphased"
    seen = {"unphased": False}
    for t_ns, op, alloc_id, size, stream, tag, name in events:
        if op == "alloc":
            seen[current] = True
            b = books(current)
            if b.intervals == 0:
                b.intervals = 1
            try:
                with torch.cuda.stream(stream_of(stream)):
                    tensors[alloc_id] = torch.empty(size, dtype=torch.uint8, device="cuda")
                b.num_allocs += 1
            except torch.cuda.OutOfMemoryError:
                ooms += 1
                failed.add(alloc_id)
        elif op == "free":
            if alloc_id in failed:
                failed.discard(alloc_id)
                continue
            if alloc_id not in tensors:
                raise TraceError("free of allocation %d, which is not live" % alloc_id)
            seen[current] = True
            books(current).num_frees += 1
            del tensors[alloc_id]
        elif op == "record_stream":
            if alloc_id in tensors:
                tensors[alloc_id].record_stream(stream_of(stream))
        elif op == "empty_cache":
            torch.cuda.empty_cache()
        elif op == "phase":
            to = strings[name] if 0 <= name < len(strings) else ""
            to = to or "unphased"
            if to == current:
                continue
            if seen.get(current):
                close(current)
            else:
                torch.cuda.reset_peak_memory_stats()
            current = to
            b = books(current)
            b.intervals += 1
            seen[current] = True
        elif op in ("segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom", "seed_block"):
            # what the recording allocator did, and the layout it held when recording began: not
            # followed (PyTorch's allocator starts empty; the seeded allocations are allocated)
            continue
        elif op in ("offload", "restore"):
            continue  # same-address offload: PyTorch's allocator has none; its blocks stay on the GPU
        else:
            raise TraceError("unknown op %r" % op)
    torch.cuda.synchronize()
    close(current)
    wall = time.perf_counter() - started
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    segment_events = [{"action": e["action"], "bytes": e["size"]} for e in snapshot["device_traces"][0]
                      if e["action"] in SEGMENT_ACTIONS]
    stats = torch.cuda.memory_stats()
    used = [phases[n] for n in order if phases[n].num_allocs or phases[n].num_frees or phases[n].intervals]
    count = {a: sum(1 for e in segment_events if e["action"] == a) for a in SEGMENT_ACTIONS}
    return {
        "engine": "torch",
        "torch_version": str(torch.__version__),
        "block_order": block_order(torch),
        "allocator_settings": torch.cuda.memory._get_current_allocator_settings()
        if hasattr(torch.cuda.memory, "_get_current_allocator_settings") else "",
        "events": len(events),
        "peak_reserved_bytes": max((p.peak_reserved_bytes for p in used), default=0),
        "peak_allocated_bytes": max((p.peak_allocated_bytes for p in used), default=0),
        "peak_requested_bytes": max((p.peak_requested_bytes for p in used), default=0),
        "device_allocs": count["segment_alloc"],
        "device_frees": count["segment_free"],
        "device_maps": count["segment_map"],
        "device_unmaps": count["segment_unmap"],
        "final_reserved_bytes": int(stats.get("reserved_bytes.all.current", 0)),
        "final_allocated_bytes": int(stats.get("allocated_bytes.all.current", 0)),
        "final_requested_bytes": int(stats.get("requested_bytes.all.current", 0)),
        "alloc_retries": int(stats.get("num_alloc_retries", 0)),
        "ooms": ooms,
        "wall_seconds": wall,
        "phases": [p.as_json() for p in used],
        "segment_events": segment_events,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m phasealloc.torch_replay", description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a trace as records (phasealloc convert --records IN OUT)")
    parser.add_argument("--out", required=True, help="where to write the result JSON")
    args = parser.parse_args(argv)
    try:
        strings, events = read_trace_records(args.trace)
    except (OSError, TraceError) as exc:
        print("phasealloc.torch_replay: %s" % exc, file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("phasealloc.torch_replay: no CUDA device (run it under phasealloc-run --sim-gpu --native)",
              file=sys.stderr)
        return 2
    try:
        result = replay(torch, strings, events)
    except TraceError as exc:
        print("phasealloc.torch_replay: %s: %s" % (args.trace, exc), file=sys.stderr)
        return 2
    with open(args.out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
