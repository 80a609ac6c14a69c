#!/usr/bin/env bash
# One device call for the conformance fixtures and the checks that go with them, results in $OUT/results.tar
# (written whatever happens: a check that overruns is cut at its own limit, and the tar is made after them all):
#   - the conformance gather (gather.py: every workload natively and under both modes, with its truth);
#   - pytest budgets in two orders and both modes (pytest_order_check.py);
#   - the lens allocator's own GPU checks with the binaries built here (allocator_checks.py);
#   - an out-of-memory error under the lens reaching the script as torch.OutOfMemoryError;
#   - the pip package installed into a fresh venv, where its check exists (test/gpu/pip_install_check.py).
# Build first here (npm run build; make -C native/allocator), carry dist/native:
#   bash test/gpu/conformance/run.sh [SECONDS]      (default 480: the gather's share of a 10-minute call)
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$(mktemp -d)}
LIMIT=${1:-480}
R=$OUT/results
mkdir -p "$R"
export PYTHONUNBUFFERED=1
SO=$PWD/dist/native/libgpumem_allocator.so
PP=$PWD/native/python
t0=$SECONDS
say() { echo "[$((SECONDS - t0))s] $*" | tee -a "$R/run.log"; }

say "env: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader) · $(python3 -c 'import torch;print(torch.__version__)')"
say "binaries: $(for f in dist/native/*; do printf '%s %s; ' "$(basename "$f")" "$(objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"; done)"
# The observer extension first: every default-mode run and the lens's OOM glue use it (built once per torch).
PYTHONPATH=$PP timeout 240 python3 -m gpumem build-observer > "$R/build-observer.log" 2>&1
say "build-observer rc=$?"

(timeout $((LIMIT - 60)) python3 test/gpu/conformance/pytest_order_check.py --out "$R" > "$R/pytest-order.log" 2>&1
 say "pytest-order rc=$?") &
(timeout $((LIMIT - 60)) python3 test/gpu/allocator_checks.py --so "$SO" > "$R/allocator.log" 2>&1
 say "allocator rc=$?") &
(PYTHONPATH=$PP GPUMEM_WATCHDOG_S=100 timeout 120 python3 -m gpumem run --allocator lens --allocator-so "$SO" --out /tmp/oom-lens -- \
   python3 -c "import faulthandler; faulthandler.dump_traceback_later(90, exit=True)
import torch
try:
    torch.empty(1 << 50, dtype=torch.uint8, device='cuda')
except torch.OutOfMemoryError as e:
    print('OOM caught (OutOfMemoryError):', str(e).splitlines()[0])" > "$R/oom-type.log" 2>&1
 say "oom-type rc=$? $(grep -c 'OOM caught (OutOfMemoryError)' "$R/oom-type.log") caught") &
if [ -f test/gpu/pip_install_check.py ]; then
  (timeout $((LIMIT - 60)) python3 test/gpu/pip_install_check.py --out "$R" > "$R/pip-install.log" 2>&1
   say "pip-install rc=$?") &
fi
GPUMEM_WATCHDOG_S=$((LIMIT + 10)) timeout $((LIMIT + 20)) python3 test/gpu/conformance/gather.py --out "$R/conformance" --limit "$LIMIT" \
  ${CONFORMANCE_ARGS:-} > "$R/gather.log" 2>&1
say "gather rc=$?"
wait
say "done"
tar -C "$R" -cf "$OUT/results.tar" . && ls -la "$OUT"
