"""The privacy store and the release plan: measurements are taken once per question and
population, reused at zero epsilon, re-measured only on purpose, capped per population,
and a release can be re-derived from the store alone."""
from __future__ import annotations

import json
import shutil
import tempfile
import sqlite3
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

from conftest import SEED_A, run_release, store_beside, public_table, without_extras
from pseo_das.config import load_config
from pseo_das.tasks.inputs.cells import cell_frame, cohort_attributes
from pseo_das.tasks.inputs.ingest import read_inputs
from pseo_das.tasks.measurements.release_plan import plan_release
from pseo_das.tasks.privacy.lifetime_budget import POPULATION_ATOM_KEYS, atoms, lifetime_budget
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.store import (LifetimeBudgetExceeded, PrivacyStore, ReleaseConflict,
                                          StoreError, epsilon_text, init_store)
from test_ingest import valid_graduates, valid_outcomes, write

CFG = load_config()
SEED = ReleaseSeed.from_hex("ab" * 32)


@pytest.fixture
def frames(tmp_path):
    inputs = read_inputs(write(tmp_path, valid_graduates(), valid_outcomes()), 2001, 2022)
    attributes = cohort_attributes(inputs.graduates, CFG.cells)
    return {level: cell_frame(attributes, level) for level in ("4", "2")}


@pytest.fixture
def store(tmp_path):
    with PrivacyStore.open(init_store(tmp_path / "store")) as opened:
        yield opened


def plan(store, frames, release_id, seed=None, cfg=CFG, **options):
    return plan_release(store, release_id, seed, "inputs", "config", cfg, frames, **options)


def test_exact_epsilons_print_as_decimals_or_fractions():
    assert [epsilon_text(Fraction(v)) for v in ("15/2", "0", "1/20", "1/3", "30")] == \
        ["7.5", "0", "0.05", "1/3", "30"]


def test_a_first_release_measures_every_population_once_per_question(store, frames):
    first = plan(store, frames, "R1", SEED)
    assert first.new_spending and first.attempt.seed == SEED
    assert first.plan["new"].all()
    # 3 earnings + 3 flows tabulations; each population at most once per question
    assert first.new_epsilon == Fraction(15, 2)
    assert not first.plan.duplicated(["tabulation_id", "institution", "degree_level",
                                      "grad_cohort"]).any()
    assert sorted(p.measurement_id for p in first.pending) == sorted(
        f"{t}@R1/1" for t in first.plan["tabulation_id"].unique())
    assert (first.populations["after"] <= Fraction(15, 2)).all()


def test_a_second_release_reuses_every_measurement_at_zero_epsilon(store, frames):
    first = plan(store, frames, "R1", SEED)
    second = plan(store, frames, "R2")
    assert second.new_spending and second.new_epsilon == 0 and not second.plan["new"].any()
    assert second.plan["measurement_id"].tolist() == first.plan["measurement_id"].tolist()
    assert second.summary()["populations_reused"] == len(first.populations)
    # R1's measurements were never stored (no values yet): R2 completes them with R1's seed
    assert {p.seed for p in second.pending} == {SEED}
    assert (second.populations["after"] == second.populations["before"]).all()


def test_measurements_coded_all_in_cip_2010_answer_the_same_questions(store, frames,
                                                                     monkeypatch):
    """Earlier versions coded every graduate in CIP-2010 (question cip_vintage "2010"); the
    recast publishes those in CIP-2020 like the new ones, so they are reused, not retaken."""
    from pseo_das.tasks.measurements import release_plan
    current = release_plan.Question.as_dict
    monkeypatch.setattr(release_plan.Question, "as_dict",
                        lambda self, cip_coding="2010": current(self, cip_coding))
    plan(store, frames, "R1", SEED)
    monkeypatch.undo()
    recorded = store.table("SELECT question FROM measurements")["question"]
    assert {json.loads(q)["cip_vintage"] for q in recorded} == {"2010"}
    second = plan(store, frames, "R2")
    assert second.new_epsilon == 0 and not second.plan["new"].any()
    other = load_config().model_copy(update={"cip": load_config().cip.model_copy(
        update={"switch_year": 2015})})
    assert plan(store, frames, "R3", cfg=other).new_epsilon == 0   # the switch year is data


def test_remeasure_spends_again_supersedes_and_respects_the_cap(store, frames, tmp_path):
    first = plan(store, frames, "R1", SEED)
    institution = first.plan["institution"].iloc[0]
    again = plan(store, frames, "R2", remeasure=institution)
    named = again.plan["institution"] == institution
    assert again.plan.loc[named, "new"].all() and not again.plan.loc[~named, "new"].any()
    mine = first.populations["institution"] == institution
    assert again.new_epsilon == first.populations.loc[mine, "after"].max() > 0
    superseded = store.table("SELECT supersedes FROM measurements WHERE measurement_id LIKE '%@R2/1'")
    assert superseded["supersedes"].str.contains("@R1/1").all()
    store.set_policy("the DRB", "test: a lower cap", lifetime_cap="10")
    with pytest.raises(LifetimeBudgetExceeded, match="over the lifetime cap of epsilon 10") as refused:
        plan(store, frames, "R3", remeasure="all")
    worst = max(3 * again.new_epsilon, 2 * first.new_epsilon)  # measured 3 times, others twice
    assert f"= {epsilon_text(worst)}, {epsilon_text(worst - 10)} over" in str(refused.value)
    assert store.attempts("R3") == []  # nothing recorded for the refused release


def test_a_rerun_reuses_its_plan_and_seed_and_changed_inputs_need_supersede(store, frames):
    first = plan(store, frames, "R1", SEED)
    again = plan(store, frames, "R1")
    assert again.attempt == first.attempt and not again.new_spending
    pd.testing.assert_frame_equal(again.plan, first.plan, check_dtype=False)
    with pytest.raises(ReleaseConflict, match="another seed"):
        plan(store, frames, "R1", ReleaseSeed.from_hex("cd" * 32))
    with pytest.raises(ReleaseConflict, match="other inputs"):
        plan_release(store, "R1", None, "inputs-2", "config", CFG, frames)
    superseding = plan_release(store, "R1", None, "inputs-2", "config", CFG, frames, supersede=True)
    assert superseding.superseded == first.attempt.attempt and superseding.new_epsilon == 0


def test_a_failed_release_rerun_with_a_corrected_configuration_is_not_charged_twice(
        store, frames):
    first = plan(store, frames, "R1", SEED)          # recorded, then failed before storing
    corrected = CFG.model_copy(update={"earnings": CFG.earnings.model_copy(
        update={"min_publish_count": 50})})          # a post-processing setting only
    again = plan_release(store, "R1", None, "inputs", "config-2", corrected, frames,
                         supersede=True)
    assert again.new_epsilon == 0 and not again.plan["new"].any()
    assert {p.seed for p in again.pending} == {SEED}   # drawn as R1 would have
    pd.testing.assert_frame_equal(again.populations[["after"]], first.populations[["after"]])


def test_the_store_is_append_only_and_never_created_silently(store, frames, tmp_path):
    plan(store, frames, "R1", SEED)
    db = sqlite3.connect(store.path / "store.sqlite")
    for statement in ("UPDATE measurements SET epsilon = '0'", "DELETE FROM measurement_populations",
                      "UPDATE releases SET seed_hex = 'x'", "DELETE FROM releases"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute(statement)
    db.close()
    with pytest.raises(StoreError, match="pseo-das store init"):
        PrivacyStore.open(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()
    with pytest.raises(StoreError, match="already holds"):
        init_store(store.path)


def test_caps_compare_exactly_a_spend_of_one_in_ten_to_the_twenty_is_refused(store, frames):
    from pseo_das.tasks.inputs.cells import observable_populations
    from pseo_das.tasks.privacy.question import Question
    store.set_policy("the DRB", "test: the cap equals the plan", lifetime_cap="7.5")
    one = observable_populations(frames["4"], 10, CFG.cells.last_earnings_year).iloc[:1]
    tiny = Fraction(1, 10 ** 20)
    store.begin()
    attempt = store.add_release("tiny", SEED, "inputs", "config", store.put_frame(one), None,
                                store.policy().policy, store.head())
    question = Question("tiny", "test", "4", 10, tiny, 1, {"cohorts": CFG.cells.cohort_definition()}).as_dict()
    store.add_measurement("tiny@tiny/1", attempt, "tiny", question, tiny, one, [])
    store.commit()
    assert store.spends()["epsilon"].tolist() == [tiny]           # kept exactly
    with pytest.raises(LifetimeBudgetExceeded) as refused:         # 7.5 + 1e-20 > 7.5
        plan(store, frames, "R1", SEED)
    assert "= 7.50000000000000000001, 0.00000000000000000001 over" in str(refused.value)
    assert float(Fraction(15, 2) + tiny) == 7.5                     # floats could not tell


def _realigned(first_cohort_year: int):
    """The default configuration with cohort windows aligned to another first year."""
    cells = CFG.cells.model_copy(update={"first_cohort_year": first_cohort_year})
    return CFG.model_copy(update={"cells": cells})


def _frames_for(cfg) -> dict:
    inputs = read_inputs(write(Path(tempfile.mkdtemp()), valid_graduates(), valid_outcomes()),
                         2001, 2022)
    attributes = cohort_attributes(inputs.graduates, cfg.cells)
    return {level: cell_frame(attributes, level) for level in ("4", "2")}


def test_atoms_are_the_graduation_years_of_each_population_window():
    spends = pd.DataFrame({"institution": ["1", "2"], "degree_level": ["05", "02"],
                           "grad_cohort": [2001, 2004], "cohort_years": [3, 1],
                           "epsilon": [Fraction(1, 3), Fraction(2)]})
    expanded = atoms(spends)
    assert list(zip(expanded["institution"], expanded["grad_year"])) == \
        [("1", 2001), ("1", 2002), ("1", 2003), ("2", 2004)]
    assert expanded["epsilon"].tolist() == [Fraction(1, 3)] * 3 + [Fraction(2)]


def test_the_lifetime_budget_is_exact_per_graduation_year_and_a_population_shows_its_worst():
    """Two windows over one institution's bachelor's graduates, 2001-2005 (charged 1/3 twice)
    and 2004-2006 (charged 1/2): 2004 and 2005 carry both."""
    keys = {"institution": "1", "degree_level": "05"}
    before = pd.DataFrame([{**keys, "grad_cohort": 2001, "cohort_years": 5,
                            "epsilon": Fraction(1, 3), "delta": Fraction(0)}] * 2)
    this = pd.DataFrame([{**keys, "grad_cohort": 2004, "cohort_years": 3,
                          "epsilon": Fraction(1, 2), "delta": Fraction(1, 10 ** 9)}])
    members = atoms(pd.DataFrame([{**keys, "grad_cohort": 2004, "cohort_years": 3}]))
    budget = lifetime_budget(members[POPULATION_ATOM_KEYS], before, this)
    assert budget.atoms["grad_year"].tolist() == [2004, 2005, 2006]
    exact = budget.atoms_over(Fraction(0))
    assert exact["after"].tolist() == [Fraction(7, 6), Fraction(7, 6), Fraction(1, 2)]
    assert exact["delta_after"].tolist() == [Fraction(1, 10 ** 9)] * 3
    (population,) = budget.populations().itertuples()
    assert (population.before, population.this_release, population.after) == \
        (Fraction(2, 3), Fraction(1, 2), Fraction(7, 6))
    assert budget.atoms_over(Fraction(7, 6)).empty and len(budget.atoms_over(Fraction(1))) == 2


def test_cohorts_realigned_over_measured_graduates_are_charged_to_the_same_graduates(store):
    """A store capped at 10 has spent 7.5 on the default windows (2001-2005, ...). A release
    whose windows start in 2002 asks new questions of new populations, but their graduates
    are the same: refused before anything is recorded, naming the graduation years."""
    store.set_policy("the DRB", "test: cap 10", lifetime_cap="10")
    first = plan(store, _frames_for(CFG), "R1", SEED)
    assert first.new_epsilon == Fraction(15, 2)
    realigned = _realigned(2002)
    recorded = store.head()
    with pytest.raises(LifetimeBudgetExceeded) as refused:
        plan(store, _frames_for(realigned), "R2", cfg=realigned)
    message = str(refused.value)
    assert "over the lifetime cap of epsilon 10" in message
    assert "institution 00366900, degree 05, graduates of 2005 (cohort 2005): spent 7.5 + this " \
           "release 7.5 = 15, 5 over" in message
    assert store.head() == recorded and store.attempts("R2") == []
    # with room for both, the overlap carries both spends and the populations show it
    store.set_policy("the DRB", "test: cap 15", lifetime_cap="15")
    second = plan(store, _frames_for(realigned), "R2", cfg=realigned)
    assert second.new_epsilon == Fraction(15, 2)
    assert second.populations["after"].max() == 15
    assert second.populations["before"].max() == Fraction(15, 2)


def test_the_ledger_sums_and_writes_epsilons_exactly():
    from pseo_das.tasks.privacy.statement import geometric_statement
    from pseo_das.tasks.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger, measured_entry

    def entry(name, epsilon):
        return measured_entry(geometric_statement(name, "p", name, epsilon, 1), 1, 1, "", "")
    thirds = [entry(f"t{i}", Fraction(1, 3)) for i in range(3)]
    assert PrivacyLedger.of(1, thirds).total_epsilon == 1               # not 0.9999...
    with pytest.raises(PrivacyBudgetExceeded, match="7.50000000000000000001, over the cap 7.5"):
        PrivacyLedger.of("7.5", [entry("a", Fraction(15, 2)), entry("b", Fraction(1, 10 ** 20))])
    frame = PrivacyLedger.of(2, thirds).to_frame()
    assert frame["epsilon"].tolist() == ["1/3"] * 3
    assert [Fraction(text) for text in frame["epsilon"]] == [Fraction(1, 3)] * 3


def test_store_show_says_what_the_store_holds_and_no_seed(store, frames):
    from pseo_das.tasks.privacy.store_summary import store_summary
    first = plan(store, frames, "R1", SEED)
    institution = first.plan["institution"].iloc[0]
    plan(store, frames, "R2", remeasure=institution)
    shown = store_summary(store.path, top=3)
    assert "releases: 2 recorded, 0 published" in shown
    assert ("policy 1: lifetime epsilon cap 30 and delta cap 0.01 per graduate, at most 10 per "
            "tabulation") in shown
    assert "earnings.I.cip4.y1@R1/1: epsilon 1 on" in shown and "NOT STORED" in shown
    assert "earnings.I.cip4.y1@R2/1" in shown and "supersedes earnings.I.cip4.y1@R1/1" in shown
    assert "nan" not in shown and SEED.hex() not in shown
    top = shown.splitlines()[-3]
    assert top.startswith(f"    institution {institution},")
    assert top.endswith(epsilon_text(2 * first.populations.loc[
        first.populations["institution"] == institution, "after"].max()))


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "override.toml"
    path.write_text(text)
    return path


# --- whole releases (slow) --------------------------------------------------------------

def _summary(folder: Path) -> dict:
    return json.loads((folder / "internal" / "release_summary.json").read_text())


@pytest.mark.slow
def test_a_second_release_spends_nothing_and_publishes_the_same_numbers(releases):
    root, _ = releases
    first, second = _summary(root / "a"), _summary(root / "a_next")
    assert first["new_epsilon"] == "7.5" and first["reused_measurements"] == 0
    assert second["new_epsilon"] == "0" and second["new_measurements"] == 0
    assert second["reused_measurements"] == first["new_measurements"]
    for name in ("pseoe_all.csv", "pseoh_all.csv", "pseof_all.csv"):
        assert public_table(root / "a", name).read_bytes() == \
            public_table(root / "a_next", name).read_bytes(), name
    lifetime = pd.read_csv(root / "a_next" / "internal" / "lifetime_budget.csv", dtype=str)
    assert set(lifetime["this_release"]) == {"0"} and lifetime["after"].map(Fraction).max() == 7.5
    assert "is a rerun of attempt 1" in (root / "a_again" / "internal" / "drb_report.md").read_text()


@pytest.fixture(scope="module")
def cohort_added(small_synthetic_dir, tmp_path_factory):
    """In one store: R1 of the small data set without its bachelor's cohort 2019 (seed A),
    then R2 of the whole small data set (no seed given: the store's), R2's microdata copy
    and R1's then deleted. Returns (root, store): R2 is in root / "r2"."""
    root = tmp_path_factory.mktemp("cohort-added")
    uri = f"sqlite:///{root / 'audit' / 'mlflow.db'}"
    data = Path(shutil.copytree(small_synthetic_dir, root / "data"))
    graduates = pd.read_parquet(data / "graduates.parquet")
    outcomes = pd.read_parquet(data / "outcomes.parquet")
    added = (graduates["degree_level"] == "05") & (graduates["grad_year"] >= 2019)
    earlier = root / "earlier"
    earlier.mkdir()
    shutil.copytree(data / "ipeds", earlier / "ipeds")   # the same IPEDS files
    graduates[~added].to_parquet(earlier / "graduates.parquet", index=False)
    outcomes[outcomes["person_id"].isin(graduates.loc[~added, "person_id"])] \
        .to_parquet(earlier / "outcomes.parquet", index=False)
    lean = without_extras(root / "lean.toml")
    assert run_release(earlier, root / "r1", SEED_A, uri, "R1", lean) == 0
    assert run_release(data, root / "r2", None, uri, "R2", lean) == 0
    shutil.rmtree(data)
    shutil.rmtree(earlier)
    return root, store_beside(uri)


@pytest.mark.slow
def test_an_added_cohort_is_the_only_thing_measured(cohort_added):
    root, store_path = cohort_added
    summary = _summary(root / "r2")
    # bachelor's cohort 2019-2021 reaches only 1 year after by 2022: earnings 1 + flows 1.2
    # + origin counts 0.3
    assert summary["new_epsilon"] == "2.5"
    with PrivacyStore.open(store_path) as store:
        plan = store.get_frame(store.attempts("R2")[0].plan_sha256)
    new = plan[plan["new"]]
    assert set(zip(new["degree_level"], new["grad_cohort"])) == {("05", 2019)}
    assert set(new["tabulation_id"]) == {"earnings.I.cip4.y1", "flows.I.cip2.y1",
                                         "flows_total.I.cip2.y1"}
    assert summary["populations_measured"] == new[["institution", "degree_level",
                                                   "grad_cohort"]].drop_duplicates().shape[0]


@pytest.mark.slow
def test_a_release_realigning_the_cohorts_is_refused_by_the_cli_and_spends_nothing(
        releases, synthetic_dir, tmp_path, tracking_uri, capsys):
    """The shared releases' store (7.5 spent on the default windows), copied and capped at 10
    by the DRB's command: a release with `first_cohort_year = 2000` measures the same
    graduates under new populations and is refused, exit 2, nothing recorded."""
    from pseo_das.cli import main
    _, uri = releases
    store = shutil.copytree(store_beside(uri), tmp_path / "store")
    with pytest.raises(SystemExit) as stop:
        main(["store", "set-policy", str(store), "--lifetime-cap", "10", "--by", "the DRB",
              "--reason", "test"])
    assert stop.value.code == 0
    with PrivacyStore.open(store) as opened:
        recorded = opened.head()
    capsys.readouterr()
    code = run_release(synthetic_dir, tmp_path / "out", None, tracking_uri, "R-2000",
                       extra=("--config", str(_config(tmp_path, "[cells]\nfirst_cohort_year = "
                                                                   "2000\n"))), store=store)
    err = capsys.readouterr().err
    assert code == 2 and "over the lifetime cap of epsilon 10" in err
    assert "spent 7.5 + this release 7.5 = 15, 5 over" in err
    with PrivacyStore.open(store) as opened:
        assert opened.head() == recorded and opened.attempts("R-2000") == []
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_republish_without_microdata_gives_the_same_bytes(cohort_added, tmp_path, capsys):
    """R2 (measured partly in R1, partly in R2) republished from the store alone: the
    microdata of both were deleted."""
    from pseo_das.cli import main
    root, store = cohort_added
    with pytest.raises(SystemExit) as stop:
        main(["republish", "--store", str(store), "--release", "R2",
              "--out", str(tmp_path / "again")])
    assert stop.value.code == 0
    files = sorted(p.relative_to(root / "r2") for p in (root / "r2").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "again")
                           for p in (tmp_path / "again").rglob("*") if p.is_file())
    for name in files:
        assert (root / "r2" / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["republish", "--store", str(store), "--release", "R9",
              "--out", str(tmp_path / "none")])
    assert stop.value.code == 2 and "release R9 was never published" in capsys.readouterr().err
    republish_beside_a_running_release(store, tmp_path, capsys)


def republish_beside_a_running_release(store: Path, tmp_path: Path, capsys) -> None:
    """A release running into `running` holds its destination lock and has a staging
    folder: republish to the same --out is refused (the lock), and so is an --out with
    glob characters (which once matched, and deleted, the running release's staging);
    the staging folder survives both (issue 31)."""
    from pseo_das.cli import main
    from pseo_das.tasks.publication.release_files import destination_lock, new_staging
    running = tmp_path / "running"
    with destination_lock(running):          # as `pseo-das release --out running` holds it
        staging = new_staging(running)
        being_written = staging / "public" / "all" / "pseoe_all.csv.gz"
        being_written.write_text("being written\n")
        for out, says in [(running, f"the release folder {running} is in use by pseo-das (pid"),
                          (tmp_path / "runn*", "may not contain *, ?, [ (glob characters)"),
                          (tmp_path / "r?nning", "may not contain *, ?, [ (glob characters)")]:
            with pytest.raises(SystemExit) as stop:
                main(["republish", "--store", str(store), "--release", "R1", "--out", str(out)])
            err = capsys.readouterr().err
            assert stop.value.code == 2 and says in err, err
            assert "pseo-das republish: FAILED, nothing was written." in err
            assert being_written.read_text() == "being written\n"
        assert not running.exists()


@pytest.mark.slow
def test_a_release_pointed_at_a_missing_store_is_refused_and_creates_nothing(
        synthetic_dir, tmp_path, tracking_uri, capsys):
    missing = tmp_path / "no-store"
    code = run_release(synthetic_dir, tmp_path / "out", SEED_A, tracking_uri, "R1", store=missing)
    err = capsys.readouterr().err
    assert code == 2 and "no privacy store there" in err and "pseo-das store init" in err
    assert not missing.exists() and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_release_whose_cohorts_reach_only_one_year_after(synthetic_dir, tmp_path, tracking_uri):
    """No population is observable 5 or 10 years out: those tabulations are empty, nothing is
    spent on them, and the release still publishes."""
    graduates = pd.read_parquet(synthetic_dir / "graduates.parquet")
    outcomes = pd.read_parquet(synthetic_dir / "outcomes.parquet")
    recent = graduates["grad_year"] >= 2018
    data = tmp_path / "recent"
    data.mkdir()
    graduates[recent].to_parquet(data / "graduates.parquet", index=False)
    outcomes[outcomes["person_id"].isin(graduates.loc[recent, "person_id"])] \
        .to_parquet(data / "outcomes.parquet", index=False)
    assert run_release(data, tmp_path / "r", SEED_A, tracking_uri, "R1") == 0
    assert _summary(tmp_path / "r")["new_epsilon"] == "2.5"  # 1-year earnings 1 + flows 1.5
    pseoe = pd.read_csv(public_table(tmp_path / "r", "pseoe_all.csv"), dtype=str)
    restricted = (pseoe["cip_level"] == "4") & pseoe["degree_level"].isin(["07", "17"])
    assert (pseoe.loc[restricted, "status_y5_earnings"] == "5").all()   # the schema's rule
    observed = pseoe[~restricted]
    assert set(observed["status_y5_earnings"]) == set(observed["status_y10_earnings"]) == {"-1"}
