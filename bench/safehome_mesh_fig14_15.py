#!/usr/bin/env python3
"""SafeHome Fig. 14 and Fig. 15 analogs in the mesh: EV's serial-key schedulers
and leases on whole agents (`meshsim routines --models ev --ev-scheduler ...`).

Reads the CSV files `meshsim routines` wrote (see meshsim --help; the file
name carries the EV variant: ev-... for tl with both leases, ev-fcfs-...,
ev-jit-..., ev-tl-nopre-..., ev-tl-nopost-..., ev-tl-nopre-nopost-...):

    RESULTS/safehome_fig14_mesh/rho<R>/          fcfs, jit and tl at load R
    RESULTS/safehome_fig15_mesh/leases-rho<R>/   tl with leases off (both on: Fig. 14's tl
                                                 at rho R, the same runs)
    RESULTS/safehome_fig15_mesh/commands<C>/     tl with C commands per routine

prints the tables of bench/README.md ("SafeHome EV in the mesh"), writes
points.csv (one row per directory and variant, pooled over the seeds) and
draws the SVGs beside them.

    bench/safehome_mesh_fig14_15.py [RESULTS]     (default: bench/results)

Latency is the paper's "E2E latency normalized with routine runtime":
end-to-end / back-to-back (the invocations' `overhead` column), so 1 is a
routine that neither waited nor stretched. Stretch is routine::ev_stretch
(1: its commands ran back to back); placement time is the time from an
invocation's first serial key to being placed in every lineage.
"""

import csv
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg_chart import COLOURS, read_tables, write_svg  # noqa: E402

SCHEDULERS = ["fcfs", "jit", "tl"]
LEASINGS = ["tl", "tl-nopost", "tl-nopre", "tl-nopre-nopost"]  # both, pre only, post only, none
LEASING_NAMES = {"tl": "both leases", "tl-nopost": "pre-lease only", "tl-nopre": "post-lease only",
                 "tl-nopre-nopost": "no leases"}
# Stretch above this counts as stretched: with 1 s commands the mesh's own round trips between commands
# put a routine that never waits at up to 1.19 under WV, and EV's lock request before each command at
# about 1.3 (p90 1.36 at rho = 1, where hardly anything waits).
STRETCHED = 1.5


def prefix(variant):
    """The file prefix meshsim routines gives an EV variant."""
    return "ev" if variant == "tl" else f"ev-{variant}"


def percentile(values, p):
    """Nearest rank, as the runner's summary computes it; nan when empty."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def point(directory, variant):
    """Pooled metrics of one variant's runs in `directory` ("wv": the WV baseline), or None if it has none."""
    name = "wv" if variant == "wv" else prefix(variant)
    invocations = read_tables([directory], f"{name}-invocations.csv")
    summaries = read_tables([directory], f"{name}-summary.csv")
    if not invocations or not summaries:
        return None
    ran = [r for r in invocations if r["e2e_ms"]]
    latency = [float(r["overhead"]) for r in ran]
    stretch = [float(r["ev_stretch"]) for r in ran if r["ev_stretch"]]
    placement = [float(r["ev_placement_ms"]) for r in invocations if r["ev_placement_ms"]]
    rekeys = [int(r["ev_rekeys"]) for r in invocations if r["ev_rekeys"]]
    return {
        "runs": len(summaries),
        "seeds": " ".join(s["seed"] for s in summaries),
        "invocations": len(invocations),
        "ok": sum(r["outcome"] == "ok" for r in invocations),
        "unfinished": sum(r["outcome"] == "unfinished" for r in invocations),
        "not_ok": sum(r["outcome"] != "ok" for r in invocations),
        "latency_p50": percentile(latency, 50),
        "latency_p90": percentile(latency, 90),
        "latency_mean": mean(latency),
        "e2e_p50_s": percentile([float(r["e2e_ms"]) / 1000 for r in ran], 50),
        "e2e_p90_s": percentile([float(r["e2e_ms"]) / 1000 for r in ran], 90),
        "wait_p50_s": percentile([float(r["wait_ms"]) / 1000 for r in ran], 50),
        "incongruent_share": mean([float(r["temporary_incongruence"]) > 0 for r in ran]),
        "parallelism": mean([float(s["parallelism_level"]) for s in summaries]),
        "stretch_mean": mean(stretch),
        "stretch_p90": percentile(stretch, 90),
        "stretched_share": mean([s > STRETCHED for s in stretch]),
        "placement_p50_ms": percentile(placement, 50),
        "placement_p90_ms": percentile(placement, 90),
        "placement_mean_ms": mean(placement),
        "rekeys_per_invocation": mean(rekeys),
        "serial_order_pass": sum(s["serial_order"] == "pass" for s in summaries),
        "final_incongruent_runs": sum(float(s["final_incongruence"]) > 0 for s in summaries),
    }


def sweep(root, pattern, variants):
    """{(variant, x): point} over the directories of `root` named like `pattern` (x its number)."""
    points = {}
    if not os.path.isdir(root):
        return points
    for name in sorted(os.listdir(root)):
        match = re.fullmatch(pattern, name)
        if not match:
            continue
        x = float(match.group(1))
        for variant in variants:
            p = point(os.path.join(root, name), variant)
            if p is not None:
                points[(variant, x)] = dict(p, directory=name, variant=variant)
    return points


def line(points, names, xs, column, labels=None):
    return [((labels or {}).get(name, name), COLOURS[i % len(COLOURS)], False,
             {x: points[(name, x)][column] for x in xs if (name, x) in points})
            for i, name in enumerate(names)]


def print_health(points):
    """One line over every EV run of a figure: outcomes, the oracle, placement and re-keys."""
    runs = sum(p["runs"] for p in points.values())
    invocations = sum(p["invocations"] for p in points.values())
    ok = sum(p["ok"] for p in points.values())
    unfinished = sum(p["unfinished"] for p in points.values())
    serial = sum(p["serial_order_pass"] for p in points.values())
    final = sum(p["final_incongruent_runs"] for p in points.values())
    p50 = [p["placement_p50_ms"] for p in points.values()]
    p90 = [p["placement_p90_ms"] for p in points.values()]
    rekeys = max(p["rekeys_per_invocation"] for p in points.values())
    print(f"Every run: {ok} of {invocations} invocations ok, {unfinished} unfinished; serial order passed in {serial} "
          f"of {runs} runs, final incongruence above 0 in {final}; placement p50 {min(p50):.0f}-{max(p50):.0f} ms, "
          f"p90 {min(p90):.0f}-{max(p90):.0f} ms per point; re-keys per invocation at most {rekeys:.2f}")
    print()


def write_points(path, points):
    columns = ["directory", "variant", "runs", "seeds", "invocations", "ok", "unfinished", "latency_p50",
               "latency_p90", "latency_mean", "e2e_p50_s", "wait_p50_s", "incongruent_share", "parallelism",
               "stretch_mean", "stretch_p90", "stretched_share", "placement_p50_ms", "placement_p90_ms",
               "placement_mean_ms", "rekeys_per_invocation", "serial_order_pass", "final_incongruent_runs"]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(columns)
        for key in sorted(points, key=lambda k: (k[1], k[0])):
            p = points[key]
            writer.writerow([f"{p[c]:.4g}" if isinstance(p[c], float) else p[c] for c in columns])


def fig14(results):
    root = os.path.join(results, "safehome_fig14_mesh")
    points = sweep(root, r"rho(\d+(?:\.\d+)?)", SCHEDULERS + ["wv"])
    if not points:
        print(f"no runs under {root}")
        return
    rhos = sorted({x for _, x in points})
    print("Fig. 14 in the mesh: latency = E2E / back-to-back, pooled over the seeds")
    print(f"| rho | scheduler | latency p50 | p90 | mean | E2E p50 | wait p50 | stretch p90 | stretch > {STRETCHED} | "
          "routines with temporary incongruence | parallelism level |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for rho in rhos:
        for s in SCHEDULERS:
            p = points.get((s, rho))
            if p is None:
                continue
            print(f"| {rho:g} | {s} | {p['latency_p50']:.2f} | {p['latency_p90']:.1f} | {p['latency_mean']:.2f} | "
                  f"{p['e2e_p50_s']:.1f} s | {p['wait_p50_s']:.1f} s | {p['stretch_p90']:.2f} | "
                  f"{p['stretched_share']:.1%} | {p['incongruent_share']:.1%} | {p['parallelism']:.2f} |")
    print()
    print_health({k: v for k, v in points.items() if k[0] != "wv"})
    print("| rho | mean latency FCFS / TL | JiT / TL | p90 FCFS / TL | JiT / TL | parallelism TL / FCFS | TL / JiT |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for rho in rhos:
        if not all((s, rho) in points for s in SCHEDULERS):
            continue
        f, j, t = (points[(s, rho)] for s in SCHEDULERS)
        paper = " (paper 2.36, 1.33; parallelism 2.3, 2.0)" if rho == 4 else ""
        print(f"| {rho:g}{paper} | {f['latency_mean'] / t['latency_mean']:.2f} | "
              f"{j['latency_mean'] / t['latency_mean']:.2f} | {f['latency_p90'] / t['latency_p90']:.2f} | "
              f"{j['latency_p90'] / t['latency_p90']:.2f} | {t['parallelism'] / f['parallelism']:.2f} | "
              f"{t['parallelism'] / j['parallelism']:.2f} |")
    print()
    if any(v == "wv" for v, _ in points):
        print("E2E against WV on the same workloads, seeds and meshes (the issue's goal: EV within 1.25x)")
        print("| rho | WV E2E p50 / p90 | " + " | ".join(f"{s} p50 / WV | {s} p90 / WV" for s in SCHEDULERS) + " |")
        print("| --- | --- |" + " --- | --- |" * len(SCHEDULERS))
        for rho in rhos:
            w = points.get(("wv", rho))
            if w is None:
                continue
            cells = []
            for s in SCHEDULERS:
                p = points.get((s, rho))
                cells += ["", ""] if p is None else [f"{p['e2e_p50_s'] / w['e2e_p50_s']:.2f}",
                                                     f"{p['e2e_p90_s'] / w['e2e_p90_s']:.2f}"]
            print(f"| {rho:g} | {w['e2e_p50_s']:.2f} / {w['e2e_p90_s']:.2f} s | " + " | ".join(cells) + " |")
        print()
    write_points(os.path.join(root, "points.csv"), points)
    write_svg(os.path.join(root, "fig14_mesh_vs_load.svg"),
              [(line(points, SCHEDULERS, rhos, "latency_mean"), "(a) mean latency / runtime", "rho", ""),
               (line(points, SCHEDULERS, rhos, "incongruent_share"), "(b) temporary incongruence", "rho",
                "share of routines"),
               (line(points, SCHEDULERS, rhos, "parallelism"), "(c) parallelism level", "rho", "")],
              [(name, COLOURS[i], False) for i, name in enumerate(SCHEDULERS)],
              caption="meshsim routines, EV on 7 agents, mean over seeds; SafeHome Fig. 14 analog in the mesh")


def fig15(results):
    root = os.path.join(results, "safehome_fig15_mesh")
    by_load = sweep(root, r"leases-rho(\d+(?:\.\d+)?)", LEASINGS)
    # TL with both leases at load R is Fig. 14's tl point: the same runs, not repeated.
    fig14_tl = sweep(os.path.join(results, "safehome_fig14_mesh"), r"rho(\d+(?:\.\d+)?)", ["tl"])
    for rho in {x for _, x in by_load}:
        if ("tl", rho) not in by_load and ("tl", rho) in fig14_tl:
            by_load[("tl", rho)] = dict(fig14_tl[("tl", rho)], directory=f"../safehome_fig14_mesh/rho{rho:g}")
    by_commands = sweep(root, r"commands(\d+)", ["tl"])
    if not by_load and not by_commands:
        print(f"no runs under {root}")
        return
    if by_load:
        print("Fig. 15a/b in the mesh: TL with leases on and off")
        print(f"| rho | leases | latency p50 | p90 | mean (x both) | routines with temporary incongruence | "
              f"parallelism | stretch p90 | stretch > {STRETCHED} |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for rho in sorted({x for _, x in by_load}):
            both = by_load.get(("tl", rho))
            for name in LEASINGS:
                p = by_load.get((name, rho))
                if p is None:
                    continue
                ratio = f" (x{p['latency_mean'] / both['latency_mean']:.2f})" if both else ""
                print(f"| {rho:g} | {LEASING_NAMES[name]} | {p['latency_p50']:.2f} | {p['latency_p90']:.1f} | "
                      f"{p['latency_mean']:.2f}{ratio} | {p['incongruent_share']:.1%} | {p['parallelism']:.2f} | "
                      f"{p['stretch_p90']:.2f} | {p['stretched_share']:.1%} |")
        print()
        print_health({k: v for k, v in by_load.items() if k[0] != "tl"})
        write_points(os.path.join(root, "points_leases.csv"), by_load)
    if by_commands:
        commands = sorted({x for _, x in by_commands})
        print(f"Fig. 15c/d in the mesh: TL (both leases) against commands per routine C; stretched: stretch > "
              f"{STRETCHED}")
        print("| C | latency mean | stretch mean | p90 | stretched | placement p50 | p90 | mean |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for c in commands:
            p = by_commands[("tl", c)]
            print(f"| {c:g} | {p['latency_mean']:.2f} | {p['stretch_mean']:.2f} | {p['stretch_p90']:.2f} | "
                  f"{p['stretched_share']:.1%} | {p['placement_p50_ms']:.0f} ms | {p['placement_p90_ms']:.0f} ms | "
                  f"{p['placement_mean_ms']:.0f} ms |")
        print()
        print_health(by_commands)
        write_points(os.path.join(root, "points_commands.csv"), by_commands)
        write_svg(os.path.join(root, "fig15_mesh_stretch_placement.svg"),
                  [(line(by_commands, ["tl"], commands, "stretched_share"),
                    f"(c) routines with stretch > {STRETCHED}", "C", "rho = 4"),
                   (line(by_commands, ["tl"], commands, "stretch_mean"), "(c) mean stretch", "C", "rho = 4"),
                   (line(by_commands, ["tl"], commands, "placement_p50_ms"), "(d) placement time p50, ms", "C",
                    "first key to placed")],
                  [("TL, both leases", COLOURS[0], False)],
                  caption="meshsim routines, EV on 7 agents; SafeHome Fig. 15c-d analog in the mesh",
                  numeric_x=True)
    if by_load:
        rhos = sorted({x for _, x in by_load})
        legend = [(LEASING_NAMES[name], COLOURS[i], False) for i, name in enumerate(LEASINGS)]
        write_svg(os.path.join(root, "fig15_mesh_leasing.svg"),
                  [(line(by_load, LEASINGS, rhos, "latency_mean", LEASING_NAMES), "(a) mean latency / runtime",
                    "rho", ""),
                   (line(by_load, LEASINGS, rhos, "incongruent_share", LEASING_NAMES),
                    "(b) temporary incongruence", "rho", "share of routines")],
                  legend, caption="meshsim routines, EV TL with leases on and off; SafeHome Fig. 15a-b analog")


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    fig14(results)
    fig15(results)


if __name__ == "__main__":
    main()
