"""The jobs layout (tasks/inputs/degree_records.py): degree records and job-level earnings,
counted with the contribution bound, against an oracle written here; the bound's rule looks
at a person's own records only; bad layouts refused with the reason."""
from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from pseo_das.config import ReleaseConfig, load_config
from pseo_das.tasks.inputs.cpi import find_cpi, read_cpi
from pseo_das.tasks.inputs.degree_records import degree_rank
from pseo_das.tasks.inputs.ingest import SEVERAL_DEGREES_HINT, InputValidationError
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir
from pseo_das.tasks.inputs.true_counts import TrueCounts, count_inputs, read_counts

CPI = read_cpi(find_cpi(default_reference_dir()))
INSTITUTIONS = {"00366900": "26", "00104800": "48", "00123400": "06"}
CIPS = ["11.0701", "52.0201", "51.3801", "26.0101"]
STATES = ["26", "48", "06"]
INDUSTRIES = ["54", "62", "44-45"]


def config(k: int) -> ReleaseConfig:
    raw = load_config().model_dump(mode="json")
    raw["privacy"]["max_degrees_per_person"] = k
    return ReleaseConfig.model_validate(raw)


def agency_data(seed: int = 3, persons: int = 1500) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Degree records (about 30% of persons with a second degree, some two in one year)
    and job rows (0-3 jobs a year, equal earnings at two jobs now and then)."""
    rng = np.random.default_rng(seed)
    rows = []
    for person in range(1, persons + 1):
        institution = rng.choice(list(INSTITUTIONS))
        year = int(rng.integers(2001, 2016))
        rows.append((person, institution, "05", rng.choice(CIPS), year))
        draw = rng.random()
        if draw < 0.25:     # a master's later, maybe elsewhere
            rows.append((person, rng.choice(list(INSTITUTIONS)), "07", rng.choice(CIPS),
                         year + int(rng.integers(1, 6))))
        elif draw < 0.32:   # a second bachelor's the same year (a tie on year and level)
            rows.append((person, institution, "05", rng.choice(CIPS), year))
    graduates = pd.DataFrame(rows, columns=["person_id", "institution", "degree_level",
                                            "cipcode", "grad_year"])
    graduates = graduates.drop_duplicates().reset_index(drop=True)
    graduates.insert(2, "inst_state", graduates["institution"].map(INSTITUTIONS))
    jobs = []
    for person in range(1, persons + 1):
        for year in range(2002, 2023):
            n = int(rng.choice([0, 1, 1, 2, 3]))
            pay = rng.integers(1, 40, n) * 1000
            if n >= 2 and rng.random() < 0.3:
                pay[1] = pay[0]    # equal earnings: the tie rule decides the main job
            for amount in pay:
                jobs.append((person, year, float(amount), rng.choice(STATES),
                             rng.choice(INDUSTRIES)))
    jobs = pd.DataFrame(jobs, columns=["person_id", "year", "earnings", "emp_state", "industry"])
    return graduates, jobs.sample(frac=1, random_state=1).reset_index(drop=True)


def oracle_layout(graduates: pd.DataFrame, jobs: pd.DataFrame, k: int,
                  cfg: ReleaseConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The bound and the derivation written plainly, person by person: the kept degrees as
    one graduate each, and their outcome rows in the outcomes layout."""
    kept = []
    for _, mine in graduates.groupby("person_id"):
        ordered = sorted(mine.itertuples(index=False), key=lambda d: (
            d.grad_year, int(d.degree_level), d.institution, d.cipcode))
        kept += ordered[:k]
    by_year: dict[tuple, list] = {}     # (person, year) -> the jobs, in row order
    for job in jobs.itertuples(index=False):
        by_year.setdefault((job.person_id, job.year), []).append(job)
    degree_rows, outcome_rows = [], []
    for record, degree in enumerate(kept):
        degree_rows.append((record, degree.institution, degree.inst_state, degree.degree_level,
                            degree.cipcode, degree.grad_year))
        for t in cfg.cells.years_after:
            year = degree.grad_year + t
            mine = by_year.get((degree.person_id, year))
            if year > cfg.cells.last_earnings_year or not mine:
                continue
            main = min(mine, key=lambda j: (-j.earnings, j.emp_state, j.industry))
            outcome_rows.append((record, t, sum(j.earnings for j in mine), main.emp_state,
                                 main.industry))
    return (pd.DataFrame(degree_rows, columns=["person_id", "institution", "inst_state",
                                               "degree_level", "cipcode", "grad_year"]),
            pd.DataFrame(outcome_rows, columns=["person_id", "years_after", "earnings",
                                                "emp_state", "industry"]))


def assert_same_counts(got: TrueCounts, expected: TrueCounts, cfg: ReleaseConfig) -> None:
    assert set(got.levels) == set(expected.levels)
    last = cfg.cells.last_earnings_year
    for level in got.levels:
        pd.testing.assert_frame_equal(got.frames[level].cells, expected.frames[level].cells)
        for k in cfg.cells.years_after:
            if level in cfg.privacy.measured_levels():
                assert (got.histograms(level, k, last)[1]
                        == expected.histograms(level, k, last)[1]).all()
            if level in cfg.flows.measured_levels():
                assert (got.flows(level, k, last)[1] == expected.flows(level, k, last)[1]).all()


@pytest.mark.parametrize("k", [1, 2])
def test_counts_of_the_jobs_layout_equal_the_oracle(tmp_path, k):
    cfg = config(k)
    graduates, jobs = agency_data()
    assert graduates["person_id"].duplicated().mean() > 0.2
    agency = tmp_path / "agency"
    agency.mkdir()
    graduates.to_parquet(agency / "graduates.parquet")
    jobs.to_csv(agency / "jobs.csv", index=False)
    oracle = tmp_path / "oracle"
    oracle.mkdir()
    expected_graduates, expected_outcomes = oracle_layout(graduates, jobs, k, cfg)
    expected_graduates.to_parquet(oracle / "graduates.parquet")
    expected_outcomes.to_parquet(oracle / "outcomes.parquet")
    got = count_inputs.fn(agency, cfg, None, CPI)
    assert_same_counts(got, read_counts(oracle, cfg, None, CPI), cfg)
    assert got.max_degrees_per_person == k
    assert set(got.fingerprints) == {"graduates.parquet", "jobs.csv"}
    dropped = len(graduates) - len(expected_graduates)
    assert (dropped > 0) == (k == 1)
    assert f"{dropped:,} degree record(s) dropped" in got.checks[-1]["result"]
    # each person in at most k records: per tabulation at most k cells and bins
    assert expected_graduates.shape[0] <= k * graduates["person_id"].nunique()


def test_the_rule_looks_at_a_person_own_records_only():
    """A person's kept degrees do not change when other persons' records are added,
    removed or reordered (and the codes' categories change with them)."""
    graduates, _ = agency_data(seed=5, persons=400)
    graduates["row"] = np.arange(len(graduates))
    rank = degree_rank(graduates)
    others, _ = agency_data(seed=9, persons=400)
    others = others.assign(person_id=others["person_id"] + 10_000, row=-1)
    mixed = pd.concat([graduates[graduates["person_id"] % 2 == 0], others], ignore_index=True)
    mixed = mixed.sample(frac=1, random_state=2).reset_index(drop=True)
    for column in ("institution", "degree_level", "cipcode"):
        mixed[column] = mixed[column].astype("category")   # other categories, other codes
    again = degree_rank(mixed)
    mine = mixed["row"].to_numpy() >= 0
    assert (again[mine] == rank[mixed["row"].to_numpy()[mine]]).all()
    # the earliest degree is kept first (a later degree never displaces a kept one)
    first = graduates[rank == 0].set_index("person_id")["grad_year"]
    assert (first == graduates.groupby("person_id")["grad_year"].min()).all()
    pairs = graduates.assign(rank=rank).groupby(["person_id", "grad_year"]).filter(
        lambda g: len(g) == 2 and g["degree_level"].nunique() == 1)
    ordered = pairs.sort_values(["person_id", "rank"])
    assert ordered.groupby("person_id")["cipcode"].apply(
        lambda c: c.is_monotonic_increasing).all()


def test_exact_duplicate_degree_row_is_refused(tmp_path):
    graduates, jobs = agency_data(persons=50)
    graduates = pd.concat([graduates, graduates.iloc[[3]]], ignore_index=True)
    graduates.to_parquet(tmp_path / "graduates.parquet")
    jobs.to_parquet(tmp_path / "jobs.parquet")
    with pytest.raises(InputValidationError) as refused:
        count_inputs.fn(tmp_path, config(2), None, CPI)
    message = str(refused.value)
    assert "graduates.parquet: input rejected" in message
    assert ("column person_id, institution, inst_state, degree_level, cipcode, grad_year: "
            "check unique_degree failed, 2 bad row(s)") in message
    assert "row 3" in message and f"row {len(graduates) - 1}" in message


def test_jobs_for_unknown_persons_and_bad_rows_are_refused(tmp_path):
    graduates, jobs = agency_data(persons=50)
    jobs.loc[0, "person_id"] = 999
    jobs.loc[1, "earnings"] = -5.0
    graduates.to_parquet(tmp_path / "graduates.parquet")
    jobs.to_parquet(tmp_path / "jobs.parquet")
    with pytest.raises(InputValidationError, match=r"jobs.parquet.*\n.*column earnings: check "
                       r"greater_than_or_equal_to\(0\) failed, 1 bad row"):
        count_inputs.fn(tmp_path, config(1), None, CPI)
    jobs.loc[1, "earnings"] = 5.0
    jobs.to_parquet(tmp_path / "jobs.parquet")
    with pytest.raises(InputValidationError, match="1 job row.*not in graduates.parquet; e.g. "
                       "row 0: 999"):
        count_inputs.fn(tmp_path, config(1), None, CPI)


def test_outcomes_layout_with_several_degrees_per_person_is_refused(tmp_path):
    graduates, _ = agency_data(persons=40)
    graduates.to_parquet(tmp_path / "graduates.parquet")
    pd.DataFrame({"person_id": [1], "years_after": [1], "earnings": [30000.0],
                  "emp_state": ["26"], "industry": ["54"]}).to_parquet(
        tmp_path / "outcomes.parquet")
    with pytest.raises(InputValidationError) as refused:
        count_inputs.fn(tmp_path, config(1), None, CPI)
    assert "column person_id: check unique failed" in str(refused.value)
    assert SEVERAL_DEGREES_HINT in str(refused.value)


def test_outcomes_and_jobs_together_are_ambiguous(tmp_path):
    for name in ("graduates", "outcomes", "jobs"):
        (tmp_path / f"{name}.csv").write_text("x\n1\n")
    with pytest.raises(InputValidationError, match="both outcomes and jobs"):
        count_inputs.fn(tmp_path, config(1), None, CPI)


def test_synth_jobs_writes_the_agency_layout(tmp_path):
    """`pseo-das synth --jobs`: degree rows with second degrees, jobs with split years,
    still marked synthetic; the default files are untouched by the option's absence."""
    from pseo_das.cli import main
    from pseo_das.synth import is_synthetic
    with pytest.raises(SystemExit) as stop:
        main(["synth", "--out", str(tmp_path), "--graduates", "3000", "--jobs"])
    assert stop.value.code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graduates.parquet", "ipeds",
                                                          "jobs.parquet"]   # ipeds/: synth_ipeds
    assert is_synthetic(tmp_path)
    graduates = pd.read_parquet(tmp_path / "graduates.parquet")
    jobs = pd.read_parquet(tmp_path / "jobs.parquet")
    assert graduates["person_id"].nunique() == 3000 and graduates["person_id"].duplicated().any()
    assert jobs.duplicated(["person_id", "year"]).any()
    counted = count_inputs.fn(tmp_path, config(2), None, CPI)
    assert "0 degree record(s) dropped" in counted.checks[-1]["result"]


@pytest.mark.slow
def test_release_of_the_jobs_layout_says_sensitivity_k(tmp_path, tracking_uri):
    """A release of two-degree persons with multi-job years at k = 2: every geometric
    row of ledger.csv at sensitivity 2, the release notes say so."""
    from conftest import SEED_A, run_release, without_extras
    from pseo_das.cli import main
    data = tmp_path / "data"
    with pytest.raises(SystemExit):
        main(["synth", "--out", str(data), "--graduates", "1000", "--institutions", "5",
              "--jobs"])   # the claim does not depend on the size
    assert run_release(data, tmp_path / "out", SEED_A, tracking_uri,
                       extra=without_extras(tmp_path / "k2.toml",
                                            "[privacy]\nmax_degrees_per_person = 2\n")) == 0
    ledger = pd.read_csv(tmp_path / "out" / "internal" / "ledger.csv")
    geometric = ledger[ledger["mechanism"] == "two-sided geometric"]
    assert len(geometric) == 9 and (geometric["sensitivity"] == 2).all()
    assert (ledger.loc[ledger["mechanism"] != "two-sided geometric", "sensitivity"] == 0).all()
    notes = (tmp_path / "out" / "public" / "release_notes.md").read_text()
    assert "a tabulation has sensitivity 2" in notes and "q = exp(-epsilon / 2)" in notes


def _plan(store, data_dir, k: int, release_id: str):
    """Plan (and record) a release of the jobs-layout data in `data_dir` with bound k."""
    from pseo_das.tasks.measurements.products import planning_frames
    from pseo_das.tasks.measurements.release_plan import record_release_plan
    from pseo_das.tasks.privacy.release_seed import ReleaseSeed
    cfg = config(k)
    counts = count_inputs.fn(data_dir, cfg, None, CPI)
    return record_release_plan.fn(store, release_id, ReleaseSeed.from_hex("ab" * 32), "0" * 64,
                                  "0" * 64, cfg, planning_frames(counts), False, None)


def test_a_graduate_counted_twice_is_capped_over_both_atoms(tmp_path):
    """Two releases measure disjoint graduation years (every atom at most 7.5 of a cap of
    10). At k = 1 both pass. At k = 2 a graduate may hold a degree in each half: over both
    releases they pay up to 15 (the two most charged atoms, which here is also every
    measurement once), over the cap, so the second release is refused before anything is
    recorded; at a cap of 15 it passes."""
    from fractions import Fraction

    from pseo_das.tasks.privacy.store import LifetimeBudgetExceeded, PrivacyStore, init_store
    graduates, jobs = agency_data(persons=600)
    halves = {}
    for name, rows in (("early", graduates["grad_year"] <= 2008),
                       ("late", graduates["grad_year"] > 2008)):
        folder = tmp_path / name
        folder.mkdir()
        graduates[rows].to_parquet(folder / "graduates.parquet", index=False)
        jobs[jobs["person_id"].isin(graduates.loc[rows, "person_id"])].to_parquet(
            folder / "jobs.parquet", index=False)
        halves[name] = folder
    outcomes = {}
    for k, cap in ((1, "10"), (2, "10"), (2, "15")):
        store = init_store(tmp_path / f"store-{k}-{cap}", lifetime_cap=cap)
        first = _plan(store, halves["early"], k, "early")
        assert max(first.populations["after"]) == Fraction(15, 2)
        try:
            second = _plan(store, halves["late"], k, "late")
            outcomes[k, cap] = max(second.populations["after"])
        except LifetimeBudgetExceeded as exc:
            outcomes[k, cap] = str(exc)
            with PrivacyStore.open(store) as opened:   # nothing recorded by the refusal
                assert len(opened.table("SELECT * FROM releases")) == 1
    assert outcomes[1, "10"] == outcomes[2, "15"] == Fraction(15, 2)
    refusal = outcomes[2, "10"]
    assert "a graduate counted with up to 2 degree records" in refusal
    assert "could pay epsilon 15 over the store's releases" in refusal
    assert "every measurement of the store once: epsilon 15" in refusal


def test_the_person_bound_counts_a_measurement_once():
    """Hand-made spends: M1 (epsilon 1) charged to atoms a and b, M2 (2) to a, M3 (3) to
    c, M4 (1) to a and c. Atoms: a 4, b 1, c 4. One record: 4 (the largest atom); two: the
    two largest atoms sum to 8, but every measurement once is 7, the smaller bound."""
    from fractions import Fraction

    from pseo_das.tasks.privacy.lifetime_budget import person_worst_case
    a, b, c = ("I1", "05", 2001), ("I1", "05", 2002), ("I2", "07", 2001)
    rows = [("M1", a, 1), ("M1", b, 1), ("M2", a, 2), ("M3", c, 3), ("M4", a, 1), ("M4", c, 1)]
    spends = pd.DataFrame([{"institution": atom[0], "degree_level": atom[1],
                            "grad_cohort": atom[2], "cohort_years": 1, "measurement_id": m,
                            "epsilon": Fraction(e), "delta": Fraction(0)}
                           for m, atom, e in rows])
    assert person_worst_case(spends, 1).epsilon == 4
    two = person_worst_case(spends, 2)
    assert (two.epsilon, two.every_measurement) == (7, 7)
    assert sorted(two.top_atoms["epsilon"]) == [4, 4]
    apart = spends[spends["measurement_id"].isin(["M2", "M3"])]
    apart = pd.concat([apart, apart.iloc[[0]].assign(measurement_id="M5", grad_cohort=2002,
                                                      epsilon=Fraction(1))])
    assert person_worst_case(apart, 2).epsilon == 5   # atoms 2, 3, 1: 3 + 2 < all once 6
