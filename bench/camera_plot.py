#!/usr/bin/env python3
"""Plots camera_bench's CSV as SVGs, with no plotting library needed.

  build/bench/camera_bench --benchmark_format=csv > camera.csv
  bench/camera_plot.py camera.csv OUTDIR

Writes OUTDIR/camera_messages.svg (request + OK messages per critical-section
entry divided by 2(N-1), the paper's Ricart-Agrawala count, against N for a
lone requester and against the number of concurrent requesters c) and
OUTDIR/camera_wait.svg (wait time normalized as in camera.md §5.1: mean wait
/ c in critical-section units, against c at N = 256 as in Fig. 5.1 and
against N at c = 10 as in Fig. 5.3). Also prints the numbers as a table.
"""

import csv
import os
import sys

WIDTH, HEIGHT, MARGIN = 420, 300, 55
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"]


def read(path):
    """[(family, {arg: value}, {counter: value})] from Google Benchmark's CSV."""
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        lines = [line for line in f if line.startswith(("name,", '"'))]
    for row in csv.DictReader(lines):
        if row.get("error_occurred") == "true":
            continue
        parts = row["name"].split("/")
        args = {}
        for part in parts[1:]:
            if ":" in part and not part.startswith("iterations"):
                key, value = part.split(":", 1)
                args[key] = int(value)
        counters = {}
        for key, value in row.items():
            if key in ("name", "time_unit", "label", "error_occurred", "error_message") or value in (None, ""):
                continue
            try:
                counters[key] = float(value)
            except ValueError:
                pass
        rows.append((parts[0], args, counters))
    return rows


def series(rows, family, x_arg, y_key, **fixed):
    """Sorted (x, y) points of one benchmark family with the other args fixed."""
    points = [(args[x_arg], counters[y_key]) for fam, args, counters in rows
              if fam == family and x_arg in args and y_key in counters
              and all(args.get(k) == v for k, v in fixed.items())]
    return sorted(points)


def panel(curves, title, x_label, x0, reference=None):
    """One line chart; curves is [(label, [(x, y)])]; x positions are evenly spaced by rank."""
    xs = sorted({x for _, pts in curves for x, _ in pts})
    ys = [y for _, pts in curves for _, y in pts] + ([reference] if reference is not None else [])
    if not xs or not ys:
        return f'<text x="{x0 + WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">{title}: no data</text>'
    top = max(ys) * 1.15 or 1.0
    sx = lambda x: x0 + MARGIN + (WIDTH - 2 * MARGIN) * (xs.index(x) / max(len(xs) - 1, 1))
    sy = lambda v: HEIGHT - MARGIN - (HEIGHT - 2 * MARGIN) * v / top
    out = [f'<text x="{x0 + WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{x0 + MARGIN}" y1="{HEIGHT - MARGIN}" x2="{x0 + WIDTH - MARGIN}" y2="{HEIGHT - MARGIN}" '
           'stroke="black"/>',
           f'<line x1="{x0 + MARGIN}" y1="{MARGIN}" x2="{x0 + MARGIN}" y2="{HEIGHT - MARGIN}" stroke="black"/>',
           f'<text x="{x0 + WIDTH / 2}" y="{HEIGHT - 15}" text-anchor="middle" font-size="12">{x_label}</text>']
    for x in xs:
        out.append(f'<text x="{sx(x)}" y="{HEIGHT - MARGIN + 15}" text-anchor="middle" font-size="11">{x}</text>')
    for i in range(5):
        v = top * i / 4
        out.append(f'<text x="{x0 + MARGIN - 5}" y="{sy(v) + 4}" text-anchor="end" font-size="11">{v:.2f}</text>')
    if reference is not None:
        out.append(f'<line x1="{x0 + MARGIN}" y1="{sy(reference)}" x2="{x0 + WIDTH - MARGIN}" y2="{sy(reference)}" '
                   'stroke="grey" stroke-dasharray="4,3"/>')
    for i, (label, pts) in enumerate(curves):
        colour = COLOURS[i % len(COLOURS)]
        coords = " ".join(f"{sx(x)},{sy(y)}" for x, y in pts)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in pts:
            out.append(f'<circle cx="{sx(x)}" cy="{sy(y)}" r="3" fill="{colour}"/>')
        ly = MARGIN - 20 + 14 * i
        out.append(f'<rect x="{x0 + MARGIN + 10}" y="{ly - 8}" width="12" height="4" fill="{colour}"/>')
        out.append(f'<text x="{x0 + MARGIN + 28}" y="{ly}" font-size="11">{label}</text>')
    return "\n".join(out)


def svg(panels, path):
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH * len(panels)}" height="{HEIGHT}" '
             'font-family="sans-serif">', '<rect width="100%" height="100%" fill="white"/>']
    for i, (curves, title, x_label, reference) in enumerate(panels):
        parts.append(panel(curves, title, x_label, i * WIDTH, reference))
    parts.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: camera_plot.py BENCH.csv OUTDIR")
    rows = read(sys.argv[1])
    if not rows:
        sys.exit(f"{sys.argv[1]}: no camera_bench rows")
    os.makedirs(sys.argv[2], exist_ok=True)
    msgs = "msgs_per_entry_over_2(N-1)"
    e2e = "e2e_msgs_per_entry_over_2(N-1)"
    wait = "normalized_wait_cs_units"
    lone = [("lone, loss 0 %", series(rows, "LoneRequester", "N", msgs, loss_pct=0, hop_arq=0)),
            ("lone, loss 5 %", series(rows, "LoneRequester", "N", msgs, loss_pct=5, hop_arq=0)),
            ("lone, all e2e, loss 0 %", series(rows, "LoneRequester", "N", e2e, loss_pct=0, hop_arq=0))]
    conc = [("N = 256, loss 5 %", series(rows, "Concurrent", "c", msgs, N=256))]
    svg([(lone, "messages / entry / 2(N-1)", "N", 1.0),
         (conc, "messages / entry / 2(N-1)", "concurrent requesters c", 1.0)],
        os.path.join(sys.argv[2], "camera_messages.svg"))
    by_c = [("N = 256 (Fig. 5.1)", series(rows, "Concurrent", "c", wait, N=256))]
    by_n = [("c = 10 (Fig. 5.3)", series(rows, "Concurrent", "N", wait, c=10))]
    svg([(by_c, "normalized wait (CS units)", "concurrent requesters c", None),
         (by_n, "normalized wait (CS units)", "N", None)],
        os.path.join(sys.argv[2], "camera_wait.svg"))
    print("benchmark                               client_rtts  sync_rtts  norm_wait  msgs/2(N-1)  e2e/2(N-1)")
    for fam, args, c in rows:
        name = fam + "".join(f" {k}={v}" for k, v in args.items())
        print(f"{name:40s} {c.get('client_delay_rtts', 0):10.2f} {c.get('sync_delay_rtts', 0):10.2f} "
              f"{c.get(wait, 0):10.2f} {c.get(msgs, 0):12.2f} {c.get(e2e, 0):11.2f}")


if __name__ == "__main__":
    main()
