"""Public reference inputs (J2J, QCEW, state coverage): the packaged demo, the layouts'
filtering rules, the matrices' order, and every bad file rejected with file and column."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pseo_das.reference_demo import LATE_COVERAGE, SUPPRESSED, write_demo_reference
from pseo_das.schemas.codes import NAICS_SECTORS, STATE_FIPS
from pseo_das.schemas.reference import J2J_AGGREGATE, J2J_COLUMNS
from pseo_das.tasks.inputs.ingest import InputValidationError
from pseo_das.tasks.inputs.reference_inputs import (COVERAGE_FILE, J2J_FILE, QCEW_FILE, REFERENCE_FILES,
                                    ReferenceInputs, default_reference_dir, load_reference,
                                    load_reference_inputs)


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """These tests never run a Prefect flow or task: skip the session's Prefect server."""
    yield


def S(code: str) -> int:
    return STATE_FIPS.index(code)


def K(code: str) -> int:
    return NAICS_SECTORS.index(code)


# --- tiny hand-built files -------------------------------------------------------------------

def j2j_row(origin: str, destination: str, ee, aq, quarter: int = 1, **changes) -> dict:
    row = dict(J2J_AGGREGATE, geography=destination, geography_orig=origin, year="2015",
               quarter=str(quarter), agg_level="1", EE=ee, AQHire=aq)
    row.update(changes)
    return row


def qcew_row(area: str, own: str, industry: str, emplvl, year: int = 2015, level: str = "54",
             disclosure: str = "", size: str = "0", qtr: str = "A") -> dict:
    return dict(area_fips=area, own_code=own, industry_code=industry, agglvl_code=level,
                size_code=size, year=str(year), qtr=qtr, disclosure_code=disclosure,
                annual_avg_estabs="1", annual_avg_emplvl=emplvl, total_annual_wages="0")


def valid_j2j() -> list[dict]:
    return [j2j_row("06", "36", "10", "5", 1), j2j_row("06", "36", "3", "", 2),
            j2j_row("01", "01", "7", "0"), j2j_row("56", "02", "", "4")]


def valid_qcew() -> list[dict]:
    return [qcew_row("01000", "5", "11", "100", 2015), qcew_row("01000", "5", "11", "300", 2016),
            qcew_row("56000", "1", "92", "10"), qcew_row("56000", "2", "92", "20"),
            qcew_row("56000", "3", "92", "30"), qcew_row("02000", "5", "31-33", "5")]


def valid_coverage() -> list[dict]:
    return [{"state": "01", "first_year": "2001", "last_year": "2010"},
            {"state": "56", "first_year": "2015", "last_year": "2022"}]


def write(directory: Path, j2j=None, qcew=None, coverage=None) -> Path:
    for name, rows in ((J2J_FILE, j2j), (QCEW_FILE, qcew), (COVERAGE_FILE, coverage)):
        frame = pd.DataFrame(rows if rows is not None else
                             {J2J_FILE: valid_j2j, QCEW_FILE: valid_qcew,
                              COVERAGE_FILE: valid_coverage}[name]())
        frame.astype(str).replace("nan", "").to_csv(directory / name, index=False)
    return directory


def rejected(directory: Path) -> str:
    with pytest.raises(InputValidationError) as err:
        load_reference_inputs(directory)
    return str(err.value)


# --- the packaged demo -----------------------------------------------------------------------

def test_demo_files_load_with_expected_shapes():
    directory = default_reference_dir()
    reference = load_reference_inputs(directory)
    assert directory == Path(__file__).parents[1] / "pseo_das" / "reference"
    assert (directory / "README.md").read_text().count("synthetic") >= 1
    for name in REFERENCE_FILES:
        assert (directory / name).stat().st_size < 300_000
        assert reference.fingerprints[name] == hashlib.sha256((directory / name).read_bytes()).hexdigest()

    j2j = reference.j2j_matrix()
    assert j2j.shape == (51, 51) and (j2j >= 0).all()
    assert (np.diag(j2j) > 0).all()
    assert (np.diag(j2j) > j2j.sum(axis=1) - np.diag(j2j)).all()  # most hires stay in the state
    assert reference.j2j["hires"].dtype == np.float64
    assert set(reference.j2j["origin_state"]) == set(STATE_FIPS)  # leading zeros kept ("01")

    employment = reference.employment_matrix()
    assert employment.shape == (51, 20)
    assert len(reference.qcew) == 51 * 20 - len(SUPPRESSED)
    assert all(employment[S(s), K(k)] == 0 for s, k in SUPPRESSED)
    assert (employment[:, K("92")] > 0).all() and (employment[:, K("61")] > 0).all()
    assert employment[S("06")].sum() > employment[S("56")].sum()  # California > Wyoming

    assert reference.coverage["first_year"].dtype == np.int64 and len(reference.coverage) == 51
    covered = reference.covered(np.array([2001, 2012, 2015, 2022]))
    assert covered.shape == (4, 51)
    assert covered[0].sum() == 51 - len(LATE_COVERAGE) and covered[3].all()
    assert not covered[0, S("04")] and covered[1, S("04")] and not covered[1, S("49")]


def test_demo_files_are_the_generator_output(tmp_path):
    for path in write_demo_reference(tmp_path):
        assert path.read_bytes() == (default_reference_dir() / path.name).read_bytes(), path.name


def test_prefect_task_body_loads_the_demo():
    reference = load_reference(default_reference_dir())
    assert isinstance(reference, ReferenceInputs) and len(reference.coverage) == 51


# --- matrices in STATE_FIPS x NAICS_SECTORS order ----------------------------------------------

def test_matrices_follow_state_and_sector_order(tmp_path):
    reference = load_reference_inputs(write(tmp_path))
    expected = np.zeros((51, 51))
    expected[S("06"), S("36")] = 10 + 5 + 3  # two quarters; an empty AQHire counts 0
    expected[S("01"), S("01")] = 7
    expected[S("56"), S("02")] = 4           # rows origin, columns destination
    np.testing.assert_array_equal(reference.j2j_matrix(), expected)

    employment = np.zeros((51, 20))
    employment[S("01"), K("11")] = 200       # mean of 2015 and 2016
    employment[S("56"), K("92")] = 60        # federal + state + local government
    employment[S("02"), K("31-33")] = 5
    np.testing.assert_array_equal(reference.employment_matrix(), employment)

    covered = reference.covered(np.array([2000, 2001, 2010, 2015, 2022, 2023]))
    assert covered.shape == (6, 51) and covered.sum() == 4
    np.testing.assert_array_equal(covered[:, S("01")], [False, True, True, False, False, False])
    np.testing.assert_array_equal(covered[:, S("56")], [False, False, False, True, True, False])
    assert set(reference.fingerprints) == set(REFERENCE_FILES)


# --- filtering rules -------------------------------------------------------------------------

def test_j2j_keeps_only_state_to_state_aggregate_rows(tmp_path):
    ignored = [
        j2j_row("06", "00", "1000", "1000", geo_level="N"),            # national destination
        j2j_row("0612345", "36", "1000", "1000", geo_level_orig="M"),  # metro origin
        j2j_row("06", "36", "1000", "1000", ind_level="S", industry="23"),
        j2j_row("06", "36", "1000", "1000", ind_level_orig="S", industry_orig="23"),
        j2j_row("06", "36", "1000", "1000", ownercode="A05"),
        j2j_row("06", "36", "1000", "1000", ownercode_orig="A05"),
        j2j_row("06", "36", "1000", "1000", sex="1"),
        j2j_row("06", "36", "1000", "1000", agegrp="A04"),
        j2j_row("06", "36", "1000", "1000", education="E4"),
        j2j_row("06", "36", "1000", "1000", firmage_orig="1"),
        j2j_row("06", "36", "1000", "1000", seasonadj="S"),
        j2j_row("6", "36", "abc", "-1", geo_level="N"),                # bad values, ignored row
    ]
    repeated = [j2j_row("06", "36", "10", "5", 1)]  # same row from an overlapping state file
    reference = load_reference_inputs(write(tmp_path, j2j=valid_j2j() + ignored + repeated))
    assert reference.j2j_matrix()[S("06"), S("36")] == 18
    assert reference.j2j["hires"].sum() == 18 + 7 + 4


def test_qcew_sums_ownerships_at_the_state_sector_level(tmp_path):
    extra = [
        qcew_row("56000", "0", "10", "999999", level="50"),   # statewide total: ignored
        qcew_row("56000", "8", "92", "999999"),               # total government: ignored
        qcew_row("56000", "5", "92", "999999", size="1"),     # size class: ignored
        qcew_row("56000", "5", "92", "999999", qtr="1"),      # quarterly row: ignored
        qcew_row("56000", "5", "921", "999999", level="55"),  # 3-digit NAICS: ignored
        qcew_row("56001", "5", "92", "999999", level="74"),   # county: ignored
        qcew_row("72000", "5", "92", "999999"),               # Puerto Rico: dropped
        qcew_row("56000", "5", "99", "999999"),               # unclassified sector: dropped
        qcew_row("02000", "5", "31-33", "0", year=2016, disclosure="N"),  # suppressed: left out
        qcew_row("02000", "1", "61", "40"), qcew_row("02000", "3", "61", "60"),
        qcew_row("02000", "5", "61", "25", year=2014), qcew_row("02000", "5", "61", "35", year=2016),
    ]
    reference = load_reference_inputs(write(tmp_path, qcew=valid_qcew() + extra))
    employment = reference.employment_matrix()
    assert employment[S("56"), K("92")] == 60          # government ownerships only
    assert employment[S("02"), K("31-33")] == 5        # not (5 + 0) / 2
    assert employment[S("02"), K("61")] == 40 + 60 + 30  # private averaged over its years
    assert len(reference.qcew) == 4 and set(reference.qcew["industry"]) <= set(NAICS_SECTORS)


# --- bad files -------------------------------------------------------------------------------

def _set(rows: list[dict], index: int, **changes) -> list[dict]:
    rows = [dict(r) for r in rows]
    rows[index].update(changes)
    return rows


BAD_FILES = {
    "j2j state code lost its leading zero": (
        dict(j2j=_set(valid_j2j(), 1, geography_orig="6")),
        [J2J_FILE, "column geography_orig", "1 bad row(s)", "row 1: '6'"]),
    "j2j non-numeric hires": (
        dict(j2j=_set(valid_j2j(), 2, EE="abc")),
        [J2J_FILE, "column EE", "is_number", "row 2: 'abc'"]),
    "j2j negative hires": (
        dict(j2j=_set(valid_j2j(), 3, AQHire="-4")),
        [J2J_FILE, "column AQHire", "greater_than_or_equal_to(0)", "row 3: '-4'"]),
    "j2j conflicting repeated quarter": (
        dict(j2j=valid_j2j() + [j2j_row("06", "36", "11", "5", 1)]),
        [J2J_FILE, "column geography_orig, geography, year, quarter", "unique_j2j_key",
         "2 bad row(s)", "row 0, row 4"]),
    "j2j without state-to-state rows": (
        dict(j2j=[j2j_row("06", "00", "1", "1", geo_level="N")]),
        [J2J_FILE, "column geo_level, geo_level_orig", "no state-to-state rows"]),
    "qcew bad area code": (
        dict(qcew=_set(valid_qcew(), 5, area_fips="2000")),
        [QCEW_FILE, "column area_fips", "row 5: '2000'"]),
    "qcew area that is not a state": (
        dict(qcew=_set(valid_qcew(), 5, area_fips="03000")),
        [QCEW_FILE, "column area_fips", "state part isin(STATE_FIPS", "row 5: '03000'"]),
    "qcew unknown industry": (
        dict(qcew=_set(valid_qcew(), 0, industry_code="34")),
        [QCEW_FILE, "column industry_code", "1 bad row(s)", "row 0: '34'"]),
    "qcew negative employment": (
        dict(qcew=_set(valid_qcew(), 2, annual_avg_emplvl="-10")),
        [QCEW_FILE, "column annual_avg_emplvl", "greater_than_or_equal_to(0)", "row 2: '-10'"]),
    "qcew non-numeric employment": (
        dict(qcew=_set(valid_qcew(), 2, annual_avg_emplvl="ten")),
        [QCEW_FILE, "column annual_avg_emplvl", "is_number", "row 2: 'ten'"]),
    "coverage bad state": (
        dict(coverage=_set(valid_coverage(), 1, state="6")),
        [COVERAGE_FILE, "column state", "row 1: '6'"]),
    "coverage duplicate state": (
        dict(coverage=valid_coverage() + [{"state": "01", "first_year": "2011", "last_year": "2022"}]),
        [COVERAGE_FILE, "column state", "field_uniqueness", "2 bad row(s)", "row 0: '01'", "row 2: '01'"]),
    # codes are ASCII digits, whole, nothing stripped (issue 31)
    "j2j state in Arabic-Indic digits": (
        dict(j2j=_set(valid_j2j(), 1, geography_orig="\u0660\u0666")),
        [J2J_FILE, "column geography_orig", "1 bad row(s)", "row 1: '\u0660\u0666'"]),
    "qcew area in full-width digits": (
        dict(qcew=_set(valid_qcew(), 5, area_fips="\uff10\uff16000")),
        [QCEW_FILE, "column area_fips", "row 5: '\uff10\uff16000'"]),
    "coverage state with a space": (
        dict(coverage=_set(valid_coverage(), 1, state="06 ")),
        [COVERAGE_FILE, "column state", "row 1: '06 '"]),
    "coverage year in Arabic-Indic digits": (
        dict(coverage=_set(valid_coverage(), 1, first_year="\u0662\u0660\u0661\u0660")),
        [COVERAGE_FILE, "column first_year", "row 1: '\u0662\u0660\u0661\u0660'"]),
    "coverage first year after last year": (
        dict(coverage=_set(valid_coverage(), 1, first_year="2023")),
        [COVERAGE_FILE, "column first_year, last_year", "first_year_le_last_year", "1 bad row(s)", "row 1"]),
    "coverage year not a year": (
        dict(coverage=_set(valid_coverage(), 0, last_year="20x0")),
        [COVERAGE_FILE, "column last_year", "row 0: '20x0'"]),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_file_is_rejected_naming_file_column_and_rows(tmp_path, case):
    files, expected = BAD_FILES[case]
    message = rejected(write(tmp_path, **files))
    for part in expected:
        assert part in message, f"{part!r} not in:\n{message}"


@pytest.mark.parametrize("name, column", [(J2J_FILE, "AQHire"), (QCEW_FILE, "annual_avg_emplvl"),
                                          (COVERAGE_FILE, "last_year")])
def test_missing_column_is_named(tmp_path, name, column):
    write(tmp_path)
    frame = pd.read_csv(tmp_path / name, dtype=str).drop(columns=column)
    frame.to_csv(tmp_path / name, index=False)
    message = rejected(tmp_path)
    assert f"{tmp_path / name}: missing column(s) {column}" in message


@pytest.mark.parametrize("name", REFERENCE_FILES)
def test_missing_file_is_named(tmp_path, name):
    write(tmp_path)
    (tmp_path / name).unlink()
    assert f"{tmp_path / name}: reference file not found" in rejected(tmp_path)


@pytest.mark.parametrize("name", REFERENCE_FILES)
def test_empty_file_is_named(tmp_path, name):
    write(tmp_path)
    (tmp_path / name).write_bytes(b"")
    assert f"{tmp_path / name}: cannot read" in rejected(tmp_path)


def test_header_only_coverage_is_rejected(tmp_path):
    write(tmp_path)
    (tmp_path / COVERAGE_FILE).write_text("state,first_year,last_year\n")
    assert "column state: no state listed" in rejected(tmp_path)


def test_every_bad_file_is_reported_at_once(tmp_path):
    message = rejected(write(tmp_path, j2j=_set(valid_j2j(), 0, EE="-1"),
                             coverage=_set(valid_coverage(), 0, state="99")))
    assert J2J_FILE in message and COVERAGE_FILE in message and QCEW_FILE not in message


def test_j2j_layout_columns_are_required_in_full(tmp_path):
    """Every filter column is part of the required layout (none silently defaults)."""
    assert set(J2J_AGGREGATE) <= set(J2J_COLUMNS)
    write(tmp_path)
    frame = pd.read_csv(tmp_path / J2J_FILE, dtype=str).drop(columns=["race", "firmsize_orig"])
    frame.to_csv(tmp_path / J2J_FILE, index=False)
    assert "missing column(s) race, firmsize_orig" in rejected(tmp_path)
