#!/usr/bin/env python3
"""Plots device_bench (device monitoring, decentralized against centralized)
as SVGs, with the paper's claims beside ours, and prints the table.

  mkdir -p OUT
  DEVICE_BENCH_OUT=OUT build/bench/device_bench --benchmark_format=csv > OUT/device.csv
  bench/device_plot.py OUT/device.csv OUT OUTDIR

Reads OUT/device_load_cdf.csv and OUT/device_traffic.csv, which the bench
writes beside its CSV. Writes OUTDIR/device_bandwidth.svg (bytes and
messages per node per second against the number of devices, mean and
busiest node, decentralized and centralized; and centralized / decentralized,
which comesh.md Fig. 11 puts above 10) and OUTDIR/device_load_cdf.svg (CDFs
of devices per leader and of k-groups per node, Fig. 6's spatial load).
Prints every point with its validity (share of views that know every
device), and where each point's traffic goes by layer and message type.
"""

import csv
import os
import sys

from svg_chart import COLOURS, read, write_svg

FIG11 = "comesh.md Fig. 11: decentralized uses over 10x less bandwidth than centralized (one k = 1 group)"
FIG6 = ("comesh.md Fig. 6 (LSH): load near the devices; median close to random selection's, "
        "a longer tail from clustering")
MODES = ("decentralized", "central")


def points(rows):
    """{(nodes, devices): {mode: counters}} from BM_DeviceMonitoring/NODES/DEVICES/CENTRAL rows."""
    out = {}
    for name, values in rows:
        parts = name.split("/")
        if parts[0] != "BM_DeviceMonitoring" or len(parts) < 4:
            continue
        out.setdefault((int(parts[1]), int(parts[2])), {})[MODES[int(parts[3])]] = values
    return out


def read_table(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def ratio(a, b):
    return a / b if b else float("nan")


def bandwidth(grid, outdir):
    by_devices = {devices: modes for (_, devices), modes in grid.items()}
    nodes = ", ".join(f"{d}: {n}" for n, d in sorted(grid))
    panels = []
    legend = []
    for key, title in (("bytes", "bytes / node / s"), ("msgs", "messages / node / s")):
        series = []
        for colour, mode in zip(COLOURS, MODES):
            for stat, dashed in (("mean", False), ("max", True)):
                series.append((f"{mode}, {'mean' if stat == 'mean' else 'busiest node'}", colour, dashed,
                               {d: m[mode][f"{key}_per_node_s_{stat}"] for d, m in by_devices.items() if mode in m}))
        panels.append((series, title, "devices", f"nodes per point (devices: nodes) {nodes}"))
        legend = [(label, colour, dashed) for label, colour, dashed, _ in series]
    ratios = [("centralized / decentralized, mean", COLOURS[2], False,
               {d: ratio(m["central"]["bytes_per_node_s_mean"], m["decentralized"]["bytes_per_node_s_mean"])
                for d, m in by_devices.items() if len(m) == 2}),
              ("centralized / decentralized, busiest node", COLOURS[2], True,
               {d: ratio(m["central"]["bytes_per_node_s_max"], m["decentralized"]["bytes_per_node_s_max"])
                for d, m in by_devices.items() if len(m) == 2}),
              ("paper: over 10", COLOURS[4], True, {d: 10.0 for d in by_devices})]
    panels.append((ratios, "bytes: centralized / decentralized", "devices", "above 10: the paper's claim holds"))
    legend += [(label, colour, dashed) for label, colour, dashed, _ in ratios]
    write_svg(os.path.join(outdir, "device_bandwidth.svg"), panels, legend, caption=FIG11)


def cdf(values):
    """{value: share of samples <= value}, from 0."""
    ordered = sorted(values)
    return {v: sum(1 for x in ordered if x <= v) / len(ordered) for v in [0.0] + ordered}


def load_cdf(loads, outdir):
    """loads: rows of device_load_cdf.csv."""
    samples = {}  # (metric, nodes, devices, mode) -> [value]
    for row in loads:
        key = (row["metric"], int(row["nodes"]), int(row["devices"]), row["mode"])
        samples.setdefault(key, []).append(float(row["value"]))
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
    write_svg(os.path.join(outdir, "device_load_cdf.svg"), panels, legend, caption=FIG6, numeric_x=True)
    print("\nFig. 6 spatial load (decentralized / centralized): p50, p90, max of devices per leader and groups per node")
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
        print(f"  {key[0]:4d} {key[1]:5d} {key[2]:13s} {total:10.0f} B/node/s: "
              + ", ".join(f"{layer}/{kind} {value / total:.0%}" for (layer, kind), value in top)
              + f"; routine {messages:.1f} msgs/node/s, notifications {notifications:.1f}")


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: device_plot.py DEVICE_BENCH.csv DEVICE_BENCH_OUT_DIR OUTDIR")
    grid = points(read(sys.argv[1]))
    if not grid:
        sys.exit(f"{sys.argv[1]}: no BM_DeviceMonitoring rows")
    os.makedirs(sys.argv[3], exist_ok=True)
    bandwidth(grid, sys.argv[3])
    print("nodes devices mode          B/node/s mean  busiest  msgs/node/s mean busiest  prop p50/p99 RTT  "
          "observed current  settle_s  wall_s  central/decentral (mean, busiest)")
    for (n, d), modes in sorted(grid.items()):
        for mode in MODES:
            v = modes.get(mode)
            if v is None:
                continue
            flag = "" if v["observed_share"] >= 1 and v["current_share"] >= 1 else "  INVALID"
            line = (f"{n:5d} {d:7d} {mode:13s} {v['bytes_per_node_s_mean']:13.0f} {v['bytes_per_node_s_max']:8.0f} "
                    f"{v['msgs_per_node_s_mean']:16.1f} {v['msgs_per_node_s_max']:7.1f} "
                    f"{v['propagation_p50_rtt']:8.1f}/{v['propagation_p99_rtt']:<8.1f} {v['observed_share']:8.3f} "
                    f"{v['current_share']:7.3f} {v['settle_s']:9.0f} {v['real_time']:7.1f}")
            if mode == "decentralized" and "central" in modes:
                c = modes["central"]
                line += (f"  {ratio(c['bytes_per_node_s_mean'], v['bytes_per_node_s_mean']):.2f}, "
                         f"{ratio(c['bytes_per_node_s_max'], v['bytes_per_node_s_max']):.2f}")
            print(line + flag)
    loads = os.path.join(sys.argv[2], "device_load_cdf.csv")
    if os.path.exists(loads):
        load_cdf(read_table(loads), sys.argv[3])
    flows = os.path.join(sys.argv[2], "device_traffic.csv")
    if os.path.exists(flows):
        traffic(read_table(flows))


if __name__ == "__main__":
    main()
