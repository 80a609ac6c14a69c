#!/usr/bin/env bash
# Every GPU check in one device call (device time is scarce). Build here first, then carry dist/native:
#   make -C native/allocator && <device run, carry dist/native> bash test/gpu/run_all.sh [stage…]
# Stages: conformance env allocator workload sanitizer stacks micro steps frag probes varlen leaks pytorch-tests summaries oom-sample leaks-convnet no-false-leaks keeper-probe budget monitors metadata export-viz categories categories-cost backward-lines backward-cost backward-self-time probe-off figures-only tracker-cost nvml-cost what-if host-bisect host-profile resnet-overhead long-run advice pytorch-mode pytorch-mode-cost ranks-2gpu notebooks pytest-order (default: env allocator stacks workload sanitizer).
# Each of micro, steps and frag is one part of test/gpu/bench_allocator.py; "bench" runs all three.
# Results land under $OUT (logs + JSON), one file per stage, so they come back with the call.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# The lent multi-GPU hosts must keep NVLink multicast off (KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(env allocator stacks workload sanitizer)
SO=$PWD/dist/native/libgpumem_allocator.so
[ -f "$SO" ] || { echo "missing $SO: run make -C native/allocator here and carry dist/native" >&2; exit 2; }

# Node for the checks that run `gpumem summary` (dist/cli.js): carried xz-compressed, the device has none.
if [ -z "${GPUMEM_NODE:-}" ] && [ -f .carry/node/node.xz ]; then
  mkdir -p /tmp/gpumem-node && xz -dc .carry/node/node.xz > /tmp/gpumem-node/node && chmod +x /tmp/gpumem-node/node
  export GPUMEM_NODE=/tmp/gpumem-node/node
fi

run_stage() {  # name, limit seconds, command…
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "=== $name (limit ${limit}s)"
  timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "=== $name rc=$rc in $((SECONDS - t0))s"
  tail -n 40 "$OUT/$name.log"
}

for s in "${stages[@]}"; do
  case $s in
    # A training notebook through the IPython extension and a pytest file under `pytest -p gpumem`, both
    # allocator modes; per cell/test figures vs max_memory_allocated() inside it (needs IPython and pytest there).
    # The conformance fixtures: every workload of test/gpu/conformance/workloads.py natively and under both allocator
    # modes, with the truth each run measured; copy $OUT/conformance/fixtures/* to test/fixtures/conformance/.
    conformance) run_stage conformance 590 bash -c "python3 test/gpu/conformance/gather.py --out $OUT/conformance --limit 540 ${CONFORMANCE_ARGS:-}; cd $OUT/conformance && tar -cf ../conformance.tar fixtures logs gather.json" ;;
    notebooks) run_stage notebooks 180 python3 test/gpu/notebook_pytest_check.py --out "$OUT" ;;
    # pytest budgets in two orders of the tests, both allocator modes: each test's peak its own (Note [pytest budgets]).
    pytest-order) run_stage pytest-order 170 python3 test/gpu/conformance/pytest_order_check.py --out "$OUT" ;;
    env) run_stage env 60 bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import sys,torch;print(sys.version);print(torch.__version__, torch.version.cuda, torch.cuda.device_count())"; which compute-sanitizer' ;;
    allocator) run_stage allocator 420 python3 test/gpu/allocator_checks.py --so "$SO" ;;
    workload) run_stage workload 300 python3 test/gpu/workload_checks.py --out "$OUT/workload" ;;
    sanitizer) run_stage sanitizer 240 env PYTHONPATH="$PWD/native/python" compute-sanitizer --tool memcheck --target-processes all \
        python3 -m gpumem run --out "$OUT/sanitizer" -- \
        python3 test/gpu/workloads/train_mlp.py ;;
    stacks) run_stage stacks 300 bash -c "GPUMEM_NATIVE_THREAD_SO=$PWD/dist/native/native_thread.so python3 test/native/recorder/test_stacks.py -v \
        && python3 test/gpu/stack_equivalence.py --out $OUT/stacks && python3 test/bench/allocator/stack_overhead.py" ;;
    # BENCH_ARGS adds bench_allocator.py flags, e.g. BENCH_ARGS="--warmup 60 --rounds 5 --step-configs native gpumem-run".
    micro|steps|frag) run_stage "$s" 560 python3 test/gpu/bench_allocator.py --so "$SO" --only "$s" ${BENCH_ARGS:-} ;;
    bench) run_stage bench 560 python3 test/gpu/bench_allocator.py --so "$SO" ;;
    # What observing PyTorch's allocator and each category source cost (probes, not tests).
    probes) run_stage probes 420 bash -c "python3 test/gpu/probes/pytorch_mode.py --out $OUT/probes && python3 test/gpu/probes/categories_cost.py --out $OUT/probes" ;;
    # The varying-length GPT-2 natively, natively with expandable segments, and under gpumem run
    # (default lens allocator); `gpumem replay` of the last capture predicts the first two peaks.
    varlen) run_stage varlen 420 bash -c "set -e; mkdir -p $OUT/varlen
        python3 test/gpu/workloads/gpt2_varlen.py > $OUT/varlen/native.txt
        PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 test/gpu/workloads/gpt2_varlen.py > $OUT/varlen/native-expandable.txt
        PYTHONPATH=$PWD/native/python python3 -m gpumem run --allocator lens --allocator-so $SO --out $OUT/varlen/session -- python3 test/gpu/workloads/gpt2_varlen.py > $OUT/varlen/lens.txt
        grep -h RESULT $OUT/varlen/*.txt
        # Replaying the lens capture predicts both native peaks (also runnable later, off the GPU).
        NODE=\${GPUMEM_NODE:-node}; if command -v \$NODE >/dev/null && [ -f dist/native/gpumem_addon.node ]; then \$NODE test/gpu/replay_validate.mjs $OUT/varlen; fi" ;;
    # Where the lens allocator's ResNet-50 step time goes while settling and after (probe, not a test).
    resnet-overhead) run_stage resnet-overhead 420 python3 test/gpu/probes/resnet_overhead.py --so "$SO" --out "$OUT/resnet-overhead" ;;
    # Steps found from the bootstrap's facts, and history.append(loss) found as a leak on its line.
    # The finding carries the keeper the bootstrap named: the history.append(loss) line (Note [Leak keeper]).
    leaks) run_stage leaks 180 python3 test/gpu/steps_check.py --out "$OUT/leaks" ;;
    # The leaky convnet (retained graphs): the keeper on every leaking line, its bytes kept
    # activations; then what the keeper's graph walk finds on real torch (a probe, plain PyTorch).
    # A loop that keeps nothing (GPT-2 small, ResNet-50, 60 steps) gets no leak finding and no keeper search
    # in either mode, though PyTorch's allocated bytes at step end wander (Note [Leak rule]). Needs Node (GPUMEM_NODE).
    no-false-leaks) run_stage no-false-leaks 420 bash -c "PYTHONPATH=$PWD/native/python python3 -m gpumem build-observer >/dev/null 2>&1
        GPUMEM_WATCHDOG_S=400 python3 test/gpu/no_false_leaks_check.py --out $OUT/no-false-leaks" ;;
    leaks-convnet) run_stage leaks-convnet 180 env GPUMEM_WATCHDOG_S=140 python3 test/gpu/steps_check.py --model convnet --steps 8 --out "$OUT/leaks-convnet" ;;
    keeper-probe) run_stage keeper-probe 150 env GPUMEM_WATCHDOG_S=80 python3 test/gpu/probes/keeper_walk_probe.py ;;
    # PyTorch's own memory tests natively and under `gpumem run`, compared (needs the carried
    # .carry/pytorch-tests/test_cuda.py from test/gpu/extract_pytorch_tests.py). Ends with PASS or FAIL.
    pytorch-tests) run_stage pytorch-tests 290 python3 test/gpu/pytorch_memory_tests.py --out "$OUT" ;;
    # `gpumem summary` (text and --json) of an OOM, a SIGKILL, a full-disk run and 2 ranks; needs
    # dist/cli.js and Node (carried as .carry/node/node.xz, or GPUMEM_NODE). Summaries land in $OUT/summaries/.
    summaries) run_stage summaries 560 python3 test/gpu/summaries_check.py --out "$OUT" ;;
    # After a caught OOM (30 % held, 90 % asked), the summary's "not from the allocator" within 0.1 GiB
    # of NVML used − reserved at the end (Note [Settled samples]). Needs dist/cli.js and Node, as summaries.
    # --budget 8MiB is a cap from both CLIs, in both modes, with the unbounded run's peak and lines.
    budget) run_stage budget 330 env GPUMEM_WATCHDOG_S=310 python3 test/gpu/budget_check.py --seconds ${GPUMEM_BUDGET_SECONDS:-120} --out "$OUT/budget" ;;
    # Lightning's DeviceStatsMonitor logs the native keys and figures under both allocator modes.
    monitors) run_stage monitors 300 python3 test/gpu/monitors_check.py --out "$OUT/monitors" ;;
    # _set_memory_metadata labels reach the capture under --allocator lens and --allocator pytorch, on the
    # allocations PyTorch labels natively (export and summary --json). Needs dist/cli.js and Node (GPUMEM_NODE).
    metadata) run_stage metadata 330 python3 test/gpu/metadata_check.py --out "$OUT/metadata" ;;
    oom-sample) run_stage oom-sample 330 python3 test/gpu/oom_sample_check.py --out "$OUT" ;;
    # `gpumem export` of the snapshot fixtures and H100 captures read by this torch's own _memory_viz.py
    # (segsum, trace, trace_plot, segment_plot; stats where it exists), labels kept. JSON: $OUT/export-viz/export_viz.json.
    export-viz) run_stage export-viz 170 python3 test/gpu/export_viz_check.py --out "$OUT/export-viz" ;;
    # Categories of GPT-2 (AdamW, bf16) and ResNet-50 under gpumem run vs what the workload
    # measures, under the lens and under PyTorch's allocator (the default mode's), and under PyTorch's allocator recording
    # the first 5 of the 10 steps (Note [Recorded steps]). Its cost is the next stage.
    categories) run_stage categories 560 bash -c "PYTHONPATH=$PWD/native/python python3 -m gpumem build-observer >/dev/null 2>&1
        GPUMEM_WATCHDOG_S=250 python3 test/gpu/categories_check.py --allocator lens --out $OUT/categories/lens; a=\$?
        GPUMEM_WATCHDOG_S=250 python3 test/gpu/categories_check.py --allocator pytorch --out $OUT/categories/pytorch; b=\$?
        GPUMEM_WATCHDOG_S=250 python3 test/gpu/categories_check.py --allocator pytorch --record-steps 5 --out $OUT/categories/record5; c=\$?
        exit \$((a | b | c))" ;;
    # FIGURES=1 adds the default mode with figures only (GPUMEM_EVENTS=0, Note [Figures only]: nothing per allocation);
    # with it, MODELS=resnet50 keeps the call under its limit (four processes a round). MODES= leaves out the modes
    # recording every step (default MODES="gpumem-run gpumem-run-auto"), e.g. MODES= RECORD=10 for the recorded steps.
    # AA=1 adds a second native process to every round (native:GPUMEM_AA=1): the run's own noise floor (two
    # identical processes differed by up to 6 % a round, H100, 2026-11-27), at a quarter more time.
    # Step time of `gpumem run` (full recording: stacks, tags, phases, module paths) vs native, the lens
    # and the default mode, ROUNDS interleaved rounds (default 5): settled (STEPS timed steps, default 100: the lent
    # host's slow bursts last about a second, a third of GPT-2's window rather than half) and settling (warm-up).
    # The configurations of a round take turns of BLOCK steps (default 10; Note [Lockstep rounds], test/gpu/README.md),
    # their main and autograd threads on the same two CPUs in every turn (Note [Turn CPUs]; NO_TURN_CPUS=1: as before).
    # WARMUP_BLOCK=10: the warm-up's steps back to back in one turn instead of one a turn (Note [Warm-up turns]).
    # NOSAMPLE=1 adds the recorded-steps configuration without device sampling (Note [One NVML call a sample]).
    # Backward on the forward line (Note [Backward on the forward line] in native/allocator/src/backward_links.h):
    # EfficientNet-B0, BERT and GPT-NeoX with checkpointing, both modes, against anomaly-mode tracebacks; then the
    # step time of GPT-2 small and ResNet-50 with the links and without (GPUMEM_BACKWARD_LINKS=0), interleaved.
    backward-lines) run_stage backward-lines 300 python3 test/gpu/backward_lines_check.py --out "$OUT/backward-lines" --stage truth --limit 280 ;;
    backward-self-time) run_stage backward-self-time 300 env GPUMEM_WATCHDOG_S=270 python3 test/gpu/backward_lines_check.py --out "$OUT/backward-self-time" --stage self-time --rounds ${ROUNDS:-1} --bench-steps ${STEPS:-50} --limit 260 ;;
    backward-cost) run_stage backward-cost 580 env GPUMEM_WATCHDOG_S=570 python3 test/gpu/backward_lines_check.py --out "$OUT/backward-cost" --stage cost --rounds ${ROUNDS:-3} --bench-steps ${STEPS:-50} --limit 560 ;;
    categories-cost) run_stage categories-cost 580 bash -c "PYTHONPATH=$PWD/native/python python3 -m gpumem build-observer >/dev/null 2>&1
        python3 test/gpu/bench_allocator.py --so $SO --only steps --models ${MODELS:-gpt2 resnet50} \
        --step-configs native ${AA:+native:GPUMEM_AA=1} ${MODES-gpumem-run gpumem-run-auto} ${FIGURES:+gpumem-run-auto:GPUMEM_EVENTS=0} ${RECORD:+gpumem-run-auto:GPUMEM_RECORD_STEPS=$RECORD} ${NOSAMPLE:+gpumem-run-auto:GPUMEM_RECORD_STEPS=${RECORD:-10},GPUMEM_SAMPLE_MS=0} --rounds ${ROUNDS:-5} --steps ${STEPS:-100} --cpus 6 \
        --lockstep ${BLOCK:-10} --warmup-block ${WARMUP_BLOCK:-1} $([ -n "${NO_TURN_CPUS:-}" ] || echo --turn-cpus) | grep --line-buffered -E 'step_ratio|median|error'" ;;
    # Which part of what runs after the stop (and under figures only) costs the host time a step that
    # no profile shows (Note [Probe switches off] in native/python/gpumem/_probe_off.py): ResNet-50 in lockstep rounds,
    # native twice, figures only, figures only with the stats poll, the hooks or the writer's tick off, and with all
    # of them and the device sampler off. host_delta_ms per configuration in the step_paired lines.
    probe-off) run_stage probe-off 580 bash -c "PYTHONPATH=$PWD/native/python python3 -m gpumem build-observer >/dev/null 2>&1
        python3 test/gpu/bench_allocator.py --so $SO --only steps --models resnet50 --rounds ${ROUNDS:-5} --steps ${STEPS:-100} \
        --cpus 6 --lockstep ${BLOCK:-10} --turn-cpus --step-configs native native:GPUMEM_AA=1 gpumem-run-auto:GPUMEM_EVENTS=0 \
        gpumem-run-auto:GPUMEM_EVENTS=0,GPUMEM_PROBE_OFF=poll gpumem-run-auto:GPUMEM_EVENTS=0,GPUMEM_PROBE_OFF=hooks \
        gpumem-run-auto:GPUMEM_EVENTS=0,GPUMEM_PROBE_OFF=writer gpumem-run-auto:GPUMEM_EVENTS=0,GPUMEM_PROBE_OFF=all,GPUMEM_SAMPLE_MS=0 \
        | grep --line-buffered -E 'step_ratio|step_paired|error'" ;;
    # Where the default mode's added host time goes, part by part. ResNet-50 in lockstep rounds:
    # PyTorch's trace entries to a tracker that does nothing (native-tracker), PyTorch's history ring (native-ring),
    # the default mode without stacks and with them, the lens mode without stacks and with them;
    # host_ms per configuration in $OUT/bench_allocator.json. Then a flat CPU profile by thread, native and default
    # mode twice each, interleaved (test/gpu/probes/perf_host.sh; carry .carry/perfpkg from probes/pack_perf.sh).
    host-bisect) run_stage host-bisect 520 bash -c "PYTHONPATH=$PWD/native/python python3 -m gpumem build-observer >/dev/null 2>&1
        python3 test/gpu/bench_allocator.py --so $SO --only steps --models resnet50 --rounds ${ROUNDS:-3} --steps ${STEPS:-60} \
        --cpus 6 --lockstep ${BLOCK:-10} $([ -n "${NO_TURN_CPUS:-}" ] || echo --turn-cpus) --step-configs native native-tracker native-ring gpumem-run-auto:GPUMEM_STACKS=0 \
        gpumem-run-auto gpumem-run:GPUMEM_STACKS=0 gpumem-run | grep --line-buffered -E 'step_ratio|median|error'" ;;
    # Probe (builds the tracker extension: about a minute on a fresh machine): what an attached trace tracker that returns at once (the state after the recorded steps: PyTorch has
    # no detach) costs an alloc/free pair, in one process, against bare; JSON: $OUT/tracker-cost/tracker_entry_cost.json.
    tracker-cost) run_stage tracker-cost 200 env GPUMEM_WATCHDOG_S=180 python3 test/gpu/probes/tracker_entry_cost.py --out "$OUT/tracker-cost" ;;
    # What the device sampler's NVML calls cost a ResNet-50 step in one process, natively (Note [One
    # NVML call a sample]); JSON: $OUT/nvml_cost_resnet50.json.
    nvml-cost) run_stage nvml-cost 200 env GPUMEM_WATCHDOG_S=180 OUT="$OUT" python3 test/gpu/probes/nvml_cost.py ;;
    host-profile) run_stage host-profile 200 env CONFIGS="native gpumem-auto gpumem-auto native" bash test/gpu/probes/perf_host.sh 5 ;;
    # What the summary says empty_cache() would release and the largest request without growth,
    # against the allocator then doing it (control socket empty_cache; an allocation of that size).
    what-if) run_stage what-if 240 python3 test/gpu/what_if_check.py --out "$OUT/what-if" ;;
    # Figures only (Note [Figures only]): the same run as natively, no events in its capture, and the
    # reader's peak from PyTorch's figures (Note [Figures from stats]) equal to max_memory_allocated(); the same for the
    # cudaMallocAsync backend. Needs Node (GPUMEM_NODE) for the summaries.
    figures-only) run_stage figures-only 300 python3 test/gpu/figures_only_check.py --out "$OUT" ;;
    # GPT-2 small for 10 minutes under gpumem run with the default 1 GiB capture budget (plus a 1-minute
    # native baseline): capture size, step time at minute 1 and 10 vs native, and the summary's peak lines.
    long-run) run_stage long-run 750 python3 test/gpu/long_run_check.py --minutes 10 --out "$OUT/long-run" ;;
    # `gpumem advise`'s checkpoint, batch-size and allocator-policy advice applied natively; measured
    # peaks against the predictions (10 %). Needs dist/cli.js and Node (GPUMEM_NODE). Ends with PASS advice.
    advice) run_stage advice 560 python3 test/gpu/advice_check.py --out "$OUT/advice" ;;
    # The PyTorch-allocator mode under `gpumem run` (auto) against native runs and against the lens
    # mode (attribution line by line); needs g++ for the observer's first build, and Node + dist/cli.js
    # (GPUMEM_NODE) for the summaries. JSON: $OUT/pytorch-mode/. Its cost is the next stage (one call each).
    pytorch-mode) run_stage pytorch-mode 580 python3 test/gpu/pytorch_mode_check.py --out "$OUT/pytorch-mode" --watchdog 560 \
        --only graphs attribution features compile-stderr expandable async ;;
    # The mode's step time: cudnn.benchmark ResNet-18 vs native (target ×1.05), GPT-2 small and ResNet-50
    # vs PyTorch's own history (target history + 1 %); interleaved rounds. JSON: $OUT/pytorch-mode-cost/.
    pytorch-mode-cost) run_stage pytorch-mode-cost 580 python3 test/gpu/pytorch_mode_check.py --out "$OUT/pytorch-mode-cost" \
        --watchdog 560 --only benchmark overhead --rounds ${ROUNDS:-4} ;;
    # On the 2-GPU machine (nvidia-h100-x2): torchrun DDP (NCCL, a rank per GPU) under gpumem run; gpumem
    # summary of the session folder shows both ranks, each peak equal to the rank's own max_memory_allocated, rank
    # 1's extra 512 MiB flagged. Needs dist/cli.js and Node (GPUMEM_NODE). Ends with SUMMARY {"failed": []}.
    ranks-2gpu) run_stage ranks-2gpu 480 python3 test/gpu/ranks_two_gpus_check.py --out "$OUT" ;;
    *) echo "unknown stage $s" >&2 ;;
  esac
done
# At most 8 files come back: pack the logs and JSON together, keep the E2E capture beside.
tar -C "$OUT" -czf "$OUT/results.tgz" --exclude results.tgz . 2>/dev/null
ls -la "$OUT"
