"""The employer-side table (pseoemp_all.csv, `[employer_table]`): its true rows and x_v per
cohort against a brute-force count (only the measured populations read), the Dask engine's
x_v equal to the local engine's, the configuration, and real releases: the table
published, reused at zero epsilon, measured and charged again when a cohort gains an
institution, refused before any noise over the lifetime cap."""
from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from conftest import (SEED_A, public_table, run_release, small_data_set, store_beside,
                      without_extras)
from pseo_das.config import ConfigError, load_config
from pseo_das.synth import write_synthetic
from pseo_das.tasks.employment_flows.employer_table import employer_table_questions
from pseo_das.tasks.codes.destinations import NONEMPLOYED, employed_destination
from pseo_das.tasks.inputs.cells import cohort_attributes, in_populations
from pseo_das.tasks.inputs.constant_dollars import in_constant_dollars
from pseo_das.tasks.inputs.ingest import InputValidationError, read_inputs
from pseo_das.tasks.inputs.true_counts import read_counts
from pseo_das.tasks.inputs.cells import observable_populations
from test_employer_counts import CPI, employers_dir  # noqa: F401  (module fixture)

TABLE = ('[employer_table]\nenabled = true\nmechanism = "smooth-laplace"\nalpha = 0.01\n'
         'epsilon = 0.5\ndelta = 1e-3\n')


def config(tmp_path: Path, text: str):
    path = tmp_path / "release.toml"
    path.write_text(text)
    return load_config(path)


@pytest.fixture(scope="module")
def table_config(tmp_path_factory):
    return config(tmp_path_factory.mktemp("cfg"), TABLE)


@pytest.fixture(scope="module")
def table_counts(employers_dir, table_config):
    return read_counts(employers_dir, table_config, None, CPI, 3_000)


def brute_force_row(data: Path, cfg, years_after: int, populations: pd.DataFrame
                    ) -> tuple[np.ndarray, np.ndarray]:
    """pandas over the whole files: per employed state x sector, the graduates of
    `populations` employed there `years_after` years out, and the largest number of them
    with one employer_id (missing ids as one employer)."""
    inputs = in_constant_dollars.fn(read_inputs(data, cfg.cells.first_cohort_year,
                                                cfg.cells.last_earnings_year),
                                    CPI, cfg.earnings.dollar_year)
    employer = pq.read_table(data / "outcomes.parquet", columns=["employer_id"]).to_pandas()
    graduates = cohort_attributes(inputs.graduates, cfg.cells, cfg.cip.switch_year)
    member = in_populations(graduates, populations)[inputs.graduate_row]
    rows = (inputs.outcomes["years_after"].to_numpy() == years_after) & member
    records = pd.DataFrame({
        "destination": employed_destination(inputs.outcomes[rows], cfg.earnings.sample_floor),
        "employer": employer["employer_id"].to_numpy(dtype=object)[rows]})
    records = records[records["destination"] != NONEMPLOYED].fillna({"employer": "<missing>"})
    counts = np.bincount(records["destination"], minlength=NONEMPLOYED)
    best = records.groupby(["destination", "employer"]).size().groupby(level=0).max()
    largest = np.zeros(NONEMPLOYED, np.int64)
    largest[best.index.to_numpy()] = best.to_numpy()
    return counts, largest


def test_each_cohort_row_and_its_x_v_equal_a_brute_force_count(employers_dir, table_config,
                                                              table_counts):
    """3,000-row chunks; every cohort of 1 and 10 years after, and one institution's
    populations alone (the measurement reads only the populations it is charged to)."""
    last = table_config.cells.last_earnings_year
    checked = 0
    for k in (1, 10):
        populations = observable_populations(table_counts.frames["2"], k, last)
        cohorts = sorted(set(populations["grad_cohort"]))
        for cohort in cohorts[:3]:
            members = populations[populations["grad_cohort"] == cohort]
            for subset in (members, members[members["institution"] == members["institution"].iloc[0]]):
                got = table_counts.employer_table("2", k, last, subset)
                truth = brute_force_row(employers_dir, table_config, k, subset)
                np.testing.assert_array_equal(got[0], truth[0], err_msg=f"y{k} c{cohort}")
                np.testing.assert_array_equal(got[1], truth[1], err_msg=f"y{k} c{cohort} x_v")
                assert (got[1] <= got[0]).all() and ((got[1] > 0) == (got[0] > 0)).all()
                checked += 1
    assert checked == 12


def test_one_question_per_cohort_names_its_populations(table_counts, table_config, tmp_path):
    questions = employer_table_questions(table_config, table_counts.frames)
    populations = observable_populations(table_counts.frames["2"], 1, 2022)
    first = [q for q in questions if q.years_after == 1]
    assert [q.parameters["grad_cohort"] for q in first] == sorted(set(populations["grad_cohort"]))
    assert {q.epsilon for q in questions} == {Fraction(1, 2)}
    assert len({q.sha256 for q in questions}) == len(questions)
    # one population fewer in the cohort: another question (measured and charged again)
    frames = dict(table_counts.frames)
    cells = frames["2"].cells
    cohort = first[0].parameters["grad_cohort"]
    one = cells[cells["grad_cohort"] == cohort]["institution"].iloc[0]
    drop = (cells["grad_cohort"] == cohort) & (cells["institution"] == one)
    frames["2"] = type(frames["2"])("2", cells[~drop].reset_index(drop=True), None)
    changed = {q.tabulation_id: q.sha256 for q in employer_table_questions(table_config, frames)}
    before = {q.tabulation_id: q.sha256 for q in questions}
    assert changed[first[0].tabulation_id] != before[first[0].tabulation_id]
    assert changed[first[1].tabulation_id] == before[first[1].tabulation_id]
    # off by default: no question, and the configuration dumps as before
    assert employer_table_questions(load_config(), table_counts.frames) == []
    assert "employer_table" not in load_config().model_dump(mode="json")


@pytest.mark.parametrize("text, reason", [
    ('mechanism = "smooth-laplace"\nalpha = 0.1\nepsilon = 0.5\n', "smallest epsilon"),
    ('mechanism = "smooth-gamma"\nalpha = 0.1\nepsilon = 0.3\n', "4 ln\\(1 \\+ alpha\\)"),
    ('mechanism = "geometric"\n', "employer_table.mechanism"),
])
def test_infeasible_table_parameters_are_refused(tmp_path, text, reason):
    with pytest.raises(ConfigError, match=reason):
        config(tmp_path, "[employer_table]\nenabled = true\n" + text)


def test_the_table_needs_the_employer_id_column(synthetic_dir, table_config):
    with pytest.raises(InputValidationError) as err:
        read_counts(synthetic_dir, table_config, None, CPI)
    assert "employer_table.enabled = true" in str(err.value) and "employer_id" in str(err.value)


@pytest.mark.slow  # a Dask LocalCluster (worker processes)
def test_the_dask_engine_counts_x_v_as_the_local_engine(employers_dir, tmp_path):
    """Partitioned, sorted Parquet in small row groups: several tasks on a real
    LocalCluster; x_v of every flow and every cohort row of the table are equal."""
    from pseo_das.tasks.inputs.dask_engine import dask_counts
    from test_dask_engine import partitioned
    cfg = config(tmp_path, '[flows]\nmechanism = "smooth-gamma"\n' + TABLE)
    data = partitioned(employers_dir, tmp_path / "parts", parts=3, row_group_size=2_000)
    local = read_counts(employers_dir, cfg, None, CPI, 4_000)
    on_dask = dask_counts(data, cfg, None, CPI, chunk_rows=4_000)
    last = cfg.cells.last_earnings_year
    for k in cfg.cells.years_after:
        np.testing.assert_array_equal(on_dask.largest_at_one_employer("2", k, last),
                                      local.largest_at_one_employer("2", k, last))
        np.testing.assert_array_equal(on_dask.flows("2", k, last)[1], local.flows("2", k, last)[1])
        populations = observable_populations(local.frames["2"], k, last)
        for _, members in populations.groupby("grad_cohort"):
            for mine, theirs in zip(on_dask.employer_table("2", k, last, members),
                                    local.employer_table("2", k, last, members)):
                np.testing.assert_array_equal(mine, theirs)


# --- real releases ------------------------------------------------------------------------

def _without_early_graduates(source: Path, target: Path, institution: str) -> Path:
    """The data without `institution`'s graduates of 2001-2003 (so that the first cohorts
    lack some of its populations, which a later release adds)."""
    graduates = pd.read_parquet(source / "graduates.parquet")
    outcomes = pd.read_parquet(source / "outcomes.parquet")
    gone = (graduates["institution"].astype(str) == institution) & (graduates["grad_year"] < 2004)
    target.mkdir(parents=True)
    shutil.copytree(source / "ipeds", target / "ipeds")   # the same public IPEDS files
    graduates[~gone].to_parquet(target / "graduates.parquet", index=False)
    outcomes[~outcomes["person_id"].isin(graduates.loc[gone, "person_id"])] \
        .to_parquet(target / "outcomes.parquet", index=False)
    return target


def _lifetime(out: Path) -> pd.DataFrame:
    table = pd.read_csv(out / "internal" / "lifetime_budget.csv", dtype=str)
    for column in ("before", "this_release", "after"):
        table[column] = table[column].map(Fraction)
    return table


@pytest.mark.slow
def test_releases_publish_reuse_and_remeasure_the_table(tmp_path, tracking_uri):
    whole = tmp_path / "whole"
    write_synthetic(whole, graduates=30_000, seed=7, progress=lambda _: None, employers=True)
    full = small_data_set(whole, tmp_path / "full")   # five institutions: the size is not tested
    newcomer = sorted(pd.read_parquet(full / "graduates.parquet")["institution"].astype(str))[-1]
    partial = _without_early_graduates(full, tmp_path / "partial", newcomer)
    extra = without_extras(tmp_path / "table.toml", TABLE)
    first, second, third = tmp_path / "r1", tmp_path / "r2", tmp_path / "r3"
    assert run_release(partial, first, SEED_A, tracking_uri, "2026Q4-a", extra) == 0
    table = pd.read_csv(public_table(first, "pseoemp_all.csv"), dtype=str)
    assert list(table.columns) == ["grad_cohort", "geo_level", "geography", "ind_level",
                                   "industry", "y1_grads_emp", "y5_grads_emp", "y10_grads_emp",
                                   "status_y1_grads_emp", "status_y5_grads_emp",
                                   "status_y10_grads_emp"]
    assert len(table) % NONEMPLOYED == 0 and (table["geo_level"] == "S").all()
    assert table.groupby("grad_cohort").size().eq(NONEMPLOYED).all()
    # all cohorts: the sum of the cohorts' noisy rows (zero epsilon)
    values = table.filter(regex=r"^y\d+_grads_emp$").apply(pd.to_numeric)
    summed = values[table["grad_cohort"] != "0000"].groupby(
        [table["geography"], table["industry"]]).sum(min_count=1)
    total = values[table["grad_cohort"] == "0000"].set_index(
        [table.loc[table["grad_cohort"] == "0000", c] for c in ("geography", "industry")])
    pd.testing.assert_frame_equal(summed.sort_index().fillna(0).astype(int),
                                  total.sort_index().fillna(0).astype(int), check_names=False)
    ledger = pd.read_csv(first / "internal" / "ledger.csv", dtype=str, keep_default_na=False)
    entries = ledger[ledger["tabulation_id"].str.startswith("employer_table.")]
    assert list(entries["tabulation_id"]) == ["employer_table.S.y1", "employer_table.S.y5",
                                              "employer_table.S.y10"]
    assert (entries["epsilon"] == "0.5").all() and (entries["employer_notion"] == "weak").all()
    assert (entries["alpha"] == "0.01").all() and (entries["delta"] == "0.001").all()
    assert entries["mechanism"].str.startswith("smooth Laplace").all()
    cohorts = table[table["grad_cohort"] != "0000"]
    for entry in entries.itertuples():
        k = entry.tabulation_id.rsplit(".y", 1)[1]
        d = int((cohorts[f"status_y{k}_grads_emp"] == "1").sum() // NONEMPLOYED)
        assert int(entry.n_cells) == d and float(entry.employer_epsilon) == d * 0.5
    report = (first / "internal" / "drb_report.md").read_text()
    assert "The employer-side table (`pseoemp_all.csv`" in report and "weak notion" in report
    # the table's Smooth Laplace: (epsilon, delta) for graduates, the employers' files named
    guarantee = json.loads((first / "internal" / "release_summary.json").read_text())["guarantee"]
    assert (guarantee["pure_epsilon_dp"], guarantee["epsilon"], guarantee["delta"]) == \
        (False, "9", "0.003")
    notes = (first / "public" / "release_notes.md").read_text()
    for document in (notes, report):
        assert "(epsilon, delta) = (9, 0.003) for each graduate, NOT pure" in document
        assert "pure epsilon-DP for each graduate" not in document
        assert "covering pseoemp_all.csv; pseoe_all.csv, pseoh_all.csv, pseof_all.csv" in document
        assert "are measured for the graduates only" in document
    manifest = json.loads((first / "internal" / "manifest.json").read_text())
    assert "public/all/pseoemp_all.csv.gz" in json.dumps(manifest)
    # each population is charged the table's 0.5 once per years-after it is observed
    spent = _lifetime(first)
    assert spent["this_release"].max() == Fraction(9)   # 3 x (1 + 1.5 + 0.5)
    assert spent["delta_after"].map(Fraction).max() == Fraction(3, 1000)   # recorded

    # the same populations again: every measurement reused, the same bytes
    assert run_release(partial, second, None, tracking_uri, "2026Q4-b", extra) == 0
    summary = json.loads((second / "internal" / "release_summary.json").read_text())
    assert summary["new_epsilon"] == "0" and summary["new_measurements"] == 0
    assert public_table(second, "pseoemp_all.csv").read_bytes() == \
        public_table(first, "pseoemp_all.csv").read_bytes()

    # new populations in the first cohort(s): those cohorts' tables are other questions,
    # charged to every population of the cohort (0.5 per years-after); others are reused
    assert run_release(full, third, None, tracking_uri, "2026Q4-c", extra) == 0
    spent = _lifetime(third)
    keys = ["institution", "degree_level", "grad_cohort"]
    known = set(map(tuple, _lifetime(first)[keys].to_numpy()))
    fresh = np.array([tuple(row) not in known for row in spent[keys].to_numpy()])
    its_cohorts = set(spent.loc[fresh, "grad_cohort"])
    assert fresh.any() and its_cohorts < set(spent["grad_cohort"])
    others = spent[~fresh]
    charged = others[others["this_release"] > 0]
    assert len(charged) and set(charged["grad_cohort"]) <= its_cohorts
    assert set(charged["this_release"]) <= {Fraction(1, 2), Fraction(1), Fraction(3, 2)}
    assert (others.loc[~others["grad_cohort"].isin(its_cohorts), "this_release"] == 0).all()
    changed = pd.read_csv(public_table(third, "pseoemp_all.csv"), dtype=str)
    kept = table[~table["grad_cohort"].isin(sorted(its_cohorts) + ["0000"])]
    assert len(kept) and kept.reset_index(drop=True).equals(
        changed[changed["grad_cohort"].isin(set(kept["grad_cohort"]))].reset_index(drop=True))


@pytest.mark.slow
def test_the_lifetime_cap_refuses_the_table_before_any_noise(tmp_path, tracking_uri):
    from pseo_das.tasks.privacy.store import PrivacyStore, init_store
    data = tmp_path / "data"
    write_synthetic(data, graduates=3_000, seed=12, progress=lambda _: None, employers=True)
    store = init_store(store_beside(tracking_uri), lifetime_cap=Fraction(8))
    out = tmp_path / "r"
    code = run_release(data, out, SEED_A, tracking_uri, "2026Q4-cap",
                       without_extras(tmp_path / "table.toml", TABLE), store=store)
    assert code == 2 and not out.exists()
    with PrivacyStore.open(store) as opened:   # nothing recorded, so nothing drawn
        assert opened.table("SELECT COUNT(*) AS n FROM releases")["n"].iloc[0] == 0
        assert opened.table("SELECT COUNT(*) AS n FROM measurements")["n"].iloc[0] == 0
    # without the table the same release fits (7.5 of 8)
    assert run_release(data, out, SEED_A, tracking_uri, "2026Q4-cap",
                       without_extras(tmp_path / "lean.toml"), store=store) == 0


def test_the_audit_knows_the_table_and_its_configured_epsilon():
    """`pseo-das audit`'s ledger check: the table's entries at employer_table.epsilon
    (checked by hand: `pseo-das audit` of a release with the table passes all 5 checks)."""
    from pseo_das.tasks.audit.ledger_check import epsilon_findings
    ledger = pd.DataFrame({"tabulation_id": ["employer_table.S.y1"],
                           "product": ["employer-side table"],
                           "mechanism": ["smooth Laplace (Haney et al. 2017, smooth sensitivity, "
                                         "Laplace noise)"],
                           "epsilon": [Fraction(1, 2)], "epsilon_text": ["0.5"]})
    assert epsilon_findings(ledger, {"employer_table.epsilon": 0.5}) == []
    wrong = epsilon_findings(ledger, {"employer_table.epsilon": 0.25})
    assert len(wrong) == 1 and "employer_table.epsilon = 0.25" in wrong[0]


def test_a_stored_question_keeps_its_employer_mechanism(tmp_path, table_counts, table_config):
    """A measurement planned but never stored (a crash) is drawn again from its recorded
    question: an employer-protecting one must come back with its mechanism (not as a
    geometric question) and the same SHA-256."""
    from pseo_das.tasks.privacy.question import stored_question
    from pseo_das.tasks.privacy.release_seed import ReleaseSeed
    from pseo_das.tasks.privacy.store import PrivacyStore, init_store
    question = employer_table_questions(table_config, table_counts.frames)[0]
    members = observable_populations(table_counts.frames["2"], 1, 2022)
    members = members[members["grad_cohort"] == question.parameters["grad_cohort"]]
    with PrivacyStore.open(init_store(tmp_path / "store")) as store:
        with store.writing():
            attempt = store.add_release("r", ReleaseSeed.from_hex("ab" * 32), "i", "c",
                                        "cd" * 32, None, store.policy().policy, store.head())
            store.add_measurement("m", attempt, question.tabulation_id, question.as_dict(),
                                  question.epsilon, members, [])
        again = stored_question(store, "m")
    assert again == question and again.sha256 == question.sha256
    assert again.protection() == table_config.employer_table.protection()
