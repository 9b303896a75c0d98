"""The IPEDS counts of pseoe and their flags (tasks/codes/ipeds_counts.py) and the
IPEDS completions they are read from (tasks/inputs/ipeds_counts.py)."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from pseo_das.config import CellsConfig, load_config
from pseo_das.ipeds_demo import YEARS as DEMO_YEARS
from pseo_das.tasks.inputs.cip_crosswalk import read_crosswalk
from pseo_das.tasks.inputs.ingest import InputValidationError
from pseo_das.tasks.inputs.ipeds_counts import (graduation_years, load_ipeds_awards,
                                                read_ipeds_awards)
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir
from pseo_das.tasks.codes.ipeds_counts import ipeds_count_columns, ipeds_counts

CELLS = CellsConfig(first_cohort_year=2001, last_earnings_year=2012, years_after=(1, 5, 10),
                    default_cohort_years=5, cohort_years_by_degree={"05": 3})
A, B, C = "00000100", "00000200", "00000300"
STATE = {A: "08", B: "08", C: "48"}
FILE_YEARS = {2001, 2002, 2003, 2004, 2005}          # no completions file for 2006
NA = None

# institution, degree, CIP-2020 code, code as reported, year, awards
AWARDS = [
    (A, "05", "11.0701", "11.0701", 2001, 10), (A, "05", "11.0701", "11.0701", 2002, 12),
    (A, "05", "11.0701", "11.0701", 2003, 8), (A, "05", "11.0701", "11.0701", 2004, 5),
    (A, "05", "11.0701", "11.0701", 2005, 7),
    (A, "05", "43.0406", "43.0106", 2002, 4),      # moved within its family
    (A, "05", "01.8301", "51.0808", 2003, 6),      # moved to another family
    (A, "07", "11.0701", "11.0701", 2001, 3), (A, "07", "11.0701", "11.0701", 2005, 2),
    (A, "05", "14.0101", "14.0101", 2001, 100),    # a program with no PSEO cell: not counted
    (B, "05", "52.0201", "52.0201", 2001, 20),     # B's 11.07 has no award in IPEDS
    (C, "05", "11.0701", "11.0701", 2001, 9),
]

# inst_level, institution, degree, cip_level, cipcode, grad_cohort; earnings status y1, y5, y10;
# expected (count, flag) for y1, y5, y10
ROWS = [
    ("I", A, "05", "4", "11.07", "2001", (1, 1, -1), [(30, 1), (30, 1), (NA, 3)]),
    ("I", A, "05", "4", "11.07", "2004", (1, 1, -1), [(12, 4), (12, 4), (NA, 3)]),   # 2006 missing
    ("I", A, "05", "4", "43.04", "2001", (1, 1, -1), [(4, 2), (4, 2), (NA, 3)]),     # edited
    ("I", A, "05", "4", "01.83", "2001", (1, 5, -1), [(6, 2), (NA, 3), (NA, 3)]),    # y5 suppressed
    ("I", B, "05", "4", "11.07", "2001", (1, 1, -1), [(NA, 3), (NA, 3), (NA, 3)]),   # no award
    ("I", B, "05", "4", "52.02", "2001", (1, 1, -1), [(20, 1), (20, 1), (NA, 3)]),
    ("I", C, "05", "4", "11.07", "2001", (1, 1, -1), [(9, 1), (9, 1), (NA, 3)]),
    ("I", A, "07", "4", "11.07", "2001", (1, 1, -1), [(NA, 3), (NA, 3), (NA, 3)]),   # restricted
    ("I", A, "05", "2", "11", "2001", (1, 1, -1), [(30, 1), (30, 1), (NA, 3)]),
    ("I", A, "05", "2", "43", "2001", (1, 1, -1), [(4, 1), (4, 1), (NA, 3)]),        # same family
    ("I", A, "05", "2", "01", "2001", (1, 1, -1), [(6, 2), (6, 2), (NA, 3)]),
    ("I", A, "07", "2", "11", "2001", (1, 1, -1), [(5, 1), (5, 1), (NA, 3)]),
    ("I", B, "05", "2", "11", "2001", (1, 1, -1), [(NA, 3), (NA, 3), (NA, 3)]),
    ("I", A, "05", "A", "00", "2001", (1, 1, -1), [(40, 1), (40, 1), (NA, 3)]),
    ("I", B, "05", "A", "00", "2001", (1, 1, -1), [(20, 4), (20, 4), (NA, 3)]),      # 11.07 missing
    ("I", A, "05", "A", "00", "0000", (1, 1, -1), [(52, 4), (52, 4), (NA, 3)]),
    ("I", A, "05", "4", "11.07", "0000", (1, 1, -1), [(42, 4), (42, 4), (NA, 3)]),
    ("S", "08", "05", "4", "11.07", "2001", (1, 1, -1), [(30, 4), (30, 4), (NA, 3)]),  # A + B
    ("S", "08", "05", "A", "00", "2001", (1, 1, -1), [(60, 4), (60, 4), (NA, 3)]),
    ("S", "48", "05", "4", "11.07", "2001", (1, 1, -1), [(9, 1), (9, 1), (NA, 3)]),
    ("S", "08", "05", "2", "01", "2001", (1, 1, -1), [(6, 2), (6, 2), (NA, 3)]),
]


def _awards() -> pd.DataFrame:
    return pd.DataFrame(AWARDS, columns=["institution", "degree_level", "cipcode",
                                         "reported_cipcode", "grad_year", "awards"])


def _rows(rows=ROWS) -> pd.DataFrame:
    frame = pd.DataFrame([r[:6] for r in rows], columns=["inst_level", "institution", "degree_level",
                                                         "cip_level", "cipcode", "grad_cohort"])
    frame.insert(0, "agg_level_pseo", "1")
    frame["grad_cohort_years"] = frame["degree_level"].map({"05": 3}).fillna(5).astype(int)
    for i, k in enumerate((1, 5, 10)):
        frame[f"status_y{k}_earnings"] = [r[6][i] for r in rows]
    return frame


def test_counts_and_flags_of_hand_made_cells():
    rows = _rows()
    got = ipeds_counts(rows, CELLS, _awards(), FILE_YEARS, STATE)
    assert list(got.columns) == ipeds_count_columns() == [
        "y1_ipeds_count", "y5_ipeds_count", "y10_ipeds_count",
        "status_y1_ipeds_count", "status_y5_ipeds_count", "status_y10_ipeds_count"]
    assert got.index.equals(rows.index)
    assert all(str(got[c].dtype) == "Int64" for c in ipeds_count_columns()[:3])
    for (*key, _, expected), (_, row) in zip(ROWS, got.iterrows()):
        values = [None if pd.isna(row[f"y{k}_ipeds_count"]) else int(row[f"y{k}_ipeds_count"])
                  for k in (1, 5, 10)]
        flags = [int(row[f"status_y{k}_ipeds_count"]) for k in (1, 5, 10)]
        assert list(zip(values, flags)) == expected, key


def test_an_award_without_institution_or_degree_level_counts_nowhere():
    rows = _rows()
    unknown = pd.DataFrame([(None, "05", "11.0701", "11.0701", 2001, 1000),
                            (A, None, "11.0701", "11.0701", 2001, 1000)],
                           columns=_awards().columns)
    pd.testing.assert_frame_equal(
        ipeds_counts(rows, CELLS, pd.concat([_awards(), unknown], ignore_index=True),
                     FILE_YEARS, STATE),
        ipeds_counts(rows, CELLS, _awards(), FILE_YEARS, STATE))


def test_row_order_and_index_are_kept():
    rows = _rows().iloc[::-1].set_axis(range(100, 100 + len(ROWS)))
    got = ipeds_counts(rows, CELLS, _awards(), FILE_YEARS, STATE)
    straight = ipeds_counts(_rows(), CELLS, _awards(), FILE_YEARS, STATE)
    assert list(got.index) == list(rows.index)
    pd.testing.assert_frame_equal(got.reset_index(drop=True),
                                  straight.iloc[::-1].reset_index(drop=True))


def test_all_cohorts_take_only_the_windows_with_year_k_earnings():
    # With earnings up to 2008, the 2004-2006 window has 1-year but not 5-year earnings.
    cells = CELLS.model_copy(update={"last_earnings_year": 2008})
    rows = _rows([r for r in ROWS if r[:3] == ("I", A, "05")])
    got = ipeds_counts(rows, cells, _awards(), FILE_YEARS, STATE)
    all_cohorts = got[(rows["grad_cohort"].eq("0000") & rows["cip_level"].eq("A")).to_numpy()].iloc[0]
    assert (all_cohorts["y1_ipeds_count"], all_cohorts["status_y1_ipeds_count"]) == (52, 4)
    assert (all_cohorts["y5_ipeds_count"], all_cohorts["status_y5_ipeds_count"]) == (40, 1)


def test_no_completions_file_at_all_is_not_available_everywhere():
    got = ipeds_counts(_rows(), CELLS, _awards().iloc[:0], set(), STATE)
    assert got[ipeds_count_columns()[:3]].isna().all().all()
    assert (got[ipeds_count_columns()[3:]] == 3).all().all()


def test_an_institution_without_a_state_is_refused():
    with pytest.raises(ValueError, match="no state for institution\\(s\\) 00000300"):
        ipeds_counts(_rows(), CELLS, _awards(), FILE_YEARS, {A: "08", B: "08"})


# --- reading the completions -----------------------------------------------------------

PACKAGED = default_reference_dir() / "ipeds"


def _copy_demo(tmp_path: Path, years) -> Path:
    folder = tmp_path / "ipeds"
    folder.mkdir(parents=True)
    for year in years:
        for name in (f"C{year}_A.csv", f"HD{year}.csv"):
            shutil.copy(PACKAGED / name, folder / name)
    return folder


def _replace_first_code(path: Path, new_code: str) -> str:
    lines = path.read_text().splitlines(keepends=True)
    old = lines[1].split(",")[1]
    lines[1] = lines[1].replace(old, f'"{new_code}"', 1)
    path.write_text("".join(lines))
    return old


def test_a_code_of_the_wrong_vintage_is_refused_naming_file_column_and_row(tmp_path):
    before, after = DEMO_YEARS[0], 2020
    folder = _copy_demo(tmp_path, [before, after])
    _replace_first_code(folder / f"C{before}_A.csv", "01.8301")    # CIP-2020 only
    _replace_first_code(folder / f"C{after}_A.csv", "51.0808")      # CIP-2010 only (moved)
    with pytest.raises(InputValidationError) as caught:
        read_ipeds_awards(folder, (before, after), 2020)
    message = str(caught.value)
    assert re.search(rf"C{before}_A\.csv.*\n.*column CIPCODE: check a CIP-2010 code failed, 1 bad "
                     r"row\(s\); e\.g\. row 0: '01\.8301'", message), message
    assert re.search(rf"C{after}_A\.csv.*\n.*column CIPCODE: check a CIP-2020 code failed, 1 bad "
                     r"row\(s\); e\.g\. row 0: '51\.0808'", message), message


def test_a_completions_file_without_its_directory_is_refused(tmp_path):
    folder = _copy_demo(tmp_path, [DEMO_YEARS[0]])
    (folder / f"HD{DEMO_YEARS[0]}.csv").unlink()
    with pytest.raises(InputValidationError, match=rf"HD{DEMO_YEARS[0]}\.csv: IPEDS directory "
                                                   "file not found"):
        read_ipeds_awards(folder, (DEMO_YEARS[0],), 2020)


def test_a_malformed_award_count_is_refused_with_its_row(tmp_path):
    folder = _copy_demo(tmp_path, [DEMO_YEARS[0]])
    path = folder / f"C{DEMO_YEARS[0]}_A.csv"
    lines = path.read_text().splitlines(keepends=True)
    fields = lines[3].split(",")
    fields[5] = "1.5"
    lines[3] = ",".join(fields)
    path.write_text("".join(lines))
    with pytest.raises(InputValidationError, match=r"column CTOTALT: .* row 2: '1\.5'"):
        read_ipeds_awards(folder, (DEMO_YEARS[0],), 2020)


def test_years_before_the_switch_are_recoded_to_cip_2020(tmp_path):
    awards, years, prints = read_ipeds_awards(_copy_demo(tmp_path, [2015]), (2014, 2015), 2020)
    assert years == {2015} and set(prints) == {"ipeds/C2015_A.csv", "ipeds/HD2015.csv"}
    six = read_crosswalk().six_digit
    assert (awards["cipcode"] == awards["reported_cipcode"].map(six)).all()
    assert (awards["cipcode"] != awards["reported_cipcode"]).any()
    assert set(awards["grad_year"]) == {2015}


# --- the packaged demo files -----------------------------------------------------------

def test_demo_counts_at_all_fields_are_sums_of_the_completions_files():
    cells = load_config(None).cells
    inputs = load_ipeds_awards(None, cells, 2020)
    assert inputs.packaged and inputs.wanted == graduation_years(cells)
    opeid, years = "00758200", range(2006, 2011)   # Aims Community College, associate's 2006-2010
    awards = inputs.awards[(inputs.awards["institution"] == opeid)
                           & (inputs.awards["degree_level"] == "03")
                           & inputs.awards["grad_year"].isin(years)]
    programs = sorted(set(awards["cipcode"].str[:5]))
    rows = _rows([("I", opeid, "03", "4", code, "2006", (1, 1, 1), None) for code in programs]
                 + [("I", opeid, "03", "A", "00", "2006", (1, 1, 1), None)])
    raw = pd.concat(pd.read_csv(PACKAGED / f"C{y}_A.csv", dtype=str) for y in years)
    hd = pd.read_csv(PACKAGED / "HD2006.csv", dtype=str, encoding="latin-1")
    unitid = hd.loc[hd["OPEID"] == opeid, "UNITID"].item()
    direct = raw[(raw["UNITID"] == unitid) & (raw["MAJORNUM"] == "1") & (raw["AWLEVEL"] == "3")
                 & (raw["CIPCODE"] != "99")]["CTOTALT"].astype(int).sum()
    got = ipeds_counts(rows, cells, inputs.awards, inputs.years, {opeid: "08"})
    assert direct > 0 and len(programs) > 3
    assert (got["y1_ipeds_count"].iloc[-1], got["status_y1_ipeds_count"].iloc[-1]) == (direct, 1)


def test_a_reference_folder_without_ipeds_takes_the_packaged_files_and_says_so(tmp_path, capsys):
    cells = load_config(None).cells
    inputs = load_ipeds_awards(tmp_path, cells, 2020)
    assert inputs.packaged
    assert "has no ipeds/: the IPEDS counts use the SYNTHETIC files of the packaged demo files" \
        in capsys.readouterr().err
    assert inputs.years == set(DEMO_YEARS) == set(inputs.wanted) - {2021}
    given = _copy_demo(tmp_path / "given", [2005, 2020])
    mine = load_ipeds_awards(given.parent, cells, 2020)
    assert not mine.packaged and mine.years == {2005, 2020}
    assert set(mine.fingerprints) == {f"ipeds/{n}" for n in ("C2005_A.csv", "HD2005.csv",
                                                              "C2020_A.csv", "HD2020.csv")}
