"""The contribution bound privacy.max_degrees_per_person = k: geometric noise at
sensitivity k (its law), the statement, question and ledger saying k, the configuration's
refusals."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from pseo_das.config import ReleaseConfig, load_config
from pseo_das.tasks.measurements.products import earnings_questions, flows_questions
from pseo_das.tasks.privacy.geometric import geometric_noise_epsilon, measure_with_geometric_noise
from pseo_das.tasks.privacy.ledger import PrivacyLedger, entry_of_ledger_row, ledger_row
from pseo_das.tasks.privacy.statement import MeasurementRefused, geometric_statement

SEED = bytes(range(32))


def config(k: int, **sections) -> ReleaseConfig:
    raw = load_config().model_dump(mode="json")
    raw["privacy"]["max_degrees_per_person"] = k
    for section, values in sections.items():
        raw[section] = {**raw.get(section, {}), **values}
    return ReleaseConfig.model_validate(raw)


def test_noise_law_at_sensitivity_k():
    """One million draws at epsilon 1, k = 3 follow P(x) = (1-q)/(1+q) q^|x|, q = exp(-1/3):
    each frequency of x in -4..4 within 5 binomial standard deviations (a false alarm has
    probability under 1e-5 over the 9 values) and far from the law at k = 1."""
    epsilon, k, n = Fraction(1), 3, 1_000_000
    statement = geometric_statement("t", "earnings", "m", epsilon, 1, sensitivity=k)
    zeros = np.zeros((n, 1), np.int64)
    noise = measure_with_geometric_noise(SEED, statement, pd.DataFrame(index=range(n)), zeros,
                                         sensitivity=k).values[:, 0]
    q = math.exp(-1 / 3)
    for x in range(-4, 5):
        p = (1 - q) / (1 + q) * q ** abs(x)
        assert abs((noise == x).sum() - n * p) < 5 * math.sqrt(n * p * (1 - p)), x
    q1 = math.exp(-1)
    assert (noise == 0).mean() < (1 - q1) / (1 + q1) - 0.1   # not the sensitivity-1 law
    assert geometric_noise_epsilon(Fraction(1), 3) == Fraction(1, 3)   # exact, no float


def test_sensitivity_one_draws_are_unchanged():
    statement = geometric_statement("t", "earnings", "m", Fraction(1), 2)
    counts = np.arange(10, dtype=np.int64).reshape(5, 2)
    once = measure_with_geometric_noise(SEED, statement, pd.DataFrame(index=range(5)), counts)
    again = measure_with_geometric_noise(SEED, statement, pd.DataFrame(index=range(5)), counts, 1)
    assert (once.values == again.values).all() and once.entry == again.entry


def test_statement_and_counts_must_agree_on_k():
    """Counts bounded at k = 1 are not measured under a statement of k = 2 (or back)."""
    cells = pd.DataFrame(index=range(2))
    counts = np.ones((2, 1), np.int64)
    with pytest.raises(MeasurementRefused, match="sensitivity 2.*calibrated to sensitivity 1"):
        measure_with_geometric_noise(SEED, geometric_statement("t", "e", "m", 1, 1, 2),
                                     cells, counts, sensitivity=1)
    with pytest.raises(MeasurementRefused):
        measure_with_geometric_noise(SEED, geometric_statement("t", "e", "m", 1, 1), cells,
                                     counts, sensitivity=2)
    with pytest.raises(ValueError, match="whole number"):
        geometric_statement("t", "e", "m", 1, 1, sensitivity=0)


def test_ledger_says_sensitivity_k():
    statement = geometric_statement("earnings_I_4_1", "earnings", "m", Fraction(1), 2, 2)
    measured = measure_with_geometric_noise(SEED, statement, pd.DataFrame(index=range(3)),
                                            np.zeros((3, 2), np.int64), sensitivity=2)
    ledger = PrivacyLedger.of(9, [measured.entry]).to_frame()
    assert ledger["sensitivity"].tolist() == [2]
    assert "at most 2 cells" in ledger["composition"].iloc[0]
    row = ledger_row(measured.entry)
    assert entry_of_ledger_row(row) == measured.entry   # read back as the same statement


def test_k_is_part_of_every_question():
    one, two = config(1), config(2)
    questions_1 = earnings_questions(one) + flows_questions(one)
    questions_2 = earnings_questions(two) + flows_questions(two)
    assert all("max_degrees_per_person" not in q.parameters for q in questions_1)
    assert all(q.sensitivity == 1 for q in questions_1)
    assert all(q.parameters["max_degrees_per_person"] == 2 and q.sensitivity == 2
               for q in questions_2)
    assert not {q.sha256 for q in questions_1} & {q.sha256 for q in questions_2}
    (statement,) = questions_2[0].statements("m")
    assert statement.sensitivity == 2


def test_default_configuration_dumps_as_before():
    assert "max_degrees_per_person" not in load_config().model_dump(mode="json")["privacy"]
    assert config(3).model_dump(mode="json")["privacy"]["max_degrees_per_person"] == 3


@pytest.mark.parametrize("sections, named", [
    ({"mos": {"enabled": True, "variant": "mos-dp"}}, "mos.enabled"),
    ({"employer_table": {"enabled": True}}, "employer_table.enabled"),
    ({"flows": {"mechanism": "smooth-gamma"}}, 'flows.mechanism = "smooth-gamma"'),
])
def test_products_without_sensitivity_k_are_refused(sections, named):
    with pytest.raises(ValidationError, match=f"max_degrees_per_person = 2.*{named}"):
        config(2, **sections)
    config(1, **sections)   # fine at k = 1


def test_the_audit_expects_the_logged_bound():
    """A geometric ledger row at sensitivity 2 is a finding for a release logged with
    k = 1, and the expected statement for one logged with k = 2."""
    from pseo_das.tasks.audit.ledger_check import statement_findings
    statement = geometric_statement("earnings.I.cip4.y1", "earnings", "m", Fraction(1), 2, 2)
    entry = measure_with_geometric_noise(SEED, statement, pd.DataFrame(index=range(1)),
                                         np.zeros((1, 2), np.int64), sensitivity=2).entry
    ledger = PrivacyLedger.of(9, [entry]).to_frame().astype(str)
    assert statement_findings(ledger, {}, bound=2)[0] == []
    assert statement_findings(ledger, {}, bound=1)[0] == [
        "tabulation earnings.I.cip4.y1: sensitivity '2' is not what its two-sided geometric "
        "statement says ('1')"]
