"""The employer-side regime: counts by an employer-protecting mechanism (Log-Laplace, Smooth
Gamma, Smooth Laplace; (alpha, epsilon[, delta]) employer-employee privacy, closed forms and
parameter checks in establishment.py), noise drawn in floating point and the values rounded
to whole graduates (post-processing).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pseo_das.tasks.privacy.establishment import (SMOOTH_GAMMA_FACTOR, SMOOTH_LAPLACE_FACTOR,
                                                  EmployerProtection, FlowsMechanism,
                                                  PrivacyNotion, log_laplace_values,
                                                  smooth_sensitivity)
from pseo_das.tasks.privacy.ledger import NoisyMeasurement, measured_entry
from pseo_das.tasks.privacy.statement import Mechanism, PrivacyStatement
from pseo_das.tasks.privacy.streams import Draws, NoiseStream, stream_sha256

# Largest value of (1 + y^2) / (1 + y^4), reached at y^2 = sqrt(2) - 1: the rejection bound
# for sampling the density proportional to 1/(1 + y^4) from a Cauchy proposal.
_QUARTIC_OVER_CAUCHY = (1 + math.sqrt(2)) / 2


def sample_inverse_quartic(generator: Draws, shape: tuple[int, ...]) -> np.ndarray:
    """Exact draws (up to floating point) from the density (sqrt(2)/pi) / (1 + y^4), mean 0
    and variance 1, by rejection from a standard Cauchy proposal: accept y when
    u * (1 + sqrt(2))/2 <= (1 + y^2)/(1 + y^4); acceptance rate 2/(2 + sqrt(2)) = 0.586.
    Used by the Smooth Gamma mechanism (release streams) and, through
    tasks/study/simulation_noise.py, by the accuracy study (simulation streams).
    Privacy cost: none by itself (the caller scales it by a smooth sensitivity)."""
    size = math.prod(shape)
    accepted: list[np.ndarray] = []
    have = 0
    while have < size:
        want = int((size - have) * 1.75) + 64
        y = generator.standard_cauchy(want)
        u = generator.random(want)
        with np.errstate(over="ignore", invalid="ignore"):
            y2 = y * y
            keep = u * _QUARTIC_OVER_CAUCHY <= (1 + y2) / (1 + y2 * y2)
        accepted.append(y[keep])
        have += int(keep.sum())
    return np.concatenate(accepted)[:size].reshape(shape)


def employer_protected_values(generator: Draws, true_counts: np.ndarray,
                              largest_at_one_employer: np.ndarray,
                              protection: EmployerProtection) -> np.ndarray:
    """The real-valued outputs of `protection`'s mechanism for `true_counts` (any shape),
    with noise from `generator` (Log-Laplace, Smooth Gamma, Smooth Laplace: module doc of
    tasks/privacy/establishment.py). `largest_at_one_employer`: x_v of each count (same
    shape; unused by Log-Laplace). Privacy cost: (alpha, epsilon[, delta]) per count for
    the employers, epsilon[, delta] per graduate; the caller accounts for the composition."""
    protection.check()
    shape = np.shape(true_counts)
    counts = np.asarray(true_counts, dtype=np.float64)
    m = protection.mechanism
    if m is FlowsMechanism.LOG_LAPLACE:
        eta = generator.laplace(0.0, 1.0, shape)
        return log_laplace_values(counts, eta, protection.alpha, protection.epsilon,
                                  protection.unbiased)
    sensitivity = smooth_sensitivity(protection.alpha, largest_at_one_employer)
    if m is FlowsMechanism.SMOOTH_GAMMA:
        eta = sample_inverse_quartic(generator, shape)
        return counts + SMOOTH_GAMMA_FACTOR * sensitivity / protection.epsilon * eta
    if m is FlowsMechanism.SMOOTH_LAPLACE:
        eta = generator.laplace(0.0, 1.0, shape)
        return counts + SMOOTH_LAPLACE_FACTOR * sensitivity / protection.epsilon * eta
    raise ValueError(f"{m}: not an employer-protecting mechanism")


def whole_graduates(values: np.ndarray) -> np.ndarray:
    """Real-valued noisy counts rounded to whole graduates, halves up (post-processing),
    within +-2^62 (a log-Laplace draw far in its tail cannot overflow int64)."""
    rounded = np.floor(np.asarray(values, dtype=np.float64) + 0.5)
    return np.clip(rounded, -2.0 ** 62, 2.0 ** 62).astype(np.int64)


def employer_composition(notion: PrivacyNotion, graduate_cells: int) -> str:
    """The ledger's composition text of a measurement with employer protection."""
    if notion is PrivacyNotion.STRONG:
        return ("graduates: parallel across the cells (each graduate in one cell); "
                "employers: strong (alpha, epsilon), parallel across the cells (each "
                "establishment in one state x sector); sequential with every other "
                "tabulation")
    return ("graduates: parallel across the cells (each graduate in one cell and "
            "destination); employers: weak (alpha, epsilon) per cell, "
            f"{graduate_cells:,} graduate-attribute cells x epsilon in the worst "
            "case; sequential with every other tabulation")


def measure_with_employer_protection(release_seed: bytes, statement: PrivacyStatement,
                                     cells: pd.DataFrame, true_counts: np.ndarray,
                                     largest_at_one_employer: np.ndarray) -> NoisyMeasurement:
    """Noisy counts (cells x the statement's columns, canonical order) by the statement's
    employer-protecting mechanism, noise from the ChaCha20 stream SHA-256(domain, seed,
    stream id), rounded to whole graduates (post-processing). `largest_at_one_employer`:
    x_v per count (same shape).

    Privacy cost: for the graduates, epsilon (and delta for Smooth Laplace) for the whole
    array (each graduate in one count, sensitivity 1: parallel composition); for the
    employers, (alpha, epsilon[, delta]) per count, the statement's notion deciding the
    composition (ledger entry). The ledger entry comes with the noise."""
    protection = statement.protection()
    statement.check_calibration(Mechanism.protecting_employers(protection.mechanism),
                                true_counts, 1)
    protection.check()   # infeasible parameters are refused before anything is recorded
    n_cells, n_bins = true_counts.shape
    entry = measured_entry(statement, n_cells, n_bins,
                           employer_composition(statement.employer_guarantee().notion, n_cells),
                           stream_sha256(release_seed, statement.stream_id))
    values = employer_protected_values(NoiseStream(release_seed, statement.stream_id),
                                       true_counts, largest_at_one_employer, protection)
    return NoisyMeasurement(statement.stream_id, cells, whole_graduates(values), entry)
