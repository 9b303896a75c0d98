"""The cell statistics (pseom_all.csv) as durable measurements of the privacy store: one
question per statistic and setting, measured once per population, charged to the lifetime
cap per population before any noise, reused at zero epsilon by later releases, a new
cohort measured alone, a rerun never charged twice (issue 15)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from pseo_das.config import ReleaseConfig, load_config
from pseo_das.tasks.earnings.cell_statistics import measure_cell_statistics
from pseo_das.tasks.earnings.cell_statistics_plan import (PRODUCT, StatisticSettings,
                                                          cell_statistics_questions)
from pseo_das.tasks.inputs.cell_moments import CellMoments
from pseo_das.tasks.inputs.true_counts import TrueCounts, read_cell_moments
from pseo_das.tasks.inputs.cells import CellFrame, cell_frame, cohort_attributes, in_populations
from pseo_das.tasks.inputs.cpi import read_cpi
from pseo_das.tasks.inputs.ingest import read_inputs
from pseo_das.tasks.measurements.products import by_years_after
from pseo_das.tasks.measurements.release_plan import plan_release
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.store import LifetimeBudgetExceeded, PrivacyStore, init_store
from pseo_das.tasks.privacy.store_integrity import verify_store
from pseo_das.tasks.privacy.store_summary import store_summary
from pseo_das.tasks.measurements.stored_cell_statistics import stored_cell_statistics
from test_ingest import valid_graduates, valid_outcomes, write

SEED = ReleaseSeed.from_hex("cd" * 32)
MOS = {"enabled": True, "acknowledge_not_formally_dp": True, "epsilon": 0.125}


def configured(**mos) -> "ReleaseConfig":
    base = load_config()
    return base.model_copy(update={"mos": base.mos.model_copy(update={**MOS, **mos})})


CFG = configured()


def frames_of(graduates: pd.DataFrame, cfg=CFG) -> dict[str, CellFrame]:
    attributes = cohort_attributes(graduates, cfg.cells)
    return {**{level: cell_frame(attributes, level) for level in ("4", "2")},
            PRODUCT: cell_frame(attributes, "A")}


@pytest.fixture
def frames(tmp_path):
    inputs = read_inputs(write(tmp_path, valid_graduates(), valid_outcomes()), 2001, 2022)
    return frames_of(inputs.graduates)


@pytest.fixture
def store(tmp_path):
    with PrivacyStore.open(init_store(tmp_path / "store")) as opened:
        yield opened


def plan(store, frames, release_id, cfg=CFG, seed=None, **options):
    return plan_release(store, release_id, seed, "inputs", f"config-{id(cfg)}", cfg, frames,
                        **options)


def pending_statistics(plan_) -> dict:
    """The plan's cell statistics still to measure, by years after (as the flow's loop
    gives them to their product)."""
    return by_years_after(plan_.pending, (PRODUCT,))


def mos_rows(plan_) -> pd.DataFrame:
    return plan_.plan[plan_.plan["tabulation_id"].str.startswith("mos.")]


def test_each_statistic_and_setting_is_a_question_whose_epsilon_is_values_plus_counts():
    questions = cell_statistics_questions(CFG)
    assert [q.tabulation_id for q in questions] == [
        "mos.I.cipA.mean_y1", "mos.I.cipA.mean_y5", "mos.I.cipA.mean_y10", "mos.I.cipA.growth_1_5"]
    assert {q.epsilon for q in questions} == {Fraction(1, 4)}        # 0.125 values + 0.125 counts
    assert [q.years_after for q in questions] == [1, 5, 10, 5]
    assert questions[0].as_dict()["mechanism"].startswith("maximum observed sensitivity")
    assert questions[0].as_dict()["formal_guarantee"].startswith("no")
    assert cell_statistics_questions(load_config()) == []            # off by default
    shas = {q.tabulation_id: q.sha256 for q in questions}
    changed = [configured(epsilon=0.25), configured(variant="mos-dp"), configured(min_count=5),
               configured(lower=12_000), configured(upper=500_000),
               configured(chi_scope="release")]
    for cfg in changed:          # anything that changes the answer is another question
        assert all(q.sha256 != shas[q.tabulation_id] for q in cell_statistics_questions(cfg))
    dp = cell_statistics_questions(configured(variant="mos-dp"))
    dp_release = cell_statistics_questions(configured(variant="mos-dp", chi_scope="release"))
    assert [q.sha256 for q in dp] == [q.sha256 for q in dp_release]   # mos-dp has no chi
    assert dp[0].as_dict()["formal_guarantee"] == "yes"
    assert StatisticSettings.of(dp[3]).statistic.is_growth


def test_a_first_release_charges_the_cell_statistics_to_every_population_they_cover(store, frames):
    first = plan(store, frames, "R1", seed=SEED)
    rows = mos_rows(first)
    assert rows["new"].all() and set(rows["measurement_id"]) == {
        f"{t}@R1/1" for t in rows["tabulation_id"].unique()}
    assert not rows.duplicated(["tabulation_id", "institution", "degree_level",
                                "grad_cohort"]).any()
    spends = store.spends()
    assert set(spends.loc[spends["measurement_id"].str.startswith("mos."), "epsilon"]) == \
        {Fraction(1, 4)}
    # a population observable 1, 5 and 10 years out: 7.5 (the default release) + 4 x 0.25
    per_population = spends.groupby(["institution", "degree_level", "grad_cohort"])["epsilon"] \
        .agg(lambda s: sum(s, Fraction(0)))
    assert first.new_epsilon == per_population.max() == Fraction(17, 2)
    assert per_population.loc[("00366900", "05", 2001)] == Fraction(17, 2)
    assert pending_statistics(first)                    # to measure, by years after


def test_a_second_release_reuses_them_at_zero_epsilon_and_a_rerun_adds_nothing(store, frames):
    first = plan(store, frames, "R1", seed=SEED)
    again = plan(store, frames, "R1")                    # a rerun (a crash, a Prefect retry)
    assert not again.new_spending and again.attempt == first.attempt
    pending = pending_statistics(again)                 # never stored: drawn with R1's seed
    assert {p.seed for group in pending.values() for p in group} == {SEED}
    assert {StatisticSettings.of(p.question).epsilon for g in pending.values() for p in g} == \
        {Fraction(1, 8)}                                 # the recorded question, as planned
    spent = store.spends()
    second = plan(store, frames, "R2")
    assert second.new_epsilon == 0 and not mos_rows(second)["new"].any()
    assert mos_rows(second)["measurement_id"].tolist() == mos_rows(first)["measurement_id"].tolist()
    pd.testing.assert_frame_equal(store.spends(), spent)   # nothing charged by R1 again or R2


def test_a_new_cohort_is_measured_alone(tmp_path, store):
    inputs = read_inputs(write(tmp_path, valid_graduates(), valid_outcomes()), 2001, 2022)
    graduates = inputs.graduates
    newest = graduates["grad_year"] == graduates["grad_year"].max()
    plan(store, frames_of(graduates[~newest]), "R1", seed=SEED)
    second = plan(store, frames_of(graduates), "R2")
    rows = mos_rows(second)
    new = rows[rows["new"]]
    assert len(new) and (new["measurement_id"].str.endswith("@R2/1")).all()
    assert not rows.loc[~rows["new"], "measurement_id"].str.endswith("@R2/1").any()
    cohort = frames_of(graduates)[PRODUCT].cells
    newest_cells = cohort[~in_populations(cohort, frames_of(graduates[~newest])[PRODUCT].cells)]
    assert set(map(tuple, new[["institution", "degree_level", "grad_cohort"]].astype(str)
                   .drop_duplicates().to_numpy())) == set(map(tuple, newest_cells[[
                       "institution", "degree_level", "grad_cohort"]].astype(str).to_numpy()))
    members = store.table("SELECT * FROM measurement_populations WHERE measurement_id = ?",
                          ("mos.I.cipA.mean_y1@R2/1",))
    assert len(members) == len(newest_cells)            # the new cohort's populations only


def test_a_plan_over_the_lifetime_cap_with_the_cell_statistics_is_refused_before_any_noise(
        store, frames):
    store.set_policy("the DRB", "test: room for the default release only", lifetime_cap="8")
    with pytest.raises(LifetimeBudgetExceeded) as refused:
        plan(store, frames, "R1", seed=SEED)
    message = str(refused.value)
    assert "over the lifetime cap of epsilon 8" in message
    assert "institution 00366900, degree 05, graduates of 2001 (cohort 2001): spent 0 + this " \
           "release 8.5 = 8.5, 0.5 over" in message
    assert store.attempts("R1") == [] and store.spends().empty      # nothing recorded
    without = load_config()                                          # the same plan without them
    assert plan(store, frames, "R1", cfg=without, seed=SEED).new_epsilon == Fraction(15, 2)


def test_changing_epsilon_or_variant_measures_again(store, frames):
    plan(store, frames, "R1", seed=SEED)
    for number, cfg in enumerate([configured(epsilon=0.25), configured(variant="mos-dp")], 2):
        other = plan(store, frames, f"R{number}", cfg=cfg)
        assert mos_rows(other)["new"].all()
        assert other.new_epsilon == 4 * cell_statistics_questions(cfg)[0].epsilon
    assert plan(store, frames, "R4").new_epsilon == 0                # the first question again


# --- measured, kept and read back (real moments of the shared synthetic data) -----------

@pytest.fixture(scope="module")
def moments(synthetic_dir) -> CellMoments:
    lower, upper = CFG.mos.bounds(CFG.earnings)
    return read_cell_moments(synthetic_dir, CFG, read_cpi(), lower, upper)


def counted(moments: CellMoments) -> TrueCounts:
    """The counting pass's result when it counted only the cell statistics' moments."""
    return TrueCounts({}, {}, [], {}, moments)


def measure_and_keep(store, moments, release_id, frames, cfg=CFG):
    """Plan a release, measure its pending cell statistics and keep them (as the flow)."""
    planned = plan_release(store, release_id, SEED if release_id == "R1" else None, "inputs",
                           "config", cfg, frames)
    measured = measure_cell_statistics.fn(pending_statistics(planned), counted(moments), cfg)
    for m in measured:
        store.store_measurement(m.measurement_id, m.cells, m.values)
    return planned, measured


@pytest.fixture
def mos_store(tmp_path, moments):
    empty = CellFrame("4", moments.frame.cells.iloc[:0], None)
    frames = {"4": empty, "2": CellFrame("2", empty.cells, None), PRODUCT: moments.frame}
    with PrivacyStore.open(init_store(tmp_path / "store")) as opened:
        yield opened, frames


def test_stored_cell_statistics_are_read_back_identically_and_reused(mos_store, moments):
    store, frames = mos_store
    first, measured = measure_and_keep(store, moments, "R1", frames)
    assert len(measured) == 4 and all(m.values.dtype == np.float64 for m in measured)
    read = stored_cell_statistics(store.path, first.plan, CFG)
    assert read.store_use["new_measurements"] == len(mos_rows(first))
    assert read.store_use["new_epsilon"] == "1" and read.store_use["reused_measurements"] == 0
    values = {e.tabulation_id: e for e in read.entries}
    assert values["mos.I.cipA.mean_y1"].formal_guarantee == "no"
    assert values["mos.I.cipA.mean_y1.count"].formal_guarantee == "yes"
    assert {e.epsilon for e in read.entries} == {Fraction(1, 8)}
    second, nothing = measure_and_keep(store, moments, "R2", frames)
    assert nothing == [] and second.new_epsilon == 0
    again = stored_cell_statistics(store.path, second.plan, CFG)
    pd.testing.assert_frame_equal(again.table, read.table)
    assert again.chi == read.chi and again.entries == read.entries
    assert again.store_use["new_epsilon"] == "0" and again.store_use["new_measurements"] == 0
    assert verify_store(store.path, check_objects=True).ok
    shown = store_summary(store.path)
    assert "mos.I.cipA.mean_y1@R1/1: epsilon 0.25 on" in shown and "NOT formally DP" in shown


def test_a_new_cohort_gets_its_own_chi_and_the_others_keep_theirs(mos_store, moments):
    store, frames = mos_store
    cells = moments.frame.cells
    newest = (cells["grad_cohort"] == cells["grad_cohort"].max()).to_numpy()
    older = {**frames, PRODUCT: CellFrame("A", cells[~newest].reset_index(drop=True), None)}
    first, _ = measure_and_keep(store, moments, "R1", older)
    before = stored_cell_statistics(store.path, first.plan, CFG)
    second, measured = measure_and_keep(store, moments, "R2", frames)
    assert [m.measurement_id for m in measured] == ["mos.I.cipA.mean_y1@R2/1"]
    assert in_populations(measured[0].cells, cells[newest]).all()    # the new cohort alone
    after = stored_cell_statistics(store.path, second.plan, CFG)
    assert after.store_use["new_epsilon"] == "0.25"                   # mean_y1 only (1 year out)
    kept = after.table[~in_populations(after.table, cells[newest])].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, before.table)                 # older cohorts unchanged
    labels = after.chi["mean_y1"]
    assert any(" in R2/1" in label for label in labels) and any(" in R1/1" in l for l in labels)
    assert after.chi["mean_y5"] == before.chi["mean_y5"]


def test_a_retry_after_a_crash_draws_the_same_values_and_spends_nothing_twice(mos_store, moments):
    """R1 planned (and charged), measured, then killed before its values were stored: the
    rerun reuses R1's plan and seed, draws the same values from the same streams, and the
    store's spends do not change."""
    store, frames = mos_store
    first = plan_release(store, "R1", SEED, "inputs", "config", CFG, frames)
    lost = measure_cell_statistics.fn(pending_statistics(first), counted(moments),
                                      CFG)   # never stored
    spent = store.spends()
    retried, kept = measure_and_keep(store, moments, "R1", frames)
    assert not retried.new_spending and retried.attempt == first.attempt
    before = {m.measurement_id: m.values for m in lost}
    assert sorted(m.measurement_id for m in kept) == sorted(before)
    for again in kept:
        np.testing.assert_array_equal(again.values, before[again.measurement_id])  # NaNs too
    pd.testing.assert_frame_equal(store.spends(), spent)
    assert measure_and_keep(store, moments, "R1", frames)[1] == []   # all stored: nothing to draw


def test_a_release_of_the_version_before_republishes_from_its_publication_record(mos_store,
                                                                                moments):
    """Releases made before the cell statistics were questions kept them in their
    publication record (outside the store's budget): they still read back from it."""
    from pseo_das.tasks.earnings.cell_statistics import cell_statistics_summary
    from pseo_das.tasks.measurements.stored_cell_statistics import cell_statistics_from_record
    store, frames = mos_store
    first, _ = measure_and_keep(store, moments, "R1", frames)
    read = stored_cell_statistics(store.path, first.plan, CFG)
    table = read.table.astype({c: str for c in ("institution", "inst_state", "degree_level",
                                                "cipcode", "statistic")})
    kept = {**read.record(), "table": store.put_frame(table)}
    old = cell_statistics_from_record(store.path, kept)
    assert old.store_use is None and old.chi == read.chi and old.entries == read.entries
    summary = cell_statistics_summary(old)
    assert summary["epsilon_spent"] == "1" and "new_epsilon" not in summary
    assert cell_statistics_from_record(store.path, None) is None


def test_with_no_population_observable_yet_the_ledger_still_has_every_entry(mos_store, moments):
    """The ledger has the values and counts entries of every statistic (the audit counts
    them), with no cell, when no population of the release is observable yet."""
    store, frames = mos_store
    nobody = {**frames, PRODUCT: CellFrame("A", moments.frame.cells.iloc[:0], None)}
    planned, measured = measure_and_keep(store, moments, "R1", nobody)
    assert measured == [] and planned.new_epsilon == 0
    read = stored_cell_statistics(store.path, planned.plan, CFG)
    assert len(read.entries) == CFG.n_mos_tabulations() == 8 and read.table.empty
    assert {e.n_cells for e in read.entries} == {0} and read.store_use["new_epsilon"] == "0"
    from pseo_das.tasks.earnings.cell_statistics import cell_statistics_table
    assert cell_statistics_table(read, 1.0).empty               # pseom_all.csv: header only
