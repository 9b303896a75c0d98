"""Tests of the synthetic confidential data set (pseo_das.synth)."""
from __future__ import annotations

import filecmp
import re
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pseo_das.schemas.institutions import institution_labels
from pseo_das.synth import INST_STATE_CODES, KIND_POOL, NAME_POOLS, make_universe, write_synthetic
from pseo_das.schemas.codes import (CIP2010_PATTERN, DEGREE_LEVELS, NAICS_SECTORS, OPEID_PATTERN,
                           STATE_FIPS_PATTERN)

GRADUATES = 20_000
LAST_DATA_YEAR = 2022
CODE_COLUMNS = {"graduates": ("institution", "inst_state", "degree_level", "cipcode"),
                "outcomes": ("emp_state", "industry")}


def _quiet(_message: str) -> None:
    pass


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    counts = write_synthetic(out, graduates=GRADUATES, progress=_quiet)
    assert counts["graduates"] == GRADUATES
    return out


@pytest.fixture(scope="module")
def graduates(data_dir) -> pd.DataFrame:
    return pd.read_parquet(data_dir / "graduates.parquet")


@pytest.fixture(scope="module")
def outcomes(data_dir) -> pd.DataFrame:
    return pd.read_parquet(data_dir / "outcomes.parquet")


@pytest.fixture(scope="module")
def linked(graduates, outcomes) -> pd.DataFrame:
    return outcomes.merge(graduates, on="person_id", how="left", validate="many_to_one")


def _text(series: pd.Series) -> pd.Series:
    return series.astype(object).where(series.notna(), None)


# --- files and types ------------------------------------------------------------

def test_writes_both_files_and_reports_their_row_counts(tmp_path):
    out = tmp_path / "nested" / "dir"  # created if missing
    messages = []
    counts = write_synthetic(out, graduates=3_000, progress=messages.append)
    assert sorted(p.name for p in out.iterdir()) == ["graduates.parquet", "ipeds",
                                                     "outcomes.parquet"]   # synth_ipeds.py
    assert counts == {"graduates": pq.read_metadata(out / "graduates.parquet").num_rows,
                      "outcomes": pq.read_metadata(out / "outcomes.parquet").num_rows}
    assert counts["graduates"] == 3_000
    assert messages and "3,000" in messages[-1]


def test_graduate_columns_and_dtypes(graduates):
    assert list(graduates.columns) == ["person_id", "institution", "inst_state",
                                       "degree_level", "cipcode", "grad_year"]
    assert graduates["person_id"].dtype == np.int64
    assert graduates["grad_year"].dtype in (np.int16, np.int64)
    for col in CODE_COLUMNS["graduates"]:
        assert isinstance(graduates[col].dtype, pd.CategoricalDtype), col
        assert graduates[col].notna().all(), col


def test_outcome_columns_and_dtypes(outcomes):
    assert list(outcomes.columns) == ["person_id", "years_after", "earnings", "emp_state",
                                      "industry"]
    assert outcomes["person_id"].dtype == np.int64
    assert outcomes["years_after"].dtype in (np.int8, np.int64)
    assert outcomes["earnings"].dtype == np.float64
    for col in CODE_COLUMNS["outcomes"]:
        assert isinstance(outcomes[col].dtype, pd.CategoricalDtype), col


def test_missing_codes_are_real_nulls(data_dir, outcomes):
    table = pq.read_table(data_dir / "outcomes.parquet")
    no_job = int(outcomes["earnings"].isna().sum())
    assert no_job > 0
    for col in ("earnings", "emp_state", "industry"):
        assert table.column(col).null_count == no_job, col
    assert (outcomes["emp_state"].isna() == outcomes["earnings"].isna()).all()
    assert (outcomes["industry"].isna() == outcomes["earnings"].isna()).all()


# --- codes ----------------------------------------------------------------------

def test_code_formats(graduates, outcomes):
    assert _text(graduates["institution"]).str.match(OPEID_PATTERN).all()
    assert _text(graduates["inst_state"]).str.match(STATE_FIPS_PATTERN).all()
    assert _text(graduates["cipcode"]).str.match(CIP2010_PATTERN).all()
    assert _text(outcomes["emp_state"]).dropna().str.match(STATE_FIPS_PATTERN).all()
    assert set(outcomes["industry"].dropna().unique()) <= set(NAICS_SECTORS)


def test_cip_codes_span_many_families(graduates):
    cip = _text(graduates["cipcode"])
    assert cip.str[:2].nunique() >= 15
    assert cip.str[:5].nunique() > cip.str[:2].nunique()  # several 4-digit series


def test_degree_levels(graduates):
    levels = graduates["degree_level"].value_counts()
    levels = levels[levels > 0]
    assert set(levels.index) <= set(DEGREE_LEVELS)
    assert {"01", "02", "03", "05", "07", "17", "18"} <= set(levels.index)
    assert levels.idxmax() == "05"


def test_institutions_and_states(graduates):
    assert graduates["institution"].nunique() >= 30
    assert graduates["inst_state"].nunique() >= 3
    states_per_inst = graduates.groupby("institution", observed=True)["inst_state"].nunique()
    assert (states_per_inst == 1).all()


@pytest.mark.parametrize("seed", [20240101, 1, 2, 3])
def test_institutions_are_real_institutions_of_their_state_fitting_their_kind(seed):
    universe = make_universe(seed)
    labels = institution_labels().drop_duplicates("institution").set_index("institution")
    states = INST_STATE_CODES[universe.inst_state]
    assert len(set(universe.opeid)) == len(universe.opeid) == 40
    assert all(opeid.endswith("00") for opeid in universe.opeid)          # main campuses
    assert (labels.loc[universe.opeid, "statefips"].to_numpy() == states).all()
    names = labels.loc[universe.opeid, "label"]
    for name, kind in zip(names, universe.inst_kind):
        assert re.search(NAME_POOLS[KIND_POOL[kind]], name), (kind, name)
    assert len(set(names)) == len(names)


def test_institution_sizes_are_very_unequal(graduates):
    sizes = graduates.groupby("institution", observed=True).size()
    assert sizes.max() > 10 * sizes.min()


def test_grad_years(graduates):
    assert graduates["grad_year"].between(2001, 2020).all()
    assert graduates["grad_year"].nunique() == 20


# --- keys and observability -----------------------------------------------------

def test_keys_are_unique_and_linked(graduates, outcomes):
    assert graduates["person_id"].is_unique
    assert not outcomes.duplicated(["person_id", "years_after"]).any()
    assert outcomes["person_id"].isin(graduates["person_id"]).all()
    assert set(outcomes["years_after"].unique()) == {1, 5, 10}


@pytest.mark.parametrize("last_data_year", [LAST_DATA_YEAR, 2012])
def test_outcomes_are_exactly_the_observable_years(tmp_path, graduates, outcomes,
                                                   last_data_year):
    if last_data_year != LAST_DATA_YEAR:
        write_synthetic(tmp_path, graduates=5_000, last_data_year=last_data_year,
                        progress=_quiet)
        graduates = pd.read_parquet(tmp_path / "graduates.parquet")
        outcomes = pd.read_parquet(tmp_path / "outcomes.parquet")
    expected = pd.concat(
        [graduates.loc[graduates["grad_year"] + k <= last_data_year, ["person_id"]]
         .assign(years_after=k) for k in (1, 5, 10)])
    got = outcomes[["person_id", "years_after"]].astype("int64")
    expected = expected.astype("int64")
    assert len(got) == len(expected)
    assert got.merge(expected, how="inner").shape[0] == len(expected)


# --- earnings -------------------------------------------------------------------

def test_earnings_values(outcomes):
    earnings = outcomes["earnings"].dropna()
    assert np.isfinite(earnings).all()
    assert (earnings >= 0).all()
    below_floor = (earnings < 10_000).mean()
    assert 0.01 < below_floor < 0.10
    no_job = outcomes["earnings"].isna().mean()
    assert 0.02 < no_job < 0.12


def test_earnings_grow_with_experience(outcomes):
    medians = outcomes.groupby("years_after")["earnings"].median()
    assert medians[1] < medians[5] < medians[10]


def test_bachelors_five_years_out_scale(linked):
    ba5 = linked.loc[(linked["degree_level"] == "05") & (linked["years_after"] == 5),
                     "earnings"].dropna()
    log_earnings = np.log(ba5[ba5 > 0])
    assert log_earnings.mean() == pytest.approx(11.0, abs=0.15)
    assert log_earnings.std() == pytest.approx(0.75, abs=0.12)


def test_degree_and_field_effects(linked):
    five = linked[linked["years_after"] == 5]
    by_degree = five.groupby("degree_level", observed=True)["earnings"].median()
    assert by_degree["17"] > by_degree["07"] > by_degree["05"] > by_degree["03"] > by_degree["01"]
    family = _text(five["cipcode"]).str[:2]
    by_family = five.groupby(family)["earnings"].median()
    assert by_family["14"] > by_family["52"] > by_family["50"]
    assert by_family["11"] > by_family["13"]


def test_work_state_mostly_the_institutions(linked):
    employed = linked[linked["earnings"].notna()]
    home = (_text(employed["emp_state"]) == _text(employed["inst_state"])).mean()
    assert 0.6 < home < 0.95


# --- cells ----------------------------------------------------------------------

def _cell_sizes(graduates: pd.DataFrame) -> pd.Series:
    cip4 = _text(graduates["cipcode"]).str[:5]
    return graduates.groupby([_text(graduates["institution"]),
                              _text(graduates["degree_level"]), cip4,
                              graduates["grad_year"]]).size()


def test_many_small_cells(graduates):
    sizes = _cell_sizes(graduates)
    assert (sizes < 10).mean() > 0.30


def test_some_large_cells(tmp_path):
    # 20,000 graduates over 20 cohorts is only 1,000 a year; a 100-graduate cell
    # needs a larger draw from the same universe.
    write_synthetic(tmp_path, graduates=100_000, progress=_quiet)
    sizes = _cell_sizes(pd.read_parquet(tmp_path / "graduates.parquet"))
    assert (sizes >= 100).sum() >= 5
    assert (sizes < 10).mean() > 0.30


# --- determinism and the fixed universe -----------------------------------------

def test_same_seed_gives_identical_files(tmp_path, data_dir):
    write_synthetic(tmp_path, graduates=GRADUATES, progress=_quiet)
    for name in ("graduates.parquet", "outcomes.parquet"):
        assert (tmp_path / name).read_bytes() == (data_dir / name).read_bytes(), name


def test_different_seed_gives_different_files(tmp_path, data_dir):
    write_synthetic(tmp_path, graduates=GRADUATES, seed=7, progress=_quiet)
    for name in ("graduates.parquet", "outcomes.parquet"):
        assert (tmp_path / name).read_bytes() != (data_dir / name).read_bytes(), name


def test_universe_does_not_depend_on_size(tmp_path, graduates):
    write_synthetic(tmp_path, graduates=2_000, progress=_quiet)
    small = pd.read_parquet(tmp_path / "graduates.parquet")

    def programs(df):
        return set(zip(_text(df["institution"]), _text(df["inst_state"]),
                       _text(df["degree_level"]), _text(df["cipcode"])))
    assert programs(small) <= programs(graduates)


def test_crash_leaves_no_output_files(tmp_path):
    def crash(_message: str) -> None:
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        write_synthetic(tmp_path, graduates=1_000, progress=crash)
    assert list(tmp_path.iterdir()) == []


# --- CIP vintages: CIP-2010 codes before the switch year, CIP-2020 from it -------

@pytest.fixture(scope="module")
def crosswalk():
    from pseo_das.tasks.inputs.cip_crosswalk import read_crosswalk
    return read_crosswalk()


def _codes_by_vintage(graduates: pd.DataFrame, switch_year: int) -> tuple[set, set]:
    cip = _text(graduates["cipcode"])
    before = graduates["grad_year"] < switch_year
    return set(cip[before]), set(cip[~before])


def test_codes_before_the_switch_are_cip2010_codes(graduates, crosswalk):
    before, _ = _codes_by_vintage(graduates, 2020)
    assert before <= set(crosswalk.six_digit)


def test_codes_from_the_switch_are_cip2020_codes(graduates, crosswalk):
    _, after = _codes_by_vintage(graduates, 2020)
    rows = crosswalk.rows
    six = rows[(rows["CIPCode2010"].str.len() == 7) & (rows["Action"] != "Deleted")]
    assert after and after <= set(six["CIPCode2020"])


def test_each_program_keeps_its_crosswalk_code(crosswalk):
    from pseo_das.synth import CIP_CODES, cip_vintages
    labels, cip2010, cip2020 = cip_vintages()
    assert list(labels[cip2010]) == list(CIP_CODES)
    assert [crosswalk.six_digit[c] for c in CIP_CODES] == list(labels[cip2020])


def test_some_programs_change_family_in_cip2020(tmp_path, data_dir):
    # The same graduates with the switch in 2001: every graduate's program can be seen in
    # both vintages, row by row.
    write_synthetic(tmp_path, graduates=GRADUATES, cip_switch_year=2001, progress=_quiet)
    assert ((tmp_path / "outcomes.parquet").read_bytes()
            == (data_dir / "outcomes.parquet").read_bytes())
    new = pd.read_parquet(tmp_path / "graduates.parquet")
    old = pd.read_parquet(data_dir / "graduates.parquet")
    old_cip, new_cip = _text(old["cipcode"]), _text(new["cipcode"])
    assert (old["person_id"] == new["person_id"]).all()
    early = (old["grad_year"] < 2020).to_numpy()
    pairs = set(zip(old_cip[early], new_cip[early]))
    moved = {(a, b) for a, b in pairs if a != b}
    assert any(a[:2] == b[:2] and a[:5] != b[:5] for a, b in moved)  # across 4-digit series
    assert any(a[:2] != b[:2] for a, b in moved)                      # across families
    assert ("51.0808", "01.8301") in moved and ("43.0106", "43.0406") in moved
    # Nothing but the code depends on the vintage.
    for col in ("person_id", "institution", "inst_state", "degree_level", "grad_year"):
        assert (_text(old[col]) == _text(new[col])).all(), col


def test_switch_year_moves_the_boundary(tmp_path, data_dir, graduates, crosswalk):
    write_synthetic(tmp_path, graduates=GRADUATES, cip_switch_year=2015, progress=_quiet)
    moved = pd.read_parquet(tmp_path / "graduates.parquet")
    cip2010 = set(crosswalk.six_digit)
    renamed = {c for c, n in crosswalk.six_digit.items() if n and n != c}
    old, new = _text(graduates["cipcode"]), _text(moved["cipcode"])
    for df, cip, switch in ((graduates, old, 2020), (moved, new, 2015)):
        before = (df["grad_year"] < switch).to_numpy()
        assert set(cip[before]) <= cip2010
        assert not set(cip[~before]) & renamed          # no 2010-only code after the switch
        assert set(cip[before]) & renamed                # some renamed code before it
    years = graduates["grad_year"].to_numpy()
    same = (years < 2015) | (years >= 2020)
    assert (old[same] == new[same]).all()
    assert (old[~same] != new[~same]).any()
    assert ((tmp_path / "outcomes.parquet").read_bytes()
            == (data_dir / "outcomes.parquet").read_bytes())


# --- partitioned datasets -----------------------------------------------------------

def test_part_files_hold_the_same_rows_as_single_files(tmp_path):
    """300,000 graduates in parts of one 250,000-graduate chunk: two part files per input,
    whose rows are those of the single files, in order; both marked synthetic."""
    from pseo_das.synth import is_synthetic
    single, parts = tmp_path / "single", tmp_path / "parts"
    write_synthetic(single, graduates=300_000, progress=_quiet)
    counts = write_synthetic(parts, graduates=300_000, progress=_quiet, part_graduates=1)
    for name in ("graduates", "outcomes"):
        files = sorted((parts / name).iterdir())
        assert [f.name for f in files] == ["part-00000.parquet", "part-00001.parquet"]
        joined = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
        whole = pd.read_parquet(single / f"{name}.parquet")
        assert len(joined) == counts[name] == len(whole)
        for column in whole:
            pd.testing.assert_series_equal(joined[column].astype(object), whole[column].astype(object))
    assert is_synthetic(parts) and is_synthetic(single)
    assert sorted(p.name for p in parts.iterdir()) == ["graduates", "ipeds", "outcomes"]
    assert filecmp.dircmp(parts / "ipeds", single / "ipeds").diff_files == []
    with pytest.raises(ValueError, match="already there"):
        write_synthetic(single, graduates=10, progress=_quiet, part_graduates=5)


def test_a_crash_while_writing_parts_leaves_nothing(tmp_path):
    def crash(_message: str) -> None:
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        write_synthetic(tmp_path, graduates=1_000, progress=crash, part_graduates=100)
    assert list(tmp_path.iterdir()) == []


# --- the national universe (issue 14: data sets at national scale) -------------------

@pytest.mark.parametrize("institutions", [500, 2000])
def test_a_national_universe_has_no_dominant_institution(institutions):
    """The expected share of each institution (its cells' probabilities) is a few percent at
    most, where the demo universe's largest holds about 18%; institutions are distinct real
    main campuses of every state and DC, each in its own state."""
    universe = make_universe(20240101, institutions)
    weights = np.diff(universe.cell_cdf, prepend=0.0)
    share = np.bincount(universe.cell_institution, weights=weights) / weights.sum()
    assert len(share) == institutions
    assert share.max() < 0.05
    demo = make_universe(20240101)
    demo_weights = np.diff(demo.cell_cdf, prepend=0.0)
    assert (np.bincount(demo.cell_institution, weights=demo_weights) / demo_weights.sum()).max() > 0.15
    labels = institution_labels().drop_duplicates("institution").set_index("institution")
    states = universe.state_codes[universe.inst_state]
    assert len(set(universe.opeid)) == institutions
    assert (labels.loc[universe.opeid, "statefips"].to_numpy() == states).all()
    assert len(set(states)) == 51 if institutions >= 2000 else len(set(states)) >= 45
    assert set(universe.inst_kind) == {"community", "regional", "research", "health"}


def test_a_national_data_set_passes_the_release_rules(tmp_path):
    """Written in part files, read back by the release's streaming counts: every input rule
    holds, with graduates of institutions in many states."""
    from pseo_das.config import load_config
    from pseo_das.tasks.inputs.cpi import find_cpi, read_cpi
    from pseo_das.tasks.inputs.reference_inputs import default_reference_dir
    from pseo_das.tasks.inputs.true_counts import read_counts
    counts = write_synthetic(tmp_path, graduates=6_000, institutions=800, part_graduates=3_000,
                             progress=_quiet)
    cfg = load_config()
    streamed = read_counts(tmp_path, cfg, None, read_cpi(find_cpi(default_reference_dir())))
    assert streamed.rows == counts
    graduates = pd.read_parquet(tmp_path / "graduates")
    assert graduates["inst_state"].nunique() >= 40
    assert graduates["institution"].nunique() > 500


def test_a_universe_larger_than_the_label_file_is_refused_before_anything_is_written(tmp_path):
    """`pseo-das synth --institutions` beyond the real main campuses of a state: exit 2, the
    reason in one line, no output folder."""
    from pseo_das.cli import main
    with pytest.raises(SystemExit) as stop:
        main(["synth", "--out", str(tmp_path / "out"), "--graduates", "10",
              "--institutions", "20000"])
    assert stop.value.code == 2
    assert not (tmp_path / "out").exists()
