"""The cells of the accuracy study and their earnings: the release's cells (institution x
degree level x 4-digit CIP x graduation cohort, for each years-after the cohort can have),
built with the release's own cell frame (tasks/cells.py) and earnings universe (earnings at
or above the floor, as tasks/histograms.py). Only cells with at least one graduate in the
earnings universe are studied: a percentile of an empty cell has no true value.

For synthetic data only: this module reads earnings microdata and its outputs (true
percentiles, true histograms) are meant for the accuracy study, never for a release.
Privacy cost: none (nothing here is released).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.study.accuracy import cell_size_stratum
from pseo_das.tasks.inputs.cells import cell_frame, cohort_attributes
from pseo_das.tasks.inputs.ingest import ValidatedInputs
from pseo_das.tasks.study.study_bins import StudyBins

STUDY_CIP_LEVEL = "4"


@dataclass
class StudySample:
    """Study cells (rows of `cells`, canonical order: years-after, then the release's cell
    order) and their earnings, sorted within each cell: cell i holds
    earnings[offsets[i]:offsets[i + 1]]."""
    cells: pd.DataFrame       # years_after, institution, degree_level, cipcode, grad_cohort, grad_cohort_years, graduates_with_earnings, stratum
    earnings: np.ndarray      # float64, sorted within each cell
    offsets: np.ndarray       # int64, len(cells) + 1

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def record_cell(self) -> np.ndarray:
        """The cell of each earnings record."""
        return np.repeat(np.arange(len(self.cells)), self.sizes)

    def true_histograms(self, bins: StudyBins) -> np.ndarray:
        """True counts per (cell, bin), cells x bins int64 (the release's binning rule)."""
        flat = self.record_cell * bins.n_bins + bins.bin_of(self.earnings)
        return np.bincount(flat, minlength=len(self.cells) * bins.n_bins).reshape(
            len(self.cells), bins.n_bins).astype(np.int64)

    def true_percentiles(self, percentiles: tuple[int, ...]) -> np.ndarray:
        """True percentile X of each cell: the order statistic of rank m = ceil(n X / 100)
        (the inverted empirical CDF, numpy's 'inverted_cdf'). cells x len(percentiles)."""
        return np.stack([self.earnings[self.offsets[:-1] + percentile_rank(self.sizes, x) - 1]
                         for x in percentiles], axis=1)


def percentile_rank(sizes: np.ndarray, percentile: int) -> np.ndarray:
    """1-based rank m = ceil(n X / 100) of percentile X in a cell of n values (n >= 1),
    computed exactly in integers."""
    sizes = np.asarray(sizes, dtype=np.int64)
    return np.maximum(1, -((-sizes * percentile) // 100))


def study_sample(inputs: ValidatedInputs, cfg: ReleaseConfig) -> StudySample:
    """Every study cell of every years-after, with its sorted earnings."""
    frame = cell_frame(cohort_attributes(inputs.graduates, cfg.cells), STUDY_CIP_LEVEL)
    earnings = inputs.outcomes["earnings"].to_numpy(dtype=np.float64, na_value=np.nan)
    years = inputs.outcomes["years_after"].to_numpy()
    parts, values, cells_parts = [], [], []
    base = 0
    for years_after in cfg.cells.years_after:
        observable = frame.observable(years_after, cfg.cells.last_earnings_year)
        in_universe = (years == years_after) & (earnings >= cfg.earnings.sample_floor)
        cell = frame.graduate_cell[inputs.graduate_row[in_universe]]
        keep = observable[cell]
        cell, value = cell[keep], earnings[in_universe][keep]
        present, dense = np.unique(cell, return_inverse=True)  # cells with earnings, sorted
        parts.append(base + dense)
        values.append(value)
        cells_parts.append(frame.cells.iloc[present].assign(years_after=years_after))
        base += len(present)
    record_cell = np.concatenate(parts)
    value = np.concatenate(values)
    order = np.lexsort((value, record_cell))
    sizes = np.bincount(record_cell, minlength=base)
    cells = pd.concat(cells_parts, ignore_index=True)
    cells = cells[["years_after"] + [c for c in cells.columns if c != "years_after"]]
    cells = cells.assign(graduates_with_earnings=sizes, stratum=cell_size_stratum(sizes))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return StudySample(cells, value[order], offsets)


@release_task("build the study sample")
def build_study_sample(inputs: ValidatedInputs, cfg: ReleaseConfig) -> StudySample:
    """Study cells and sorted earnings (synthetic data only). Privacy cost: none."""
    sample = study_sample(inputs, cfg)
    counts = sample.cells["stratum"].value_counts(sort=False)
    progress(f"study sample: {len(sample.cells):,} cells with earnings, "
             f"{len(sample.earnings):,} earnings records; cells by size: "
             + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
    return sample
