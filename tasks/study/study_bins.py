"""Histogram bins of the accuracy study: "Log-Normal" and "Even" bins for any bin count k
(seed 000 sections 4.1.1 and 5.3). Privacy cost: none (bins are public and chosen without
looking at any data).

A bin count k means k bins below the top bin, plus the open top bin: k + 1 bins in all, as
in the authors' code (the production table, k = 20, has 21 bins).

* Log-Normal (k): lower edges 10,000, then the quantiles j/k (j = 1 .. k-1) and 0.975 of a
  log-normal distribution; the top bin opens at the 0.975 quantile and interpolates up to
  the 0.999 quantile. Edges are rounded to whole dollars, halves up. Table 1 prints the
  parameters as 11.003 and 0.753, but those rounded values miss the table by up to 752
  dollars; mu = 11.00255 and sigma = 0.75275 (the values that round to the printed ones,
  found by fitting the table's log edges) reproduce all 21 edges and the interpolation bound
  of Table 1 exactly, so k = 20 gives the production bins of default_config.toml to the
  dollar (tested). k may go up to 40: beyond it the quantile (k-1)/k passes 0.975.
* Even (k): k bins of equal width from 10,000 to 300,000, then the top bin from 300,000
  (earnings at or above it) interpolating up to 500,000 (SPEC.md, Accuracy study). The
  authors' SAS code has one more even bin (its loop includes 300,000 itself) and a
  500,000-500,001 bin; we follow SPEC.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

LOG_NORMAL = "log_normal"
EVEN = "even"
METHOD_LABELS = {LOG_NORMAL: "Log-Normal", EVEN: "Even"}

EARNINGS_FLOOR = 10_000
LOG_NORMAL_MU = 11.00255
LOG_NORMAL_SIGMA = 0.75275
LOG_NORMAL_TOP_QUANTILE = 0.975
LOG_NORMAL_INTERPOLATION_QUANTILE = 0.999
EVEN_TOP_START = 300_000
EVEN_TOP_UPPER = 500_000


@dataclass(frozen=True)
class StudyBins:
    """One histogram layout: `lower` edges (the last opens the top bin) and `upper` bounds
    (the top bin's is its interpolation bound)."""
    method: str
    bin_count: int
    lower: np.ndarray
    upper: np.ndarray

    @property
    def n_bins(self) -> int:
        return len(self.lower)

    def bin_of(self, earnings: np.ndarray) -> np.ndarray:
        """0-based bin of each earnings value (all >= the floor); at or above the last edge:
        the top bin. The same rule as the release (tasks/histograms.py)."""
        return (np.searchsorted(self.lower, earnings, side="right") - 1).astype(np.int64)


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def log_normal_bins(bin_count: int, mu: float = LOG_NORMAL_MU, sigma: float = LOG_NORMAL_SIGMA,
                    floor: int = EARNINGS_FLOOR) -> StudyBins:
    """Log-Normal bins for bin count k (k + 1 bins); k = 20 is Table 1."""
    if not 2 <= bin_count <= 40:
        raise ValueError(f"Log-Normal bins need 2 <= k <= 40, not {bin_count}")
    normal = NormalDist()

    def quantile(p: float) -> int:
        return _round_half_up(math.exp(mu + sigma * normal.inv_cdf(p)))

    edges = [floor] + [quantile(j / bin_count) for j in range(1, bin_count)]
    edges.append(quantile(LOG_NORMAL_TOP_QUANTILE))
    lower = np.array(edges, dtype=np.float64)
    upper = np.append(lower[1:], quantile(LOG_NORMAL_INTERPOLATION_QUANTILE))
    if np.any(np.diff(lower) <= 0):
        raise ValueError(f"Log-Normal bins with k = {bin_count} are not increasing")
    return StudyBins(LOG_NORMAL, bin_count, lower, upper)


def even_bins(bin_count: int, floor: int = EARNINGS_FLOOR, top_start: int = EVEN_TOP_START,
              top_upper: int = EVEN_TOP_UPPER) -> StudyBins:
    """Even bins for bin count k (k + 1 bins): k equal bins from the floor to `top_start`,
    then the top bin up to `top_upper`. Edges are not rounded (widths like 9,666.67)."""
    if bin_count < 1:
        raise ValueError(f"Even bins need k >= 1, not {bin_count}")
    width = (top_start - floor) / bin_count
    lower = np.append(floor + width * np.arange(bin_count), float(top_start))
    upper = np.append(lower[1:], float(top_upper))
    return StudyBins(EVEN, bin_count, lower, upper)


def study_bin_sets(bin_counts: tuple[int, ...]) -> list[StudyBins]:
    """Log-Normal and Even bins for every bin count of the grid."""
    return [make(k) for k in bin_counts for make in (log_normal_bins, even_bins)]
