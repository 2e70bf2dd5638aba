#!/usr/bin/env python3
"""Plots apex_bench (apex.md §8 Fig. 8, §9 Fig. 10 and Fig. 11) as SVGs, with
the paper's numbers beside ours, and prints the README's tables.

  mkdir -p RUN && cd RUN
  APEX_BENCH_OUT=. apex_bench
  bench/apex_plot.py OUTDIR RUN [RUN...]

Each RUN (merged) holds the apex_latency.csv and apex_contention.csv the bench
wrote (one row per `apex` invocation). Writes OUTDIR/apex_latency.svg
(latency p50 against PEG depth, per width and strategy, star and line, and
the aggressive / conservative ratio) and OUTDIR/apex_contention.svg
(execution-stage success rate, rollback cost and contention aborts against
contender invocations, per actuation loss rate and strategy).
"""

import os
import sys

from svg_chart import COLOURS, read_tables, write_svg

FIG10 = ("apex.md §9.2-9.3 (Wi-Fi testbed): 5x4 star conservative 1.34 s, aggressive 1.01 s "
         "(aggressive saves 48 % at 2x1, 25 % at 5x4); 5x4 line 2.26 s vs 1.53 s")
FIG8 = ("apex.md Fig. 8 (model, f_c = 0.01, f_t = 0.001, 5x4): success conservative 98 %, aggressive 80 %; "
        "rollback cost 1 % vs 8 %")
STRATEGIES = ("conservative", "aggressive")


def quantile(values, q):
    """The q-quantile by rank, as the bench computes it (nan for no samples)."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[int(q * (len(values) - 1))]


def mean(values):
    return sum(values) / len(values)


def latency_points(rows):
    """{(topology, width, depth, strategy): [latency_ms of the runs that ended OK]}."""
    out = {}
    for row in rows:
        key = (row["topology"], int(row["width"]), int(row["depth"]), row["strategy"])
        point = out.setdefault(key, [])
        if row["latency_ms"]:
            point.append(float(row["latency_ms"]))
    return out


def latency(points, outdir):
    topologies = sorted({k[0] for k in points}, key=lambda t: t != "star")
    widths = sorted({k[1] for k in points})
    panels, ratios = [], []
    for topology in topologies:
        series = []
        for i, width in enumerate(widths):
            for strategy in STRATEGIES:
                series.append((f"{width} {strategy}", COLOURS[i], strategy == "aggressive",
                               {d: quantile(v, 0.5) for (t, w, d, s), v in points.items()
                                if t == topology and w == width and s == strategy and v}))
        panels.append((series, f"latency p50 (ms), {topology}", "PEG depth", ""))
        for i, width in enumerate(widths):
            ratio = {}
            for (t, w, d, s), v in points.items():
                base = points.get((t, w, d, "conservative"))
                if t == topology and w == width and s == "aggressive" and v and base:
                    ratio[d] = quantile(v, 0.5) / quantile(base, 0.5)
            ratios.append((f"{topology} width {width}", COLOURS[i], topology != "star", ratio))
    panels.append((ratios, "aggressive / conservative (p50)", "PEG depth", ""))
    legend = [(f"width {w}: conservative solid, aggressive dashed", COLOURS[i], False) for i, w in enumerate(widths)]
    legend.append(("ratio panel: star solid, line dashed", COLOURS[0], True))
    write_svg(os.path.join(outdir, "apex_latency.svg"), panels, legend, caption=FIG10)

    print("\nLatency, trigger to the subject command's outcome (ms, virtual time)\n")
    print("| topology | depth x width | conservative p50 | mean | aggressive p50 | mean | aggr. / cons. (p50) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for topology in topologies:
        for width in widths:
            for depth in sorted({k[2] for k in points}):
                c = points.get((topology, width, depth, "conservative"), [])
                a = points.get((topology, width, depth, "aggressive"), [])
                if not c or not a:
                    continue
                print(f"| {topology} | {depth}x{width} | {quantile(c, 0.5):.0f} | {mean(c):.0f} | "
                      f"{quantile(a, 0.5):.0f} | {mean(a):.0f} | {quantile(a, 0.5) / quantile(c, 0.5):.2f} |")


def contention_points(rows):
    """{(failure_permille, contenders, strategy): {...shares over the runs that executed}}."""
    out = {}
    for row in rows:
        key = (int(row["failure_permille"]), int(row["contenders"]), row["strategy"])
        point = out.setdefault(key, {"runs": 0, "executed": 0, "ok": 0, "wounded": 0, "failed": 0, "undone": 0,
                                     "plan": 0})
        point["runs"] += 1
        if row["executed"] != "1":
            continue
        point["executed"] += 1
        point["plan"] += int(row["plan"])
        point["ok"] += row["ok"] == "1"
        point["wounded"] += row["wounded"] == "1"
        point["failed"] += row["failed_command"] == "1"
        point["undone"] += int(row["undone"])
    return out


def contention(points, outdir, peg=20):
    failures = sorted({k[0] for k in points})
    panels = []
    metrics = (("success", lambda p: p["ok"] / p["executed"]),
               ("rollback cost", lambda p: p["undone"] / peg / p["executed"]),
               ("wounded share", lambda p: p["wounded"] / p["executed"]))
    for title, value in metrics:
        series = []
        for i, failure in enumerate(failures):
            for strategy in STRATEGIES:
                series.append((f"{failure} {strategy}", COLOURS[i], strategy == "aggressive",
                               {c: value(p) for (f, c, s), p in points.items()
                                if f == failure and s == strategy and p["executed"]}))
        panels.append((series, f"execution stage: {title}", "contender invocations per run", ""))
    legend = [(f"actuation loss {f / 10:g} %: conservative solid, aggressive dashed", COLOURS[i], False)
              for i, f in enumerate(failures)]
    write_svg(os.path.join(outdir, "apex_contention.svg"), panels, legend, caption=FIG8)

    print("\nExecution stage of the 5x4 `apex` combo (shares of the runs that entered EXECUTING)\n")
    print("| loss | contenders | strategy | runs | executed | PEG commands (mean) | success | wounded | "
          "failed command | rollback cost |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (f, c, s), p in sorted(points.items()):
        if not p["executed"]:
            continue
        e = p["executed"]
        print(f"| {f / 10:g} % | {c} | {s} | {p['runs']} | {e} | {p['plan'] / e:.1f} | {100 * p['ok'] / e:.0f} % | "
              f"{100 * p['wounded'] / e:.0f} % | {100 * p['failed'] / e:.0f} % | "
              f"{100 * p['undone'] / peg / e:.1f} % |")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    outdir, run = sys.argv[1], sys.argv[2:]
    os.makedirs(outdir, exist_ok=True)
    latency_rows = read_tables(run, "apex_latency.csv")
    if latency_rows:
        latency(latency_points(latency_rows), outdir)
    contention_rows = read_tables(run, "apex_contention.csv")
    if contention_rows:
        contention(contention_points(contention_rows), outdir)


if __name__ == "__main__":
    main()
