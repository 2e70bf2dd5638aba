#!/usr/bin/env python3
"""SafeHome Fig. 12 analog: visibility models on whole agents in meshsim.

Reads the CSV files `meshsim routines` writes (MODEL-invocations.csv and
MODEL-summary.csv, see meshsim --help) and draws, per model, the CDF of
end-to-end latency, of temporary incongruence per routine and of the
parallelism level per run, as Fig. 12a's three columns; then prints a
table: latency percentiles over every invocation of every seed and their
ratio to WV measured in the same run, the share of routines that suffered a
temporary incongruence (the paper's metric), parallelism level, final
incongruence, and how many runs passed each oracle check; then the median
latency by arrival time (the arrival window cut in fifths), which shows a
queue that grows through the run (a saturated device, or the factory's
back-to-back arrivals) apart from a steady one.

    bench/safehome_plot.py DIR [OUT.svg]     (default OUT: DIR/safehome_fig12.svg)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg_chart import COLOURS, read_tables, write_svg  # noqa: E402

MODELS = ["gsv", "psv", "ev", "wv"]


def percentile(values, p):
    """Nearest rank, as the runner's summary computes it."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def cdf(values):
    ordered = sorted(values)
    return {v: (i + 1) / len(ordered) for i, v in enumerate(ordered)}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    directory = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(directory, "safehome_fig12.svg")
    data = {}
    for model in MODELS:
        invocations = read_tables([directory], f"{model}-invocations.csv")
        summaries = read_tables([directory], f"{model}-summary.csv")
        if invocations and summaries:
            data[model] = (invocations, summaries)
    if "wv" not in data:
        sys.exit(f"{directory}: no wv-invocations.csv / wv-summary.csv: the ratios need WV from the same run")

    latency, incongruence, parallelism, legend = [], [], [], []
    stats = {}
    for i, (model, (invocations, summaries)) in enumerate(data.items()):
        colour = COLOURS[i % len(COLOURS)]
        ran = [r for r in invocations if r["e2e_ms"]]
        e2e = [float(r["e2e_ms"]) / 1000 for r in ran]
        ti = [float(r["temporary_incongruence"]) for r in ran]
        pl = [float(s["parallelism_level"]) for s in summaries]
        latency.append((model.upper(), colour, False, cdf(e2e)))
        incongruence.append((model.upper(), colour, False, cdf(ti)))
        parallelism.append((model.upper(), colour, False, cdf(pl)))
        legend.append((model.upper(), colour, False))
        stats[model] = {
            "runs": len(summaries),
            "invocations": len(invocations),
            "ended_ok": sum(r["outcome"] == "ok" for r in invocations),
            "p50": percentile(e2e, 50),
            "p90": percentile(e2e, 90),
            "p95": percentile(e2e, 95),
            "ti_share": sum(v > 0 for v in ti) / max(len(ti), 1),
            "parallelism": sum(pl) / max(len(pl), 1),
            "final": sum(float(s["final_incongruence"]) for s in summaries) / max(len(summaries), 1),
            "final_runs": sum(float(s["final_incongruence"]) > 0 for s in summaries),
            "checks": {c: sum(s[c] == "pass" for s in summaries)
                       for c in ("serial_order", "global_strict", "partitioned_strict")},
        }
    write_svg(out, [(latency, "End-to-end latency", "seconds (CDF)", ""),
                    (incongruence, "Temporary incongruence", "per routine (CDF)", ""),
                    (parallelism, "Parallelism level", "per run (CDF)", "")],
              legend, caption=f"meshsim routines, {directory}", numeric_x=True)

    wv = stats["wv"]
    print(f"{'model':5} {'runs':>4} {'ok/inv':>9} {'p50 s':>7} {'p90 s':>7} {'p95 s':>7} "
          f"{'p50/WV':>7} {'p90/WV':>7} {'TI share':>8} {'parallel':>8} {'final':>6} {'final>0':>7} "
          f"{'serial':>6} {'GSV':>4} {'PSV':>4}")
    for model, s in stats.items():
        c = s["checks"]
        print(f"{model:5} {s['runs']:4} {s['ended_ok']:4}/{s['invocations']:<4} {s['p50']:7.2f} {s['p90']:7.2f} "
              f"{s['p95']:7.2f} {s['p50'] / wv['p50']:7.2f} {s['p90'] / wv['p90']:7.2f} {s['ti_share']:8.3f} "
              f"{s['parallelism']:8.2f} {s['final']:6.3f} {s['final_runs']:7} {c['serial_order']:6} "
              f"{c['global_strict']:4} {c['partitioned_strict']:4}")
    by_arrival(data)
    print(f"svg {out}")


def by_arrival(data):
    last = max(float(r["arrival_ms"]) for invocations, _ in data.values() for r in invocations)
    fifths = 5
    print(f"median E2E s by arrival time (fifths of the {last / 1000:.0f} s arrival window)")
    print(f"{'model':5} " + " ".join(f"{f'{k + 1}/5':>8}" for k in range(fifths)))
    for model, (invocations, _) in data.items():
        bins = [[] for _ in range(fifths)]
        for r in invocations:
            if r["e2e_ms"]:
                k = min(fifths - 1, int(float(r["arrival_ms"]) / last * fifths)) if last > 0 else 0
                bins[k].append(float(r["e2e_ms"]) / 1000)
        print(f"{model:5} " + " ".join(f"{percentile(b, 50):8.1f}" for b in bins))


if __name__ == "__main__":
    main()
