#!/usr/bin/env bash
# Packs this machine's perf for the lent GPU machine, which has none (no network there): Debian's linux-perf with
# every library it loads and the loader itself, so that it runs whatever glibc the device has. Writes
# .carry/perfpkg/perf.tar.xz (ignored; ~8 MB), for perf_host.sh; carry ".carry/perfpkg". Installs linux-perf only
# for the copy and removes it again: nothing in the product or CI uses it.
#   bash test/gpu/probes/pack_perf.sh
set -eu
cd "$(dirname "$0")/../../.."
had=1
command -v perf > /dev/null || { had=0; apt-get install -y -q linux-perf > /dev/null; }
tmp=$(mktemp -d)
mkdir -p "$tmp/perf/lib" .carry/perfpkg
cp "$(command -v perf)" "$tmp/perf/perf"
for l in $(ldd "$(command -v perf)" | awk '{print $3}' | grep /); do cp -L "$l" "$tmp/perf/lib/"; done
cp -L /lib64/ld-linux-x86-64.so.2 "$tmp/perf/lib/"
tar cJf .carry/perfpkg/perf.tar.xz -C "$tmp" perf
rm -rf "$tmp"
[ $had = 1 ] || apt-get purge -y -q linux-perf > /dev/null
ls -la .carry/perfpkg/perf.tar.xz
