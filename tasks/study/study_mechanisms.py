"""The mechanisms the accuracy study compares (seed 000 sections 4.1 and 4.2), vectorised
across cells and noise draws. Noise comes from the caller (tasks/study/simulation_noise.py
draws it); these functions only apply it, so the same code serves simulations and any future use.

* Histogram method: geometric noise on every bin of a cell's histogram, then percentiles by
  the release's first-bin rule (tasks/percentiles.py).
* Smooth sensitivity (Nissim, Raskhodnikova and Smith 2007): each percentile X gets its
  own share eps_x = eps / (number of percentiles); beta = eps_x / 4; protected value =
  true percentile + S*_beta / (eps_x / 16) x eta, eta drawn from the density proportional
  to 1 / (1 + |y|^4).
"""
from __future__ import annotations

import math

import numpy as np

from pseo_das.tasks.earnings.percentiles import protected_percentiles

SMOOTH_SENSITIVITY = "smooth_sensitivity"
# The authors' SAS code gives every percentile the whole epsilon (3 x epsilon for three
# percentiles): the study runs it too, as a comparator more generous to smooth sensitivity.
SMOOTH_SENSITIVITY_UNSPLIT = "smooth_sensitivity_unsplit"

# Earnings range of the smooth-sensitivity mechanism, which needs a bounded domain [L, U]:
# the sample floor of 10,000 (seed 000 sections 4.1.1 and 5.2: earnings are "strictly above
# $10,000") and 614,597, the 99.9th percentile of the log-normal bins, the largest earnings
# value the histogram method can return (Table 1's interpolation bound). Earnings above U
# are clipped to U before computing S* (0.09% of the synthetic earnings records).
SMOOTH_LOWER = 10_000.0
SMOOTH_UPPER = 614_597.0
INVERSE_QUARTIC_NORMALISER = math.pi / math.sqrt(2)  # integral of 1 / (1 + y^4) over R


def histogram_percentiles(true_counts: np.ndarray, noise: np.ndarray, bin_lower: np.ndarray,
                          bin_upper: np.ndarray, percentiles: tuple[int, ...]) -> np.ndarray:
    """The histogram method: percentiles of `true_counts` (cells x bins) + `noise` (draws x
    cells x bins, or cells x bins). Returns draws x cells x percentiles (NaN where the noisy
    total is <= 0).

    Privacy cost: epsilon, the parameter of the two-sided geometric noise, for all cells and
    percentiles together: each graduate is in one bin of one cell (sensitivity 1, parallel
    composition across cells), and any number of percentiles is post-processing.
    """
    noisy = true_counts + noise
    shape = noisy.shape
    flat = noisy.reshape(-1, shape[-1])
    values = protected_percentiles(flat, bin_lower, bin_upper, percentiles)
    return values.reshape(shape[:-1] + (len(percentiles),))


def smooth_sensitivity(earnings: np.ndarray, offsets: np.ndarray, ranks: np.ndarray,
                       beta: float, lower: float = SMOOTH_LOWER,
                       upper: float = SMOOTH_UPPER) -> np.ndarray:
    """beta-smooth sensitivity S* of the order statistic of rank m in every cell (seed 000
    eq. 4.6, NRS 2007 section 3.1):

        S* = max_{k=0..n} exp(-k beta) max_{t=0..k+1} (x_{m+t} - x_{m+t-k-1}),

    with the cell's sorted values clipped to [lower, upper], x_i = lower for i < 1 and
    x_i = upper for i > n. With a = m+t-k-1 and b = m+t this is the maximum over
    0 <= a <= m <= b <= n+1, a < b, of f(a, b) = (x_b - x_a) exp(-beta (b - a - 1)).

    For a1 < a2 the ratio f(a, b2) / f(a, b1) (b1 < b2) does not decrease from a1 to a2, so
    the largest best b is non-decreasing in a and a divide and conquer over a finds S* in
    O(n log n) per cell (NRS's algorithm). It runs level by level for all cells at once.

    `earnings`: values sorted within cells; cell i is earnings[offsets[i]:offsets[i+1]]
    (n >= 1); `ranks`: the 1-based rank m of each cell's percentile.
    Privacy cost: none by itself (it is the noise scale of a mechanism).
    """
    sizes = np.diff(offsets).astype(np.int64)
    n_cells = len(sizes)
    ranks = np.asarray(ranks, dtype=np.int64)
    if np.any(sizes < 1) or np.any(ranks < 1) or np.any(ranks > sizes):
        raise ValueError("every cell needs n >= 1 values and a rank 1 <= m <= n")
    # Padded values: cell i occupies padded[start[i] : start[i] + n_i + 2], x_0 = L, x_{n+1} = U.
    start = offsets[:-1] + 2 * np.arange(n_cells)
    padded = np.empty(len(earnings) + 2 * n_cells)
    padded[start] = lower
    padded[start + sizes + 1] = upper
    inner = np.repeat(start + 1 - offsets[:-1], sizes) + np.arange(len(earnings))
    padded[inner] = np.clip(earnings, lower, upper)

    cell = np.arange(n_cells)
    a_lo, a_hi = np.zeros(n_cells, np.int64), ranks.copy()
    b_lo, b_hi = ranks.copy(), sizes + 1
    best_cell, best_value = [], []
    while len(cell):
        a_mid = (a_lo + a_hi) // 2
        lo = np.maximum(b_lo, a_mid + 1)
        length = b_hi - lo + 1
        seg_start = np.concatenate([[0], np.cumsum(length)[:-1]])
        seg = np.repeat(np.arange(len(cell)), length)
        b = lo[seg] + np.arange(int(length.sum())) - seg_start[seg]
        base = start[cell][seg]
        gap = b - a_mid[seg] - 1
        value = (padded[base + b] - padded[base + a_mid[seg]]) * np.exp(-beta * gap)
        seg_max = np.maximum.reduceat(value, seg_start)
        arg = np.maximum.reduceat(np.where(value == seg_max[seg], b, -1), seg_start)
        best_cell.append(cell)
        best_value.append(seg_max)
        left = a_lo <= a_mid - 1
        right = a_mid + 1 <= a_hi
        cell = np.concatenate([cell[left], cell[right]])
        a_lo, a_hi = np.concatenate([a_lo[left], a_mid[right] + 1]), np.concatenate([a_mid[left] - 1, a_hi[right]])
        b_lo, b_hi = np.concatenate([b_lo[left], arg[right]]), np.concatenate([arg[left], b_hi[right]])
    out = np.zeros(n_cells)
    np.maximum.at(out, np.concatenate(best_cell), np.concatenate(best_value))
    return out


def smooth_sensitivity_percentiles(true_values: np.ndarray, sensitivities: np.ndarray,
                                   eta: np.ndarray, epsilon_per_percentile: float) -> np.ndarray:
    """Protected percentiles: true + S* / (eps_x / 16) x eta (NRS 2007 lemma 2.5 with the
    density 1/(1+|y|^4): gamma = 4, alpha = eps_x / 16, beta = eps_x / 4).

    `true_values`, `sensitivities`: cells (S* computed with beta = eps_x / 4); `eta`: draws
    x cells draws from sample_inverse_quartic. Returns draws x cells.

    Privacy cost: eps_x for each percentile; releasing P percentiles of a cell costs
    P x eps_x (sequential composition: each percentile is a separate query), parallel across
    cells. As in NRS and the paper, neighbouring data sets change one record of a cell
    (its size n is held fixed).
    """
    return true_values[None] + (sensitivities / (epsilon_per_percentile / 16))[None] * eta


def inverse_quartic_cdf(y: np.ndarray) -> np.ndarray:
    """Exact CDF of the density (sqrt(2)/pi) / (1 + y^4):
    1/2 + sign(y) G(|y|) / (pi/sqrt(2)), where G(t), the integral of 1/(1+s^4) from 0 to t, is
    (1/(4 sqrt 2)) [ln((t^2 + sqrt2 t + 1)/(t^2 - sqrt2 t + 1)) + 2 atan(sqrt2 t + 1) + 2 atan(sqrt2 t - 1)]."""
    y = np.asarray(y, dtype=np.float64)
    t = np.abs(y)
    r2 = math.sqrt(2)
    g = (np.log((t * t + r2 * t + 1) / (t * t - r2 * t + 1))
         + 2 * np.arctan(r2 * t + 1) + 2 * np.arctan(r2 * t - 1)) / (4 * r2)
    return 0.5 + np.sign(y) * g / INVERSE_QUARTIC_NORMALISER
