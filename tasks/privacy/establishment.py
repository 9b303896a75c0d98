"""Employer-side protection: (alpha, epsilon) employer-employee privacy (Haney,
Machanavajjhala, Abowd, Graham, Kutzbach and Vilhuber, "Utility cost of formal privacy for
releasing national employer-employee statistics", SIGMOD 2017). Pure parameter checks and
closed forms; the noise itself is drawn in tasks/privacy/employer_side.py.

The neighbours of (alpha, epsilon) privacy change the workforce of one establishment e
from E to E' with E a subset of E' and |E| < |E'| <= max((1 + alpha)|E|, |E| + 1): one
worker (so the graduates keep epsilon-DP), or up to a share alpha of the establishment's
workforce (so an employer's size and shape are hidden up to a factor 1 + alpha). A count
with only establishment attributes (state x sector) gets the *strong* notion; a count that
also has graduate attributes (institution, degree, field, cohort: every program-level
flow) gets only the *weak* notion (the change is proportional within every subgroup of the
workforce), and a marginal over d graduate-attribute cells costs d x epsilon for the
employers (the paper's section 8), while each graduate is in one cell (epsilon).

The mechanisms (formulas rebuilt from the paper's appendix proofs, its text being OCR):

* Log-Laplace: n~ = (n + 1/alpha) e^eta - 1/alpha, eta ~ Laplace(lambda), lambda =
  2 ln(1 + alpha) / epsilon; E[n~] + 1/alpha = (n + 1/alpha) / (1 - lambda^2) (lemma 8.2;
  finite only for lambda < 1, the variance only for lambda < 1/2). Optional unbiasing:
  (n~ + 1/alpha)(1 - lambda^2) - 1/alpha, then clamped at 0.
* Smooth Gamma: n + (16 S* / epsilon) eta, eta with density (sqrt 2 / pi) / (1 + z^4)
  (variance 1), S* = max(alpha x_v, 1), x_v the largest number of the cell's workers at one
  establishment (lemma 8.5); feasible when 1 + alpha <= e^(epsilon / 4).
* Smooth Laplace: n + (2 S* / epsilon) Laplace(1), (alpha, epsilon, delta) privacy, feasible
  when 1 + alpha <= e^(epsilon / (2 ln(2 / delta))). The paper writes ln(1/delta); this
  module takes the safer ln(2/delta) (a larger minimum epsilon). Its Table 2 uses
  ln(1/delta): 2 ln(1/delta) ln(1 + alpha) is 2.77 at delta 5e-4, alpha 0.2 (the table
  prints 2.13, a misprint).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from pseo_das.errors import PseoDasError

# E|eta| for the density (sqrt 2 / pi) / (1 + z^4): 2 (sqrt 2 / pi) (pi / 4) = 1 / sqrt 2.
INVERSE_QUARTIC_MEAN_ABSOLUTE = 1 / math.sqrt(2)
SMOOTH_GAMMA_FACTOR = 16   # noise scale 16 S* / epsilon (NRS 2007 lemma 2.6, gamma = 4)
SMOOTH_LAPLACE_FACTOR = 2  # noise scale 2 S* / epsilon


class FlowsMechanism(StrEnum):
    """How the employment flows are measured (`flows.mechanism`)."""
    GEOMETRIC = "geometric"            # graduates only: epsilon-DP, exact integer noise
    LOG_LAPLACE = "log-laplace"        # graduates and employers: (alpha, epsilon)
    SMOOTH_GAMMA = "smooth-gamma"      # graduates and employers: (alpha, epsilon)
    SMOOTH_LAPLACE = "smooth-laplace"  # graduates and employers: (alpha, epsilon, delta)

    @property
    def protects_employers(self) -> bool:
        return self is not FlowsMechanism.GEOMETRIC


class PrivacyNotion(StrEnum):
    """The employer-side guarantee a count gets (module doc)."""
    STRONG = "strong"   # only establishment attributes (state x sector)
    WEAK = "weak"       # establishment and graduate attributes (program-level flows)


MECHANISM_NAMES = {
    FlowsMechanism.LOG_LAPLACE: "log-Laplace (Haney et al. 2017, algorithm 1)",
    FlowsMechanism.SMOOTH_GAMMA: "smooth gamma (Haney et al. 2017, smooth sensitivity, 1/(1+z^4) noise)",
    FlowsMechanism.SMOOTH_LAPLACE: "smooth Laplace (Haney et al. 2017, smooth sensitivity, Laplace noise)",
}


class InfeasibleParameters(PseoDasError, ValueError):
    """The (alpha, epsilon, delta) asked for cannot be given by the mechanism."""


def log_laplace_lambda(alpha: float, epsilon: float) -> float:
    """lambda = 2 ln(1 + alpha) / epsilon, the scale of the Laplace noise on the log count."""
    return 2 * math.log1p(alpha) / epsilon


def smooth_gamma_min_epsilon(alpha: float) -> float:
    """The smallest epsilon for which Smooth Gamma gives (alpha, epsilon): 4 ln(1 + alpha)."""
    return 4 * math.log1p(alpha)


def smooth_laplace_min_epsilon(alpha: float, delta: float, paper_form: bool = False) -> float:
    """The smallest epsilon for which Smooth Laplace gives (alpha, epsilon, delta):
    2 ln(2/delta) ln(1 + alpha) (`paper_form`: the paper's 2 ln(1/delta) ln(1 + alpha),
    which its Table 2 tabulates; not used for releases)."""
    return 2 * math.log((1 if paper_form else 2) / delta) * math.log1p(alpha)


@dataclass(frozen=True)
class EmployerProtection:
    """One mechanism with its (alpha, epsilon, delta); `check()` refuses what cannot be given."""
    mechanism: FlowsMechanism
    alpha: float
    epsilon: float
    delta: float = 0.0
    unbiased: bool = False   # Log-Laplace only: the bias correction, then clamped at 0

    def check(self) -> list[str]:
        """Raise InfeasibleParameters with the reason, or return warnings (may be empty)."""
        m, alpha, epsilon, delta = self.mechanism, self.alpha, self.epsilon, self.delta
        if not m.protects_employers:
            return []
        for name, value in (("alpha", alpha), ("epsilon", epsilon)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise InfeasibleParameters(f"{m.value}: {name} = {value!r} must be a finite "
                                           "number above 0")
        if m is FlowsMechanism.SMOOTH_LAPLACE:
            if not (math.isfinite(delta) and 0 < delta < 1):
                raise InfeasibleParameters(f"smooth-laplace: delta = {delta!r} must lie strictly "
                                           "between 0 and 1 (it is an (alpha, epsilon, delta) "
                                           "mechanism)")
        elif delta != 0:
            raise InfeasibleParameters(f"{m.value}: delta = {delta!r}; this mechanism is pure "
                                       "(delta 0): only smooth-laplace takes a delta")
        if self.unbiased and m is not FlowsMechanism.LOG_LAPLACE:
            raise InfeasibleParameters(f"{m.value}: unbiasing is for log-laplace only")
        warnings = []
        if m is FlowsMechanism.LOG_LAPLACE:
            lam = log_laplace_lambda(alpha, epsilon)
            if lam >= 1:
                raise InfeasibleParameters(
                    f"log-laplace: lambda = 2 ln(1 + alpha) / epsilon = {lam:.4g} >= 1 at alpha "
                    f"{alpha:g}, epsilon {epsilon:g}: the noisy counts would have an infinite "
                    f"mean; take epsilon above {2 * math.log1p(alpha):.4g} or a smaller alpha")
            if lam >= 0.5:
                warnings.append(
                    f"log-laplace: lambda = {lam:.4g} >= 1/2: the noisy counts have a finite "
                    f"mean but an infinite variance; epsilon above {4 * math.log1p(alpha):.4g} "
                    "gives a finite one")
        elif m is FlowsMechanism.SMOOTH_GAMMA:
            low = smooth_gamma_min_epsilon(alpha)
            if epsilon < low:
                raise InfeasibleParameters(
                    f"smooth-gamma: 1 + alpha <= e^(epsilon/4) fails at alpha {alpha:g}, "
                    f"epsilon {epsilon:g}: the smallest epsilon for alpha {alpha:g} is "
                    f"4 ln(1 + alpha) = {low:.4g}")
        else:
            low = smooth_laplace_min_epsilon(alpha, delta)
            if epsilon < low:
                raise InfeasibleParameters(
                    f"smooth-laplace: 1 + alpha <= e^(epsilon / (2 ln(2/delta))) fails at alpha "
                    f"{alpha:g}, epsilon {epsilon:g}, delta {delta:g}: the smallest epsilon is "
                    f"2 ln(2/delta) ln(1 + alpha) = {low:.4g}")
        return warnings

    @property
    def lam(self) -> float:
        return log_laplace_lambda(self.alpha, self.epsilon)

    def describe(self) -> str:
        text = f"{self.mechanism.value}, alpha {self.alpha:g}, epsilon {self.epsilon:g}"
        if self.mechanism is FlowsMechanism.SMOOTH_LAPLACE:
            text += f", delta {self.delta:g}"
        if self.unbiased:
            text += ", unbiased"
        return text


def smooth_sensitivity(alpha: float, largest_at_one_employer: np.ndarray) -> np.ndarray:
    """S* = max(alpha x_v, 1) per cell (lemma 8.5: the local sensitivity is already smooth).
    `largest_at_one_employer`: x_v, the largest number of the cell's workers at one
    establishment. Privacy cost: none by itself (a noise scale)."""
    return np.maximum(alpha * np.asarray(largest_at_one_employer, dtype=np.float64), 1.0)


def log_laplace_values(true_counts: np.ndarray, eta: np.ndarray, alpha: float,
                       epsilon: float, unbiased: bool = False) -> np.ndarray:
    """Log-Laplace outputs from standard Laplace draws `eta` (scale 1): (n + 1/alpha)
    e^(lambda eta) - 1/alpha; `unbiased`: (n~ + 1/alpha)(1 - lambda^2) - 1/alpha clamped at
    0. Privacy: (alpha, epsilon) per count (module doc)."""
    lam = log_laplace_lambda(alpha, epsilon)
    shift = 1 / alpha
    noisy = (np.asarray(true_counts, dtype=np.float64) + shift) * np.exp(lam * eta) - shift
    if unbiased:
        noisy = np.maximum((noisy + shift) * (1 - lam * lam) - shift, 0.0)
    return noisy


def log_laplace_mean(n: float, alpha: float, epsilon: float) -> float:
    """E[n~] = (n + 1/alpha) / (1 - lambda^2) - 1/alpha (lemma 8.2; lambda < 1)."""
    lam = log_laplace_lambda(alpha, epsilon)
    if lam >= 1:
        return math.inf
    return (n + 1 / alpha) / (1 - lam * lam) - 1 / alpha


def log_laplace_mse(n: float, alpha: float, epsilon: float) -> float:
    """E[(n~ - n)^2] = (n + 1/alpha)^2 (1/(1 - 4 lambda^2) - 2/(1 - lambda^2) + 1)
    (E[e^(t eta)] = 1/(1 - t^2 lambda^2) for a Laplace(lambda) eta; lambda < 1/2)."""
    lam = log_laplace_lambda(alpha, epsilon)
    if lam >= 0.5:
        return math.inf
    return (n + 1 / alpha) ** 2 * (1 / (1 - 4 * lam * lam) - 2 / (1 - lam * lam) + 1)


def expected_absolute_error(mechanism: FlowsMechanism, sensitivity: float, epsilon: float) -> float:
    """E|n~ - n| of the additive smooth mechanisms: 16 S*/epsilon x 1/sqrt 2 = 11.31 S*/epsilon
    (Smooth Gamma), 2 S*/epsilon (Smooth Laplace)."""
    if mechanism is FlowsMechanism.SMOOTH_GAMMA:
        return SMOOTH_GAMMA_FACTOR * sensitivity / epsilon * INVERSE_QUARTIC_MEAN_ABSOLUTE
    if mechanism is FlowsMechanism.SMOOTH_LAPLACE:
        return SMOOTH_LAPLACE_FACTOR * sensitivity / epsilon
    raise ValueError(f"{mechanism}: not an additive smooth-sensitivity mechanism")


def employer_epsilon(notion: PrivacyNotion, epsilon: float, graduate_cells: int) -> float:
    """The employers' worst-case epsilon of a tabulation: epsilon for the strong notion
    (establishment-attribute cells compose in parallel), graduate_cells x epsilon for the
    weak one (a marginal over d graduate-attribute cells costs d x epsilon)."""
    return epsilon if notion is PrivacyNotion.STRONG else graduate_cells * epsilon
