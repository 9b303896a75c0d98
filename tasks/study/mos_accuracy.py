"""Accuracy of the cell statistics (issue 15), on synthetic data only: mean earnings per
institution x degree level x cohort cell (all fields) by

  mos             maximum observed sensitivity (Chetty and Friedman 2019): value +
                  Laplace(chi / (epsilon_v N)), chi = max N x LS per degree level, N >= 3;
  mos-dp          the formally private variant: (noisy sum of x - L) / (noisy count) + L,
                  Laplace((U - L) / epsilon_v) and geometric noise at epsilon_v, published
                  where the noisy count is at least 3, clipped to [L, U];
  histogram       the mean implied by a noisy earnings histogram of the cell (21 bins,
                  geometric noise at epsilon per bin, negative bins as 0, each bin at its
                  midpoint, the top bin at the midpoint of its edge and the interpolation
                  bound), measured at the all-fields level;
  histogram-as-published
                  the same from the histograms a default release publishes at zero extra
                  epsilon: the all-fields cell is the sum of its 4-digit cells' noisy
                  histograms, each measured at the release's epsilon (1 per years-after).

At equal total epsilon E per statistic: mos and mos-dp spend E/2 on the values and E/2 on
the counts (as a release does), the histogram E on its bins; "histogram-as-published"
costs nothing beyond the default release. Errors are |estimate - true mean of the clamped
earnings| in the bins' 2016 dollars, by the cell's true number of observations. Growth
(y5 - y1 per graduate) is compared between mos and mos-dp only (histograms do not pair a
graduate's years).

No epsilon is spent and nothing is released: all noise is simulation noise
(tasks/study/simulation_noise.py). The output holds aggregate errors only.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig, load_config
from pseo_das.tasks import progress
from pseo_das.tasks.earnings.mos import chi_by_scope, mean_local_sensitivity, mos_dp_mean
from pseo_das.tasks.inputs.cpi import read_cpi
from pseo_das.tasks.inputs.true_counts import read_cell_moments, read_counts
from pseo_das.tasks.study.simulation_noise import (simulated_geometric_noise,
                                                  simulated_laplace_noise, simulation_generator,
                                                  summed_geometric_noise)

DEFAULT_MOS_STUDY_SEED = "5eed" * 16
SIZE_CLASSES = [(3, 9), (10, 29), (30, 99), (100, 299), (300, None)]
MOS, MOS_DP, HISTOGRAM, HISTOGRAM_PUBLISHED = "mos", "mos-dp", "histogram", "histogram-as-published"


@dataclass(frozen=True)
class MosStudyResult:
    out_dir: Path
    table: pd.DataFrame       # epsilon, statistic, method, size_class, cells, ...
    winners: pd.DataFrame     # per epsilon, statistic, size class: the lowest median error
    seconds: float


def size_class(n: np.ndarray) -> np.ndarray:
    labels = np.full(len(n), "", dtype=object)
    for low, high in SIZE_CLASSES:
        inside = (n >= low) & (n <= (high if high is not None else np.iinfo(np.int64).max))
        labels[inside] = f"{low}-{high}" if high is not None else f"{low}+"
    return labels


def histogram_mean(counts: np.ndarray, midpoints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean implied by noisy histograms (negative bins as 0); NaN where nothing is left.
    Returns (means, noisy totals). Privacy cost: none (post-processing)."""
    kept = np.clip(counts, 0, None).astype(np.float64)
    total = kept.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (kept @ midpoints) / total, counts.sum(axis=1)


def _histograms_at_all_fields(data_dir: Path, cfg: ReleaseConfig, cpi, keys: pd.MultiIndex
                              ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per years-after: the true all-fields histograms aligned to `keys` (institution,
    degree, cohort) and the number of 4-digit cells summed into each."""
    study_cfg = cfg.model_copy(update={"privacy": cfg.privacy.model_copy(update={
        "cip_levels": {"4": "measure", "2": "derive", "A": "measure"}})})
    counts = read_counts(data_dir, study_cfg, None, cpi)
    out = {}
    for k in cfg.cells.years_after:
        cells, hist = counts.histograms("A", k, cfg.cells.last_earnings_year)
        index = _keys(cells)
        aligned = pd.DataFrame(hist, index=index).reindex(keys).fillna(0).to_numpy(np.int64)
        fine, _ = counts.histograms("4", k, cfg.cells.last_earnings_year)
        terms = pd.Series(1, index=_keys(fine)).groupby(level=[0, 1, 2]).sum()
        out[k] = (aligned, terms.reindex(keys).fillna(0).to_numpy(np.int64))
    return out


def _keys(cells: pd.DataFrame) -> pd.MultiIndex:
    return pd.MultiIndex.from_arrays([cells["institution"].astype(str).to_numpy(),
                                      cells["degree_level"].astype(str).to_numpy(),
                                      cells["grad_cohort"].to_numpy(np.int64)])


def mos_accuracy_study(data_dir: Path, out_dir: Path, epsilons: list[float] | None = None,
                       draws: int = 20, seed_hex: str = DEFAULT_MOS_STUDY_SEED,
                       min_count: int = 3, release_epsilon: float = 1.0) -> MosStudyResult:
    """Run the comparison (module doc) and write `mos_accuracy.csv` and
    `mos_accuracy_winners.csv` to `out_dir`. Synthetic data only (the caller checks)."""
    started = time.perf_counter()
    epsilons = epsilons or [0.2, 1.0, 4.0]
    cfg, cpi = load_config(), read_cpi()
    lower, upper = float(cfg.earnings.sample_floor), float(cfg.earnings.top_bin_upper)
    moments = read_cell_moments(Path(data_dir), cfg, cpi, lower, upper)
    keys = _keys(moments.frame.cells)
    histograms = _histograms_at_all_fields(Path(data_dir), cfg, cpi, keys)
    edges = np.array(cfg.earnings.bin_edges, np.float64)
    midpoints = (edges + np.append(edges[1:], upper)) / 2
    seed = bytes.fromhex(seed_hex)
    degree = moments.frame.cells["degree_level"].astype(str).to_numpy()
    rows = []
    for statistic, m in moments.statistics.items():
        observable = moments.frame.observable(statistic.years_after, cfg.cells.last_earnings_year)
        lo, hi = (lower - upper, upper - lower) if statistic.is_growth else (lower, upper)
        n, total = m.n, m.total
        eligible = observable & (n >= min_count)
        truth = np.where(eligible, total / np.maximum(n, 1), np.nan)
        ls = mean_local_sensitivity(n[eligible], total[eligible], m.lowest[eligible],
                                    m.highest[eligible], lo, hi)
        chi = np.full(len(n), np.nan)
        chi[eligible] = chi_by_scope(n[eligible], ls, degree[eligible])[0]
        classes = size_class(n)
        for epsilon in epsilons:
            half = epsilon / 2
            errors: dict[str, list[np.ndarray]] = {}
            for d in range(draws):
                g = simulation_generator(seed, f"mos-study/{statistic.value}/{epsilon}/{d}")
                mos = truth + simulated_laplace_noise(g, (len(n),)) * chi / (half * np.maximum(n, 1))
                noisy_sum = total - n * lo + simulated_laplace_noise(g, (len(n),)) * (hi - lo) / half
                noisy_count = n + simulated_geometric_noise(g, half, (len(n),))
                dp, published = mos_dp_mean(noisy_sum, noisy_count, lo, hi, min_count)
                estimates = {MOS: mos, MOS_DP: np.where(published, dp, np.nan)}
                if not statistic.is_growth:
                    true_hist, terms = histograms[statistic.years_after]
                    direct = true_hist + simulated_geometric_noise(g, epsilon, true_hist.shape)
                    mean, count = histogram_mean(direct, midpoints)
                    estimates[HISTOGRAM] = np.where(count >= min_count, mean, np.nan)
                    summed = true_hist + summed_geometric_noise(g, release_epsilon, terms,
                                                                  true_hist.shape[1])
                    mean, count = histogram_mean(summed, midpoints)
                    estimates[HISTOGRAM_PUBLISHED] = np.where(count >= min_count, mean, np.nan)
                for method, estimate in estimates.items():
                    errors.setdefault(method, []).append(np.abs(estimate - truth))
            for method, stacked in errors.items():
                error = np.stack(stacked)             # draws x cells
                for label in dict.fromkeys(classes[eligible]):
                    mine = eligible & (classes == label)
                    e = error[:, mine]
                    finite = np.isfinite(e)
                    rows.append({
                        "epsilon": epsilon, "statistic": statistic.value, "method": method,
                        "size_class": label, "cells": int(mine.sum()),
                        "published_share": round(float(finite.mean()), 4),
                        "median_abs_error": round(float(np.median(e[finite])), 1)
                        if finite.any() else np.nan,
                        "mean_abs_error": round(float(e[finite].mean()), 1)
                        if finite.any() else np.nan,
                        "extra_epsilon": 0.0 if method == HISTOGRAM_PUBLISHED else epsilon})
        progress(f"mos accuracy: {statistic.value} done ({time.perf_counter() - started:.0f} s)")
    table = pd.DataFrame(rows)
    order = {label: i for i, label in enumerate(f"{lo}-{hi}" if hi else f"{lo}+"
                                                for lo, hi in SIZE_CLASSES)}
    table = table.assign(_order=table["size_class"].map(order)).sort_values(
        ["statistic", "epsilon", "_order", "method"], kind="stable").drop(columns="_order")
    same_budget = table[table["method"] != HISTOGRAM_PUBLISHED]
    winners = (same_budget.sort_values("median_abs_error", kind="stable")
               .groupby(["statistic", "epsilon", "size_class"], sort=False).head(1)
               .sort_values(["statistic", "epsilon"], kind="stable")
               [["statistic", "epsilon", "size_class", "method", "median_abs_error",
                 "published_share"]])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "mos_accuracy.csv", index=False)
    winners.to_csv(out_dir / "mos_accuracy_winners.csv", index=False)
    return MosStudyResult(out_dir, table, winners, time.perf_counter() - started)
