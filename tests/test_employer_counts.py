"""The optional employer_id column, x_v (the largest number of a flow's graduates at one
establishment) counted in the streaming step against a brute-force count, the
configuration of flows.mechanism, and the synthetic establishments."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pseo_das.config import ConfigError, load_config
from pseo_das.synth import write_synthetic
from pseo_das.tasks.codes.destinations import NONEMPLOYED, employed_destination
from pseo_das.tasks.inputs.cells import cell_frame, cohort_attributes
from pseo_das.tasks.inputs.constant_dollars import in_constant_dollars
from pseo_das.tasks.inputs.cpi import find_cpi, read_cpi
from pseo_das.tasks.inputs.ingest import InputValidationError, read_inputs
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir
from pseo_das.tasks.inputs.true_counts import read_counts
from pseo_das.tasks.privacy.statement import Mechanism
from pseo_das.tasks.measurements.products import flows_questions, planned_questions

CPI = read_cpi(find_cpi(default_reference_dir()))


def config(tmp_path: Path, text: str):
    path = tmp_path / "release.toml"
    path.write_text(text)
    return load_config(path)


@pytest.fixture(scope="module")
def employers_dir(tmp_path_factory) -> Path:
    """The tests' data (30,000 graduates, seed 7) with synthetic employers, a fifth of the
    jobs' employer_id blanked (unknown establishment)."""
    out = tmp_path_factory.mktemp("employers")
    write_synthetic(out, graduates=30_000, seed=7, progress=lambda _: None, employers=True)
    outcomes = pd.read_parquet(out / "outcomes.parquet")
    blank = np.random.default_rng(1).random(len(outcomes)) < 0.2
    outcomes["employer_id"] = outcomes["employer_id"].astype(object).where(~blank, None)
    outcomes.to_parquet(out / "outcomes.parquet", index=False)
    return out


@pytest.fixture(scope="module")
def gamma_config(tmp_path_factory):
    return config(tmp_path_factory.mktemp("cfg"), '[flows]\nmechanism = "smooth-gamma"\n')


def brute_force_largest(data: Path, cfg, level: str, years_after: int) -> np.ndarray:
    """x_v by pandas over the whole files: per (cell, employed destination), the largest
    number of graduates with one employer_id, the missing ids of a flow counted as one
    employer; the non-employed column: per cell, the largest number at one employer over
    every job (under the earnings floor too), the missing ids of the cell as one."""
    inputs = in_constant_dollars.fn(read_inputs(data, cfg.cells.first_cohort_year,
                                                cfg.cells.last_earnings_year),
                                    CPI, cfg.earnings.dollar_year)
    employer = pq.read_table(data / "outcomes.parquet", columns=["employer_id"]).to_pandas()
    frame = cell_frame(cohort_attributes(inputs.graduates, cfg.cells, cfg.cip.switch_year), level)
    rows = inputs.outcomes["years_after"].to_numpy() == years_after
    destination = employed_destination(inputs.outcomes[rows], cfg.earnings.sample_floor)
    records = pd.DataFrame({
        "cell": frame.graduate_cell[inputs.graduate_row[rows]], "destination": destination,
        "employer": employer["employer_id"].to_numpy(dtype=object)[rows],
        "job": inputs.outcomes["earnings"].notna().to_numpy()[rows]})
    jobs = records[records["job"]].fillna({"employer": "<missing>"})
    assert ((jobs["destination"] == NONEMPLOYED) & (jobs["employer"] != "<missing>")).any()
    records = jobs[jobs["destination"] != NONEMPLOYED]
    at_one = records.groupby(["cell", "destination", "employer"]).size()
    best = at_one.groupby(level=["cell", "destination"]).max()
    largest = np.zeros((len(frame.cells), NONEMPLOYED + 1), np.int64)
    largest[best.index.get_level_values(0), best.index.get_level_values(1)] = best.to_numpy()
    in_cell = jobs.groupby(["cell", "employer"]).size().groupby(level="cell").max()
    largest[in_cell.index.to_numpy(), NONEMPLOYED] = in_cell.to_numpy()
    ties = (at_one.groupby(level=["cell", "destination"]).transform("max") == at_one) \
        .groupby(level=["cell", "destination"]).sum()
    assert (ties > 1).any()   # the data have ties for the largest employer
    return largest[frame.measured_cells(years_after, cfg.cells.last_earnings_year, None)]


def brute_force_table_largest(data: Path, cfg, years_after: int) -> np.ndarray:
    """x_v of the employer-side table by pandas: per employed destination, the largest
    number of graduates (every cell) with one employer_id, the missing ids as one."""
    inputs = in_constant_dollars.fn(read_inputs(data, cfg.cells.first_cohort_year,
                                                cfg.cells.last_earnings_year),
                                    CPI, cfg.earnings.dollar_year)
    employer = pq.read_table(data / "outcomes.parquet", columns=["employer_id"]).to_pandas()
    rows = inputs.outcomes["years_after"].to_numpy() == years_after
    records = pd.DataFrame({
        "destination": employed_destination(inputs.outcomes[rows], cfg.earnings.sample_floor),
        "employer": employer["employer_id"].to_numpy(dtype=object)[rows]})
    records = records[records["destination"] != NONEMPLOYED].fillna({"employer": "<missing>"})
    best = records.groupby(["destination", "employer"]).size().groupby(level=0).max()
    largest = np.zeros(NONEMPLOYED, np.int64)
    largest[best.index.to_numpy()] = best.to_numpy()
    return largest


@pytest.mark.parametrize("chunk_rows", [1_000_000, 1_000])
def test_largest_number_at_one_employer_equals_a_brute_force_count(employers_dir, gamma_config,
                                                                   chunk_rows):
    """1,000-row chunks cut through cells and employers: the counts still add up."""
    streamed = read_counts(employers_dir, gamma_config, None, CPI, chunk_rows)
    for k in gamma_config.cells.years_after:
        largest = streamed.largest_at_one_employer("2", k, gamma_config.cells.last_earnings_year)
        truth = brute_force_largest(employers_dir, gamma_config, "2", k)
        np.testing.assert_array_equal(largest, truth, err_msg=f"y{k}")
        _, flows = streamed.flows("2", k, gamma_config.cells.last_earnings_year)
        assert (largest[:, :NONEMPLOYED] <= flows[:, :NONEMPLOYED]).all()
        table, table_largest = streamed.employer_side_table("2", k,
                                                            gamma_config.cells.last_earnings_year)
        np.testing.assert_array_equal(table, flows[:, :NONEMPLOYED].sum(axis=0))
        np.testing.assert_array_equal(table_largest,
                                      brute_force_table_largest(employers_dir, gamma_config, k))
        assert ((largest[:, :NONEMPLOYED] > 0) == (flows[:, :NONEMPLOYED] > 0)).all()


def test_a_mechanism_for_employers_needs_the_employer_id_column(synthetic_dir, gamma_config):
    with pytest.raises(InputValidationError) as err:
        read_counts(synthetic_dir, gamma_config, None, CPI)
    message = str(err.value)
    assert "outcomes.parquet" in message and "employer_id" in message
    assert 'flows.mechanism = "smooth-gamma"' in message and "--employers" in message
    # the geometric mechanism neither needs nor reads it
    counts = read_counts(synthetic_dir, load_config(), None, CPI)
    assert not counts.levels["2"].largest_at_one_employer


def test_a_bad_employer_id_is_named_by_column_and_row(employers_dir, gamma_config, tmp_path):
    for name in ("graduates.parquet", "outcomes.parquet"):
        (tmp_path / name).write_bytes((employers_dir / name).read_bytes())
    outcomes = pd.read_parquet(tmp_path / "outcomes.parquet")
    job = int(np.flatnonzero(outcomes["employer_id"].notna().to_numpy())[0])
    outcomes.loc[job, "employer_id"] = "no spaces allowed"
    outcomes.to_parquet(tmp_path / "outcomes.parquet", index=False)
    with pytest.raises(InputValidationError) as err:
        read_counts(tmp_path, gamma_config, None, CPI)
    assert "column employer_id: check str_matches" in str(err.value)
    assert f"row {job}: 'no spaces allowed'" in str(err.value)


@pytest.mark.parametrize("text, reason", [
    ('mechanism = "smooth-gamma"\nepsilon_per_tabulation = 0.3',
     "the smallest epsilon for alpha 0.1 is 4 ln(1 + alpha) = 0.3812"),
    ('mechanism = "log-laplace"\nepsilon_per_tabulation = 0.15', "infinite mean"),
    ('mechanism = "smooth-laplace"', "delta = 0 must lie strictly between 0 and 1"),
    ('mechanism = "smooth-laplace"\nemployer_delta = 1e-6\nemployer_alpha = 0.2',
     "2 ln(2/delta) ln(1 + alpha) = 5.29"),
    ('employer_delta = 1e-6', "for the employer-protecting flows.mechanism values only"),
    ('mechanism = "laplace"', "flows.mechanism = 'laplace'"),
    ('mechanism = "smooth-gamma"\nemployer_alpha = 0', "flows.employer_alpha = 0"),
])
def test_infeasible_employer_parameters_are_refused_at_configuration(tmp_path, text, reason):
    with pytest.raises(ConfigError) as err:
        config(tmp_path, f"[flows]\n{text}\n")
    assert reason in str(err.value)


def test_the_geometric_questions_are_unchanged_and_other_mechanisms_ask_another(tmp_path):
    geometric = {q.tabulation_id: q for q in planned_questions(load_config(), {})}
    gamma = {q.tabulation_id: q for q in planned_questions(
        config(tmp_path, '[flows]\nmechanism = "smooth-gamma"\nemployer_alpha = 0.05\n'), {})}
    flows = "flows.I.cip2.y1"
    assert geometric[flows].as_dict()["mechanism"] == Mechanism.GEOMETRIC
    assert "alpha" not in geometric[flows].as_dict() and geometric[flows].protection() is None
    assert gamma[flows].sha256 != geometric[flows].sha256   # never reused across mechanisms
    assert gamma[flows].protection().alpha == 0.05
    assert "smooth gamma" in gamma[flows].as_dict()["mechanism"]
    for tab in ("flows_total.I.cip2.y1", "earnings.I.cip4.y1"):   # the others unchanged
        assert gamma[tab].sha256 == geometric[tab].sha256


def test_synthetic_employers_change_no_other_value(employers_dir, synthetic_dir, tmp_path):
    write_synthetic(tmp_path, graduates=30_000, seed=7, progress=lambda _: None, employers=True)
    assert (tmp_path / "graduates.parquet").read_bytes() == \
        (synthetic_dir / "graduates.parquet").read_bytes()
    with_employers = pd.read_parquet(tmp_path / "outcomes.parquet")
    plain = pd.read_parquet(synthetic_dir / "outcomes.parquet")
    pd.testing.assert_frame_equal(with_employers.drop(columns="employer_id"), plain)
    job = plain["industry"].notna().to_numpy()
    assert with_employers["employer_id"].notna().to_numpy().tolist() == job.tolist()
    # establishment ids carry their state and sector; a few employers dominate
    ids = with_employers.loc[job, "employer_id"].astype(str)
    assert (ids.str[1:3] == with_employers.loc[job, "emp_state"].astype(str)).all()
    share = with_employers[job].groupby(["emp_state", "industry"], observed=True)["employer_id"] \
        .agg(lambda s: s.value_counts().iloc[0] / len(s))
    sizes = with_employers[job].groupby(["emp_state", "industry"], observed=True).size()
    assert (share[sizes >= 50] > 0.3).mean() > 0.05


@pytest.fixture(scope="module")
def employer_counts(employers_dir, gamma_config):
    return read_counts(employers_dir, gamma_config, None, CPI)   # x_v counted


@pytest.mark.parametrize("text", [
    '[flows]\nmechanism = "log-laplace"\nemployer_alpha = 0.1\n',
    '[flows]\nmechanism = "log-laplace"\nemployer_alpha = 0.1\nlog_laplace_unbiased = true\n',
    '[flows]\nmechanism = "smooth-gamma"\nemployer_alpha = 0.1\n',
    '[flows]\nmechanism = "smooth-laplace"\nemployer_alpha = 0.05\nemployer_delta = 1e-3\n',
])
def test_the_flows_task_measures_with_each_mechanism(employer_counts, tmp_path, text):
    """measure_flows with each mechanism on the real counts: the flows get it (weak notion,
    the ledger's columns), the origin counts keep the geometric mechanism, and the mean
    absolute error over all flows matches the closed form computed from each flow's x_v."""
    from pseo_das.tasks.employment_flows.noisy_flows import PRODUCT, measure_flows
    from pseo_das.tasks.privacy.establishment import (FlowsMechanism, expected_absolute_error,
                                                      log_laplace_lambda, log_laplace_mean,
                                                      smooth_sensitivity)
    from pseo_das.tasks.privacy.question import PendingMeasurement
    from pseo_das.tasks.privacy.release_seed import ReleaseSeed
    cfg = config(tmp_path, text)
    counts = employer_counts
    questions = [q for q in flows_questions(cfg) if q.years_after == 1]
    seed = ReleaseSeed.from_hex("ab" * 32)
    pending = {1: [PendingMeasurement(f"m.{q.tabulation_id}", q, seed, None)
                   for q in questions if q.product.startswith(PRODUCT)]}
    measured = {m.entry.product: m for m in measure_flows.fn(pending, counts, cfg)}
    flows, total = measured[PRODUCT], measured[PRODUCT + " origin counts"]
    assert total.entry.mechanism == Mechanism.GEOMETRIC and total.entry.employer_notion == ""
    protection = cfg.flows.employer_protection()
    entry = flows.entry
    assert entry.employer_notion == "weak" and entry.alpha == f"{protection.alpha:g}"
    assert float(entry.employer_epsilon) == pytest.approx(entry.n_cells * 1.2)
    _, truth = counts.flows("2", 1, cfg.cells.last_earnings_year)
    largest = counts.largest_at_one_employer("2", 1, cfg.cells.last_earnings_year)
    error = flows.values - truth
    n = error.size
    if protection.mechanism is FlowsMechanism.LOG_LAPLACE:
        if protection.unbiased:   # clamped at 0: never negative
            assert flows.values.min() >= 0
        else:   # E[n~] per flow by lemma 8.2; Var from E[e^(2 eta)] = 1/(1 - 4 lambda^2)
            lam = log_laplace_lambda(protection.alpha, protection.epsilon)
            mean = np.vectorize(log_laplace_mean)(truth, protection.alpha, protection.epsilon)
            var = (truth + 1 / protection.alpha) ** 2 * (1 / (1 - 4 * lam ** 2)
                                                          - 1 / (1 - lam ** 2) ** 2) + 1 / 12
            assert abs((flows.values - mean).mean()) < 5 * np.sqrt(var.sum()) / n
    else:
        s_star = smooth_sensitivity(protection.alpha, largest)
        expected = expected_absolute_error(protection.mechanism, 1.0, protection.epsilon) * s_star
        # rounding to whole graduates moves |error| by at most 1/2 per flow
        assert abs(np.abs(error).mean() - expected.mean()) < 0.5 + 0.05 * expected.mean()
        assert (s_star > 1).any()   # some flows have a large employer


def test_the_employer_study_reports_errors_that_match_the_closed_forms(employers_dir, tmp_path):
    """The study's mean absolute errors: geometric 2a/(1 - a^2) in every stratum; Smooth
    Gamma on the empty flows (x_v = 0, S* = 1) 11.31/epsilon; the infeasible Smooth Laplace
    setting listed with its reason, not measured."""
    from pseo_das.tasks.study.employer_flows_study import employer_flows_study
    from pseo_das.tasks.study.flows_study import DEFAULT_FLOWS_STUDY_SEED
    result = employer_flows_study(employers_dir, tmp_path, ["geometric", "smooth-gamma",
                                                            "smooth-laplace"],
                                  DEFAULT_FLOWS_STUDY_SEED, 1, [0.1], [1.0])
    assert result["settings"] == 3 and result["infeasible"] == 1
    summary = pd.read_csv(tmp_path / "employer_flows_accuracy.csv")
    a = np.exp(-1.0)
    geometric = summary[summary["mechanism"] == "geometric"]
    assert set(geometric["stratum"]) >= {"0", "1-4", "50+", "one employer (100%)"}
    size = geometric[geometric["stratum_kind"] == "size"]
    # the empty flows: millions of draws, so tight; E|X| = 2a/(1 - a^2) = 0.851
    empty = size[size["stratum"] == "0"].iloc[0]
    assert empty["mean_abs_error"] == pytest.approx(2 * a / (1 - a * a), rel=0.01)
    assert abs(empty["bias"]) < 0.01
    gamma_empty = summary[(summary["mechanism"] == "smooth-gamma") & (summary["stratum"] == "0")]
    # rounding to whole graduates changes |error| by under 1/2 per flow; here about 0.02
    assert gamma_empty["mean_abs_error"].iloc[0] == pytest.approx(16 / np.sqrt(2), rel=0.02)
    infeasible = pd.read_csv(tmp_path / "employer_flows_infeasible.csv")
    assert list(infeasible["mechanism"]) == ["smooth-laplace"]
    assert "2 ln(2/delta) ln(1 + alpha) = 1.449" in infeasible["reason"].iloc[0]
    report = (tmp_path / "employer_flows_accuracy.md").read_text()
    assert "By employer concentration" in report and "Employer-side table" in report
    table = summary[(summary["stratum_kind"] == "employer table")
                    & (summary["mechanism"] == "geometric")].iloc[0]
    assert table["flows"] == 3 * 1020    # state x sector x years after
    # 3,060 cells: E|X| = 0.851, sd of |X| 1.057 (Var X = 2a/(1 - a)^2): 5 standard errors
    assert abs(table["mean_abs_error"] - 2 * a / (1 - a * a)) < 5 * 1.057 / np.sqrt(3060)


def test_x_v_is_the_same_from_csv_unsorted_and_partitioned_inputs(employers_dir, gamma_config,
                                                                  employer_counts, tmp_path):
    """The CSV reader, the disk-backed pass for unsorted inputs and part files give the
    same x_v as the sorted Parquet file."""
    graduates = pd.read_parquet(employers_dir / "graduates.parquet")
    outcomes = pd.read_parquet(employers_dir / "outcomes.parquet")
    variants = {}
    csv = tmp_path / "csv"
    csv.mkdir()
    graduates.to_csv(csv / "graduates.csv", index=False)
    outcomes.to_csv(csv / "outcomes.csv", index=False)
    variants["csv"] = csv
    shuffled = tmp_path / "unsorted"
    shuffled.mkdir()
    graduates.to_parquet(shuffled / "graduates.parquet", index=False)
    outcomes.sample(frac=1.0, random_state=3).to_parquet(shuffled / "outcomes.parquet",
                                                         index=False)
    variants["unsorted"] = shuffled
    parts = tmp_path / "parts"
    (parts / "outcomes").mkdir(parents=True)
    graduates.to_parquet(parts / "graduates.parquet", index=False)
    for k, rows in enumerate(np.array_split(np.arange(len(outcomes)), 3)):
        outcomes.iloc[rows].to_parquet(parts / "outcomes" / f"part-{k}.parquet", index=False)
    variants["parts"] = parts
    last = gamma_config.cells.last_earnings_year
    for name, data in variants.items():
        counts = read_counts(data, gamma_config, None, CPI, 5_000)
        for k in gamma_config.cells.years_after:
            np.testing.assert_array_equal(counts.largest_at_one_employer("2", k, last),
                                          employer_counts.largest_at_one_employer("2", k, last),
                                          err_msg=f"{name} y{k}")
    # a column in some part files only is refused, naming the folder
    outcomes.drop(columns="employer_id").iloc[:10].to_parquet(parts / "outcomes" / "part-9.parquet",
                                                              index=False)
    with pytest.raises(InputValidationError, match="column employer_id is in some part files only"):
        read_counts(parts, gamma_config, None, CPI)
