"""The posterior of a verification measure (Barrientos et al. 2017, section 3.1, model (4)),
in closed form. Privacy cost: none (post-processing of the released noisy count).

The server releases R = S + Z, where S ~ Binomial(M, r) is the number of the M groups whose
estimate lies in the analyst's interval and Z is two-sided geometric noise at epsilon,
P(Z = k) proportional to q^|k|, q = exp(-epsilon) (the paper uses Laplace noise; this server
uses the project's exact discrete sampler, so R is an integer). With the prior r ~ Beta(1, 1)
the marginal of S is uniform on 0..M, so

    P(S = s | R) is proportional to q^|R - s|,      s = 0..M,
    r | R  ~  sum_s P(S = s | R) Beta(s + 1, M - s + 1),

a mixture of M + 1 Betas: no MCMC. Its mean, CDF and quantiles follow from the Betas'; its
mode is found on a fine grid and refined.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np
from scipy import optimize, special, stats

GRID_POINTS = 4001        # the mode's grid on [0, 1] before refinement
PLOT_POINTS = 201         # the density returned for plotting


@dataclass(frozen=True)
class VerificationPosterior:
    """What the analyst reads: the posterior of r = P(estimate in the interval)."""
    released_count: int
    groups: int
    epsilon: float
    mode: float
    mean: float
    interval_95: tuple[float, float]
    prob_above_half: float
    count_weights: list[float]     # P(S = s | R), s = 0..M
    density_r: list[float]         # a grid on [0, 1] ...
    density: list[float]           # ... and the posterior density on it (for the plot)

    def as_dict(self) -> dict:
        return asdict(self)


def count_weights(released: int, groups: int, epsilon: float | Fraction) -> np.ndarray:
    """P(S = s | R = released), s = 0..M: proportional to exp(-epsilon |R - s|) (the
    uniform prior of S cancels)."""
    s = np.arange(groups + 1)
    log_w = -float(epsilon) * np.abs(released - s)
    return np.exp(log_w - special.logsumexp(log_w))


def log_density(r: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Log posterior density of r at the points `r`."""
    m = len(weights) - 1
    s = np.arange(m + 1)[:, None]
    with np.errstate(divide="ignore"):
        terms = np.log(weights)[:, None] + stats.beta.logpdf(np.asarray(r)[None, :], s + 1, m - s + 1)
    return special.logsumexp(terms, axis=0)


def cdf(r: float | np.ndarray, weights: np.ndarray) -> np.ndarray:
    m = len(weights) - 1
    s = np.arange(m + 1)[:, None]
    return (weights[:, None] * special.betainc(s + 1, m - s + 1, np.atleast_1d(r)[None, :])).sum(0)


def quantile(p: float, weights: np.ndarray) -> float:
    if p <= 0:
        return 0.0
    if p >= 1:
        return 1.0
    return float(optimize.brentq(lambda x: cdf(x, weights)[0] - p, 0.0, 1.0, xtol=1e-12))


def mode(weights: np.ndarray) -> float:
    grid = np.linspace(0.0, 1.0, GRID_POINTS)
    values = log_density(grid, weights)
    best = int(np.argmax(values))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, GRID_POINTS - 1)]
    refined = optimize.minimize_scalar(lambda x: -log_density(np.array([x]), weights)[0],
                                       bounds=(low, high), method="bounded",
                                       options={"xatol": 1e-10})
    candidates = [(values[best], grid[best])]
    if refined.success:
        candidates.append((-refined.fun, float(refined.x)))
    return float(max(candidates)[1])


def posterior(released: int, groups: int, epsilon: float | Fraction) -> VerificationPosterior:
    """The posterior of r given the released count (closed form, see the module doc)."""
    weights = count_weights(int(released), int(groups), epsilon)
    s = np.arange(groups + 1)
    grid = np.linspace(0.0, 1.0, PLOT_POINTS)
    density = np.exp(log_density(grid, weights))
    return VerificationPosterior(
        released_count=int(released), groups=int(groups), epsilon=float(epsilon),
        mode=mode(weights), mean=float((weights * (s + 1) / (groups + 2)).sum()),
        interval_95=(quantile(0.025, weights), quantile(0.975, weights)),
        prob_above_half=float(1.0 - cdf(0.5, weights)[0]),
        count_weights=[float(w) for w in weights],
        density_r=[float(x) for x in grid], density=[float(d) for d in density])
