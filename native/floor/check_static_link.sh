#!/bin/sh
# check_static_link.sh — the floor's shims link where the compiler links libstdc++ statically (Note [Binary floor] in
# README.md): a GCC installed with no shared libstdc++ beside it pulls libstdc++.a's members, and one of them defines
# std::__throw_bad_array_new_length as floor_shims.cc does. The shims are weak, so the archive's copy wins. Links a
# small library that pulls that member (std::vector's length error, new T[n]) with -static-libstdc++.
#   sh native/floor/check_static_link.sh          (from the repository root; prints "1 passed, 0 failed" or the error)
set -u
CXX=${CXX:-g++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/user.cc" <<'SRC'
#include <vector>
int reserve(int n) { std::vector<int> v; v.reserve(n); return int(v.capacity()); }
int* array(long n) { return new int[n]; }
SRC
start=$(date +%s%3N)
if out=$("$CXX" -std=c++17 -O2 -fPIC -shared -include native/floor/floor.h -o "$tmp/static.so" "$tmp/user.cc" \
           native/floor/floor_shims.cc -static-libstdc++ 2>&1); then
  status=pass msg=""
  echo "ok   floor shims link beside a static libstdc++"
else
  status=fail msg=$(printf '%s' "$out" | grep -m1 'multiple definition\|error' || printf '%s' "$out" | head -1)
  echo "FAIL floor shims beside a static libstdc++: $msg"
fi
sh test/tools/emit-result.sh native/floor-static-libstdc++ "$status" "$msg" $(( $(date +%s%3N) - start ))
[ "$status" = pass ] && echo "1 passed, 0 failed" || { echo "0 passed, 1 failed"; exit 1; }
