#!/usr/bin/env python3
"""Builds the policy results table (the evidence for the policies) from `phasealloc replay --json` outputs.

Usage: policy_table.py [--ours SPEC] OUT.md REPLAY.json [REPLAY.json ...]
Each input is one trace replayed with policies that include `pytorch`,
`pytorch:expandable_segments:True` and the default `phasealloc` (or, with --ours, the policy whose
effective spec is SPEC, e.g. `phasealloc:release:adaptive,lifetime:true`: the targets of a variant). Checks the targets and says
met / not met for each; it never edits a number.
"""
import json
import subprocess
import sys


def gib(n):
    return f"{n / 2**30:.2f} GiB"


EMPTY_CACHE = "pytorch + empty_cache() at phases"


def short(policy):
    return policy


def phase_peak(result, name):
    return max((p["peak_reserved_bytes"] for p in result.get("phases", []) if p["name"] == name), default=0)


def phase_mean(result, name):
    """Time-weighted mean reserved while the phase ran (the replay's colocation headroom)."""
    phases = result.get("colocation", {}).get("phases", [])
    return next((p["reserved_bytes.all.mean"] for p in phases if p["name"] == name), 0)


def held(result, name):
    """'peak / mean' reserved while the phase ran."""
    return f"{gib(phase_peak(result, name))} / {gib(phase_mean(result, name))}"


def main():
    args = sys.argv[1:]
    ours_spec = None
    if args[:1] == ["--ours"]:
        ours_spec, args = args[1], args[2:]
    out_path, inputs = args[0], args[1:]
    docs = [json.load(open(p)) for p in inputs]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [f"Measured at commit `{commit}` on the simulated device (80 GiB); `floor` is the peak of live",
             "requested bytes, below which no allocator can go. Fragmentation = 1 - peak allocated / peak",
             "reserved. Device calls = reserve + release + map + unmap; est. time uses the replay's",
             "modelled cost per call (not measured).", "",
             "| trace | policy | peak reserved | vs pytorch | frag | device calls | est. device time | OOMs |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    checks = []
    phase_rows = []
    real_rows = []  # (trace, pytorch, expandable, phasealloc) for the real-code table
    for d in docs:
        rows = {short(r["policy"]): r for r in d["results"]}
        base = rows["pytorch"]
        for name, r in rows.items():
            lines.append(f"| {d['trace']} (floor {gib(d['floor_bytes'])}) | `{name}` | {gib(r['peak_reserved_bytes'])} | "
                         f"{r['peak_reserved_bytes'] / base['peak_reserved_bytes']:.3f} | {100 * r['fragmentation']:.1f}% | "
                         f"{r['device_calls']} | {r['modeled_device_time_ns'] / 1e6:.1f} ms | {r['ooms']} |")
        if ours_spec is not None:
            ours = rows[ours_spec]
        else:
            ours = rows["phasealloc:release:adaptive"] if "phasealloc:release:adaptive" in rows else rows["phasealloc"]
        expandable = rows["pytorch:expandable_segments:True"]
        real = d["trace"].endswith(".patrace.gz")  # tools/data/real: recorded from real PyTorch code
        synthetic = "ppo-" in d["trace"] and not real
        if real or synthetic:  # the targets: per real-code trace and per preset
            real_rows.append((d, base, expandable, ours))
        if synthetic:
            phase_rows.append((d, base, expandable, rows.get(EMPTY_CACHE), ours))
        checks.append((d["trace"], "peak reserved <= pytorch", ours["peak_reserved_bytes"] <= base["peak_reserved_bytes"]))
        if synthetic:
            ratio = ours["peak_reserved_bytes"] / base["peak_reserved_bytes"]
            floor_ratio = d["floor_bytes"] / base["peak_reserved_bytes"]
            checks.append((d["trace"], f"peak reserved <= 0.75 x pytorch (is {ratio:.3f}; the floor is {floor_ratio:.3f})",
                           ratio <= 0.75))
            checks.append((d["trace"], "peak reserved <= expandable_segments",
                           ours["peak_reserved_bytes"] <= expandable["peak_reserved_bytes"]))
            checks.append((d["trace"], f"fragmentation <= 3% (is {100 * ours['fragmentation']:.1f}%)",
                           ours["fragmentation"] <= 0.03))
            calls = ours["device_calls"] / max(1, base["device_calls"])
            checks.append((d["trace"], f"device calls <= 2 x pytorch (is {calls:.2f}x)", calls <= 2.0))
            if EMPTY_CACHE in rows:
                zhou = rows[EMPTY_CACHE]
                checks.append((d["trace"], f"peak reserved <= pytorch + empty_cache() at phases "
                               f"(is {ours['peak_reserved_bytes'] / zhou['peak_reserved_bytes']:.3f}x)",
                               ours["peak_reserved_bytes"] <= zhou["peak_reserved_bytes"]))
    lines += ["", "Waste is peak reserved minus the floor; `removed` is the share of pytorch's waste a policy",
              "removes (STAlloc's measure). Generation and inference columns are what the job holds while",
              "that phase runs, peak / time-weighted mean reserved (the rest of the device is what a colocated",
              "inference engine could use).", "",
              "| trace | policy | waste | removed | generation | inference |", "|---|---|---:|---:|---:|---:|"]
    for d, base, expandable, zhou, ours in phase_rows:
        base_waste = base["peak_reserved_bytes"] - d["floor_bytes"]
        for r in (base, zhou, expandable, ours):
            if r is None:
                continue
            waste = r["peak_reserved_bytes"] - d["floor_bytes"]
            removed = f"{100 * (1 - waste / base_waste):.0f}%" if base_waste > 0 else "-"
            lines.append(f"| {d['trace']} | `{r['policy']}` | {gib(waste)} | {removed} | "
                         f"{held(r, 'generation')} | {held(r, 'inference')} |")
    if real_rows:
        lines += ["", "The targets, on the real-code traces (`tools/data/real`, recorded from",
                  "`bench/gpu/rlhf_job.py` on the simulated GPU) and on the presets. Waste = peak reserved - peak",
                  "allocated of the same allocator; removed = 1 - waste(phasealloc) / waste(pytorch). Device calls =",
                  "map + unmap, or malloc + free, over the whole trace. Reserved while generating: peak / time-weighted",
                  "mean reserved while the `generation` phase runs (the replay's colocation headroom); the ratio is",
                  "phasealloc's peak over expandable segments' peak.", "",
                  "| trace | waste pytorch | waste expandable | waste phasealloc | removed | reserved phasealloc / "
                  "expandable | calls phasealloc / pytorch | generating: expandable | generating: phasealloc | "
                  "generating ratio |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for d, base, expandable, ours in real_rows:
            waste = {k: r["peak_reserved_bytes"] - r["peak_allocated_bytes"] for k, r in
                     (("pt", base), ("ex", expandable), ("pa", ours))}
            removed = 1 - waste["pa"] / waste["pt"] if waste["pt"] > 0 else None
            vs_exp = ours["peak_reserved_bytes"] / expandable["peak_reserved_bytes"]
            calls = ours["device_calls"] / max(1, base["device_calls"])
            gen_exp, gen_ours = phase_peak(expandable, "generation"), phase_peak(ours, "generation")
            gen_ratio = gen_ours / gen_exp if gen_exp > 0 else None
            lines.append(f"| {d['trace']} | {gib(waste['pt'])} | {gib(waste['ex'])} | {gib(waste['pa'])} | "
                         f"{'-' if removed is None else f'{100 * removed:.0f}%'} | {vs_exp:.4f} | {calls:.2f}x | "
                         f"{held(expandable, 'generation')} | {held(ours, 'generation')} | "
                         f"{'-' if gen_ratio is None else f'{gen_ratio:.3f}'} |")
            checks.append((d["trace"], "waste removed >= 90% (is " +
                           ("-" if removed is None else f"{100 * removed:.0f}%") + ")",
                           removed is not None and removed >= 0.90))
            if d["trace"].endswith(".patrace.gz"):  # the presets have this check above
                checks.append((d["trace"], f"peak reserved <= expandable_segments (is {vs_exp:.4f}x)",
                               ours["peak_reserved_bytes"] <= expandable["peak_reserved_bytes"]))
            checks.append((d["trace"], f"device calls <= 1.3 x pytorch (is {calls:.2f}x)", calls <= 1.3))
            if gen_ratio is not None:  # every PPO/GRPO trace has a generation phase
                checks.append((d["trace"], f"reserved while generating <= 0.8 x expandable_segments "
                               f"(is {gen_ratio:.3f}x)", gen_ratio <= 0.8))
    lines += ["", "| trace | target (default `phasealloc`) | |", "|---|---|---|"]
    lines += [f"| {t} | {what} | {'met' if ok else '**not met**'} |" for t, what, ok in checks]
    open(out_path, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
