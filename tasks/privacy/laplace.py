"""The floating-point Laplace regime: continuous Laplace noise on real values (the cell
statistics), formal at a declared sensitivity bound, or non-formal with the maximum observed
sensitivity (MOS: a scale taken from the data). Drawn in double precision, so the guarantee
holds up to that floating-point approximation (Mironov 2012).
"""
from __future__ import annotations

import numpy as np

from pseo_das.epsilon import epsilon_text
from pseo_das.tasks.privacy.ledger import LedgerEntry, measured_entry
from pseo_das.tasks.privacy.statement import Mechanism, MeasurementRefused, PrivacyStatement
from pseo_das.tasks.privacy.streams import NoiseStream, stream_sha256

def laplace_noise(release_seed: bytes, measurement_id: str, scales: np.ndarray) -> np.ndarray:
    """Continuous Laplace noise, one draw per entry of `scales` (its scale b: density
    exp(-|x|/b) / 2b), in the caller's canonical order, from the ChaCha20 stream
    SHA-256(domain, seed, measurement id). Drawn in double precision by numpy's inversion
    of a uniform double, so, like every floating-point Laplace sampler (Mironov 2012), the
    set of values it can return is not the whole real line: the guarantee it carries is
    that of the Laplace mechanism up to that floating-point approximation. A scale of 0
    gives 0. Privacy cost: none by itself; `measure_with_laplace_noise` records it."""
    scales = np.asarray(scales, dtype=np.float64)
    if not np.isfinite(scales).all() or (scales < 0).any():
        raise ValueError(f"{measurement_id}: Laplace scales must be finite and non-negative")
    unit = NoiseStream(release_seed, measurement_id).laplace(0.0, 1.0, scales.shape)
    return unit * scales


def measure_with_laplace_noise(release_seed: bytes, statement: PrivacyStatement,
                               values: np.ndarray, scales: np.ndarray, composition: str,
                               observed_sensitivity: float | None = None
                               ) -> tuple[np.ndarray, LedgerEntry]:
    """`values` + Laplace(`scales`) (one draw per value, canonical order), and the ledger
    entry that records it: no noise leaves this function without its entry.

    Privacy cost: the statement's epsilon for the whole array when `scales` = (a bound on
    the sensitivity of each value) / epsilon and every person affects at most one value
    (parallel composition). A formal statement declares that bound and every scale must
    be exactly it / epsilon. A non-formal one (maximum observed sensitivity: the scale
    chi / (epsilon N_g) uses a chi computed from the data and published without noise)
    declares none; `observed_sensitivity` (chi) is then recorded in the ledger.
    """
    values = np.asarray(values, dtype=np.float64)
    statement.check_calibration(Mechanism.LAPLACE, values.reshape(-1, 1),
                                statement.sensitivity if statement.formal else None)
    scales = np.broadcast_to(np.asarray(scales, dtype=np.float64), values.shape)
    declared = statement.sensitivity   # a formal statement's (only those declare one: above)
    if declared is not None and not np.all(scales == declared / float(statement.epsilon)):
        raise MeasurementRefused(
            f"{statement.stream_id}: Laplace scales other than the declared sensitivity "
            f"{statement.sensitivity} / epsilon {epsilon_text(statement.epsilon)}: refused, "
            "nothing drawn")
    entry = measured_entry(statement, values.size, 1, composition,
                           stream_sha256(release_seed, statement.stream_id),
                           None if statement.formal else observed_sensitivity)
    return values + laplace_noise(release_seed, statement.stream_id, scales), entry
