#!/usr/bin/env bash
# Renders an HTML report of synthetic results in headless Chromium and checks what a reader gets:
# a non-trivial screenshot, no console messages (no script errors, no failed loads), and a DOM
# that holds the charts. Exits 77 (skipped) when chromium is not installed; tools/dev.sh installs it.
#
# Usage: report_render_test.sh REPORT_RENDER_MAIN OUT_DIR
set -euo pipefail

driver=$1
out_dir=$2

browser=""
for candidate in chromium chromium-browser; do
  if command -v "$candidate" >/dev/null 2>&1; then
    browser=$candidate
    break
  fi
done
if [ -z "$browser" ]; then
  if [ "${PHASEALLOC_NO_SKIP:-}" = 1 ]; then  # tools/dev.sh test: a skip is a failure there
    echo "FAIL: chromium not installed (tools/dev.sh deps installs it), and PHASEALLOC_NO_SKIP=1"
    exit 1
  fi
  echo "SKIP: chromium not installed (tools/dev.sh deps installs it)"
  exit 77
fi

rm -rf "$out_dir"
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
profiles=$(mktemp -d)
trap 'rm -rf "$profiles"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Chromium without network, extensions or first-run work; each run gets its own profile.
run_browser() {  # name, chromium arguments...
  local name=$1
  shift
  timeout 90 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profiles/$name" --enable-logging=stderr --v=0 "$@" 2>"$out_dir/$name.log"
}

# Page-level console messages (script errors, failed loads) are logged as ...:CONSOLE...
no_console_messages() {  # log file
  if grep -E ':CONSOLE|Uncaught|Failed to load resource' "$1"; then
    fail "console messages in $1"
  fi
}

"$driver" "$out_dir/report.html" full || fail "report_render_main full"
"$driver" "$out_dir/empty.html" empty || fail "report_render_main empty"

# 1. Screenshot: exists, larger than 20 KB, and more than a handful of colours.
run_browser screenshot --screenshot="$out_dir/report.png" --window-size=1400,2000 \
  "file://$out_dir/report.html" >/dev/null || fail "chromium --screenshot exited with $?"
[ -f "$out_dir/report.png" ] || fail "no screenshot written"
size=$(stat -c %s "$out_dir/report.png")
[ "$size" -gt 20000 ] || fail "screenshot is only $size bytes"
no_console_messages "$out_dir/screenshot.log"

python3 - "$out_dir/report.png" <<'PY' || fail "screenshot check"
import struct, sys, zlib

def pixels(path):
    """Decodes an 8-bit RGB or RGBA PNG (what Chromium writes) with the standard library."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, colour_type = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour_type not in (2, 6):
                sys.exit(f"unexpected PNG format: depth {depth}, colour type {colour_type}")
            bpp = 3 if colour_type == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                line[i] = (line[i] + ((line[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        yield from (bytes(line[i:i + 3]) for i in range(0, stride, bpp))
        prev = line

colours = set(pixels(sys.argv[1]))
print(f"screenshot: {len(colours)} distinct colours")
if len(colours) < 32:
    sys.exit(f"only {len(colours)} distinct colours: the page did not render")
PY

# 2. DOM after layout: the charts and tables are there, the policy names escaped, no error page.
run_browser dom --dump-dom "file://$out_dir/report.html" >"$out_dir/report.dom.html" || fail "chromium --dump-dom"
no_console_messages "$out_dir/dom.log"
dom="$out_dir/report.dom.html"
grep -q '<svg[^>]*id="timeline"' "$dom" || fail "no timeline <svg> in the DOM"
grep -q '<svg[^>]*id="phase-bars"' "$dom" || fail "no phase bar <svg> in the DOM"
grep -q '<table class="results"' "$dom" || fail "no results table in the DOM"
grep -qF 'tag=&lt;tight &amp; "cap"&gt;' "$dom" || fail "the escaped policy name is missing from the DOM"
for phase in generation inference training optimizer; do
  grep -q ">$phase</text>" "$dom" || fail "phase $phase is not labelled"
done
if grep -q 'chrome-error\|<tight' "$dom"; then fail "error page or unescaped text in the DOM"; fi

# 3. The edge case renders too.
run_browser empty --dump-dom "file://$out_dir/empty.html" >"$out_dir/empty.dom.html" || fail "chromium --dump-dom empty"
no_console_messages "$out_dir/empty.log"
grep -q 'The trace has no events' "$out_dir/empty.dom.html" || fail "the empty report does not say so"

echo "PASS: report rendered ($size bytes of PNG), DOM checked; files in $out_dir"
