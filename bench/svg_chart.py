"""Line charts as SVG for the bench/*_plot.py scripts, with no plotting library
needed, and the readers of Google Benchmark's CSV output and of the benches' own
CSV files they share.

A panel is (series, title, xlabel, note); a series is
(label, colour, dashed, {x: y}). By default the x values are spaced evenly by
rank (benchmark grids: 25, 50, 100, ...); with numeric_x=True they are placed
on a linear axis and each series is drawn as a step function (CDFs).
"""

import csv
import os

WIDTH, HEIGHT, MARGIN = 420, 300, 55
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def read(path):
    """[(name, {column: value})] from Google Benchmark's CSV output (numeric columns only)."""
    with open(path, newline="", encoding="utf-8") as f:
        lines = [line for line in f if line.startswith(("name,", '"BM_'))]
    rows = []
    for row in csv.DictReader(lines):
        values = {}
        for key, value in row.items():
            try:
                values[key] = float(value)
            except (TypeError, ValueError):
                pass
        rows.append((row["name"], values))
    return rows


def read_tables(dirs, name):
    """The rows (dicts of strings) of every DIR/name that exists among `dirs`, merged."""
    rows = []
    for directory in dirs:
        path = os.path.join(directory, name)
        if os.path.exists(path):
            with open(path, newline="", encoding="utf-8") as f:
                rows += list(csv.DictReader(f))
    return rows


def tick(value):
    """A short axis label: 0.25, 12.5, 2.61k, 1.2M."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def panel(series, title, xlabel, x0, note="", numeric_x=False, labels=None):
    """One chart, `x0` pixels from the left of the picture; `labels` ({x: text}) names the x ticks."""
    xs = sorted({x for _, _, _, points in series for x in points})
    ys = [y for _, _, _, points in series for y in points.values()]
    if not xs or not ys:
        return ""
    top = max(ys) * 1.1 or 1.0
    left, right = x0 + MARGIN, x0 + WIDTH - MARGIN
    if numeric_x:
        span = (xs[-1] - xs[0]) or 1.0
        sx = lambda x: left + (right - left) * (x - xs[0]) / span
        ticks = [float(f"{xs[0] + span * i / 4:.3g}") for i in range(5)]
    else:
        sx = lambda x: left + (right - left) * (xs.index(x) / max(len(xs) - 1, 1))
        ticks = xs
    sy = lambda v: HEIGHT - MARGIN - (HEIGHT - 2 * MARGIN) * v / top
    out = [f'<text x="{x0 + WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{HEIGHT - MARGIN}" x2="{right}" y2="{HEIGHT - MARGIN}" stroke="black"/>',
           f'<line x1="{left}" y1="{MARGIN}" x2="{left}" y2="{HEIGHT - MARGIN}" stroke="black"/>',
           f'<text x="{x0 + WIDTH / 2}" y="{HEIGHT - 20}" text-anchor="middle" font-size="12">{xlabel}</text>']
    if note:
        out.append(f'<text x="{x0 + WIDTH / 2}" y="{HEIGHT - 5}" text-anchor="middle" font-size="10">{note}</text>')
    for x in ticks:
        out.append(f'<text x="{sx(x)}" y="{HEIGHT - MARGIN + 15}" text-anchor="middle" font-size="11">{(labels or {}).get(x, tick(x) if numeric_x else f"{x:g}")}</text>')
    for i in range(5):
        v = top * i / 4
        out.append(f'<text x="{left - 5}" y="{sy(v) + 4}" text-anchor="end" font-size="11">{tick(v)}</text>')
    for _, colour, dashed, points in series:
        ordered = sorted(points)
        if numeric_x:
            corners = [(ordered[0], 0.0)]
            for before, after in zip(ordered, ordered[1:]):
                corners += [(before, points[before]), (after, points[before])]
            corners.append((ordered[-1], points[ordered[-1]]))
        else:
            corners = [(x, points[x]) for x in ordered]
        coords = " ".join(f"{sx(x)},{sy(y)}" for x, y in corners)
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for x in points:
            out.append(f'<circle cx="{sx(x)}" cy="{sy(points[x])}" r="3" fill="{colour}"/>')
    return "\n".join(out)


def write_svg(path, panels, legend, caption="", numeric_x=False, labels=None):
    """Panels side by side, then the legend [(label, colour, dashed)], then a caption line."""
    lines = len(legend) + (1 if caption else 0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{len(panels) * WIDTH}" '
             f'height="{HEIGHT + 20 + 15 * lines}" font-family="sans-serif">',
             '<rect width="100%" height="100%" fill="white"/>']
    for i, (series, title, xlabel, note) in enumerate(panels):
        parts.append(panel(series, title, xlabel, i * WIDTH, note, numeric_x, labels))
    for i, (label, colour, dashed) in enumerate(legend):
        y = HEIGHT + 15 + 15 * i
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        parts.append(f'<line x1="{MARGIN}" y1="{y - 4}" x2="{MARGIN + 14}" y2="{y - 4}" stroke="{colour}" '
                     f'stroke-width="2"{dash}/>')
        parts.append(f'<text x="{MARGIN + 20}" y="{y}" font-size="12">{label}</text>')
    if caption:
        parts.append(f'<text x="{MARGIN}" y="{HEIGHT + 15 + 15 * len(legend)}" font-size="12">{caption}</text>')
    parts.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")
