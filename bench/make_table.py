#!/usr/bin/env python3
"""Turns phasealloc_bench's Google Benchmark JSON into a Markdown results table.

    make_table.py results.json                      # Markdown on stdout
    make_table.py results.json --readme README.md   # replace the part between the markers

Benchmarks are named BM_<Pattern>/<allocator>/<args>; each pattern becomes one table with a row
per argument set and the allocators side by side. Of repeated runs the median is used (the
aggregate Google Benchmark writes with --benchmark_repetitions), else the single run.
Then the issue's targets are checked and printed as met / not met. Python 3 stdlib only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

from readme_section import replace_section

ANCHOR_TARGET = 0.3  # target: phasealloc <= 0.3x PyTorch's own allocator on every pattern
ANCHOR_FAMILIES = ("BM_HotPath", "BM_Mixed", "BM_RlhfPhases", "BM_KvCacheGrowth", "BM_Pr193400")

PATTERNS = {
    "BM_HotPath": "Hot path: allocate + free one size (cached reuse)",
    "BM_Mixed": "Mixed: log-uniform sizes, random lifetimes (seeded ring of live blocks)",
    "BM_BatchLifo": "Batch, LIFO: allocate N, free in reverse",
    "BM_BatchFifo": "Batch, FIFO: allocate N, free in order",
    "BM_KvCacheGrowth": "KV-cache growth by concatenation (256 steps)",
    "BM_RlhfPhases": "RLHF phase alternation (generation, scoring, training, optimizer)",
    "BM_Pr193400": "PyTorch PR #193400 reproducer (91 MiB + 45.5 MiB freed, 2 MiB kept, per cycle)",
    "BM_SharedEngineThreads": "Threads on one shared allocator, one stream each",
    "BM_CrossStreamFree": "Free of a block used by another stream (record_stream, events complete at once)",
}

HOT_PATH_PAIR_TARGET_NS = 50.0
SPEED_RATIO_TARGET = 0.5
RESERVED_OVER_LIVE_TARGET = 2.0
# An allocate + free pair of the hot path, counted by callgrind (bench/callgrind_pairs.sh),
# on the engine and on the C entry point; and its time against glibc's malloc/free in the same run.
INSTRUCTIONS_PER_PAIR_TARGET = 400
GLIBC_TIME_RATIO_TARGET = 3.0
INSTRUCTION_ROWS = [
    ("engine/phasealloc", "engine, `phasealloc` policy"),
    ("engine/pytorch", "engine, `pytorch` policy"),
    ("capi/phasealloc", "C entry point (phasealloc_malloc / phasealloc_free), `phasealloc` policy"),
    ("glibc", "glibc malloc / free"),
]


def human_bytes(value):
    value = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            if value == int(value):
                return f"{int(value)} {unit}"
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value} B"


def human_arg(part):
    key, sep, value = part.partition(":")
    if sep and value.isdigit() and ("bytes" in key or key in ("min", "max")):
        return f"{key} {human_bytes(int(value))}"
    if sep:
        return f"{key} {value}"
    return part


class Run:
    """The median view of one benchmark (one pattern, one allocator, one argument set)."""

    def __init__(self, run_name):
        self.run_name = run_name
        parts = run_name.split("/")
        self.family = parts[0]
        self.allocator = parts[1] if len(parts) > 1 else "?"
        rest = [p for p in parts[2:] if p not in ("real_time", "process_time", "manual_time")]
        self.args = ", ".join(human_arg(p) for p in rest) or "-"
        self.medians = {}  # field -> value (median aggregate, or single run)
        self.cv = {}  # field -> coefficient of variation, when repeated
        self.label = ""
        self.error = None
        self.repetitions = 1
        self.use_real_time = "real_time" in parts
        self.order = 0  # position of its argument set in the family (registration order)

    def value(self, field):
        return self.medians.get(field)


def load_runs(data):
    runs = {}
    singles = {}  # run_name -> list of iteration rows, when there are no aggregates
    for b in data.get("benchmarks", []):
        name = b.get("run_name") or b["name"]
        run = runs.setdefault(name, Run(name))
        if b.get("label"):
            run.label = b["label"]
        run.order = b.get("per_family_instance_index", run.order)
        if b.get("error_occurred"):
            run.error = b.get("error_message", "error")
            continue
        numeric = {k: v for k, v in b.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if b.get("run_type") == "aggregate":
            agg = b.get("aggregate_name")
            run.repetitions = b.get("repetitions", run.repetitions)
            if agg == "median":
                run.medians.update(numeric)
            elif agg == "cv":
                run.cv.update(numeric)
        else:
            singles.setdefault(name, []).append(numeric)
    for name, rows in singles.items():
        run = runs[name]
        if run.medians:
            continue  # aggregates win
        run.repetitions = len(rows)
        keys = set().union(*rows)
        run.medians = {k: statistics.median(r[k] for r in rows if k in r) for k in keys}
    return runs


def to_ns(seconds):
    return None if seconds is None else seconds * 1e9


def fmt_ns(ns, cv=None):
    if ns is None:
        return "-"
    text = f"{ns:,.0f}" if ns >= 1000 else f"{ns:.1f}"
    if cv is not None and cv > 0:
        text += f" ±{cv * 100:.0f}%"
    return text


def fmt_calls(calls):
    if calls is None:
        return "-"
    if calls == 0:
        return "0"
    if calls < 0.01:
        return f"{calls:.1e}"
    return f"{calls:,.2f}".rstrip("0").rstrip(".")


def allocator_order(runs, context):
    listed = [a for a in (context.get("allocators") or "").split(";") if a]
    seen = []
    for run in runs.values():
        if run.allocator not in seen:
            seen.append(run.allocator)
    return [a for a in listed if a in seen] + [a for a in seen if a not in listed]


def is_host_only(run):
    return run is not None and run.value("peak_reserved") is None and run.error is None


def cell_missing(run):
    return "missing" if run is None or run.error else None


def pattern_table(family, runs, allocators, notes, anchor=None):
    rows = {}
    for run in sorted(runs.values(), key=lambda r: r.order):
        if run.family == family:
            rows.setdefault(run.args, {})[run.allocator] = run
    if not rows:
        return []
    engines = [a for a in allocators if not any(is_host_only(r.get(a)) for r in rows.values())]
    extra = [k for k in ("peak_live", "reserved_over_live", "event_calls")
             if any(r.get(a) and r[a].value(k) is not None for r in rows.values() for a in allocators)]
    ratio = anchor is None and "phasealloc" in allocators and "pytorch" in allocators
    versus = [a for a in allocators if anchor in allocators and a != anchor]

    head = ["args"] + [f"ns/op {a}" + (" (host only)" if a not in engines else "") for a in allocators]
    if ratio:
        head.append("phasealloc / pytorch time")
    head += [f"{a} / {anchor} time" for a in versus]
    head += [f"peak reserved {a}" for a in engines]
    head += [f"device calls/iter {a}" for a in engines]
    if "peak_live" in extra:
        head.append("peak live")
    if "reserved_over_live" in extra:
        head += [f"reserved / live {a}" for a in engines]
    if "event_calls" in extra:
        head += [f"event calls/iter {a}" for a in engines]

    out = [f"### {PATTERNS.get(family, family)}", "", f"`{family}`", ""]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
    for args, by_alloc in rows.items():
        cells = [args]
        for a in allocators:
            r = by_alloc.get(a)
            miss = cell_missing(r)
            if miss:
                if r is not None and r.error:
                    notes.setdefault(a, r.error)
                cells.append(miss)
            else:
                cells.append(fmt_ns(to_ns(r.value("time_per_op")), r.cv.get("time_per_op")))
        if ratio:
            pa, pt = by_alloc.get("phasealloc"), by_alloc.get("pytorch")
            if pa and pt and not pa.error and not pt.error and pt.value("time_per_op"):
                cells.append(f"{pa.value('time_per_op') / pt.value('time_per_op'):.2f}×")
            else:
                cells.append("-")
        for a in versus:
            r, ref = by_alloc.get(a), by_alloc.get(anchor)
            if r and ref and not r.error and not ref.error and ref.value("time_per_op"):
                cells.append(f"{r.value('time_per_op') / ref.value('time_per_op'):.2f}×")
            else:
                cells.append("-")
        for a in engines:
            r = by_alloc.get(a)
            cells.append(cell_missing(r) or human_bytes(r.value("peak_reserved") or 0))
        for a in engines:
            r = by_alloc.get(a)
            cells.append(cell_missing(r) or fmt_calls(r.value("device_calls")))
        if "peak_live" in extra:
            live = next((r.value("peak_live") for r in by_alloc.values() if r and r.value("peak_live")), None)
            cells.append(human_bytes(live) if live else "-")
        if "reserved_over_live" in extra:
            for a in engines:
                r = by_alloc.get(a)
                v = None if cell_missing(r) else r.value("reserved_over_live")
                cells.append("-" if v is None else f"{v:.2f}")
        if "event_calls" in extra:
            for a in engines:
                r = by_alloc.get(a)
                cells.append(cell_missing(r) or fmt_calls(r.value("event_calls")))
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    return out


def check_targets(runs):
    """(target, verdict, evidence) for each of the issue's targets."""
    checks = []

    def rows(family, allocator):
        return sorted((r for r in runs.values() if r.family == family and r.allocator == allocator),
                      key=lambda r: r.order)

    hot = rows("BM_HotPath", "phasealloc")
    if not hot or any(r.error for r in hot):
        checks.append((f"hot path allocate+free pair <= {HOT_PATH_PAIR_TARGET_NS:.0f} ns (phasealloc, median)",
                       "not measured", "phasealloc rows missing"))
    else:
        pairs = [(r.args, 2 * to_ns(r.value("time_per_op"))) for r in hot]
        met = all(p <= HOT_PATH_PAIR_TARGET_NS for _, p in pairs)
        evidence = "; ".join(f"{a}: {p:.1f} ns" for a, p in pairs)
        checks.append((f"hot path allocate+free pair <= {HOT_PATH_PAIR_TARGET_NS:.0f} ns (phasealloc, median)",
                       "met" if met else "not met", evidence))

    for family, what in (("BM_Mixed", "mixed"), ("BM_RlhfPhases", "RLHF phases")):
        pa = {r.args: r for r in rows(family, "phasealloc")}
        pt = {r.args: r for r in rows(family, "pytorch")}
        target = f"{what}: phasealloc time/op <= {SPEED_RATIO_TARGET}× pytorch's"
        pairs = [(a, pa[a], pt[a]) for a in pa if a in pt and not pa[a].error and not pt[a].error]
        if not pairs:
            checks.append((target, "not measured", "phasealloc or pytorch rows missing"))
            continue
        ratios = [(a, p.value("time_per_op") / t.value("time_per_op")) for a, p, t in pairs]
        met = all(x <= SPEED_RATIO_TARGET for _, x in ratios)
        checks.append((target, "met" if met else "not met", "; ".join(f"{a}: {x:.2f}×" for a, x in ratios)))

    pr = rows("BM_Pr193400", "phasealloc")
    target = f"#193400: phasealloc peak reserved <= {RESERVED_OVER_LIVE_TARGET:.0f}× peak live"
    if not pr or any(r.error or r.value("reserved_over_live") is None for r in pr):
        checks.append((target, "not measured", "phasealloc rows missing"))
    else:
        vals = [(r.args, r.value("reserved_over_live"), r.value("peak_reserved"), r.value("peak_live")) for r in pr]
        met = all(v <= RESERVED_OVER_LIVE_TARGET for _, v, _, _ in vals)
        checks.append((target, "met" if met else "not met",
                       "; ".join(f"{a}: {human_bytes(res)} reserved / {human_bytes(live)} live = {v:.2f}×"
                                 for a, v, res, live in vals)))
    return checks


def check_anchor_targets(runs, anchor, allocators):
    """Every phasealloc allocator against `anchor` (PyTorch's own allocator) on the issue's patterns."""
    checks = []
    for a in [x for x in allocators if x != anchor and x != "glibc"]:
        for family in ANCHOR_FAMILIES:
            mine = {r.args: r for r in runs.values() if r.family == family and r.allocator == a}
            ref = {r.args: r for r in runs.values() if r.family == family and r.allocator == anchor}
            target = f"{PATTERNS.get(family, family).split(':')[0]}: {a} time/op <= {ANCHOR_TARGET}× {anchor}'s"
            pairs = [(k, mine[k], ref[k]) for k in mine if k in ref and not mine[k].error and not ref[k].error]
            if not pairs:
                checks.append((target, "not measured", f"{a} or {anchor} rows missing"))
                continue
            ratios = [(k, m.value("time_per_op") / t.value("time_per_op")) for k, m, t in pairs]
            met = all(x <= ANCHOR_TARGET for _, x in ratios)
            checks.append((target, "met" if met else "not met", "; ".join(f"{k}: {x:.2f}×" for k, x in ratios)))
    return checks


def instruction_lines(counts):
    """The callgrind table: instructions per allocate + free pair and the ratio to glibc's."""
    per_pair = counts.get("instructions_per_pair", {})
    glibc = per_pair.get("glibc")
    out = ["### Instructions per allocate + free pair (callgrind)", "",
           f"`bench/callgrind_pairs.sh` (`{counts.get('pairs', '?')}` pairs of {human_bytes(counts.get('bytes', 0))} "
           f"after one warm-up pair, {counts.get('build_type', '?')} build, commit `{counts.get('commit', '?')}`): "
           "callgrind's instruction count inside the loop, divided by the pairs. A count, not a time: the same on "
           "a loaded machine.", "",
           "| allocator | instructions / pair | / glibc |", "|---|---:|---:|"]
    for key, label in INSTRUCTION_ROWS:
        value = per_pair.get(key)
        if value is None:
            out.append(f"| {label} | missing | |")
            continue
        ratio = f"{value / glibc:.1f}×" if glibc else ""
        out.append(f"| {label} | {value:,.0f} | {ratio} |")
    out.append("")
    per_step = counts.get("instructions_per_mixed_step", {})
    if per_step:
        out += ["Per step of `BM_Mixed`'s pattern (`hot_path_pairs mixed`: free a random block of a ring of 256, "
                "allocate a log-uniform size from 512 B to the maximum, seeded; the engine on the zero-cost model "
                "device): the general path, where the pools' best-fit index searches, splits and merges.", "",
                "| engine, pattern | instructions / step |", "|---|---:|"]
        out += [f"| {label} | {value:,.0f} |" for label, value in per_step.items()]
        out.append("")
    return out


def check_instruction_targets(counts, runs, fast, slow_allocators):
    """<= 400 instructions per pair (engine and C entry point, phasealloc policy) and the hot
    path's time per pair <= 3x glibc's in the same run."""
    checks = []
    per_pair = (counts or {}).get("instructions_per_pair", {})
    target = f"hot path: <= {INSTRUCTIONS_PER_PAIR_TARGET} instructions per allocate + free pair (callgrind, phasealloc policy)"
    rows = [(k, per_pair[k]) for k in ("engine/phasealloc", "capi/phasealloc") if k in per_pair]
    if not rows:
        checks.append((target, "not measured", "no callgrind counts (bench/callgrind_pairs.sh)"))
    else:
        met = all(v <= INSTRUCTIONS_PER_PAIR_TARGET for _, v in rows) and len(rows) == 2
        checks.append((target, "met" if met else "not met", "; ".join(f"{k}: {v:,.0f}" for k, v in rows)))
    for a in slow_allocators:
        target = f"hot path: {a} time per pair <= {GLIBC_TIME_RATIO_TARGET:.0f}× glibc's (same run)"
        mine = {r.args: r for r in runs.values() if r.family == "BM_HotPath" and r.allocator == a}
        ref = {r.args: r for r in runs.values() if r.family == "BM_HotPath" and r.allocator == fast}
        pairs = [(k, mine[k], ref[k]) for k in mine if k in ref and not mine[k].error and not ref[k].error]
        if not pairs:
            checks.append((target, "not measured", f"{a} or {fast} rows missing"))
            continue
        ratios = [(k, m.value("time_per_op") / g.value("time_per_op")) for k, m, g in pairs]
        met = all(x <= GLIBC_TIME_RATIO_TARGET for _, x in ratios)
        checks.append((target, "met" if met else "not met", "; ".join(f"{k}: {x:.2f}×" for k, x in ratios)))
    return checks


def git_commit():
    """The checkout this script lives in (the JSON may be anywhere)."""
    try:
        cwd = os.path.dirname(os.path.abspath(__file__))
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=cwd, capture_output=True, text=True,
                               check=True).stdout.strip()
        return commit + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def machine_lines(context, commit):
    caches = ", ".join(
        f"L{c.get('level')} {c.get('type', '')} {human_bytes(c.get('size', 0))}"
        + (f" (shared by {c['num_sharing']})" if c.get("num_sharing", 0) > 1 else "")
        for c in context.get("caches", []))
    load = context.get("load_avg")
    lines = [
        f"- host: `{context.get('host_name', '?')}`, {context.get('num_cpus', '?')} CPUs at "
        f"{context.get('mhz_per_cpu', '?')} MHz, CPU scaling "
        f"{'on' if context.get('cpu_scaling_enabled') else 'off'}",
        f"- caches: {caches or '?'}",
        f"- load average at start: {', '.join(f'{x:.2f}' for x in load) if load else '?'}",
        f"- build: {context.get('build_type', '?')} ({context.get('compiler', '?')}); Google Benchmark library: "
        f"{context.get('library_build_type', '?')} build",
        f"- git commit: `{commit}`",
        f"- date: {context.get('date', '?')}",
    ]
    return lines


def render(data, commit, anchor=None, counts=None):
    context = data.get("context", {})
    runs = load_runs(data)
    allocators = allocator_order(runs, context)
    reps = max((r.repetitions for r in runs.values()), default=1)
    out = ["## Results", ""]
    out += machine_lines(context, commit)
    out += [
        f"- {reps} repetition(s) per benchmark; every number is the median over them "
        "(±: coefficient of variation of time/op).",
        "- ns/op: CPU time per allocator call (allocate or free; record_stream and set_phase costs are folded "
        "in), on a model device with zero call cost, so it is the allocator's own host time. Two-thread rows: wall "
        "time over both threads' calls. glibc is malloc/free on the host: no device, streams or phases.",
        "- peak reserved: the engine's peak reserved bytes; device calls/iter: reserve + release + map + unmap "
        "per iteration of the timed loop.",
        "",
    ] if anchor is None else [
        f"- {reps} repetition(s) per benchmark; every number is the median over them "
        "(±: coefficient of variation of time/op).",
        f"- `{anchor}`: PyTorch's own CUDACachingAllocator from the wheel's libc10_cuda.so (raw_alloc_with_stream / "
        "raw_delete); `capi`: phasealloc's C entry point (phasealloc_malloc / phasealloc_free, what "
        "CUDAPluggableAllocator calls) with its default policy. Both run on the CUDA device, here the simulated "
        "GPU (simcuda), and pay its device calls (cudaMalloc, cuMemMap, ...: host work in the simulator, not a "
        "GPU's cost). `phasealloc`: the engine alone on the zero-cost model device. glibc: malloc/free on the host.",
        "- ns/op: CPU time per allocator call; device calls/iter: the allocator's own count (torch: cudaMalloc + "
        "cudaFree, each expandable map counted as an alloc; phasealloc: reserve + release + map + unmap).",
        "",
    ]
    if counts is not None:
        out += instruction_lines(counts)
    notes = {}
    for family in list(PATTERNS) + sorted({r.family for r in runs.values()} - set(PATTERNS)):
        out += pattern_table(family, runs, allocators, notes, anchor)
    if notes:
        out += ["Missing allocators:", ""]
        out += [f"- `{a}`: {msg}" for a, msg in notes.items()]
        out.append("")
    out += ["### Targets", "", "| target | verdict | measured |", "|---|---|---|"]
    checks = check_targets(runs) if anchor is None else check_anchor_targets(runs, anchor, allocators)
    if counts is not None:
        engines = [a for a in allocators if a != "glibc" and a != anchor and "glibc" in allocators]
        checks += check_instruction_targets(counts, runs, "glibc", [a for a in engines if a in ("phasealloc", "capi")])
    out += [f"| {t} | **{v}** | {e} |" for t, v, e in checks]
    out.append("")
    return "\n".join(out), checks


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", help="Google Benchmark JSON output of phasealloc_bench")
    parser.add_argument("--readme", help="write the table between the results markers of this file")
    parser.add_argument("--commit", help="git commit to show (default: git rev-parse --short HEAD)")
    parser.add_argument("--anchor", help="the allocator every other is compared with (phasealloc_torch_bench: torch)")
    parser.add_argument("--markers", default="results", help="marker name in the README (default: results)")
    parser.add_argument("--instructions", help="JSON of bench/callgrind_pairs.sh: adds the instructions-per-pair "
                        "table and its targets")
    args = parser.parse_args()
    with open(args.json, encoding="utf-8") as f:
        data = json.load(f)
    counts = None
    if args.instructions:
        with open(args.instructions, encoding="utf-8") as f:
            counts = json.load(f)
    table, checks = render(data, args.commit or git_commit(), args.anchor, counts)
    if args.anchor:
        table = table.replace("## Results", f"## Against PyTorch's own allocator ({args.anchor})", 1)
    if args.readme:
        replace_section(args.readme, args.markers, table)
    else:
        print(table)
    for target, verdict, evidence in checks:
        print(f"{verdict:>12}: {target} ({evidence})", file=sys.stderr)


if __name__ == "__main__":
    main()
