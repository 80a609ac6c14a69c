#!/bin/sh
# run_tests.sh LIB NATIVE_THREAD_SO [UNIT_BINARIES…] — the recorder's tests: C++ unit binaries (sanitized)
# and the Python-driven tests against the real allocator .so (sim backend). Prints one closing line
# "N passed, N failed" and exits non-zero on any failure. Each test writes one results line (Note [Results
# format] in test/README.md): the binaries through check.h, the Python tests through common.main; a run
# that dies without its own failing line gets one here.
lib="$1"; helper="$2"; shift 2
here=$(cd "$(dirname "$0")" && pwd)
emit="$here/../../tools/emit-result.sh"
pass=0; fail=0
log=$(mktemp); trap 'rm -f "$log"' EXIT
for bin in "$@"; do
  echo "== $bin"
  TSAN_OPTIONS="halt_on_error=1" "$bin" > "$log" 2>&1; st=$?; cat "$log"
  line=$(tail -n 1 "$log")
  p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
  f=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
  if [ -z "$p" ]; then p=0; f=1; sh "$emit" "recorder/$(basename "$bin"): crashed" fail "exit status $st; see the log above"; fi
  if [ "$st" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  pass=$((pass + p)); fail=$((fail + f))
done
for t in "$here"/test_*.py; do
  echo "== $(basename "$t")"
  GPUMEM_TEST_SO="$lib" GPUMEM_NATIVE_THREAD_SO="$helper" python3 "$t" -v > "$log" 2>&1; st=$?; cat "$log"
  ok=$(grep -c ' \.\.\. ok$' "$log")
  bad=$(grep -c ' \.\.\. \(FAIL\|ERROR\)$' "$log")
  skipped=$(grep -c ' \.\.\. skipped' "$log")
  if [ "$st" -ne 0 ] && [ "$bad" -eq 0 ]; then
    bad=1; sh "$emit" "recorder/$(basename "$t" .py): exit status" fail "exited $st with no failing test; see the log above"
  fi
  if [ "$skipped" -ne 0 ]; then bad=$((bad + skipped)); fi  # the helper is always built here: a skip is a failure
  pass=$((pass + ok)); fail=$((fail + bad))
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
