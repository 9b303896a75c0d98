"""The lifetime privacy budget store: append-only, capped per population, no double spending."""
from __future__ import annotations

import sqlite3

import pandas as pd
import pytest

from tasks.privacy_budget import (LifetimeBudget, LifetimeBudgetExceeded, ReleaseConflict)

SEED = "ab" * 32


def plan(epsilon: float = 2.0, populations=(("00000001", "05", 2010), ("00000002", "03", 2012))):
    rows = [(*pop, tab, epsilon / 2) for pop in populations for tab in ("t.y1", "t.y5")]
    return pd.DataFrame(rows, columns=["institution", "degree_level", "grad_cohort",
                                       "tabulation_id", "epsilon"])


@pytest.fixture
def store(tmp_path):
    budget = LifetimeBudget(tmp_path / "budget.sqlite")
    yield budget
    budget.close()


def lifetime(store: LifetimeBudget) -> dict:
    return {tuple(r[:3]): r[3] for r in store.spent().itertuples(index=False, name=None)}


def test_a_release_is_recorded_with_its_spend_per_population(store):
    decision = store.decide("R1", SEED, "in", "cfg", plan(), lifetime_cap=10)
    assert decision.new_spending and decision.attempt.seed_hex == SEED
    assert lifetime(store) == {("00000001", "05", 2010): 2.0, ("00000002", "03", 2012): 2.0}
    assert decision.populations["after"].tolist() == [2.0, 2.0]


def test_a_rerun_reuses_the_seed_and_spends_nothing(store):
    first = store.decide("R1", None, "in", "cfg", plan(), lifetime_cap=10)
    again = store.decide("R1", None, "in", "cfg", plan(), lifetime_cap=10)
    assert len(first.attempt.seed_hex) == 64 and again.attempt == first.attempt
    assert not again.new_spending
    assert again.populations["before"].tolist() == [0.0, 0.0]  # its own spend is not counted twice
    assert lifetime(store) == {("00000001", "05", 2010): 2.0, ("00000002", "03", 2012): 2.0}
    with pytest.raises(ReleaseConflict, match="another seed"):
        store.decide("R1", SEED, "in", "cfg", plan(), lifetime_cap=10)


def test_changed_inputs_are_refused_unless_superseded(store):
    store.decide("R1", SEED, "in", "cfg", plan(), lifetime_cap=10)
    with pytest.raises(ReleaseConflict, match="other inputs"):
        store.decide("R1", None, "in-2", "cfg", plan(), lifetime_cap=10)
    with pytest.raises(ReleaseConflict, match="other configuration"):
        store.decide("R1", None, "in", "cfg-2", plan(), lifetime_cap=10)
    superseding = store.decide("R1", None, "in-2", "cfg", plan(), lifetime_cap=10, supersede=True)
    assert superseding.new_spending and superseding.superseded.attempt == 1
    assert superseding.attempt.seed_hex != SEED  # new noise
    assert set(lifetime(store).values()) == {4.0}  # a supersession is new spending


def test_the_lifetime_cap_refuses_before_recording_and_names_populations(store):
    store.decide("R1", SEED, "in", "cfg", plan(epsilon=6), lifetime_cap=10)
    with pytest.raises(LifetimeBudgetExceeded) as refused:
        store.decide("R2", None, "in", "cfg", plan(epsilon=6, populations=[("00000001", "05", 2010),
                                                                           ("00000009", "07", 2015)]),
                     lifetime_cap=10)
    message = str(refused.value)
    assert "1 population(s) over the lifetime cap of epsilon 10" in message
    assert "institution 00000001, degree 05, cohort 2010: spent 6 + this release 6 = 12, 2 over" in message
    assert "00000009" not in message
    assert store.attempts("R2") == []  # nothing recorded for the refused release
    assert lifetime(store) == {("00000001", "05", 2010): 6.0, ("00000002", "03", 2012): 6.0}


def test_the_store_is_append_only(store, tmp_path):
    store.decide("R1", SEED, "in", "cfg", plan(), lifetime_cap=10)
    db = sqlite3.connect(tmp_path / "budget.sqlite")
    for statement in ("UPDATE spends SET epsilon = 0", "DELETE FROM spends",
                      "UPDATE releases SET seed_hex = 'x'", "DELETE FROM releases"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute(statement)
    db.close()


def test_releases_record_their_spend_and_a_rerun_adds_nothing(releases):
    """In the shared releases: 2026Q4-test ran twice (the second a rerun), 2026Q4-other once."""
    root, uri = releases
    store = LifetimeBudget(root / "audit" / "privacy_budget.sqlite")
    try:
        assert [a.attempt for a in store.attempts("2026Q4-test")] == [1]
        assert [a.attempt for a in store.attempts("2026Q4-other")] == [2]
        spent = store.spent()
        assert spent["epsilon"].max() == pytest.approx(15.0)  # 7.5 per release, twice, not three times
    finally:
        store.close()
    per_population = pd.read_csv(root / "a_again" / "internal" / "lifetime_budget.csv")
    assert per_population["after"].max() == pytest.approx(7.5)
    drb = (root / "a_again" / "internal" / "drb_report.md").read_text()
    assert "is a rerun of attempt 1" in drb
