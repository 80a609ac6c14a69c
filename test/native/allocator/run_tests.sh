#!/bin/sh
# run_tests.sh BUILD_DIR LIB — runs the allocator's test binaries and checks the .so's exports; prints
# one closing line "N passed, N failed" (summed) and exits non-zero on any failure. Each check writes one
# results line (Note [Results format] in test/README.md): the binaries through check.h, the shell checks
# here through emit-result.sh.
build="$1"; lib="$2"
emit="$(dirname "$0")/../../tools/emit-result.sh"
total_pass=0; total_fail=0
tally() {  # tally LOG STATUS: add the binary's closing counts (a crash counts as one failure)
  line=$(tail -n 1 "$1")
  p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
  f=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
  # A binary that died before its closing line wrote no line for the case it died in: one for the crash.
  if [ -z "$p" ]; then p=0; f=1; sh "$emit" "allocator/$(basename "$3"): crashed" fail "exit status $2; see the log above"; fi
  if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
}
log=$(mktemp); trap 'rm -f "$log"' EXIT
echo "== ASan+UBSan: $build/test_asan"
"$build/test_asan" > "$log" 2>&1; st=$?; cat "$log"; tally "$log" $st "$build/test_asan"
echo "== TSan: $build/stress_tsan"
TSAN_OPTIONS="halt_on_error=1" "$build/stress_tsan" > "$log" 2>&1; st=$?; cat "$log"; tally "$log" $st "$build/stress_tsan"
echo "== the library's exceptions in a host with the system's libstdc++: $build/oom_host"
"$build/oom_host" "$lib" > "$log" 2>&1; st=$?; cat "$log"; tally "$log" $st "$build/oom_host"
echo "== exports of $lib"
# Only the C API may be visible: C++ internals leaking would clash with PyTorch's own symbols.
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^gpumem_' | grep -v '^_init$\|^_fini$' || true)
have=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -c '^gpumem_')
if [ -z "$bad" ] && [ "$have" -ge 20 ]; then
  echo "ok   exports_only_the_c_api ($have gpumem_* symbols)"; total_pass=$((total_pass + 1))
  sh "$emit" allocator/exports_only_the_c_api pass
else
  echo "FAIL exports_only_the_c_api: unexpected: $bad (gpumem_* count $have)"; total_fail=$((total_fail + 1))
  sh "$emit" allocator/exports_only_the_c_api fail "unexpected exports: $bad (gpumem_* count $have)"
fi
undef=$(nm -D --undefined-only "$lib" | awk '{print $2}' | grep -i '^cu\|^Py' || true)
if [ -z "$undef" ]; then
  echo "ok   links_nothing_from_cuda_or_python"; total_pass=$((total_pass + 1))
  sh "$emit" allocator/links_nothing_from_cuda_or_python pass
else
  echo "FAIL links_nothing_from_cuda_or_python: $undef"; total_fail=$((total_fail + 1))
  sh "$emit" allocator/links_nothing_from_cuda_or_python fail "undefined: $undef"
fi
echo "== one direction: module graph and the core alone"
# Note [Module graph] in native/allocator/README.md: no cycle among modules (include and link edges),
# and the core, linked alone, names nothing of the recorder.
alloc=$(cd "$(dirname "$0")/../../../native/allocator" && pwd)
if python3 "$alloc/tools/module_graph.py" --src "$alloc/src" --objs "$build/lib" > "$log" 2>&1; then
  echo "ok   module_graph_has_no_cycle ($(head -n 1 "$log"))"; total_pass=$((total_pass + 1))
  sh "$emit" allocator/module_graph_has_no_cycle pass "$(head -n 1 "$log")"
else
  cat "$log"; echo "FAIL module_graph_has_no_cycle"; total_fail=$((total_fail + 1))
  sh "$emit" allocator/module_graph_has_no_cycle fail "$(tail -n 3 "$log")"
fi
if sh "$alloc/tools/check_core_alone.sh" "$build/graph/core.o" > "$log" 2>&1; then
  cat "$log"; total_pass=$((total_pass + 1))
  sh "$emit" allocator/core_alone_references_no_recorder pass
else
  cat "$log"; total_fail=$((total_fail + 1))
  sh "$emit" allocator/core_alone_references_no_recorder fail "$(head -n 4 "$log")"
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
