"""Readable reports: the per-phase table of phasealloc.summary() and torch.cuda.memory_summary()."""


def format_bytes(n):
    """PyTorch's format: "512 B", "1.50 MiB", "2.00 GiB"."""
    n = int(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return "%.2f %s" % (n / scale, unit)
    return "%d B" % n


_COLUMNS = (
    ("phase", 14),
    ("intervals", 9),
    ("peak alloc", 12),
    ("peak reserved", 13),
    ("frag", 7),
    ("allocs", 9),
    ("frees", 9),
    ("dev alloc", 9),
    ("dev free", 9),
    ("released", 12),
    ("ooms", 5),
)


def phase_table(raw):
    """The per-phase table of one device's stats object (phasealloc_stats_json)."""
    info = raw.get("phasealloc", {})
    title = "phasealloc, device %s (%s, policy %s), current phase '%s'" % (
        info.get("device_index", "?"), info.get("device", "no engine yet"), info.get("policy", "-"),
        info.get("current_phase", "-"))
    header = " ".join(name.rjust(width) if i else name.ljust(width) for i, (name, width) in enumerate(_COLUMNS))
    lines = [title, "-" * len(header), header, "-" * len(header)]
    for p in raw.get("phases", []):
        if p.get("intervals", 0) == 0 and p.get("num_allocs", 0) == 0:
            continue
        cells = (
            p["name"], str(p["intervals"]), format_bytes(p["peak_allocated_bytes"]),
            format_bytes(p["peak_reserved_bytes"]), "%.1f%%" % (100.0 * p["fragmentation"]),
            str(p["num_allocs"]), str(p["num_frees"]), str(p["num_device_alloc"]), str(p["num_device_free"]),
            format_bytes(p["released_bytes"]), str(p["num_ooms"]),
        )
        lines.append(" ".join(c.rjust(w) if i else c.ljust(w) for i, (c, (_, w)) in enumerate(zip(cells, _COLUMNS))))
    lines.append("-" * len(header))
    lines.append("now: %s allocated, %s reserved; peak %s allocated, %s reserved; misuse %d" % (
        format_bytes(raw.get("allocated_bytes.all.current", 0)), format_bytes(raw.get("reserved_bytes.all.current", 0)),
        format_bytes(raw.get("allocated_bytes.all.peak", 0)), format_bytes(raw.get("reserved_bytes.all.peak", 0)),
        raw.get("num_misuse", 0) + info.get("interpose_misuse", 0)))
    lines.append("fragmentation = 1 - peak allocated / peak reserved within the phase")
    return "\n".join(lines)
