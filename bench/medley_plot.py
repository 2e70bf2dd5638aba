#!/usr/bin/env python3
"""Plots medley_bench's CSV as one SVG, with no plotting library needed.

  export MEDLEY_BENCH_LARGE=1
  build/bench/medley_bench --benchmark_filter=BM_MedleyVsSwim --benchmark_format=csv > vs_swim.csv
  build/bench/medley_bench --benchmark_filter=BM_FalsePositives --benchmark_format=csv > false.csv
  bench/medley_plot.py vs_swim.csv false.csv medley.svg

(One CSV per benchmark: Google Benchmark's CSV header holds only the first
benchmark's counters, so a mixed CSV loses the others' columns.)

Left: failure detection time (p50, protocol periods, at every live node)
against mesh size, Medley (alpha = 3) next to plain SWIM (alpha = 0) on the
same topology and seed. Right: hop-by-hop membership bytes per node per
second. Grids and random geometric meshes. Also prints, per topology and
size, the Medley / SWIM ratios and the false failures per node-hour, and the
BM_FalsePositives rows if the CSV has them.
"""

import csv
import sys

# (topology kind in the benchmark name, protocol) -> (label, colour, counter suffix)
SERIES = {("0", "medley"): ("grid, Medley (alpha 3)", "#1f77b4"),
          ("0", "swim"): ("grid, SWIM (alpha 0)", "#d62728"),
          ("1", "medley"): ("random, Medley (alpha 3)", "#2ca02c"),
          ("1", "swim"): ("random, SWIM (alpha 0)", "#ff7f0e")}
KINDS = {"0": "grid", "1": "random"}
PANELS = [("detect_p50_{}", "detection p50 (protocol periods)"), ("hop_Bps_node_{}", "hop bytes / node / s")]
RATIOS = ["ratio_detect_p50", "ratio_detect_p99", "ratio_hop_bytes", "ratio_e2e_bytes",
          "false_per_node_hour_medley", "false_per_node_hour_swim"]
WIDTH, HEIGHT, MARGIN = 420, 300, 55


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def read(paths):
    """({kind: {nodes: {counter: value}}}, [false-positive rows]) from Google Benchmark's CSV outputs."""
    runs, false_positives = {}, []
    for path in paths:
        read_one(path, runs, false_positives)
    return runs, false_positives


def read_one(path, runs, false_positives):
    with open(path, newline="", encoding="utf-8") as f:
        lines = [line for line in f if line.startswith(("name,", '"BM_'))]
    for row in csv.DictReader(lines):
        parts = row["name"].split("/")
        if parts[0] == "BM_MedleyVsSwim" and len(parts) >= 3:
            runs.setdefault(parts[1], {})[int(parts[2])] = {k: number(v) for k, v in row.items() if k != "name"}
        elif parts[0] == "BM_FalsePositives" and len(parts) >= 3:
            false_positives.append((parts[1:], number(row.get("false_failures_per_node_hour"))))


def panel(runs, key, title, x0):
    xs = sorted({n for points in runs.values() for n in points})
    ys = [points[n][key.format(proto)] for points in runs.values() for n in points for proto in ("medley", "swim")]
    ys = [y for y in ys if y == y]  # drop NaN
    if not xs or not ys:
        return ""
    top = max(ys) * 1.1 or 1.0
    sx = lambda n: x0 + MARGIN + (WIDTH - 2 * MARGIN) * (xs.index(n) / max(len(xs) - 1, 1))
    sy = lambda v: HEIGHT - MARGIN - (HEIGHT - 2 * MARGIN) * v / top
    out = [f'<text x="{x0 + WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{x0 + MARGIN}" y1="{HEIGHT - MARGIN}" x2="{x0 + WIDTH - MARGIN}" y2="{HEIGHT - MARGIN}" '
           'stroke="black"/>',
           f'<line x1="{x0 + MARGIN}" y1="{MARGIN}" x2="{x0 + MARGIN}" y2="{HEIGHT - MARGIN}" stroke="black"/>',
           f'<text x="{x0 + WIDTH / 2}" y="{HEIGHT - 15}" text-anchor="middle" font-size="12">nodes</text>']
    for n in xs:
        out.append(f'<text x="{sx(n)}" y="{HEIGHT - MARGIN + 15}" text-anchor="middle" font-size="11">{n}</text>')
    for i in range(5):
        v = top * i / 4
        out.append(f'<text x="{x0 + MARGIN - 5}" y="{sy(v) + 4}" text-anchor="end" font-size="11">{v:.0f}</text>')
    for (kind, proto), (_, colour) in SERIES.items():
        points = runs.get(kind, {})
        pts = [(n, points[n][key.format(proto)]) for n in sorted(points) if points[n][key.format(proto)] == points[n][key.format(proto)]]
        if not pts:
            continue
        dash = ' stroke-dasharray="5,3"' if proto == "swim" else ""
        coords = " ".join(f"{sx(n)},{sy(v)}" for n, v in pts)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for n, v in pts:
            out.append(f'<circle cx="{sx(n)}" cy="{sy(v)}" r="3" fill="{colour}"/>')
    return "\n".join(out)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: medley_plot.py BENCH.csv [MORE.csv ...] OUT.svg")
    runs, false_positives = read(sys.argv[1:-1])
    if not runs:
        sys.exit(f"{', '.join(sys.argv[1:-1])}: no BM_MedleyVsSwim rows")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * WIDTH}" height="{HEIGHT + 40}" '
             'font-family="sans-serif">', '<rect width="100%" height="100%" fill="white"/>']
    for i, (key, title) in enumerate(PANELS):
        parts.append(panel(runs, key, title, i * WIDTH))
    for i, (label, colour) in enumerate(SERIES.values()):
        x = MARGIN + (i % 2) * WIDTH
        y = HEIGHT + 15 + 15 * (i // 2)
        parts.append(f'<rect x="{x}" y="{y - 9}" width="12" height="4" fill="{colour}"/>')
        parts.append(f'<text x="{x + 18}" y="{y}" font-size="12">{label}</text>')
    parts.append("</svg>")
    with open(sys.argv[-1], "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")
    print("topology,nodes," + ",".join(RATIOS))
    for kind in sorted(runs):
        for n in sorted(runs[kind]):
            row = runs[kind][n]
            print(f"{KINDS.get(kind, kind)},{n}," + ",".join(f"{row.get(k, float('nan')):.3f}" for k in RATIOS))
    if false_positives:
        print("loss_percent,local_health,nodes,false_failures_per_node_hour")
        for args, value in false_positives:
            print(",".join(a for a in args if not a.startswith("iterations")) + f",{value:.3f}")


if __name__ == "__main__":
    main()
