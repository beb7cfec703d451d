# Sourced by the tests/cli/*_case.sh scripts: their common check.
#
# expect STATUS PATTERN COMMAND...: runs COMMAND (expect_seconds at most, default 120; with
# expect_memory_kib set, under that virtual-memory limit), checks its exit status and that its
# output matches the extended regular expression PATTERN; a failure is printed and counted in
# `failures`, which the caller starts at 0 and checks at the end.
expect() {
  want=$1 pattern=$2
  shift 2
  if [ -n "${expect_memory_kib:-}" ]; then
    out=$( (ulimit -v "$expect_memory_kib"; timeout "${expect_seconds:-120}" "$@") 2>&1)
  else
    out=$(timeout "${expect_seconds:-120}" "$@" 2>&1)
  fi
  rc=$?
  if [ "$rc" != "$want" ] || ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
    echo "FAIL: $*"
    echo "  expected exit $want and /$pattern/, got exit $rc:"
    printf '%s\n' "$out" | head -40 | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok: $* -> exit $rc"
  fi
}
