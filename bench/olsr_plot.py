#!/usr/bin/env python3
"""Plots olsr_bench's CSV as one SVG, with no plotting library needed.

  build/bench/olsr_bench --benchmark_format=csv > olsr.csv
  bench/olsr_plot.py olsr.csv olsr.svg

Left: OLSR control bytes per node per second against grid size, MPR flooding
next to the classic-flooding baseline of the same run. Right: convergence time
in virtual seconds. Also prints the MPR / classic ratios per size.
"""

import csv
import sys

SERIES = {"BM_OlsrMprFlooding": ("grid, MPR flooding (RFC 3626)", "#1f77b4"),
          "BM_ClassicFloodingBaseline": ("grid, classic flooding (baseline)", "#d62728"),
          "BM_OlsrMprFloodingRandom": ("random, MPR flooding", "#2ca02c"),
          "BM_ClassicFloodingRandomBaseline": ("random, classic flooding (baseline)", "#ff7f0e")}
PAIRS = [("grid", "BM_OlsrMprFlooding", "BM_ClassicFloodingBaseline"),
         ("random", "BM_OlsrMprFloodingRandom", "BM_ClassicFloodingRandomBaseline")]
PANELS = [("control_bytes_per_node_s", "control bytes / node / s"), ("convergence_s", "convergence (virtual s)")]
WIDTH, HEIGHT, MARGIN = 420, 300, 55


def read(path):
    """{series: {nodes: {counter: value}}} from Google Benchmark's CSV output."""
    data = {}
    with open(path, newline="", encoding="utf-8") as f:
        lines = [line for line in f if line.startswith(("name,", '"BM_'))]
    for row in csv.DictReader(lines):
        series = row["name"].split("/")[0]
        if series in SERIES:
            data.setdefault(series, {})[int(float(row["nodes"]))] = {k: float(row[k]) for k, _ in PANELS}
    return data


def panel(data, key, title, x0):
    xs = sorted({n for points in data.values() for n in points})  # every size of any series
    ys = [points[n][key] for points in data.values() for n in points]
    if not xs or not ys:
        return ""
    top = max(ys) * 1.1 or 1.0
    sx = lambda n: x0 + MARGIN + (WIDTH - 2 * MARGIN) * (xs.index(n) / max(len(xs) - 1, 1))
    sy = lambda v: HEIGHT - MARGIN - (HEIGHT - 2 * MARGIN) * v / top
    out = [f'<text x="{x0 + WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{x0 + MARGIN}" y1="{HEIGHT - MARGIN}" x2="{x0 + WIDTH - MARGIN}" y2="{HEIGHT - MARGIN}" '
           'stroke="black"/>',
           f'<line x1="{x0 + MARGIN}" y1="{MARGIN}" x2="{x0 + MARGIN}" y2="{HEIGHT - MARGIN}" stroke="black"/>',
           f'<text x="{x0 + WIDTH / 2}" y="{HEIGHT - 15}" text-anchor="middle" font-size="12">grid nodes</text>']
    for n in xs:
        out.append(f'<text x="{sx(n)}" y="{HEIGHT - MARGIN + 15}" text-anchor="middle" font-size="11">{n}</text>')
    for i in range(5):
        v = top * i / 4
        out.append(f'<text x="{x0 + MARGIN - 5}" y="{sy(v) + 4}" text-anchor="end" font-size="11">{v:.0f}</text>')
    for series, points in data.items():
        colour = SERIES[series][1]
        coords = " ".join(f"{sx(n)},{sy(points[n][key])}" for n in sorted(points))
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for n in points:
            out.append(f'<circle cx="{sx(n)}" cy="{sy(points[n][key])}" r="3" fill="{colour}"/>')
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: olsr_plot.py BENCH.csv OUT.svg")
    data = read(sys.argv[1])
    if not data:
        sys.exit(f"{sys.argv[1]}: no olsr_bench rows")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * WIDTH}" height="{HEIGHT + 40}" '
             'font-family="sans-serif">', '<rect width="100%" height="100%" fill="white"/>']
    for i, (key, title) in enumerate(PANELS):
        parts.append(panel(data, key, title, i * WIDTH))
    for i, (series, (label, colour)) in enumerate(SERIES.items()):
        y = HEIGHT + 15 + 15 * i
        parts.append(f'<rect x="{MARGIN}" y="{y - 9}" width="12" height="4" fill="{colour}"/>')
        parts.append(f'<text x="{MARGIN + 18}" y="{y}" font-size="12">{label}</text>')
    parts.append("</svg>")
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")
    print("topology,nodes,control_ratio_mpr_over_classic,convergence_ratio_mpr_over_classic")
    for kind, mpr_name, classic_name in PAIRS:
        mpr, classic = data.get(mpr_name, {}), data.get(classic_name, {})
        for n in sorted(set(mpr) & set(classic)):
            def ratio(key):
                return mpr[n][key] / classic[n][key] if classic[n][key] else float("nan")
            print(f"{kind},{n},{ratio('control_bytes_per_node_s'):.3f},{ratio('convergence_s'):.3f}")


if __name__ == "__main__":
    main()
