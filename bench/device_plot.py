#!/usr/bin/env python3
"""Plots device_bench (device monitoring, decentralized against centralized)
as SVGs, with the paper's claims beside ours, and prints the table.

  mkdir -p RUN
  DEVICE_BENCH_OUT=RUN build/bench/device_bench --benchmark_format=csv > RUN/device.csv
  bench/device_plot.py OUTDIR RUN [RUN...]

Each RUN directory holds the benchmark's CSV (device.csv) and the
device_load_cdf.csv and device_traffic.csv the bench wrote beside it; several
RUNs (say, the large points run apart with a shorter window) are merged.
Writes, for the watched runs (BM_DeviceMonitoring) and the unwatched ones
(BM_DeviceMonitoringUnwatched, suffix _unwatched) as present,
OUTDIR/device_bandwidth.svg (bytes and messages per node per second against
the number of devices, mean and busiest node, decentralized and centralized;
and centralized / decentralized, which comesh.md Fig. 11 puts above 10) and
OUTDIR/device_load_cdf.svg (CDFs of devices per leader and of k-groups per
node, Fig. 6's spatial load). Prints every point with its validity (share of
views, or of leaders' records, that know every device), and where each
point's traffic goes by layer and message type.
"""

import os
import sys

from svg_chart import COLOURS, read, read_tables, write_svg

FIG11 = "comesh.md Fig. 11: decentralized uses over 10x less bandwidth than centralized (one k = 1 group)"
FIG6 = ("comesh.md Fig. 6 (LSH): load near the devices; median close to random selection's, "
        "a longer tail from clustering")
MODES = ("decentralized", "central")
# benchmark family -> (suffix of its files and CSV modes, what its subscribers do)
FAMILIES = {"BM_DeviceMonitoring": ("", "every node watches every device"),
            "BM_DeviceMonitoringUnwatched": ("_unwatched", "no watchers: the device leaders' monitoring only")}


def points(rows, family):
    """{(nodes, devices): {mode: counters}} from FAMILY/NODES/DEVICES/CENTRAL rows."""
    out = {}
    for name, values in rows:
        parts = name.split("/")
        if parts[0] != family or len(parts) < 4:
            continue
        out.setdefault((int(parts[1]), int(parts[2])), {})[MODES[int(parts[3])]] = values
    return out


def ratio(a, b):
    return a / b if b else float("nan")


def valid(counters):
    return counters["observed_share"] >= 1 and counters["current_share"] >= 1


def bandwidth(grid, path, subtitle):
    """Points in order of devices, then nodes; x is the rank, labelled nodes/devices."""
    order = sorted(grid, key=lambda point: (point[1], point[0]))
    by_rank = {rank: grid[point] for rank, point in enumerate(order)}
    labels = {rank: f"{n}/{d}" for rank, (n, d) in enumerate(order)}
    invalid = [labels[r] for r, m in by_rank.items() if not all(valid(v) for v in m.values())]
    panels = []
    legend = []
    for key, title in (("bytes", "bytes / node / s"), ("msgs", "messages / node / s")):
        series = []
        for colour, mode in zip(COLOURS, MODES):
            for stat, dashed in (("mean", False), ("max", True)):
                series.append((f"{mode}, {'mean' if stat == 'mean' else 'busiest node'}", colour, dashed,
                               {r: m[mode][f"{key}_per_node_s_{stat}"] for r, m in by_rank.items() if mode in m}))
        panels.append((series, title, "nodes / devices", ""))
        legend = [(label, colour, dashed) for label, colour, dashed, _ in series]
    complete = {r: m for r, m in by_rank.items() if len(m) == 2 and all(valid(v) for v in m.values())}
    ratios = [("centralized / decentralized, mean", COLOURS[2], False,
               {r: ratio(m["central"]["bytes_per_node_s_mean"], m["decentralized"]["bytes_per_node_s_mean"])
                for r, m in complete.items()}),
              ("centralized / decentralized, busiest node", COLOURS[2], True,
               {r: ratio(m["central"]["bytes_per_node_s_max"], m["decentralized"]["bytes_per_node_s_max"])
                for r, m in complete.items()}),
              ("paper: over 10", COLOURS[4], True, {r: 10.0 for r in by_rank})]
    note = f"invalid, left out: {', '.join(invalid)}" if invalid else "above 10: the paper's claim holds"
    panels.append((ratios, "bytes: centralized / decentralized", "nodes / devices", note))
    legend += [(label, colour, dashed) for label, colour, dashed, _ in ratios]
    write_svg(path, panels, legend, caption=f"{subtitle}. {FIG11}", labels=labels)


def cdf(values):
    """{value: share of samples <= value}, from 0."""
    ordered = sorted(values)
    return {v: sum(1 for x in ordered if x <= v) / len(ordered) for v in [0.0] + ordered}


def load_cdf(loads, suffix, path):
    """loads: rows of device_load_cdf.csv; draws those of one family (its suffix)."""
    samples = {}  # (metric, nodes, devices, mode) -> [value]
    for row in loads:
        mode = row["mode"].removesuffix(suffix) if suffix else row["mode"]
        if mode not in MODES or (suffix and not row["mode"].endswith(suffix)):
            continue
        key = (row["metric"], int(row["nodes"]), int(row["devices"]), mode)
        samples.setdefault(key, []).append(float(row["value"]))
    if not samples:
        return
    grid = sorted({(n, d) for _, n, d, _ in samples})
    panels = []
    legend = []
    for metric, title in (("devices_per_leader", "devices watched per leader (CDF)"),
                          ("groups_per_node", "k-groups per node (CDF)")):
        series = []
        for colour, (n, d) in zip(COLOURS * 2, grid):
            for mode, dashed in (("decentralized", False), ("central", True)):
                values = samples.get((metric, n, d, mode))
                if values:
                    series.append((f"{n} nodes, {d} devices, {mode}", colour, dashed, cdf(values)))
        panels.append((series, title, title.split(" (")[0], "solid: decentralized; dashed: centralized"))
        legend = [(label, colour, dashed) for label, colour, dashed, _ in series]
    write_svg(path, panels, legend, caption=FIG6, numeric_x=True)
    print(f"\nFig. 6 spatial load{' (' + suffix.strip('_') + ')' if suffix else ''} (decentralized / centralized): p50, p90, max of devices per leader and "
          "groups per node")
    for n, d in grid:
        cells = []
        for metric in ("devices_per_leader", "groups_per_node"):
            for mode in MODES:
                v = sorted(samples.get((metric, n, d, mode), [0.0]))
                q = lambda p: v[int(p * (len(v) - 1))]
                cells.append(f"{mode[:4]} {q(0.5):.0f}/{q(0.9):.0f}/{v[-1]:.0f}")
        leaders = {mode: len(samples.get(("devices_per_leader", n, d, mode), [])) for mode in MODES}
        print(f"  {n:4d} nodes {d:5d} devices  per leader: {cells[0]}  {cells[1]}  ({leaders['decentralized']} "
              f"leaders)   groups/node: {cells[2]}  {cells[3]}")


def traffic(rows):
    """Where each point's bytes go: hop bytes by layer and type, as shares of the point's total; and how many
    of the routine layer's messages are the leaders' notifications (changes and answers to renewals)."""
    hop = {}  # (nodes, devices, mode) -> {(layer, type): bytes/node/s}
    routine = {}  # (nodes, devices, mode) -> [all routine messages, device notifications] /node/s, end to end
    for row in rows:
        key = (int(row["nodes"]), int(row["devices"]), row["mode"])
        if row["scope"] == "hop":
            hop.setdefault(key, {})[(row["layer"], row["type"])] = float(row["bytes_per_node_s"])
        elif row["layer"] == "routine":
            cell = routine.setdefault(key, [0.0, 0.0])
            cell[1 if row["type"] == "device_notify" else 0] += float(row["msgs_per_node_s"])
    print("\ntraffic: hop bytes sent by layer/type, share of all (OLSR and membership included); "
          "routine messages end to end per node per second, notifications among them")
    for key in sorted(hop):
        cells = hop[key]
        total = sum(cells.values()) or 1.0
        top = sorted(cells.items(), key=lambda kv: -kv[1])[:5]
        messages, notifications = routine.get(key, [0.0, 0.0])
        print(f"  {key[0]:4d} {key[1]:5d} {key[2]:23s} {total:8.0f} B/node/s: "
              + ", ".join(f"{layer}/{kind} {value / total:.0%}" for (layer, kind), value in top)
              + f"; routine {messages:.1f} msgs/node/s, notifications {notifications:.1f}")


def table(grid, subtitle):
    print(f"\n{subtitle}")
    print("nodes devices mode          B/node/s mean  busiest  msgs/node/s mean busiest  prop p50/p99 RTT  "
          "observed current  settle_s  measure_s  wall_s  central/decentral (mean, busiest)")
    for (n, d), modes in sorted(grid.items()):
        for mode in MODES:
            v = modes.get(mode)
            if v is None:
                continue
            flag = "" if valid(v) else "  INVALID"
            line = (f"{n:5d} {d:7d} {mode:13s} {v['bytes_per_node_s_mean']:13.0f} {v['bytes_per_node_s_max']:8.0f} "
                    f"{v['msgs_per_node_s_mean']:16.1f} {v['msgs_per_node_s_max']:7.1f} "
                    f"{v['propagation_p50_rtt']:8.1f}/{v['propagation_p99_rtt']:<8.1f} {v['observed_share']:8.3f} "
                    f"{v['current_share']:7.3f} {v['settle_s']:9.0f} {v['measure_s']:10.0f} {v['real_time']:7.1f}")
            if mode == "decentralized" and "central" in modes:
                c = modes["central"]
                line += (f"  {ratio(c['bytes_per_node_s_mean'], v['bytes_per_node_s_mean']):.2f}, "
                         f"{ratio(c['bytes_per_node_s_max'], v['bytes_per_node_s_max']):.2f}")
            print(line + flag)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: device_plot.py OUTDIR RUN_DIR [RUN_DIR...]")
    outdir, runs = sys.argv[1], sys.argv[2:]
    rows = []
    for run in runs:
        rows += read(os.path.join(run, "device.csv"))
    os.makedirs(outdir, exist_ok=True)
    loads = read_tables(runs, "device_load_cdf.csv")
    drawn = False
    for family, (suffix, subtitle) in FAMILIES.items():
        grid = points(rows, family)
        if not grid:
            continue
        drawn = True
        bandwidth(grid, os.path.join(outdir, f"device_bandwidth{suffix}.svg"), subtitle)
        table(grid, f"{family}: {subtitle}")
        load_cdf(loads, suffix, os.path.join(outdir, f"device_load_cdf{suffix}.svg"))
    if not drawn:
        sys.exit(f"{', '.join(runs)}: no device_bench rows")
    traffic(read_tables(runs, "device_traffic.csv"))


if __name__ == "__main__":
    main()
