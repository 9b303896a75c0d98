"""The employer-protecting flows mechanisms' accuracy study (docs/method/employer-protection.md,
"Accuracy"), measured.

    .venv/bin/python benchmarks/bench_employer_study.py [--alphas 0.01,0.05,0.1] [--epsilons 1,2]

Runs `pseo-das evaluate --product flows --mechanisms geometric,log-laplace,smooth-gamma,
smooth-laplace` on `pseo-das synth --employers` data (200,000 graduates, cached as for
bench_employer_table.py; --graduates) on the grid given (default: the settings the docs discuss; the
command's own default grid is wider), timed with its peak memory, and records from its
employer_flows_accuracy.csv the mean absolute error of a flow by the flow's true size, by
the share of its graduates at its largest establishment, and of the employer-side table's
cells, for every feasible setting. Result: results/employer-study-<date>.json.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd

from bench_employer_table import synthetic
from pseo_das.tasks.study.employer_flows_study import (CONCENTRATION_STRATA, SIZE_STRATA,
                                                       TABLE_STRATUM)
from release_runs import pseo_das
from result_file import Run, table

MECHANISMS = "geometric,log-laplace,smooth-gamma,smooth-laplace"


def setting(row) -> str:
    alpha = "" if pd.isna(row.alpha) else f", alpha {row.alpha:g}"
    return f"{row.mechanism}, epsilon {row.epsilon:g}{alpha}"


def by_stratum(summary: pd.DataFrame, kind: str, labels: list[str]) -> tuple[list, list]:
    """One row per setting: its mean absolute error per stratum; and the flows per stratum."""
    part = summary[summary["stratum_kind"] == kind]
    rows = []
    for key, group in part.groupby(["mechanism", "alpha", "epsilon"], sort=False, dropna=False):
        errors = group.set_index("stratum")["mean_abs_error"]
        rows.append([setting(group.iloc[0]),
                     *(round(errors[s], 2) if s in errors else None for s in labels)])
    flows = part.groupby("stratum")["flows"].max()
    return rows, [int(flows.get(s, 0)) for s in labels]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alphas", default="0.01,0.05,0.1")
    parser.add_argument("--epsilons", default="1,2")
    parser.add_argument("--graduates", type=int, default=200_000)
    args = parser.parse_args()
    run = Run("employer-study")
    data = synthetic(args.graduates)
    with tempfile.TemporaryDirectory(prefix="pseo-bench-employer-study-") as name:
        out = Path(name) / "study"
        study = pseo_das(["evaluate", "--product", "flows", "--data", str(data), "--out",
                          str(out), "--mechanisms", MECHANISMS, "--alphas", args.alphas,
                          "--epsilons", args.epsilons], "employer-study")
        summary = pd.read_csv(out / "employer_flows_accuracy.csv")
        infeasible = len(pd.read_csv(out / "employer_flows_infeasible.csv"))
    sizes = [label for _, _, label in SIZE_STRATA]
    shares = [label for _, _, label in CONCENTRATION_STRATA]
    size_rows, size_flows = by_stratum(summary, "size", sizes)
    share_rows, share_flows = by_stratum(summary, "concentration", shares)
    cells = summary[summary["stratum"] == TABLE_STRATUM]
    table_rows = [[setting(r), round(r.mean_abs_error, 2), round(100 * r.relative_error, 1)]
                  for r in cells.itertuples()]
    feasible = len(size_rows)
    path = run.write([
        table(f"Mean absolute error of a flow (graduates) by its true size, "
              f"{args.graduates:,} graduates; {feasible} feasible "
              f"settings, {infeasible} infeasible; the study took {study['wall_s']:.0f} s at "
              f"{study['peak_mb'] / 1024:.1f} GB peak",
              ["mechanism", *[f"{s} ({n:,} flows)" for s, n in zip(sizes, size_flows)]],
              size_rows),
        table("Employed flows of 5 or more graduates, by the share at their largest establishment",
              ["mechanism", *[f"{s} ({n:,} flows)" for s, n in zip(shares, share_flows)]],
              share_rows),
        table(f"The employer-side table ({TABLE_STRATUM}: {int(cells['flows'].iloc[0]):,} "
              f"cells, mean true count "
              f"{cells['true_mean'].iloc[0]:.1f}): mean absolute error per cell",
              ["mechanism", "mean absolute error", "relative error (%)"], table_rows)],
        details={"study": study, "alphas": args.alphas, "epsilons": args.epsilons})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
