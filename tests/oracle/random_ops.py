"""Seeded random allocator workloads as phasealloc text traces: the inputs of the differential test
of the `pytorch` model against PyTorch's own allocator (test_oracle_random.py).

    python random_ops.py --seed 7 --ops 10000 --capacity-gib 8 OUT.txt

Rationale: a recorded trace shows the paths one program took; the model must make PyTorch's
decisions on every path, including the rare ones (an allocation that only fits after the cache is
released, a block freed while another stream still uses it, a segment too large to split).
Approach: a random walk over the live set. Sizes are log-uniform from 1 B to 1 GiB, so every size
class, rounding rule and segment kind is hit. Allocations go to one of two streams; a live block is
sometimes used by the other stream (record_stream) before its free, the cross-stream free. The walk
allocates more while the live bytes are low and frees more while they are high, so the live set
keeps coming back near capacity, where allocations fail (out of memory after PyTorch has released
its cache and retried). empty_cache and phase changes (generation / training) are interleaved.
Limitations: one device; streams complete their work at once on the simulator, so a cross-stream
free is deferred only until the next allocation, as it is on an idle GPU.
"""

import argparse
import math
import random

GIB = 1 << 30
MAX_BYTES = GIB
PHASES = ("generation", "training")


def generate(seed, ops, capacity_bytes, streams=2):
    """The trace text of `ops` operations drawn with `seed` (the same seed, the same text)."""
    rng = random.Random(seed)
    lines = []
    live = {}  # alloc id -> (bytes, stream)
    live_bytes = 0
    next_id = 1
    t_ns = 0
    phase = 0

    def emit(op, alloc_id=0, size=0, stream=0, name=0):
        nonlocal t_ns
        t_ns += 1000
        lines.append("%d %s %d %d %d 0 %d -" % (t_ns, op, alloc_id, size, stream, name))

    emit("phase", name=1)
    for _ in range(ops):
        r = rng.random()
        fill = live_bytes / capacity_bytes
        # Allocation odds fall as the live set fills: the walk hovers between half and full capacity.
        alloc_odds = 0.62 if fill < 0.5 else 0.5 if fill < 0.9 else 0.4
        if r < 0.004:
            emit("empty_cache")
        elif r < 0.008:
            phase = 1 - phase
            emit("phase", name=1 + phase)
        elif r < 0.06 and live:
            alloc_id = rng.choice(list(live))
            emit("record_stream", alloc_id, 0, 1 - live[alloc_id][1] if streams > 1 else 0)
        elif r < 0.06 + alloc_odds or not live:
            size = max(1, int(math.exp(rng.uniform(0.0, math.log(MAX_BYTES)))))
            stream = rng.randrange(streams) if rng.random() < 0.3 else 0
            live[next_id] = (size, stream)
            live_bytes += size
            emit("alloc", next_id, size, stream)
            next_id += 1
        else:
            alloc_id = rng.choice(list(live))
            size, stream = live.pop(alloc_id)
            live_bytes -= size
            emit("free", alloc_id, size, stream)
    for alloc_id, (size, stream) in sorted(live.items()):
        emit("free", alloc_id, size, stream)
    header = ["# phasealloc-trace v1", 'source "random_ops seed %d, %d ops"' % (seed, ops), 'allocator_settings ""',
              "device_capacity_bytes %d" % capacity_bytes, "stream_count %d" % streams,
              'string 0 ""', 'string 1 "%s"' % PHASES[0], 'string 2 "%s"' % PHASES[1],
              "# t_ns op alloc_id bytes stream tag name flags"]
    return "\n".join(header + lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ops", type=int, default=10000)
    parser.add_argument("--capacity-gib", type=float, default=8.0)
    args = parser.parse_args()
    with open(args.out, "w") as f:
        f.write(generate(args.seed, args.ops, int(args.capacity_gib * GIB)))


if __name__ == "__main__":
    main()
