#!/usr/bin/env python3
"""SafeHome Fig. 14 and Fig. 15 analogs: scheduling policies and TL's leasing.

Reads what bench/safehome_scheduler_bench wrote under RESULTS (default
bench/results): safehome_fig14/{policies,latency_quantiles}.csv and
safehome_fig15/{leasing_vs_load,leasing_vs_commands,latency_quantiles,
placement_time}.csv; prints the tables of bench/README.md (the paper's numbers
beside ours) and draws the SVGs next to the CSV files.

    bench/safehome_fig14_15.py [RESULTS]
"""

import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg_chart import COLOURS, read, read_tables, write_svg  # noqa: E402

POLICIES = ["fcfs", "jit", "tl"]
LEASINGS = ["tl_both", "tl_pre_only", "tl_post_only", "tl_none"]
FIG14_RHO = 4  # the load of the paper's Fig. 14 numbers
STRETCH_PAPER = {2: 0.05, 4: 0.25, 8: 0.15}  # share of routines with stretch > 1 (§7.5.1)


def means(rows, key):
    """{(policy, x): {column: mean over the seeds}}, x the value of column `key` (rho or commands)."""
    sums = defaultdict(lambda: defaultdict(float))
    counts = defaultdict(int)
    for row in rows:
        point = (row["policy"], float(row[key]) if key == "rho" else int(row[key]))
        counts[point] += 1
        for column, value in row.items():
            if column not in ("policy", "rho", "commands"):
                sums[point][column] += float(value)
    return {point: {c: v / counts[point] for c, v in columns.items()} for point, columns in sums.items()}


def quantiles(directory):
    """{(policy, rho, commands): {quantile: latency}}."""
    out = defaultdict(dict)
    for row in read_tables([directory], "latency_quantiles.csv"):
        out[(row["policy"], float(row["rho"]), row["commands"])][float(row["quantile"])] = float(row["latency"])
    return out


def line(points, names, x_values, column):
    return [(name, COLOURS[i % len(COLOURS)], False,
             {x: points[(name, x)][column] for x in x_values if (name, x) in points})
            for i, name in enumerate(names)]


def fig14(results):
    directory = os.path.join(results, "safehome_fig14")
    points = means(read_tables([directory], "policies.csv"), "rho")
    if not points:
        sys.exit(f"safehome_fig14_15: no policies.csv in {directory}")
    q = quantiles(directory)
    rhos = sorted({x for _, x in points})
    print("Fig. 14: latency = E2E / back-to-back, pooled over the seeds")
    print("| rho | policy | latency p50 | p90 | mean | routines with temporary incongruence | "
          "incongruence (mean) | parallelism level |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for rho in rhos:
        for policy in POLICIES:
            p = points.get((policy, rho))
            if p is None:
                continue
            lat = q[(policy, rho, "1-5")]
            print(f"| {rho:g} | {policy} | {lat[0.5]:.2f} | {lat[0.9]:.1f} | {p['latency_mean']:.2f} | "
                  f"{p['incongruent_share']:.1%} | {p['incongruence_mean']:.3f} | {p['parallelism']:.2f} |")
    print()
    print("| rho | mean latency FCFS / TL | JiT / TL | p90 FCFS / TL | JiT / TL | parallelism TL / FCFS | TL / JiT |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for rho in rhos:
        if not all((policy, rho) in points for policy in POLICIES):
            continue
        f, j, t = (points[(policy, rho)] for policy in POLICIES)
        fq, jq, tq = (q[(policy, rho, "1-5")] for policy in POLICIES)
        paper = " (paper 2.36, 1.33; parallelism 2.3, 2.0)" if rho == FIG14_RHO else ""
        print(f"| {rho:g}{paper} | {f['latency_mean'] / t['latency_mean']:.2f} | "
              f"{j['latency_mean'] / t['latency_mean']:.2f} | {fq[0.9] / tq[0.9]:.2f} | {jq[0.9] / tq[0.9]:.2f} | "
              f"{t['parallelism'] / f['parallelism']:.2f} | {t['parallelism'] / j['parallelism']:.2f} |")
    print()
    write_svg(os.path.join(directory, "fig14_vs_load.svg"),
              [(line(points, POLICIES, rhos, "latency_mean"), "(a) mean latency / runtime", "rho", ""),
               (line(points, POLICIES, rhos, "incongruent_share"), "(b) temporary incongruence", "rho",
                "share of routines"),
               (line(points, POLICIES, rhos, "parallelism"), "(c) parallelism level", "rho", "")],
              [(name, COLOURS[i], False) for i, name in enumerate(POLICIES)],
              caption="safehome_scheduler_bench, Table 3 workload, mean over seeds; SafeHome Fig. 14 analog")
    cdf = [(policy, COLOURS[i], False, {qq * 100: v for qq, v in q[(policy, FIG14_RHO, "1-5")].items()})
           for i, policy in enumerate(POLICIES)]
    write_svg(os.path.join(directory, "fig14_latency_percentiles.svg"),
              [(cdf, f"latency / runtime at rho = {FIG14_RHO}", "percentile of routines",
                "the CDF of Fig. 14a, axes swapped")],
              [(name, COLOURS[i], False) for i, name in enumerate(POLICIES)], numeric_x=True)


def fig15(results):
    directory = os.path.join(results, "safehome_fig15")
    by_load = means(read_tables([directory], "leasing_vs_load.csv"), "rho")
    by_commands = means(read_tables([directory], "leasing_vs_commands.csv"), "commands")
    if not by_load or not by_commands:
        sys.exit(f"safehome_fig15: no leasing_vs_*.csv in {directory}")
    rhos = sorted({x for _, x in by_load})
    commands = sorted({x for _, x in by_commands})
    for title, points, xs, label in (("load rho, 1-5 commands", by_load, rhos, "rho"),
                                      ("commands per routine C, rho = 4", by_commands, commands, "C")):
        print(f"Fig. 15a/b against {title}: mean latency (x TL with both leases), routines with temporary "
              "incongruence, routines TL appended")
        print(f"| {label} | " + " | ".join(LEASINGS) + " |")
        print("| --- |" + " --- |" * len(LEASINGS))
        for x in xs:
            both = points[("tl_both", x)]["latency_mean"]
            cells = []
            for name in LEASINGS:
                p = points.get((name, x))
                if p is None:
                    cells.append("")
                    continue
                cells.append(f"{p['latency_mean']:.2f} (x{p['latency_mean'] / both:.2f}), "
                             f"{p['incongruent_share']:.1%}, {p['appended'] / p['routines']:.0%}")
            print(f"| {x:g} | " + " | ".join(cells) + " |")
        print()
    print("Fig. 15c: share of routines TL (both leases) stretched, rho = 4")
    print("| C | stretch > 1 | stretch p90 (seed mean) | paper |")
    print("| --- | --- | --- | --- |")
    for c in commands:
        p = by_commands[("tl_both", c)]
        paper = STRETCH_PAPER.get(c)
        print(f"| {c} | {p['stretched_share']:.1%} | {p['stretch_p90']:.2f} | "
              f"{'' if paper is None else f'{paper:.0%}'} |")
    print()
    placement = defaultdict(dict)
    for name, values in read(os.path.join(directory, "placement_time.csv")):
        if name.endswith("_median"):
            bench, arg = name[:-len("_median")].split("/commands:")
            placement[int(arg)][bench] = values
    print("Fig. 15d: one placement into a table of 30 routines over 15 devices (CPU time, median of repetitions)")
    print("| C | TL | append baseline | TL / baseline | probes |")
    print("| --- | --- | --- | --- | --- |")
    ratio = {}
    for c in sorted(placement):
        tl, base = placement[c]["BM_TimelinePlacement"], placement[c]["BM_AppendPlacementBaseline"]
        ratio[c] = tl["cpu_time"] / base["cpu_time"]
        print(f"| {c} | {tl['cpu_time']:.1f} us | {base['cpu_time']:.2f} us | {ratio[c]:.0f} | {tl['probes']:.1f} |")
    print()
    leasing_colours = [(name, COLOURS[i], False) for i, name in enumerate(LEASINGS)]
    write_svg(os.path.join(directory, "fig15_leasing.svg"),
              [(line(by_load, LEASINGS, rhos, "latency_mean"), "(a) mean latency / runtime", "rho", "1-5 commands"),
               (line(by_load, LEASINGS, rhos, "incongruent_share"), "(b) temporary incongruence", "rho",
                "share of routines"),
               (line(by_commands, LEASINGS, commands, "latency_mean"), "(a) mean latency / runtime", "C", "rho = 4"),
               (line(by_commands, LEASINGS, commands, "incongruent_share"), "(b) temporary incongruence", "C",
                "share of routines")],
              leasing_colours, caption="safehome_scheduler_bench, TL with leases on and off; SafeHome Fig. 15a-b analog")
    write_svg(os.path.join(directory, "fig15_stretch_placement.svg"),
              [([("tl_both", COLOURS[0], False,
                  {c: by_commands[("tl_both", c)]["stretched_share"] for c in commands}),
                 ("paper", COLOURS[1], True, dict(STRETCH_PAPER))],
                "(c) routines with stretch > 1", "C", "rho = 4"),
               ([("TL / append baseline", COLOURS[0], False, ratio)], "(d) placement time / baseline", "C",
                "30 routines, 15 devices")],
              [("ours (TL, both leases)", COLOURS[0], False), ("paper (§7.5.1)", COLOURS[1], True)],
              caption="SafeHome Fig. 15c-d analog", numeric_x=True)


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    fig14(results)
    fig15(results)


if __name__ == "__main__":
    main()
