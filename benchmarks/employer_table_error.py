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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--release", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args()
    cfg = load_config(args.config)
    table_cfg = cfg.employer_table
    counts = read_counts(args.data, cfg, None, read_cpi(find_cpi(default_reference_dir())))
    level, last = cfg.flows.measured_levels()[0], cfg.cells.last_earnings_year
    places = destinations().iloc[:NONEMPLOYED]
    key = pd.MultiIndex.from_arrays([places["state"], places["industry"]])
    published = pd.read_csv(table_path(args.release / "public", "pseoemp_all.csv"), dtype=str)
    factor = {"smooth-laplace": SMOOTH_LAPLACE_FACTOR,
              "smooth-gamma": SMOOTH_GAMMA_FACTOR * INVERSE_QUARTIC_MEAN_ABSOLUTE
              }.get(table_cfg.mechanism)
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
        line = (f"y{k}: {len(errors)} cohorts x {NONEMPLOYED} cells: mean absolute error "
                f"{np.mean(np.concatenate(errors)):.2f} (mean true count "
                f"{np.mean(np.concatenate(truths)):.2f}; S* > 1 in "
                f"{100 * np.mean(np.concatenate(above)):.1f}% of cells)")
        if expected:
            line += f", expected {np.mean(np.concatenate(expected)):.2f}"
        line += (f"; all cohorts: mean absolute error {np.mean(np.abs(everything - all_truth)):.2f}"
                 f" (mean true count {np.mean(all_truth):.1f})")
        print(line)


if __name__ == "__main__":
    main()
