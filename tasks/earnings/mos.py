"""Maximum observed sensitivity (MOS; Chetty and Friedman 2019, "A Practical Method to
Reduce Privacy Loss When Disclosing Statistics Based on Small Samples", section II): pure
functions, vectorised over cells. No noise is drawn here (the mechanism layer draws it).

The method, for a statistic theta_g of each cell g with N_g observations:
  * local sensitivity LS_g: the largest change of theta_g from removing one observed record
    or adding one record anywhere in the public domain [L, U];
  * chi = max over the cells of a scope of N_g x LS_g (the MOS parameter), so that the
    envelope chi / N_g weakly exceeds LS_g in every cell of the scope;
  * release theta_g + Laplace(chi / (epsilon N_g)) and N_g + noise of scale 1 / epsilon.

Privacy statement: the cell statistics are protected at epsilon *given chi*, but chi is
computed from the confidential data and published without noise, and the noise scale
uses the true N_g: MOS is NOT a formal differential-privacy guarantee. The paper argues
the risk of the single number chi is small when it is computed over many cells; no bound
is proved. The formally private variant ("mos-dp", `mos_dp_mean`) replaces chi by the
public worst case and divides a noisy sum by a noisy count.

Two reference computations are given for ordinary least squares (OLS), as in the paper's
Figure 1 (a predicted value from a univariate regression): `ols_local_sensitivity`, by
rank-one updates of the sufficient statistics, O(N + grid) per cell.
"""
from __future__ import annotations

from enum import StrEnum

import numpy as np
import pandas as pd


class MosVariant(StrEnum):
    MOS = "mos"          # chi = max N_g LS_g, data-dependent, published: NOT formally DP
    MOS_DP = "mos-dp"    # chi = the public worst case (U - L): epsilon-DP


class ChiScope(StrEnum):
    """Over which cells one chi is the maximum (always within one statistic)."""
    DEGREE_LEVEL = "degree_level"   # one chi per statistic and degree level
    RELEASE = "release"             # one chi per statistic over the whole release


def mean_local_sensitivity(n: np.ndarray, total: np.ndarray, lowest: np.ndarray,
                           highest: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """Local sensitivity of the mean of each cell (arrays, one entry per cell): the larger of

      adding a record x in [lower, upper]:  max(|lower - mean|, |upper - mean|) / (N + 1)
      removing an observed record x_i:      max(|lowest - mean|, |highest - mean|) / (N - 1)

    (the change of the mean is (x - mean)/(N + 1) when adding x and (mean - x_i)/(N - 1)
    when removing x_i, so the extremes decide). Needs only N, the sum, the minimum and the
    maximum of each cell. A cell with N < 2 has no finite local sensitivity (removing its
    record leaves no mean): inf. Privacy cost: none (a function of confidential values:
    its result must not be published, only chi through the MOS release)."""
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.asarray(total, dtype=np.float64) / n
        adding = np.maximum(np.abs(lower - mean), np.abs(upper - mean)) / (n + 1)
        removing = np.maximum(np.abs(np.asarray(lowest) - mean),
                              np.abs(np.asarray(highest) - mean)) / (n - 1)
        sensitivity = np.maximum(adding, removing)
    return np.where(n >= 2, sensitivity, np.inf)


def _ols_theta(n, sx, sy, sxx, sxy, at: float | None) -> np.ndarray:
    """The OLS slope (`at` None) or predicted value at `at` from sufficient statistics
    (arrays); inf where the regressor has no variance."""
    with np.errstate(divide="ignore", invalid="ignore"):
        xbar, ybar = sx / n, sy / n
        cxx = sxx - sx * xbar
        slope = (sxy - sx * ybar) / cxx
        theta = slope if at is None else ybar + slope * (at - xbar)
    degenerate = ~(cxx > 1e-12 * np.maximum(sxx, 1.0)) | (n < 2)
    return np.where(degenerate, np.inf, theta)


def ols_statistic(x: np.ndarray, y: np.ndarray, at: float | None = None) -> float:
    """The OLS slope of y on x (`at` None) or its predicted value at x = `at`."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    return float(_ols_theta(len(x), x.sum(), y.sum(), (x * x).sum(), (x * y).sum(), at))


def ols_local_sensitivity(x: np.ndarray, y: np.ndarray, x_grid: np.ndarray,
                          y_bounds: tuple[float, float], at: float | None = None
                          ) -> tuple[float, tuple[str, float, float]]:
    """Local sensitivity of an OLS slope (`at` None) or predicted value at `at` in one cell,
    by rank-one updates of the sufficient statistics (n, sum x, sum y, sum x^2, sum xy):
    every removal of an observed point (O(N), vectorised) and every addition of a point
    (x, y) with x on `x_grid` and y at either bound (the change is linear in the added y,
    so the bounds decide; over x it is a ratio of quadratics, so a continuous regressor
    needs a fine grid: the result is then the maximum over the grid). A discrete regressor
    (e.g. years after graduation 1 and 5) is exact with its values as the grid.

    Returns (LS, the change that attains it: ("add" | "remove", x, y)). The data are
    centred first (slopes and changes do not move under translation) for precision.
    A change that leaves the regressor without variance gives inf (the paper's point that
    the global sensitivity of OLS is infinite). Privacy cost: none (confidential result).
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    cx, cy = x.mean(), y.mean()
    xs, ys = x - cx, y - cy
    at_c = None if at is None else at - cx
    n = float(len(x))
    sx, sy, sxx, sxy = xs.sum(), ys.sum(), (xs * xs).sum(), (xs * ys).sum()
    theta = _ols_theta(n, sx, sy, sxx, sxy, at_c)
    removed = _ols_theta(n - 1, sx - xs, sy - ys, sxx - xs * xs, sxy - xs * ys, at_c)
    gx = np.repeat(np.asarray(x_grid, np.float64) - cx, 2)
    gy = np.tile(np.asarray(y_bounds, np.float64) - cy, len(x_grid))
    added = _ols_theta(n + 1, sx + gx, sy + gy, sxx + gx * gx, sxy + gx * gy, at_c)
    changes = np.abs(np.concatenate([removed, added]) - theta)
    where = int(np.argmax(changes))
    if where < len(x):
        how = ("remove", float(x[where]), float(y[where]))
    else:
        k = where - len(x)
        how = ("add", float(gx[k] + cx), float(gy[k] + cy))
    return float(changes[where]), how


def chi_by_scope(n: np.ndarray, sensitivity: np.ndarray, scope: np.ndarray
                 ) -> tuple[np.ndarray, pd.Series]:
    """chi = max over the cells of each scope group of N_g x LS_g (the MOS parameter), and
    each cell's chi. `scope`: one group label per cell. Cells with an infinite LS (N < 2)
    must be left out by the caller (minimum N). Privacy cost: none here, but chi is
    published without noise: the reason MOS is not formally DP."""
    product = np.asarray(n, np.float64) * np.asarray(sensitivity, np.float64)
    if not np.isfinite(product).all():
        raise ValueError("chi: a cell with an infinite local sensitivity (N < 2) is in scope")
    groups = pd.Series(product).groupby(np.asarray(scope)).max()
    return groups.reindex(np.asarray(scope)).to_numpy(), groups


def mos_noise_scale(chi: np.ndarray, n: np.ndarray, epsilon: float) -> np.ndarray:
    """The Laplace scale of the MOS release of each cell: chi / (epsilon N_g)."""
    return np.asarray(chi, np.float64) / (epsilon * np.asarray(n, np.float64))


def worst_case_chi(lower: float, upper: float) -> float:
    """The public bound of N x LS for a mean of values in [lower, upper]: U - L (removal:
    |x_i - mean| <= (U - L)(N - 1)/N, so LS <= (U - L)/N; addition: < (U - L)/N)."""
    return float(upper - lower)


def mos_dp_mean(noisy_shifted_sum: np.ndarray, noisy_count: np.ndarray, lower: float,
                upper: float, min_count: int) -> tuple[np.ndarray, np.ndarray]:
    """The mos-dp mean of each cell from its noisy sum of (x - lower) (noise of scale
    (upper - lower)/epsilon: adding or removing one record changes the shifted sum by at
    most upper - lower) and its noisy count: lower + sum / count, clipped to [lower, upper],
    where the noisy count is at least `min_count` (else NaN). Returns (means, published).
    Privacy cost: none (post-processing of two epsilon-DP measurements)."""
    count = np.asarray(noisy_count, np.float64)
    published = count >= min_count
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = lower + np.asarray(noisy_shifted_sum, np.float64) / count
    return np.where(published, np.clip(mean, lower, upper), np.nan), published
