#!/usr/bin/env bash
# phasealloc export, read by PyTorch's own torch.cuda._memory_viz (the real wheel, on the simulated
# GPU): for each policy, `python -m torch.cuda._memory_viz stats` reports the reserved and allocated
# bytes `phasealloc replay --json` reports at the end of the trace (total_reserved = reserved,
# total_allocated = the requested bytes of the allocated blocks), exactly as well as in its own
# formatting; `trace` puts every allocation inside a segment (no "MEM[" lines; whole-segment
# policies only: memory_viz's text trace does not follow segment_map); trace_plot and
# segment_plot write their HTML.
#
# Usage: export_memory_viz_test.sh PHASEALLOC PYTHON SIMCUDA_DIR LAUNCHER TRACE OUT_DIR
set -euo pipefail

cli=$1
python=$2
sim_dir=$3
launcher=$4
trace=$5
out_dir=$6

rm -rf "$out_dir"
mkdir -p "$out_dir"
export PHASEALLOC_SIMCUDA_DIR=$sim_dir SIMCUDA_GPU=quiet:1
viz() { "$launcher" --sim-gpu --native -- "$python" "$@"; }

for policy in pytorch phasealloc; do
  dir="$out_dir/$policy"
  mkdir -p "$dir"
  "$cli" export "$trace" "$dir/export.pickle" --policy "$policy"
  "$cli" replay "$trace" --policy "$policy" --json --quiet >"$dir/replay.json"
  viz -m torch.cuda._memory_viz stats "$dir/export.pickle" >"$dir/stats.txt"
  viz -m torch.cuda._memory_viz trace_plot "$dir/export.pickle" -o "$dir/trace_plot.html"
  viz -m torch.cuda._memory_viz segment_plot "$dir/export.pickle" -o "$dir/segment_plot.html"
  if [ "$policy" = pytorch ]; then
    viz -m torch.cuda._memory_viz trace "$dir/export.pickle" >"$dir/trace.txt"
  fi
  # segsum again with memory_viz's byte formatting made exact, to compare to the byte.
  viz -c 'import pickle, sys
from torch.cuda import _memory_viz as v
v.Bytes.__repr__ = lambda self: str(self.value)
print(v.segsum(pickle.load(open(sys.argv[1], "rb"))))' "$dir/export.pickle" >"$dir/stats_exact.txt"

  "$python" - "$dir" "$policy" <<'PY'
import json, os, re, sys
d, policy = sys.argv[1], sys.argv[2]
r = json.load(open(os.path.join(d, "replay.json")))["results"][0]
reserved, allocated = r["final_reserved_bytes"], r["final_requested_bytes"]

def fmt(num):  # torch.cuda._memory_viz._format_size
    for unit in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"]:
        if abs(num) < 1024.0:
            return f"{num:3.1f}{unit}B"
        num /= 1024.0
    return f"{num:.1f}YiB"

def field(text, name):
    m = re.search(rf"^{name}: (\S+)", text, re.M)
    assert m, f"{policy}: no '{name}:' line in memory_viz's output:\n{text[-2000:]}"
    return m.group(1)

stats = open(os.path.join(d, "stats.txt")).read()
exact = open(os.path.join(d, "stats_exact.txt")).read()
assert field(stats, "total_reserved") == fmt(reserved), (policy, field(stats, "total_reserved"), reserved)
assert field(stats, "total_allocated") == fmt(allocated), (policy, field(stats, "total_allocated"), allocated)
assert int(field(exact, "total_reserved")) == reserved, (policy, field(exact, "total_reserved"), reserved)
assert int(field(exact, "total_allocated")) == allocated, (policy, field(exact, "total_allocated"), allocated)
for html in ("trace_plot.html", "segment_plot.html"):
    assert os.path.getsize(os.path.join(d, html)) > 100000, (policy, html)
if policy == "pytorch":
    text = open(os.path.join(d, "trace.txt")).read()
    allocs = len(re.findall(r"^\w+ = seg_|^\w+ = [a-z]+\d*\[", text, re.M))
    outside = len(re.findall(r"^\w+ = MEM\[", text, re.M))
    assert allocs > 0 and outside == 0, (policy, allocs, outside)
print(f"{policy}: memory_viz stats total_reserved {field(exact, 'total_reserved')} B "
      f"({field(stats, 'total_reserved')}), total_allocated {field(exact, 'total_allocated')} B "
      f"({field(stats, 'total_allocated')}), segments {field(stats, 'segments')}; "
      f"phasealloc replay: final reserved {reserved} B, final requested {allocated} B, "
      f"peak reserved {r['peak_reserved_bytes']} B")
PY
done
