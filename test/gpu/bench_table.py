"""The step benchmark's results as the rows test/gpu/README.md and the main README quote (the recording cost tables), read
from bench_allocator.py's JSON ($OUT/bench_allocator.json) so no figure is copied by hand:

    python3 test/gpu/bench_table.py OUT/bench_allocator.json --run NAME

One row per model and configuration against the first configuration (the baseline): settled (the median over rounds
of each round's median-step ratio, Note [Interleaved rounds]) with its rounds, settling likewise, the 10th
percentile's median, the host time a step over the baseline's (mean of the rounds) and the k-th turns' median ratio
(Note [Paired view]). A figure the JSON lacks prints as "–". No GPU or torch needed."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_allocator import paired_view, round_ratios  # noqa: E402  (imports no torch at module level)

HEADER = ("| run | model | configuration | settled (≤ 1.01) | rounds | settling (≤ 1.03) | rounds | p10 | host | turns |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def _f(x, fmt="%.3f"):
    return "–" if x is None else fmt % x


def rows(rounds, run="", block=10):
    """Markdown rows for every model and every configuration after the first, in the rounds' first order."""
    configs = list(rounds[0])
    base = configs[0]
    models = [m for m in rounds[0][base] if isinstance(rounds[0][base][m], dict) and "median_ms" in rounds[0][base][m]]
    out = []
    for model in models:
        for c in configs[1:]:
            settled = round_ratios(rounds, base, c, model, "median_ms")
            settling = round_ratios(rounds, base, c, model, "settling_ms")
            p10 = round_ratios(rounds, base, c, model, "p10_ms")
            paired = paired_view(rounds, base, c, model, block)
            out.append("| %s | %s | %s | **%s** | %s | **%s** | %s | %s | %s | %s |" % (
                run, model, c, _f(settled["median"]), " ".join(_f(x) for x in settled["rounds"]),
                _f(settling["median"]), " ".join(_f(x) for x in settling["rounds"]), _f(p10["median"]),
                _f(paired["host_delta_ms"]["mean"], "%+.2f"), _f(paired["turns"]["median"])))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="bench_allocator.py's JSON (its step_rounds)")
    ap.add_argument("--run", default="", help="the run's name in the first column")
    ap.add_argument("--block", type=int, default=10, help="the run's --lockstep block (steps a turn)")
    args = ap.parse_args()
    with open(args.json) as f:
        rounds = json.load(f)["step_rounds"]
    print(HEADER)
    print("\n".join(rows(rounds, args.run, args.block)))
    return 0


if __name__ == "__main__":
    import faulthandler

    faulthandler.dump_traceback_later(60, exit=True)  # as every script here (test_gpu_watchdogs), though it reads a file
    sys.exit(main())
