#!/usr/bin/env bash
# Probe (not a test): where a ResNet-50 step's host time goes, natively and under `gpumem run` (default mode),
# by a flat CPU profile of the workload's threads (perf's cpu-clock: the lent VM has no PMU), per step.
# perf is carried from this machine: .carry/perfpkg/perf.tar.xz (Debian's linux-perf with its libraries and
# loader, so that it runs on any glibc). Writes $OUT/perf/<config>.txt (report by thread, library and symbol)
# (<n>-<config>.txt, n counting the profiles: CONFIGS may repeat a configuration, to interleave them) and a
# summary.txt line per profile: the steps inside the window and their median time. Our threads are named
# gpumem-* (Note [Thread names]), so the report by thread (comm) tells their work from the workload's.
#   bash test/gpu/probes/perf_host.sh [seconds per profile, default 5]   (CONFIGS="native gpumem-auto" by default)
# A gpumem configuration may carry `gpumem run` options after a colon, comma-separated (the launcher sets every
# GPUMEM_* variable from its options, so variables of ours in this environment would not reach the workload):
# gpumem-auto:--record-steps=1 or gpumem-auto:--figures-only.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$(mktemp -d)}
W=${1:-5}
mkdir -p "$OUT/perf" /tmp/perfpkg
tar xJf .carry/perfpkg/perf.tar.xz -C /tmp/perfpkg
PERF=(/tmp/perfpkg/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perfpkg/perf/lib /tmp/perfpkg/perf/perf)
export PYTHONPATH=$PWD/native/python GPUMEM_WATCHDOG_S=$((W + 100))
python3 -m gpumem build-observer > /dev/null 2>&1
i=0
for spec in ${CONFIGS:-native gpumem-auto}; do
  c=${spec%%:*}; settings=""; [ "$c" = "$spec" ] || settings=${spec#*:}
  i=$((i + 1)); r=$i-$(echo "$spec" | tr ':,=' '_+-' | sed 's/_--/_/g')
  pidf=/tmp/perf-$r.pid; rm -f "$pidf"
  if [ $c = native ]; then
    python3 ${PROBE_WORKLOAD:-test/gpu/probes/perf_workload.py} "$pidf" $((W + 2)) > "$OUT/perf/$r.out" 2>&1 &
  else
    python3 -m gpumem run --allocator-so dist/native/libgpumem_allocator.so --out /tmp/perf-session $([ $c = gpumem-lens ] && echo --allocator lens) ${settings//,/ } -- \
      python3 ${PROBE_WORKLOAD:-test/gpu/probes/perf_workload.py} "$pidf" $((W + 2)) > "$OUT/perf/$r.out" 2>&1 &
  fi
  bg=$!
  for _ in $(seq 1200); do [ -f "$pidf" ] && break; sleep 0.1; done
  [ -f "$pidf" ] || { echo "$r: no pid"; kill $bg; continue; }
  pid=$(cat "$pidf")
  t0=$(date +%s.%N)
  "${PERF[@]}" record -q -e cpu-clock -F 4999 -o /tmp/perf-$r.data -p "$pid" -- sleep "$W" 2> /dev/null
  t1=$(date +%s.%N)
  wait $bg
  window() { awk -v a="$t0" -v b="$t1" -v c="$1" '$1 == "STEP" && $2 > a && $2 < b {print $c}' "$OUT/perf/$r.out"; }
  median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
  n=$(window 2 | wc -l)
  med=$(window 3 | median)
  host=$(window 4 | median)  # host time: until step() returned (perf_workload.py's fourth column)
  echo "$r steps $n median_ms $med host_ms $host" | tee -a "$OUT/perf/summary.txt"
  {
    echo "steps in window: $n, median step ms: $med, samples at 4999 Hz"
    "${PERF[@]}" report -i /tmp/perf-$r.data --stdio --sort comm -n 2>/dev/null | grep -v '^#' | grep . | head -12
    # by thread id: Python threads (the stats poll) share the process's comm, so the comm report adds them to main's
    "${PERF[@]}" report -i /tmp/perf-$r.data --stdio --sort pid -n 2>/dev/null | grep -v '^#' | grep . | head -12
    "${PERF[@]}" report -i /tmp/perf-$r.data --stdio --sort comm,dso -n 2>/dev/null | grep -v '^#' | grep . | head -30
    "${PERF[@]}" report -i /tmp/perf-$r.data --stdio --sort comm,dso,sym -n 2>/dev/null | grep -v '^#' | grep . | head -300
  } >> "$OUT/perf/$r.txt"
done
