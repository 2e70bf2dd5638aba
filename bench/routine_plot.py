#!/usr/bin/env python3
"""Plots routine_bench (comesh.md Fig. 4, Fig. 5, sync delay, Fig. 11) as SVGs,
with the paper's claims beside ours, and prints the README's tables.

  mkdir -p RUN && cd RUN
  ROUTINE_BENCH_FULL=1 ROUTINE_BENCH_SEEDS=5 ROUTINE_BENCH_OUT=. routine_bench
  bench/routine_plot.py OUTDIR RUN [RUN...]

Each RUN (merged; say, a second mesh size for the traffic run apart) holds the routine_delays.csv (one row per trigger; empty delays: the
trigger never actuated) and routine_traffic.csv (bytes per second per node and
traffic class) and routine_heartbeats.csv the bench wrote. Writes OUTDIR/routine_client_delay.svg (Fig. 4:
client delay against devices per routine, SLA and OLA, per topology; Fig. 5:
grid SLA with and without churn, all at once and, if the run has it, gradual
(experiment client_gradual: its own no-churn baseline)), OUTDIR/routine_sync_delay.svg and
OUTDIR/routine_traffic_N_nodes.svg (Fig. 11: bytes per node per second against
routines, decentralized and central, background and foreground, and central /
decentralized).
"""

import os
import sys

from svg_chart import COLOURS, read_tables, write_svg

FIG4 = "comesh.md Fig. 4: client delay grows gradually with devices; OLA below SLA; grid above random and clustered"
FIG5 = "comesh.md Fig. 5: 40 % of nodes churned (grid, SLA): client delay +25 %"
RESTART_MS = 9000  # routine_bench: crashed nodes come back kChurnDowntime_s - kChurnLead_s after the trigger
MODES = ("decentralized", "decentralized_uncoalesced", "central")
FIG11 = "comesh.md Fig. 11: decentralized uses over 10x less bandwidth than one central group; flat in routines"
BACKGROUND = {"olsr", "membership", "kgroup_heartbeat", "catalog_sync", "device_subscription", "device_io"}


def quantile(values, q):
    """The q-quantile by rank, as the bench computes it (nan for no samples)."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[int(q * (len(values) - 1))]


def delay_points(rows, experiment):
    """{(topology, strategy, churn, devices): {"delay": [...], "after": [...], "tried": n}}."""
    out = {}
    for row in rows:
        if row["experiment"] != experiment:
            continue
        key = (row["topology"], row["strategy"], int(row["churn"]), int(row["devices"]))
        point = out.setdefault(key, {"delay": [], "after": [], "trigger": [], "tried": 0})
        point["tried"] += 1
        if row["delay_ms"]:
            point["delay"].append(float(row["delay_ms"]))
        if row.get("trigger_ms"):
            point["trigger"].append(float(row["trigger_ms"]))
            point["after"].append(float(row["locks_ms"]) + float(row["command_ms"]))
    return out


def fmt(value):
    return "-" if value != value else f"{value:.0f}"


def client_delay(points, outdir, gradual=None):
    topologies = ["grid", "random", "clustered"]
    panels = []
    legend = [("SLA p50", COLOURS[0], False), ("SLA p90", COLOURS[0], True),
              ("OLA p50", COLOURS[1], False), ("OLA p90", COLOURS[1], True),
              ("grid SLA, 40 % nodes crashed, p50", COLOURS[2], False),
              ("... p90", COLOURS[2], True)]
    for topology in topologies:
        series = []
        for i, strategy in enumerate(("sla", "ola")):
            for q, dashed in ((0.5, False), (0.9, True)):
                series.append((f"{strategy} p{int(q * 100)}", COLOURS[i], dashed,
                               {d: quantile(p["delay"], q) for (t, s, c, d), p in points.items()
                                if t == topology and s == strategy and c == 0 and p["delay"]}))
        panels.append((series, f"client delay (ms), {topology}", "devices per routine", ""))
    churn = []
    for churned, colour in ((0, COLOURS[0]), (40, COLOURS[2])):
        for q, dashed in ((0.5, False), (0.9, True)):
            churn.append((f"{churned}", colour, dashed,
                          {d: quantile(p["delay"], q) for (t, s, c, d), p in points.items()
                           if t == "grid" and s == "sla" and c == churned and p["delay"]}))
    panels.append((churn, "grid, SLA: churn (ms)", "devices per routine", ""))
    if gradual:
        series = []
        for churned, colour in ((0, COLOURS[0]), (40, COLOURS[3])):
            for q, dashed in ((0.5, False), (0.9, True)):
                series.append((f"g{churned}", colour, dashed,
                               {d: quantile(p["delay"], q) for (t, s, c, d), p in gradual.items()
                                if t == "grid" and s == "sla" and c == churned and p["delay"]}))
        panels.append((series, "grid, SLA: gradual churn (ms)", "devices per routine", "paper: +25 %"))
        legend += [("gradual: no churn, p50", COLOURS[0], False),
                   ("gradual: 40 % crashed one at a time, p50", COLOURS[3], False), ("... p90", COLOURS[3], True)]
    write_svg(os.path.join(outdir, "routine_client_delay.svg"), panels, legend, caption=FIG4 + "; " + FIG5)

    print("\nClient delay (ms, trigger device changed -> first command actuated; "
          "after trigger: trigger committed -> first command)\n")
    print("| topology | devices | strategy | churn | p50 | p90 | after trigger p50 / p90 | completed | "
          "ratio to no churn (p50) | before restart |")
    print("| --- | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for key in sorted(points, key=lambda k: (topologies.index(k[0]), k[2], k[3], k[1])):
        topology, strategy, churned, devices = key
        p = points[key]
        ratio = ""
        before = ""
        if churned:
            before = f"{sum(1 for d in p['delay'] if d < RESTART_MS)}/{p['tried']}"
            base = points.get((topology, strategy, 0, devices))
            if base and base["delay"] and p["delay"]:
                ratio = f"{quantile(p['delay'], 0.5) / quantile(base['delay'], 0.5):.2f}"
        print(f"| {topology} | {devices} | {strategy.upper()} | {churned} % | {fmt(quantile(p['delay'], 0.5))} | "
              f"{fmt(quantile(p['delay'], 0.9))} | {fmt(quantile(p['after'], 0.5))} / "
              f"{fmt(quantile(p['after'], 0.9))} | {len(p['delay'])}/{p['tried']} | {ratio} | {before} |")


def gradual_table(points):
    """Fig. 5, gradual churn (experiment client_gradual): every trigger counted, none dropped."""
    print("\nFig. 5, gradual churn (grid, SLA; ms, trigger device changed -> first command actuated; "
          "paper: +25 %)\n")
    print("| devices | no churn p50 / p90 | gradual 40 % p50 / p90 | ratio p50 | ratio p90 | "
          "after trigger p50 / p90 (no churn; churn) | within 30 s (no churn; churn) |")
    print("| ---: | --- | --- | ---: | ---: | --- | --- |")
    for devices in sorted({k[3] for k in points}):
        base = points.get(("grid", "sla", 0, devices))
        churned = points.get(("grid", "sla", 40, devices))
        if not base or not churned:
            continue
        q = lambda p, x: quantile(p["delay"], x)
        ratio = lambda x: (f"{q(churned, x) / q(base, x):.2f}"
                           if base["delay"] and churned["delay"] else "")
        print(f"| {devices} | {fmt(q(base, 0.5))} / {fmt(q(base, 0.9))} | {fmt(q(churned, 0.5))} / "
              f"{fmt(q(churned, 0.9))} | {ratio(0.5)} | {ratio(0.9)} | "
              f"{fmt(quantile(base['after'], 0.5))} / {fmt(quantile(base['after'], 0.9))}; "
              f"{fmt(quantile(churned['after'], 0.5))} / {fmt(quantile(churned['after'], 0.9))} | "
              f"{len(base['delay'])}/{base['tried']}; {len(churned['delay'])}/{churned['tried']} |")


def sync_delay(points, outdir):
    series = []
    for i, strategy in enumerate(("sla", "ola")):
        for q, dashed in ((0.5, False), (0.9, True)):
            series.append((strategy, COLOURS[i], dashed,
                           {d: quantile(p["delay"], q) for (t, s, c, d), p in points.items()
                            if s == strategy and p["delay"]}))
    legend = [("SLA p50", COLOURS[0], False), ("SLA p90", COLOURS[0], True),
              ("OLA p50", COLOURS[1], False), ("OLA p90", COLOURS[1], True)]
    write_svg(os.path.join(outdir, "routine_sync_delay.svg"),
              [(series, "sync delay (ms), grid", "devices per routine", "")], legend,
              caption="first invocation's last lock released -> second's first command (same routine, twice)")
    print("\nSync delay (ms)\n")
    print("| devices | strategy | p50 | p90 | max | completed |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for key in sorted(points, key=lambda k: (k[3], k[1])):
        p = points[key]
        print(f"| {key[3]} | {key[1].upper()} | {fmt(quantile(p['delay'], 0.5))} | {fmt(quantile(p['delay'], 0.9))} | "
              f"{fmt(max(p['delay']) if p['delay'] else float('nan'))} | {len(p['delay'])}/{p['tried']} |")


def traffic(rows, outdir, suffix):
    """{(routines, mode): {node: {class: bytes/s}}} -> plots and tables (rows of one mesh size)."""
    nodes = {}
    for row in rows:
        key = (int(row["routines"]), row["mode"])
        nodes.setdefault(key, {}).setdefault(int(row["node"]), {})[row["class"]] = float(row["bytes_per_s"])
    summary = {}
    for key, per_node in nodes.items():
        totals = [sum(c.values()) for c in per_node.values()]
        background = [sum(v for k, v in c.items() if k in BACKGROUND) for c in per_node.values()]
        count = len(per_node)
        classes = {}
        for c in per_node.values():
            for k, v in c.items():
                classes[k] = classes.get(k, 0.0) + v / count
        summary[key] = {"mean": sum(totals) / count, "max": max(totals), "background": sum(background) / count,
                        "foreground": (sum(totals) - sum(background)) / count, "classes": classes}
    routines = sorted({r for r, _ in summary})
    line = lambda mode, field: {r: summary[(r, mode)][field] for r in routines if (r, mode) in summary}
    ratio = lambda field: {r: summary[(r, "central")][field] / summary[(r, "decentralized")][field]
                           for r in routines if (r, "central") in summary and (r, "decentralized") in summary}
    # The hub's own load against a decentralized node's: the reading under which a hub that does every
    # node's work can cost 10x more than "a node" (the means cannot differ by 10x: the hub's traffic
    # crosses the same mesh).
    hub_ratio = {r: summary[(r, "central")]["max"] / summary[(r, "decentralized")]["mean"]
                 for r in routines if (r, "central") in summary and (r, "decentralized") in summary}
    panels = [
        ([("d", COLOURS[0], False, line("decentralized", "mean")), ("c", COLOURS[1], False, line("central", "mean")),
          ("db", COLOURS[0], True, line("decentralized", "background")),
          ("cb", COLOURS[1], True, line("central", "background")),
          ("df", COLOURS[2], False, line("decentralized", "foreground")),
          ("du", COLOURS[5], False, line("decentralized_uncoalesced", "mean"))],
         "bytes per node per second, mean", "routines", ""),
        ([("d", COLOURS[0], False, line("decentralized", "max")), ("c", COLOURS[1], False, line("central", "max"))],
         "bytes per second, busiest node", "routines", ""),
        ([("m", COLOURS[3], False, ratio("mean")), ("x", COLOURS[4], False, ratio("max"))],
         "central / decentralized", "routines", "paper: over 10"),
    ]
    legend = [("decentralized (k = 3), total", COLOURS[0], False), ("central (k = 1, one hub), total", COLOURS[1], False),
              ("decentralized background", COLOURS[0], True), ("central background", COLOURS[1], True),
              ("decentralized foreground", COLOURS[2], False),
              ("decentralized, heartbeats not coalesced, total", COLOURS[5], False),
              ("ratio of the means", COLOURS[3], False), ("ratio of the busiest nodes", COLOURS[4], False)]
    write_svg(os.path.join(outdir, f"routine_traffic{suffix}.svg"), panels, legend, caption=FIG11)

    print(f"\nFig. 11, {suffix.strip('_')}: bytes per node per second (hop by hop, device I/O included)\n")
    print("| routines | mode | mean | busiest | background | foreground | heartbeats | "
          "central / decentral. (mean, busiest) | hub / decentral. mean |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for r in routines:
        for mode in MODES:
            if (r, mode) not in summary:
                continue
            s = summary[(r, mode)]
            share = s["classes"].get("kgroup_heartbeat", 0.0) / s["mean"]
            rat = hub = ""
            if mode == "decentralized" and r in ratio("mean"):
                rat = f"{ratio('mean')[r]:.2f}, {ratio('max')[r]:.2f}"
                hub = f"{hub_ratio[r]:.2f}"
            print(f"| {r} | {mode} | {s['mean']:.0f} | {s['max']:.0f} | {s['background']:.0f} | "
                  f"{s['foreground']:.0f} | {100 * share:.0f} % | {rat} | {hub} |")
    print("\nMean bytes per node per second by class\n")
    classes = sorted({k for s in summary.values() for k in s["classes"]})
    print("| routines | mode | " + " | ".join(classes) + " |")
    print("| ---: | --- | " + " | ".join("---:" for _ in classes) + " |")
    for r in routines:
        for mode in MODES:
            if (r, mode) in summary:
                c = summary[(r, mode)]["classes"]
                print(f"| {r} | {mode} | " + " | ".join(f"{c.get(k, 0.0):.0f}" for k in classes) + " |")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    outdir, run = sys.argv[1], sys.argv[2:]
    os.makedirs(outdir, exist_ok=True)
    delays = read_tables(run, "routine_delays.csv")
    if delays:
        gradual = delay_points(delays, "client_gradual")
        client_delay(delay_points(delays, "client"), outdir, gradual)
        if gradual:
            gradual_table(gradual)
        sync = delay_points(delays, "sync")
        if sync:
            sync_delay(sync, outdir)
    traffic_rows = read_tables(run, "routine_traffic.csv")
    for size in sorted({int(row["nodes"]) for row in traffic_rows}):
        traffic([row for row in traffic_rows if int(row["nodes"]) == size], outdir, f"_{size}_nodes")
    heartbeats = read_tables(run, "routine_heartbeats.csv")
    if heartbeats:
        print("\nk-group heartbeats (decentralized): heartbeats and the requests that carried them per second "
              "mesh-wide (equal without coalescing), distinct leader -> follower node pairs, and requests per pair "
              "per second (10 at one request per pair per 100 ms tick)\n")
        print("| nodes | routines | coalesced | heartbeats/s | requests/s | pairs | requests per pair per s |")
        print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
        for row in heartbeats:
            if row["mode"] == "central":
                continue
            rate, pairs = float(row["heartbeats_per_s"]), int(row["peer_pairs"])
            requests = float(row.get("heartbeat_requests_per_s") or rate)
            coalesced = "yes" if row.get("coalesce", "0") == "1" else "no"
            print(f"| {row['nodes']} | {row['routines']} | {coalesced} | {rate:.0f} | {requests:.0f} | {pairs} | "
                  f"{requests / pairs if pairs else 0:.1f} |")


if __name__ == "__main__":
    main()
