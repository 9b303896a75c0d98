"""The verification measure: the noisy number of groups whose estimate lies in the
interval (Barrientos et al. 2017, section 3.1; trends section 3.2), and its posterior.

Privacy cost: the query's epsilon, pure epsilon-DP for the graduates (add or remove one
graduate with all their records): the graduate's records are in one group (keyed hash of
person_id), so the count S moves by at most 1 (sensitivity 1), and S is released with
two-sided geometric noise at epsilon drawn exactly by the mechanism layer (the paper uses
Laplace noise; the discrete sampler keeps the count an integer and the guarantee exact).
The noise stream is keyed by the server's seed and the query's canonical SHA-256, so the
same query gets the same noise whenever it is computed. The posterior is post-processing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.tasks.privacy.geometric import measure_with_geometric_noise
from pseo_das.tasks.privacy.ledger import LedgerEntry
from pseo_das.tasks.privacy.statement import geometric_statement
from pseo_das.tasks.verification.estimates import group_indicators
from pseo_das.tasks.verification.groups import person_groups
from pseo_das.tasks.verification.posterior import VerificationPosterior, posterior
from pseo_das.tasks.verification.query import RegressionQuery
from pseo_das.tasks.verification.records import AnalysisRecords

PRODUCT = "verification"


@dataclass(frozen=True)
class VerificationAnswer:
    query_sha256: str
    released_count: int
    posterior: VerificationPosterior
    entry: LedgerEntry


def measurement_id(query_sha256: str) -> str:
    return f"verification.{query_sha256}"


def noisy_count(records: AnalysisRecords, person_hash: np.ndarray, query: RegressionQuery,
                query_sha256: str, server_seed: bytes, deadline: float | None = None
                ) -> tuple[int, LedgerEntry]:
    """S + two-sided geometric noise at the query's epsilon, and its ledger entry. The true
    S never leaves this function. QueryTimeout (no noise drawn) once `deadline` passed."""
    indicators = group_indicators(records, query, person_groups(person_hash, query.groups),
                                  deadline)
    statement = geometric_statement(measurement_id(query_sha256), PRODUCT,
                                    measurement_id(query_sha256), query.exact_epsilon, 1)
    measured = measure_with_geometric_noise(
        server_seed, statement, pd.DataFrame(index=[0]),
        np.array([[int(indicators.sum())]], dtype=np.int64))
    return int(np.asarray(measured.values)[0, 0]), measured.entry


def verify(records: AnalysisRecords, person_hash: np.ndarray, query: RegressionQuery,
           query_sha256: str, server_seed: bytes, deadline: float | None = None
           ) -> VerificationAnswer:
    """Measure and post-process. Spends the query's epsilon once released: the caller
    charges it, in the same transaction that keeps the answer, before the answer leaves the
    server (an answer never released, after a timeout or a refusal, costs nothing)."""
    released, entry = noisy_count(records, person_hash, query, query_sha256, server_seed,
                                  deadline)
    return VerificationAnswer(query_sha256, released,
                              posterior(released, query.groups, query.exact_epsilon), entry)
