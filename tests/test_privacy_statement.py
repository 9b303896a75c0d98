"""One privacy statement per measurement: the question states it, the mechanism draws only
what it is calibrated for, the store gives the same statement back, and the release's
guarantee (documents, release_summary.json, MLflow, CLI, audit) is derived from the
statements by one function."""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from pseo_das.config import load_config
from pseo_das.tasks.earnings.cell_statistics_plan import cell_statistics_questions
from pseo_das.tasks.measurements.products import flows_questions, planned_questions
from pseo_das.tasks.measurements.questions import measured_statements, read_statements
from pseo_das.tasks.measurements.release_plan import lifetime_budget_file, lifetime_table
from pseo_das.tasks.privacy.establishment import (EmployerProtection, FlowsMechanism,
                                                  PrivacyNotion)
from pseo_das.tasks.privacy.employer_side import measure_with_employer_protection
from pseo_das.tasks.privacy.geometric import measure_with_geometric_noise
from pseo_das.tasks.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger
from pseo_das.tasks.privacy.statement import (MeasurementRefused, Mechanism, Sampler,
                                              employer_statement, geometric_statement,
                                              laplace_statement, release_guarantee)
from pseo_das.tasks.privacy.question import lifetime_spends
from pseo_das.tasks.privacy.store import LifetimeBudgetExceeded, StorePolicyError
from test_privacy_store import CFG, SEED, frames, plan, store  # noqa: F401  (fixtures)

FILES = {"earnings histograms": ("pseoe_all.csv", "pseoh_all.csv"),
         "employment flows": ("pseof_all.csv",), "employer-side table": ("pseoemp_all.csv",)}
SMOOTH_LAPLACE = EmployerProtection(FlowsMechanism.SMOOTH_LAPLACE, 0.05, 1.2, 1e-3)
LOG_LAPLACE = EmployerProtection(FlowsMechanism.LOG_LAPLACE, 0.05, 1.2)


def _config(tmp_path, text):
    path = tmp_path / "release.toml"
    path.write_text(text)
    return load_config(path)


# --- the release's guarantee, by exact enumeration of the cases -------------------------

GEOMETRIC = [geometric_statement(f"earnings.I.cip4.y{k}", "earnings histograms", "", 1, 21)
             for k in (1, 5, 10)]


def test_only_geometric_measurements_are_pure_epsilon_dp_and_sampled_exactly():
    guarantee = release_guarantee(GEOMETRIC)
    assert (guarantee.pure, guarantee.all_exact, guarantee.epsilon, guarantee.delta) == \
        (True, True, 3, 0)
    assert guarantee.graduates_sentence().startswith("pure epsilon-DP for each graduate: epsilon 3")
    assert "no delta is lost to sampling" in guarantee.sampling_sentence()
    said = guarantee.employers_sentence(FILES)
    assert "no employer protection" in said and "pseoe_all.csv, pseoh_all.csv" in said


def test_a_pure_mechanism_with_a_floating_point_sampler_is_pure_but_not_exact():
    flows = employer_statement("flows.I.cip2.y1", "employment flows", "", LOG_LAPLACE,
                               1022, PrivacyNotion.WEAK)
    guarantee = release_guarantee(GEOMETRIC + [flows])
    assert guarantee.pure and not guarantee.all_exact and guarantee.delta == 0
    assert guarantee.floating_point == ("flows.I.cip2.y1",)
    sampling = guarantee.sampling_sentence()
    assert "two-sided geometric measurements (3) are sampled exactly" in sampling
    assert "1 measurement(s) use floating-point samplers (log-Laplace" in sampling
    employers = guarantee.employers_sentence(FILES)
    assert "covering pseof_all.csv" in employers
    assert "pseoe_all.csv, pseoh_all.csv are measured for the graduates only" in employers


def test_a_delta_makes_the_release_epsilon_delta_and_delta_adds_up():
    flows = [employer_statement(f"flows.I.cip2.y{k}", "employment flows", "", SMOOTH_LAPLACE,
                                1022, PrivacyNotion.WEAK) for k in (1, 5, 10)]
    guarantee = release_guarantee(GEOMETRIC + flows)
    assert not guarantee.pure and guarantee.delta == Fraction(3, 1000)
    assert guarantee.epsilon == Fraction(3) + 3 * Fraction("1.2")
    sentence = guarantee.graduates_sentence()
    assert sentence.startswith("(epsilon, delta) = (6.6, 0.003) for each graduate, NOT pure")
    assert "formal (6.6, 0.003)-DP" in sentence and "pure epsilon-DP for" not in sentence
    summary = guarantee.summary(FILES)
    assert (summary["pure_epsilon_dp"], summary["delta"], summary["sampled_exactly"]) == \
        (False, "0.003", False)


def test_mos_is_counted_apart_as_not_formal():
    mos = laplace_statement("mos.I.cipA.mean_y1", "cell statistics (MOS)", "", "0.1", None, False)
    dp = laplace_statement("mos.I.cipA.mean_y5", "cell statistics (MOS)", "", "0.1", 10.0, True)
    guarantee = release_guarantee(GEOMETRIC + [mos, dp])
    assert (guarantee.formal_epsilon, guarantee.non_formal_epsilon) == (Fraction("3.1"),
                                                                        Fraction("0.1"))
    assert not guarantee.pure and guarantee.non_formal == ("mos.I.cipA.mean_y1",)
    assert "NOT a formal differential-privacy guarantee" in guarantee.graduates_sentence()
    assert "formal pure epsilon-DP 3.1" in guarantee.graduates_sentence()
    assert release_guarantee(GEOMETRIC + [dp]).pure          # mos-dp alone: pure, not exact
    assert not release_guarantee(GEOMETRIC + [dp]).all_exact
    with pytest.raises(ValueError, match="declares its sensitivity"):
        laplace_statement("x", "p", "", 1, None, True)


# --- the mechanism draws only what its statement is calibrated for ---------------------

def test_geometric_noise_refuses_another_sensitivity_or_shape():
    cells, counts = pd.DataFrame(index=range(2)), np.zeros((2, 3), np.int64)
    calibrated = geometric_statement("t", "p", "m", 1, 3)
    assert measure_with_geometric_noise(SEED.bits, calibrated, cells, counts).values.shape \
        == (2, 3)
    with pytest.raises(MeasurementRefused, match="sensitivity 2, but two-sided geometric noise "
                                                 "is calibrated to sensitivity 1"):
        measure_with_geometric_noise(SEED.bits, replace(calibrated, sensitivity=2), cells,
                                     counts)
    with pytest.raises(MeasurementRefused, match=r"shape \(2, 4\), but the statement declares "
                                                 "cells x 3"):
        measure_with_geometric_noise(SEED.bits, calibrated, cells,
                                     np.zeros((2, 4), np.int64))
    with pytest.raises(MeasurementRefused, match="declares smooth Laplace"):
        measure_with_geometric_noise(SEED.bits, employer_statement(
            "t", "p", "m", SMOOTH_LAPLACE, 3, PrivacyNotion.WEAK), cells, counts)


def test_employer_protection_refuses_another_sensitivity_or_shape():
    cells, counts = pd.DataFrame(index=range(2)), np.zeros((2, 3), np.int64)
    stated = employer_statement("t", "p", "m", SMOOTH_LAPLACE, 3, PrivacyNotion.WEAK)
    entry = measure_with_employer_protection(SEED.bits, stated, cells, counts, counts).entry
    assert (entry.delta, entry.statement.sampler) == (Fraction(1, 1000), Sampler.FLOATING_POINT)
    with pytest.raises(MeasurementRefused, match="sensitivity 2"):
        measure_with_employer_protection(SEED.bits, replace(stated, sensitivity=2), cells,
                                         counts, counts)
    with pytest.raises(MeasurementRefused, match="cells x 3"):
        measure_with_employer_protection(SEED.bits, stated, cells, counts[:, :2],
                                         counts[:, :2])


# --- questions state, the store gives the same statement back ---------------------------

def test_every_question_states_its_measurements(tmp_path):
    cfg = _config(tmp_path, '[flows]\nmechanism = "smooth-laplace"\nemployer_alpha = 0.05\n'
                            'employer_delta = 1e-3\n[mos]\nenabled = true\n'
                            'acknowledge_not_formally_dp = true\n')
    by_product = {}
    for question in planned_questions(cfg, {}):
        stated = question.statements(f"{question.tabulation_id}@R/1")
        by_product.setdefault(question.product, set()).update(s.mechanism for s in stated)
        assert sum(s.epsilon for s in stated) == question.epsilon
        assert sum(s.delta for s in stated) == question.delta
        assert all(s.stream_id.endswith("@R/1") for s in stated)
    assert by_product == {"earnings histograms": {Mechanism.GEOMETRIC},
                          "employment flows": {Mechanism.SMOOTH_LAPLACE},
                          "employment flows origin counts": {Mechanism.GEOMETRIC},
                          "cell statistics (MOS)": {Mechanism.LAPLACE, Mechanism.GEOMETRIC}}
    flows = next(q for q in flows_questions(cfg) if q.product == "employment flows")
    assert flows.delta == Fraction(1, 1000)
    (values, counts) = cell_statistics_questions(cfg)[0].statements("mos.I.cipA.mean_y1@R/1")
    assert (values.formal, values.sensitivity, counts.stream_id) == \
        (False, None, "mos.I.cipA.mean_y1.count@R/1")


def test_the_statement_read_from_the_store_is_the_one_the_mechanism_used(store, frames):
    """The ledger entry rebuilt from the store carries the statement the measurement was
    drawn with (both from Question.statements)."""
    planned = plan(store, frames, "R1", SEED)
    pending = next(p for p in planned.pending if p.question.product == "earnings histograms")
    (statement,) = pending.question.statements(pending.measurement_id)
    n_cells = 4
    measured = measure_with_geometric_noise(SEED.bits, statement,
                                            pd.DataFrame(index=range(n_cells)),
                                            np.zeros((n_cells, statement.columns), np.int64))
    assert measured_statements(store, pending.measurement_id) == (measured.entry.statement,)
    assert read_statements(store, pending.question, [pending.measurement_id]) == \
        (measured.entry.statement,)
    other = replace(pending.question, epsilon=Fraction(2))
    with pytest.raises(ValueError, match="states another guarantee"):
        read_statements(store, other, [pending.measurement_id])


def test_the_store_records_delta_beside_epsilon(store, frames, tmp_path):
    cfg = _config(tmp_path, '[flows]\nmechanism = "smooth-laplace"\nemployer_alpha = 0.05\n'
                            'employer_delta = 1e-3\n')
    planned = plan(store, frames, "R1", SEED, cfg=cfg)
    spends = lifetime_spends(store)
    flows = spends["measurement_id"].str.startswith("flows.I.")
    assert set(spends.loc[flows, "delta"]) == {Fraction(1, 1000)}
    assert set(spends.loc[~flows, "delta"]) == {Fraction(0)}
    # every population is in one flows tabulation per years after it is observed
    assert planned.new_delta == Fraction(3, 1000) and planned.summary()["new_delta"] == "0.003"
    table = lifetime_table(store, planned.plan, planned.attempt.attempt)
    written = lifetime_budget_file(table)
    assert list(written.columns[-3:]) == ["delta_before", "delta_this_release", "delta_after"]
    assert "0.003" in set(written["delta_after"])
    pure = lifetime_budget_file(table.assign(delta_this_release=Fraction(0),
                                             delta_after=Fraction(0)))
    assert list(pure.columns[3:]) == ["before", "this_release", "after"]   # as before


def test_the_lifetime_delta_cap_refuses_a_plan_before_anything_is_recorded(store, frames,
                                                                          tmp_path):
    """A new store caps delta per graduate (default 1/100) beside epsilon, exactly: Smooth
    Laplace flows at delta 1e-3 spend 3/1000 per graduate (three years after); a cap of
    29/10000 refuses the plan, naming the graduates; the policy is recorded with who and why."""
    from pseo_das.tasks.privacy.store import DEFAULT_LIFETIME_DELTA_CAP
    assert store.policy().lifetime_delta_cap == DEFAULT_LIFETIME_DELTA_CAP == Fraction(1, 100)
    cfg = _config(tmp_path, '[flows]\nmechanism = "smooth-laplace"\nemployer_alpha = 0.05\n'
                            'employer_delta = 1e-3\n')
    store.set_policy("the DRB", "test: just under one release", lifetime_delta_cap="0.0029")
    with pytest.raises(LifetimeBudgetExceeded, match="over the lifetime cap of delta 0.0029") as no:
        plan(store, frames, "R1", SEED, cfg=cfg)
    assert "= 0.003, 0.0001 over" in str(no.value) and "--lifetime-delta-cap" in str(no.value)
    assert store.attempts("R1") == []
    store.set_policy("the DRB", "test: exactly one release", lifetime_delta_cap="0.003")
    assert plan(store, frames, "R1", SEED, cfg=cfg).new_delta == Fraction(3, 1000)
    assert store.policy().as_dict()["lifetime_delta_cap"] == "0.003"
    with pytest.raises(StorePolicyError, match="must be below 1"):
        store.set_policy("the DRB", "test", lifetime_delta_cap="1")


def test_the_release_cap_refuses_the_plan_before_anything_is_recorded(store, frames):
    """Planning checks the release's cap (the configuration's check bypassed here): no
    population may be newly charged more than privacy.epsilon_cap."""
    low = CFG.model_copy(update={"privacy": CFG.privacy.model_copy(update={"epsilon_cap": 7})})
    with pytest.raises(PrivacyBudgetExceeded, match="refused before any noise was drawn and "
                                                    "before anything was recorded: it would "
                                                    "spend epsilon 7.5"):
        plan(store, frames, "R1", SEED, cfg=low)
    assert store.table("SELECT COUNT(*) AS n FROM releases")["n"].iloc[0] == 0
    assert store.table("SELECT COUNT(*) AS n FROM measurements")["n"].iloc[0] == 0
    assert plan(store, frames, "R1", SEED).new_epsilon == Fraction(15, 2)   # 7.5 of 9 fits


def test_the_ledger_of_a_release_derives_its_guarantee_from_its_entries():
    entries = [measure_with_geometric_noise(
        SEED.bits, s, pd.DataFrame(index=range(1)), np.zeros((1, 21), np.int64)).entry
        for s in GEOMETRIC]
    assert PrivacyLedger.of(9, entries).guarantee() == release_guarantee(GEOMETRIC)


def test_the_audit_reads_the_ledger_rows_as_statements():
    """`pseo-das audit`: each measured row of ledger.csv is read back as its statement (a
    geometric row at sensitivity 2 is not one), and the guarantee they give is compared
    with release_summary.json's."""
    from pseo_das.tasks.audit.ledger_check import statement_findings
    entries = [measure_with_geometric_noise(
        SEED.bits, s, pd.DataFrame(index=range(1)), np.zeros((1, 21), np.int64)).entry
        for s in GEOMETRIC]
    ledger = PrivacyLedger.of(9, entries).to_frame().astype(str)
    summary = {"guarantee": release_guarantee(GEOMETRIC).summary(FILES)}
    findings, figures = statement_findings(ledger, summary)
    assert findings == [] and figures["guarantee (from the ledger's statements)"].startswith(
        "pure epsilon-DP")
    tampered = ledger.copy()
    tampered.loc[0, "sensitivity"] = "2"
    findings, _ = statement_findings(tampered, {"guarantee": {**summary["guarantee"],
                                                              "delta": "0.001"}})
    assert findings == [
        "tabulation earnings.I.cip4.y1: sensitivity '2' is not what its two-sided geometric "
        "statement says ('1')",
        "internal/release_summary.json: guarantee delta is '0.001', the ledger's statements "
        "give '0'"]
    # with the cell statistics, the sensitivity column holds MOS's float chi and is written
    # as floats: 1.0 is the declared 1, 2.0 is not
    as_floats = ledger.assign(sensitivity=["1.0"] * len(ledger))
    assert statement_findings(as_floats, summary)[0] == []
    as_floats.loc[0, "sensitivity"] = "2.0"
    assert statement_findings(as_floats, summary)[0] == [
        "tabulation earnings.I.cip4.y1: sensitivity '2.0' is not what its two-sided geometric "
        "statement says ('1')"]
