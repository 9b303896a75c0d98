"""Input validation: every rule stops the run with file, column, count and examples."""
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from pseo_das.cli import main
from pseo_das.tasks.inputs.ingest import InputValidationError, read_inputs

FIRST, LAST = 2001, 2022


def valid_graduates() -> pd.DataFrame:
    return pd.DataFrame({
        "person_id": np.arange(1, 7, dtype=np.int64),
        "institution": ["00366900", "00366900", "00366900", "00104800", "00104800", "00104800"],
        "inst_state": ["26", "26", "26", "48", "48", "48"],
        "degree_level": ["05", "05", "07", "03", "05", "17"],
        "cipcode": ["11.0701", "52.0201", "11.0701", "51.3801", "26.0101", "40.0801"],
        "grad_year": [2001, 2005, 2010, 2015, 2018, 2020],
    })


def valid_outcomes() -> pd.DataFrame:
    return pd.DataFrame({
        "person_id": np.array([1, 1, 1, 2, 3, 4, 5], dtype=np.int64),
        "years_after": np.array([1, 5, 10, 1, 1, 1, 1], dtype=np.int64),
        "earnings": [30000.0, 55000.0, np.nan, 8000.0, 72000.0, 41000.0, 250.0],
        "emp_state": ["26", "26", None, "48", "26", "48", "48"],
        "industry": ["54", "52", None, "44-45", "62", "62", "72"],
    })


def write(tmp_path: Path, graduates: pd.DataFrame, outcomes: pd.DataFrame, fmt="parquet") -> Path:
    for name, frame in (("graduates", graduates), ("outcomes", outcomes)):
        if fmt == "csv":
            frame.to_csv(tmp_path / f"{name}.csv", index=False)
        else:
            frame.to_parquet(tmp_path / f"{name}.parquet")
    return tmp_path


def write_releasable(folder: Path) -> Path:
    """The valid tiny data set in a new `folder`, with the IPEDS files of its own graduates
    (synth_ipeds.py), so that a release of it withholds no cell; returns `folder`."""
    from pseo_das.synth_ipeds import write_synthetic_ipeds
    folder.mkdir()
    write_synthetic_ipeds(write(folder, valid_graduates(), valid_outcomes()))
    return folder


@pytest.mark.parametrize("dtype", ["int64", "Int64", "float32"])
def test_whole_dollar_and_float32_earnings_are_valid(tmp_path, dtype):
    outcomes = valid_outcomes()
    outcomes["earnings"] = outcomes["earnings"].fillna(0 if dtype == "int64" else np.nan)
    outcomes["earnings"] = outcomes["earnings"].astype(dtype)
    expected = outcomes["earnings"].astype("float64")
    inputs = read_inputs(write(tmp_path, valid_graduates(), outcomes), FIRST, LAST)
    assert inputs.outcomes["earnings"].dtype == np.float64
    pd.testing.assert_series_equal(inputs.outcomes["earnings"], expected, check_names=False)


def test_whole_dollar_earnings_with_empty_cells_in_a_csv_are_valid(tmp_path):
    """Issue 32: integer earnings with empty cells (no job) were refused with "cannot
    convert NA to integer"."""
    outcomes = valid_outcomes().assign(earnings=lambda o: o["earnings"].astype("Int64"))
    write(tmp_path, valid_graduates(), outcomes, "csv")
    assert "1,10,,," in (tmp_path / "outcomes.csv").read_text()      # an empty cell, no job
    assert "1,1,30000,26" in (tmp_path / "outcomes.csv").read_text()  # whole dollars
    inputs = read_inputs(tmp_path, FIRST, LAST)
    pd.testing.assert_series_equal(inputs.outcomes["earnings"], valid_outcomes()["earnings"],
                                   check_names=False)


def test_earnings_that_are_not_numbers_in_a_csv_are_refused_by_row(tmp_path):
    outcomes = valid_outcomes().astype({"earnings": object})
    outcomes.loc[[1, 4], "earnings"] = ["55k", "true"]
    write(tmp_path, valid_graduates(), outcomes, "csv")
    with pytest.raises(InputValidationError, match=r"outcomes.csv: input rejected.*\n  column "
                       r"earnings: 2 value\(s\) that are not numbers .*row 1: '55k', row 4: 'true'"):
        read_inputs(tmp_path, FIRST, LAST)


def test_earnings_as_booleans_are_refused(tmp_path):
    outcomes = valid_outcomes().assign(earnings=[True, False, True, True, False, True, True])
    with pytest.raises(InputValidationError, match="column earnings has type bool"):
        read_inputs(write(tmp_path, valid_graduates(), outcomes), FIRST, LAST)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_valid_inputs_pass(tmp_path, fmt):
    inputs = read_inputs(write(tmp_path, valid_graduates(), valid_outcomes(), fmt), FIRST, LAST)
    assert len(inputs.graduates) == 6 and len(inputs.outcomes) == 7
    assert inputs.graduates["institution"].iloc[0] == "00366900"  # leading zeros kept from CSV
    linked = inputs.graduates["person_id"].to_numpy()[inputs.graduate_row]
    np.testing.assert_array_equal(linked, inputs.outcomes["person_id"].to_numpy())
    assert set(inputs.fingerprints) == {f"graduates.{fmt}", f"outcomes.{fmt}"}


def _set(frame, column, rows, value):
    frame = frame.copy()
    frame[column] = frame[column].astype(object)
    frame.loc[rows, column] = value
    return frame


GRADUATE_VIOLATIONS = [
    ("bad OPEID", lambda g: _set(g, "institution", [1, 2], "3669"), "institution", "str_matches", 2),
    ("bad CIP", lambda g: _set(g, "cipcode", [0], "110701"), "cipcode", "str_matches", 1),
    ("unknown degree", lambda g: _set(g, "degree_level", [3], "99"), "degree_level", "isin", 1),
    ("grad_year out of range", lambda g: g.assign(grad_year=[1999, 2005, 2010, 2015, 2018, 2030]),
     "grad_year", "in_range", 2),
    ("duplicate graduate", lambda g: g.assign(person_id=[1, 1, 3, 4, 5, 6]), "person_id", "unique", 2),
    ("bad state", lambda g: _set(g, "inst_state", [0], "CA"), "inst_state", "str_matches", 1),
    ("institution in two states", lambda g: _set(g, "inst_state", [0], "27"),
     "institution, inst_state", "one_inst_state_per_institution", 3),
    # codes are ASCII digits, matched whole, nothing stripped (issue 31)
    ("OPEID in Arabic-Indic digits", lambda g: _set(g, "institution", [3, 4, 5], "\u0660\u0660\u0661\u0660\u0664\u0668\u0660\u0660"),
     "institution", "str_matches", 3),
    ("OPEID in full-width digits", lambda g: _set(g, "institution", [3, 4, 5], "\uff10\uff10\uff11\uff10\uff14\uff18\uff10\uff10"),
     "institution", "str_matches", 3),
    ("OPEID with a trailing space", lambda g: _set(g, "institution", [0], "00366900 "),
     "institution", "str_matches", 1),
    ("OPEID with a trailing newline", lambda g: _set(g, "institution", [0], "00366900\n"),
     "institution", "str_matches", 1),
    ("CIP in full-width digits", lambda g: _set(g, "cipcode", [0], "\uff11\uff11.0701"), "cipcode", "str_matches", 1),
    ("state with a leading space", lambda g: _set(g, "inst_state", [0, 1, 2], " 26"), "inst_state", "str_matches", 3),
    ("state in Arabic-Indic digits", lambda g: _set(g, "inst_state", [0, 1, 2], "\u0662\u0666"),
     "inst_state", "str_matches", 3),
    ("degree level with a space", lambda g: _set(g, "degree_level", [0], "05 "), "degree_level", "isin", 1),
]


@pytest.mark.parametrize("label,mutate,column,check,n_bad", GRADUATE_VIOLATIONS,
                         ids=[v[0] for v in GRADUATE_VIOLATIONS])
def test_graduate_violations_are_named(tmp_path, label, mutate, column, check, n_bad):
    write(tmp_path, mutate(valid_graduates()), valid_outcomes())
    with pytest.raises(InputValidationError) as err:
        read_inputs(tmp_path, FIRST, LAST)
    message = str(err.value)
    assert "graduates.parquet" in message
    line = next(l for l in message.splitlines() if f"column {column}" in l)
    assert check in line and f"{n_bad} bad row(s)" in line and "row " in line


OUTCOME_VIOLATIONS = [
    ("years_after not 1/5/10", lambda o: o.assign(years_after=[1, 5, 3, 1, 1, 1, 1]), "years_after", "isin", 1),
    ("negative earnings", lambda o: _set(o, "earnings", [0], -5.0), "earnings", "greater_than_or_equal_to", 1),
    ("infinite earnings", lambda o: _set(o, "earnings", [1, 2], np.inf), "earnings", "finite", 2),
    ("duplicate person-year", lambda o: o.assign(years_after=[1, 5, 5, 1, 1, 1, 1]),
     "person_id, years_after", "unique_person_id_years_after", 2),
    ("unknown industry", lambda o: _set(o, "industry", [0], "99"), "industry", "isin", 1),
    ("industry with a space", lambda o: _set(o, "industry", [0], " 54"), "industry", "isin", 1),
    ("state in full-width digits", lambda o: _set(o, "emp_state", [0], "\uff12\uff16"), "emp_state", "str_matches", 1),
]


@pytest.mark.parametrize("label,mutate,column,check,n_bad", OUTCOME_VIOLATIONS,
                         ids=[v[0] for v in OUTCOME_VIOLATIONS])
def test_outcome_violations_are_named(tmp_path, label, mutate, column, check, n_bad):
    write(tmp_path, valid_graduates(), mutate(valid_outcomes()))
    with pytest.raises(InputValidationError) as err:
        read_inputs(tmp_path, FIRST, LAST)
    message = str(err.value)
    assert "outcomes.parquet" in message
    line = next(l for l in message.splitlines() if f"column {column}" in l)
    assert check in line and f"{n_bad} bad row(s)" in line


def test_outcome_for_unknown_person(tmp_path):
    write(tmp_path, valid_graduates(), valid_outcomes().assign(person_id=[1, 1, 1, 2, 3, 4, 77]))
    with pytest.raises(InputValidationError, match=r"outcomes.parquet.*\n.*column person_id: 1 outcome row.*row 6: 77"):
        read_inputs(tmp_path, FIRST, LAST)


def test_missing_column_and_wrong_type(tmp_path):
    write(tmp_path, valid_graduates().drop(columns="cipcode"), valid_outcomes())
    with pytest.raises(InputValidationError, match="graduates.parquet: missing column.*cipcode"):
        read_inputs(tmp_path, FIRST, LAST)
    write(tmp_path, valid_graduates().assign(institution=366900), valid_outcomes())
    with pytest.raises(InputValidationError, match="column institution has type int64"):
        read_inputs(tmp_path, FIRST, LAST)
    write(tmp_path, valid_graduates(), valid_outcomes().assign(earnings="lots"))
    with pytest.raises(InputValidationError, match="outcomes.parquet: column earnings has type "
                       "(object|str); expected numbers"):
        read_inputs(tmp_path, FIRST, LAST)


def test_missing_file(tmp_path):
    valid_graduates().to_parquet(tmp_path / "graduates.parquet")
    with pytest.raises(InputValidationError, match="no outcomes.parquet, outcomes.csv or outcomes/"):
        read_inputs(tmp_path, FIRST, LAST)


@pytest.mark.slow
def test_release_stops_before_noise_and_publishes_nothing(tmp_path, tracking_uri, capsys):
    (tmp_path / "data").mkdir()
    data = write(tmp_path / "data", valid_graduates(), _set(valid_outcomes(), "earnings", [0], -1.0))
    out = tmp_path / "release"
    with pytest.raises(SystemExit) as stop:
        main(["release", "--data", str(data), "--out", str(out), "--seed", "c3" * 32,
              "--release-id", "bad-input", "--tracking-uri", tracking_uri,
              "--store", str(tmp_path / "store"), "--init-store"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "nothing was published" in err and "outcomes.parquet" in err and "column earnings" in err
    assert not out.exists() and list(tmp_path.glob(".release*")) == []
    # The audit store shows the failed attempt, with no epsilon spent.
    run = mlflow.MlflowClient(tracking_uri).search_runs(
        [mlflow.MlflowClient(tracking_uri).get_experiment_by_name("pseo-das quarterly release").experiment_id])[0]
    assert run.info.status == "FAILED" and "InputValidationError" in run.data.tags["failure"]
    assert not any(k.startswith("epsilon") for k in run.data.metrics)
    from pseo_das.tasks.privacy.store import PrivacyStore
    with PrivacyStore.open(tmp_path / "store") as store:
        assert store.attempts("bad-input") == [] and store.spends().empty


def test_parquet_read_in_tables_of_fixed_rows_whatever_the_row_groups(tmp_path):
    """Row groups of any size (smaller and larger than a chunk) give tables of exactly
    `rows` rows, the last one shorter, in file order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pseo_das.tasks.inputs.ingest import _tables

    path = tmp_path / "groups.parquet"
    values = list(range(23))
    with pq.ParquetWriter(path, pa.schema([("person_id", pa.int64())])) as writer:
        start = 0
        for size in (3, 7, 1, 10, 2):
            writer.write_table(pa.table({"person_id": values[start:start + size]}))
            start += size
    parquet = pq.ParquetFile(path)
    assert [parquet.metadata.row_group(i).num_rows for i in range(5)] == [3, 7, 1, 10, 2]
    for rows in (1, 4, 6, 23, 50):
        tables = list(_tables(parquet, ["person_id"], rows))
        assert [t.num_rows for t in tables[:-1]] == [rows] * (len(tables) - 1)
        assert 0 < tables[-1].num_rows <= rows
        assert sum((t["person_id"].to_pylist() for t in tables), []) == values


def test_one_state_per_institution_agrees_with_a_groupby():
    """The check counts states per institution on category codes; a pandas groupby is the
    oracle (missing states not counted, a missing institution fails)."""
    from pseo_das.schemas.inputs import _one_state_per_institution
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(0, 30))
        df = pd.DataFrame({"institution": pd.Categorical(rng.choice(["a", "b", "c", None], n)),
                           "inst_state": pd.Categorical(rng.choice(["01", "02", None], n))})
        expected = df.groupby("institution", observed=True)["inst_state"].transform("nunique") == 1
        np.testing.assert_array_equal(_one_state_per_institution(df).to_numpy(),
                                      expected.to_numpy())
