"""Error of a release's employer-side table (pseoemp_all.csv) against the true counts of the
synthetic microdata it was measured from (synthetic data only: it reads the true counts).

    .venv/bin/python benchmarks/employer_table_error.py --data DATA --release OUT --config TOML

Prints, per years after, the mean absolute error of a cohort row's cell (state x sector)
and of an all-cohort cell, the mean true count, the closed-form expectation of the
cohort cells' error (Smooth Laplace: 2 S*/epsilon, S* = max(alpha x_v, 1); Smooth Gamma:
11.31 S*/epsilon) and the share of cohort cells with S* above 1. Assumes the release
measured every cohort from these data (a first release, or one whose cohorts' populations
are those of the data).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.config import load_config
from pseo_das.schemas.distribution import table_path
from pseo_das.tasks.codes.destinations import NONEMPLOYED, destinations
from pseo_das.tasks.inputs.cpi import find_cpi, read_cpi
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir
from pseo_das.tasks.inputs.true_counts import read_counts
from pseo_das.tasks.privacy.establishment import (INVERSE_QUARTIC_MEAN_ABSOLUTE,
                                                  SMOOTH_GAMMA_FACTOR, SMOOTH_LAPLACE_FACTOR)
from pseo_das.tasks.inputs.cells import observable_populations


def table_error(data: Path, release: Path, config: Path) -> list[dict]:
    """Per years after: cohorts, the cohort cells' mean absolute error and its closed form
    (None for log-Laplace), mean true count, share of cells with S* > 1, and the all-cohort
    cells' mean absolute error and mean true count."""
    cfg = load_config(config)
    table_cfg = cfg.employer_table
    counts = read_counts(data, cfg, None, read_cpi(find_cpi(default_reference_dir())))
    level, last = cfg.flows.measured_levels()[0], cfg.cells.last_earnings_year
    places = destinations().iloc[:NONEMPLOYED]
    key = pd.MultiIndex.from_arrays([places["state"], places["industry"]])
    published = pd.read_csv(table_path(release / "public", "pseoemp_all.csv"), dtype=str)
    factor = {"smooth-laplace": SMOOTH_LAPLACE_FACTOR,
              "smooth-gamma": SMOOTH_GAMMA_FACTOR * INVERSE_QUARTIC_MEAN_ABSOLUTE
              }.get(table_cfg.mechanism)
    rows = []
    for k in cfg.cells.years_after:
        populations = observable_populations(counts.frames[level], k, last)
        errors, truths, expected, above = [], [], [], []
        all_truth = np.zeros(NONEMPLOYED, np.int64)
        for cohort, members in populations.groupby("grad_cohort"):
            truth, largest = counts.employer_table(level, k, last, members)
            row = published[published["grad_cohort"] == f"{cohort:04d}"] \
                .set_index(["geography", "industry"]).reindex(key)
            noisy = row[f"y{k}_grads_emp"].astype(np.int64).to_numpy()
            errors.append(np.abs(noisy - truth))
            truths.append(truth)
            sensitivity = np.maximum(table_cfg.alpha * largest, 1.0)
            above.append(sensitivity > 1)
            if factor is not None:
                expected.append(factor * sensitivity / table_cfg.epsilon)
            all_truth += truth
        everything = published[published["grad_cohort"] == "0000"] \
            .set_index(["geography", "industry"]).reindex(key)[f"y{k}_grads_emp"] \
            .astype(np.int64).to_numpy()
        rows.append({"years_after": k, "cohorts": len(errors),
                     "cohort_error": float(np.mean(np.concatenate(errors))),
                     "expected": float(np.mean(np.concatenate(expected))) if expected else None,
                     "cohort_truth": float(np.mean(np.concatenate(truths))),
                     "above_share": float(np.mean(np.concatenate(above))),
                     "all_error": float(np.mean(np.abs(everything - all_truth))),
                     "all_truth": float(np.mean(all_truth))})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--release", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args()
    for r in table_error(args.data, args.release, args.config):
        line = (f"y{r['years_after']}: {r['cohorts']} cohorts x {NONEMPLOYED} cells: mean "
                f"absolute error {r['cohort_error']:.2f} (mean true count "
                f"{r['cohort_truth']:.2f}; S* > 1 in {100 * r['above_share']:.1f}% of cells)")
        if r["expected"] is not None:
            line += f", expected {r['expected']:.2f}"
        print(line + f"; all cohorts: mean absolute error {r['all_error']:.2f} (mean true "
              f"count {r['all_truth']:.1f})")


if __name__ == "__main__":
    main()
