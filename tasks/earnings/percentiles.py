"""Percentiles from noisy histograms (first-bin rule of seed 000 eq. 4.2 / seed 001 eq. 4).
Privacy cost: none (post-processing of noisy counts)."""
from __future__ import annotations

import numpy as np


PERCENTILE_BLOCK_ROWS = 1 << 16


def protected_percentiles(counts: np.ndarray, bin_lower: np.ndarray, bin_upper: np.ndarray,
                          percentiles: tuple[int, ...]) -> np.ndarray:
    """Percentile Y of each row of noisy bin counts q (cells x bins).

    With C the cumulative noisy count and T the noisy total, J is the first bin with
    C(J-1)/T < Y/100 <= C(J)/T, and the value is
    lower_J + (upper_J - lower_J) * (Y/100 * T - C(J-1)) / q_J.
    Comparisons are exact in integers (100 C(J) >= Y T). Rows with T <= 0 give NaN.
    Returns cells x len(percentiles) floats, unrounded. Each row's values are its own:
    computed PERCENTILE_BLOCK_ROWS rows at a time (a 100m national release's 3.8 million
    histograms: cumulative counts of 650 MB at once).
    """
    counts = np.asarray(counts)
    lower = np.asarray(bin_lower, dtype=np.float64)
    upper = np.asarray(bin_upper, dtype=np.float64)
    out = np.full((len(counts), len(percentiles)), np.nan)
    for start in range(0, len(counts), PERCENTILE_BLOCK_ROWS):
        block = slice(start, start + PERCENTILE_BLOCK_ROWS)
        out[block] = _block_percentiles(np.asarray(counts[block], dtype=np.int64), lower, upper,
                                        percentiles)
    return out


def _block_percentiles(counts: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                       percentiles: tuple[int, ...]) -> np.ndarray:
    cumulative = np.cumsum(counts, axis=1)
    total = cumulative[:, -1]
    positive = total > 0
    rows = np.arange(len(counts))
    out = np.full((len(counts), len(percentiles)), np.nan)
    for k, y in enumerate(percentiles):
        reached = 100 * cumulative >= y * total[:, None]
        j = np.argmax(reached, axis=1)  # first bin reaching Y (the last bin always does if T > 0)
        before = np.where(j > 0, cumulative[rows, j - 1], 0)
        q_j = counts[rows, j]
        with np.errstate(divide="ignore", invalid="ignore"):
            value = lower[j] + (upper[j] - lower[j]) * (y / 100 * total - before) / q_j
        out[positive, k] = value[positive]
    return out


def round_dollars(values: np.ndarray) -> np.ndarray:
    """Round to whole dollars, halves up (so anyone can redo it by hand)."""
    return np.floor(values + 0.5)
