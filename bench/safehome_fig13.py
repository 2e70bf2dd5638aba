#!/usr/bin/env python3
"""SafeHome Fig. 13 analog: abort rate and rollback cost under device failures.

Reads the MODEL-summary.csv files `meshsim routines` wrote for several
workloads that differ in one parameter (the generator's device_failure_ratio
or must_share, sim/scenarios/WORKLOADS.md), one output directory each, and
prints, per model, the abort rate and the rollback commands per aborted
routine averaged over the seeds, against the parameter; then draws both as
lines (the paper's Fig. 13 panels).

    bench/safehome_fig13.py OUT.svg LABEL=VALUE:DIR [LABEL=VALUE:DIR ...]

e.g. failure_ratio=0.1:out-f10; every argument must use the same LABEL.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg_chart import COLOURS, read_tables, write_svg  # noqa: E402

MODELS = ["gsv", "sgsv", "psv", "wv"]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    points = []
    for arg in sys.argv[2:]:
        try:
            setting, directory = arg.split(":", 1)
            label, value = setting.split("=", 1)
            points.append((label, float(value), directory))
        except ValueError:
            sys.exit(f"safehome_fig13: '{arg}' is not LABEL=VALUE:DIR (e.g. failure_ratio=0.1:out-f10)")
    labels = {p[0] for p in points}
    if len(labels) != 1:
        sys.exit(f"safehome_fig13: every point must vary one parameter, got {sorted(labels)}")
    label = labels.pop()
    aborts, rollbacks = [], []
    print(f"| model | {label} | seeds | abort rate | rollback commands per abort | oracle (serial order) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for i, model in enumerate(MODELS):
        abort_line, rollback_line = {}, {}
        for _, value, directory in sorted(points, key=lambda p: p[1]):
            rows = read_tables([directory], f"{model}-summary.csv")
            if not rows:
                continue
            rate = sum(float(r["abort_rate"]) for r in rows) / len(rows)
            per_abort = sum(float(r["rollback_commands_per_abort"]) for r in rows) / len(rows)
            passed = sum(r["serial_order"] == "pass" for r in rows)
            abort_line[value] = rate
            rollback_line[value] = per_abort
            print(f"| {model} | {value:g} | {len(rows)} | {rate:.3f} | {per_abort:.2f} | {passed}/{len(rows)} pass |")
        if abort_line:
            colour = COLOURS[i % len(COLOURS)]
            aborts.append((model, colour, False, abort_line))
            rollbacks.append((model, colour, False, rollback_line))
    if not aborts:
        sys.exit("safehome_fig13: no MODEL-summary.csv in the given directories")
    write_svg(out, [(aborts, "abort rate", label, "mean over seeds"),
                    (rollbacks, "rollback commands per abort", label, "mean over seeds")],
              [(name, colour, dashed) for name, colour, dashed, _ in aborts],
              caption="meshsim routines, whole agents; SafeHome Fig. 13 analog", numeric_x=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
