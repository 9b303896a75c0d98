"""Accuracy measures of protected percentiles (seed 000 section 5.2) and their summaries by
cell-size stratum. Privacy cost: none (measures of simulated outputs).

* Relative accuracy of a protected percentile: 1 - |protected - true| / true.
* L1 error of a cell: the sum over the 25th, 50th and 75th percentiles of |protected - true|.
* Cell-size strata of the authors' code: under 30, 30-49, 50-79, 80-99, 100-199, 200-299,
  300 and over. Summaries add two groups: "30 and over" (every stratum a release can
  publish) and "all cells".

A histogram percentile is undefined when the noisy total of its cell is 0 or negative (the
release publishes nothing there). Summaries leave undefined values out of their means and
medians, as the authors' code does (SAS statistics skip missing values), and report the
share of them as `undefined_share`.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.tasks.study.simulation_noise import (simulated_geometric_noise, simulation_generator,
                                                 simulation_sample, within_bin_truth)
from pseo_das.tasks.earnings.noisy_histograms import NoisyHistograms
from pseo_das.tasks.earnings.percentiles import protected_percentiles, round_dollars

STRATUM_EDGES = (30, 50, 80, 100, 200, 300)
STRATA = ("under 30", "30-49", "50-79", "80-99", "100-199", "200-299", "300 and over")
PUBLISHABLE = "30 and over"   # the strata a release can publish (noisy count >= 30)
ALL_CELLS = "all cells"
STRATUM_ORDER = STRATA + (PUBLISHABLE, ALL_CELLS)


def cell_size_stratum(sizes: np.ndarray) -> pd.Categorical:
    """The stratum of each cell size (under 30 includes 0 and negative noisy counts)."""
    codes = np.searchsorted(np.asarray(STRATUM_EDGES), np.asarray(sizes), side="right")
    return pd.Categorical.from_codes(codes, categories=list(STRATA), ordered=True)


def relative_accuracy(protected: np.ndarray, true: np.ndarray) -> np.ndarray:
    """1 - |protected - true| / true, elementwise (NaN where `protected` is NaN). True values
    are earnings percentiles, at least the 10,000 floor, so the ratio is always defined."""
    return 1.0 - np.abs(protected - true) / true


def l1_error_sum(protected: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Sum over the last axis (the percentiles) of |protected - true|; NaN if any is NaN."""
    return np.abs(protected - true).sum(axis=-1)


def _stratum_groups(strata: pd.Categorical) -> list[tuple[str, np.ndarray]]:
    """(stratum, cell indices) for every stratum with cells, then cells of 30 and over
    (every stratum but the first), then all cells."""
    codes = np.asarray(strata.codes)
    groups = [(label, np.flatnonzero(codes == k)) for k, label in enumerate(STRATA)]
    groups.append((PUBLISHABLE, np.flatnonzero(codes > 0)))
    groups = [(label, idx) for label, idx in groups if len(idx)]
    return groups + [(ALL_CELLS, np.arange(len(codes)))]


def _mean_median(values: np.ndarray) -> tuple[int, float, float]:
    """Count of defined values, their mean and median (NaN when there are none)."""
    defined = values[~np.isnan(values)]
    if len(defined) == 0:
        return 0, float("nan"), float("nan")
    return len(defined), float(defined.mean()), float(np.median(defined))


def summarise_percentiles(protected: np.ndarray, true: np.ndarray, strata: pd.Categorical,
                          percentiles: tuple[int, ...]) -> pd.DataFrame:
    """Relative accuracy by stratum and percentile, over every cell and draw.

    `protected`: draws x cells x percentiles; `true`: cells x percentiles (or one per draw,
    as `protected`). One row per (stratum, percentile): cells, values (defined cell-draws),
    undefined_share, mean_relative_accuracy, median_relative_accuracy, mean_abs_error.
    """
    true = true if true.ndim == 3 else true[None]
    groups = _stratum_groups(strata)
    rows = {}
    for k, x in enumerate(percentiles):   # one percentile at a time: draws x cells
        accuracy = relative_accuracy(protected[:, :, k], true[:, :, k])
        error = np.abs(protected[:, :, k] - true[:, :, k])
        for label, idx in groups:
            acc = accuracy[:, idx].ravel()
            n, mean, median = _mean_median(acc)
            err = error[:, idx].ravel()
            rows[label, k] = {"stratum": label, "percentile": x, "cells": len(idx), "values": n,
                              "undefined_share": 1 - n / acc.size,
                              "mean_relative_accuracy": mean, "median_relative_accuracy": median,
                              "mean_abs_error": float(np.nanmean(err)) if n else float("nan")}
    return pd.DataFrame([rows[label, k] for label, _ in groups for k in range(len(percentiles))])


def summarise_l1(protected: np.ndarray, true: np.ndarray, strata: pd.Categorical) -> pd.DataFrame:
    """The sum of the L1 errors of all percentiles, by stratum, over every cell and draw:
    stratum, cells, values, undefined_share, mean_l1_error_sum, median_l1_error_sum."""
    total = l1_error_sum(protected, true[None])
    rows = []
    for label, idx in _stratum_groups(strata):
        values = total[:, idx].ravel()
        n, mean, median = _mean_median(values)
        rows.append({"stratum": label, "cells": len(idx), "values": n,
                     "undefined_share": 1 - n / values.size,
                     "mean_l1_error_sum": mean, "median_l1_error_sum": median})
    return pd.DataFrame(rows)


def stand_in_histograms(noisy: np.ndarray, epsilon: float) -> np.ndarray:
    """Published noisy histograms as a stand-in for the true ones: a bin whose noisy count
    is at most half the noise's variance per bin (2q / (1 - q)^2, q = exp(-epsilon)),
    rounded, is taken as empty (at epsilon 2: negatives only; 1: counts of 1 or less; 0.5:
    4 or less), since noise alone puts counts there in the many empty bins of small cells.
    Calibrated against true values on synthetic data (docs/audit/mlflow.md, "Expected
    accuracy"): clipping negatives alone overstates the accuracy of cells of 30-49."""
    return np.where(noisy <= empty_bin_threshold(epsilon), 0, noisy)


def empty_bin_threshold(epsilon: float) -> int:
    """Half the variance of two-sided geometric noise at `epsilon`, rounded."""
    q = math.exp(-epsilon)
    return max(0, round(q / (1 - q) ** 2))


def expected_accuracy_from_noisy_histograms(noisy: np.ndarray, bin_lower: np.ndarray,
                                            bin_upper: np.ndarray, percentiles: tuple[int, ...],
                                            epsilon: float, draws: int, seed: bytes,
                                            noise_only: bool = False) -> pd.DataFrame:
    """Expected relative accuracy of published percentiles, by simulation from the published
    noisy histograms alone (cells x bins, as in pseoh.csv).

    The noisy counts stand in for the true histograms (`stand_in_histograms`). Each draw
    adds fresh two-sided geometric noise at `epsilon` to them and recomputes the percentiles
    with the release's rule, rounded to whole dollars as published, and compares them with
    a fresh draw of the true percentiles given the stand-in histograms
    (`simulation_noise.within_bin_truth`),
    so both errors of a published percentile are counted: the noise's and the linear
    interpolation's within its bin. `noise_only`: the estimate before issue 36 (negatives
    set to 0 stand in, their own percentiles are the truth: the noise's error alone; it
    overstates the accuracy of small cells). Cells are stratified by their published noisy
    count (sum of `noisy`'s bins); cells whose stand-in histogram is empty have no stand-in
    truth and are left out.

    Returns one row per (stratum, percentile), strata in size order, then "30 and over",
    then "all cells":
    stratum, percentile, cells (with a stand-in truth), values (defined cell-draws),
    undefined_share (draws whose simulated total was <= 0), mean_relative_accuracy,
    median_relative_accuracy, mean_abs_error (dollars).

    Privacy cost: none. It reads only published noisy counts (post-processing), and its
    noise is simulation noise from `seed` (no ledger entry, never the release's streams).
    """
    noisy = np.asarray(noisy, dtype=np.int64)
    lower = np.asarray(bin_lower, dtype=np.float64)
    upper = np.asarray(bin_upper, dtype=np.float64)
    stand_in = np.clip(noisy, 0, None) if noise_only else stand_in_histograms(noisy, epsilon)
    kept = stand_in.sum(axis=1) > 0
    stand_in = stand_in[kept]
    strata = cell_size_stratum(noisy[kept].sum(axis=1))
    del noisy, kept
    generator = simulation_generator(seed, f"expected-accuracy/epsilon={float(epsilon)!r}")
    simulated = np.empty((draws, len(stand_in), len(percentiles)))
    truth = np.empty_like(simulated)
    for d in range(draws):
        redrawn = simulated_geometric_noise(generator, epsilon, stand_in.shape)
        redrawn += stand_in   # in place: the redrawn histograms are the noise's array
        simulated[d] = round_dollars(protected_percentiles(redrawn, lower, upper, percentiles))
        truth[d] = protected_percentiles(stand_in, lower, upper, percentiles) if noise_only \
            else within_bin_truth(generator, stand_in, lower, upper, percentiles)
        del redrawn
    del stand_in
    return summarise_percentiles(simulated, truth, strata, tuple(percentiles))


def accuracy_seed(tables: list[NoisyHistograms]) -> bytes:
    """The simulation seed of a release's accuracy table: the SHA-256 of the content
    addresses of the stored measurements it simulates from (or, for tables without them,
    of their noisy counts), so identical published data give an identical table whatever
    the release seed or id."""
    digest = hashlib.sha256()
    for table in tables:
        digest.update(table.tabulation_id.encode() + b"\n")
        for source in table.sources:
            digest.update(source.encode() + b"\n")
        if not table.sources:
            digest.update(np.ascontiguousarray(table.counts, dtype="<i8").tobytes())
    return digest.digest()


ACCURACY_DRAWS = 20
# The simulation holds each draw's percentiles of every cell: a release with more published
# measured cells than this (a national one at 100 million outcome rows: 539,391, 1.1 GB) is
# simulated on a random sample of them of about this size.
ACCURACY_MAX_CELLS = 100_000
# The smallest epsilon at which the estimate was checked against true values on synthetic
# data (tests/test_expected_accuracy_truth.py: within 0.01 at 1 and 2). Below it noise
# lifts many small cells above the publication minimum, which their published histograms
# cannot show, and the estimate overstates the smallest cells' accuracy (measured at 0.5 by
# the same test): the DRB report says so beside its table.
ACCURACY_CHECKED_EPSILON = 1.0


def release_accuracy(cfg: ReleaseConfig, tables: list[NoisyHistograms]) -> dict:
    """Expected relative accuracy of the published percentiles of the measured institution
    cells, by cell-size stratum, simulated from their published noisy histograms at the
    release's epsilon (never from true values), seeded by `accuracy_seed`; above
    ACCURACY_MAX_CELLS cells, on a sample of them (each kept with probability
    ACCURACY_MAX_CELLS / cells, from a simulation stream of the same seed). Privacy cost:
    none."""
    measured = [t for t in tables if t.measured]
    counts = np.concatenate([t.counts[t.counts.sum(axis=1) >= cfg.earnings.min_publish_count]
                             for t in measured])   # the published histograms only
    cells = len(counts)
    epsilon = float(cfg.privacy.epsilon_per_tabulation)
    seed = accuracy_seed(measured)
    if cells > ACCURACY_MAX_CELLS:
        counts = counts[simulation_sample(seed, "expected-accuracy/sample", cells,
                                          ACCURACY_MAX_CELLS / cells)]
    summary = {"tables": ", ".join(t.tabulation_id for t in measured), "draws": ACCURACY_DRAWS,
               "cells": cells, "simulated_cells": len(counts), "epsilon": epsilon,
               "empty_at_most": empty_bin_threshold(epsilon),
               "checked_epsilon": ACCURACY_CHECKED_EPSILON, "rows": []}
    if not cells:
        return summary
    table = expected_accuracy_from_noisy_histograms(
        counts, np.array(cfg.earnings.bin_edges), np.array(cfg.earnings.bin_upper),
        tuple(cfg.earnings.percentiles), epsilon, ACCURACY_DRAWS, seed)
    rows = table[(table["cells"] > 0) & (table["stratum"] != ALL_CELLS)]
    return summary | {"rows": rows.to_dict("records")}
