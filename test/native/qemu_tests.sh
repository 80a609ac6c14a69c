#!/bin/sh
# qemu_tests.sh PART "COMMAND [ARGS]"... — runs ARM64 test binaries under qemu-user with Debian's ARM64 libraries
# (Note [ARM64] in native/floor/README.md): each command's cases report through check.h, their names prefixed
# "arm64/"; a command that dies before its closing line counts one failure. A command written
# "--same=FILE COMMAND [ARGS]" is one case instead: its output must be FILE's bytes (what the x64 build printed).
# Prints one closing line "N passed, N failed" (summed) and exits non-zero on any failure.
part="$1"; shift
emit="$(dirname "$0")/../tools/emit-result.sh"
sysroot="${GPUMEM_ARM64_SYSROOT:-/usr/aarch64-linux-gnu}"
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64)
if [ -z "$qemu" ]; then
  echo "FAIL arm64: qemu-user is missing (apt-get install -y qemu-user-static)"
  sh "$emit" "arm64/$part: qemu-user" fail "qemu-aarch64 not found: apt-get install -y qemu-user-static"
  echo "0 passed, 1 failed"; exit 1
fi
export GPUMEM_RESULTS_PREFIX=arm64/
total_pass=0; total_fail=0
log=$(mktemp); trap 'rm -f "$log"' EXIT
for cmd in "$@"; do
  echo "== ARM64 under $(basename "$qemu"): $cmd"
  start=$(date +%s%3N)
  case "$cmd" in --same=*)
    same="${cmd%% *}"; same="${same#--same=}"; cmd="${cmd#* }"
    name="arm64/$part/$(basename "${cmd%% *}") $(echo "$cmd" | cut -d' ' -f2): the same bytes as x64's $(basename "$same")"
    # shellcheck disable=SC2086 # a command and its arguments, split on spaces
    "$qemu" -L "$sysroot" $cmd > "$log.out" 2> "$log"; st=$?
    ms=$(( $(date +%s%3N) - start ))
    if [ "$st" -eq 0 ] && cmp -s "$same" "$log.out"; then
      echo "ok   $name ($(wc -c < "$same") bytes, $(grep -c '^== ' "$same") files)"; total_pass=$((total_pass + 1))
      sh "$emit" "$name" pass "$(wc -c < "$same") bytes" $ms
    else
      first=$(cmp "$same" "$log.out" 2>&1 | head -n 1)
      echo "FAIL $name: exit status $st; $first"; cat "$log"
      diff "$same" "$log.out" | head -n 6 | cut -c1-300
      total_fail=$((total_fail + 1))
      sh "$emit" "$name" fail "exit status $st; $first" $ms
    fi
    rm -f "$log.out"; continue ;;
  esac
  # shellcheck disable=SC2086 # a command and its arguments, split on spaces
  "$qemu" -L "$sysroot" $cmd > "$log" 2>&1; st=$?
  cat "$log"
  line=$(tail -n 1 "$log")
  p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
  f=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
  if [ -z "$p" ]; then
    p=0; f=1
    sh "$emit" "arm64/$part/$(basename "${cmd%% *}"): crashed" fail "exit status $st under qemu; see the log above" $(( $(date +%s%3N) - start ))
  fi
  if [ "$st" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
done
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
