"""The public downloads as their publishers ship them (issue 32, item 3): each fixture of
tests/data/public-layouts/ (hand-made rows in the real headers and encodings) is read, and
what is not one of the known layouts is still refused naming the file, column and rows."""
from __future__ import annotations

import gzip
import shutil
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from pseo_das.schemas.codes import STATE_FIPS
from pseo_das.tasks.inputs.cip_crosswalk import read_crosswalk
from pseo_das.tasks.inputs.cpi import read_cpi
from pseo_das.tasks.inputs.ingest import InputValidationError
from pseo_das.tasks.inputs.ipeds import read_completions
from pseo_das.tasks.inputs.reference_inputs import (COVERAGE_FILE, J2J_FILE, default_reference_dir,
                                                    is_reference_input, load_reference_inputs)

LAYOUTS = Path(__file__).parent / "data" / "public-layouts"


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """These tests never run a Prefect flow or task: skip the session's Prefect server."""
    yield


# --- NCES CIP crosswalk ----------------------------------------------------------------------

def test_the_crosswalk_layouts_in_circulation_read_the_same():
    """The NCES download (quoted header, ="01.0101" cells, CRLF) and a public copy (header
    'Text change', two empty columns, CIPCode2010 and CIPCode2020 repeated as numbers)."""
    nces = read_crosswalk(LAYOUTS / "nces" / "Crosswalk2010to2020.csv")
    copy = read_crosswalk(LAYOUTS / "nces-copy" / "Crosswalk2010to2020.csv")
    assert b'="01.0101",' in (LAYOUTS / "nces" / "Crosswalk2010to2020.csv").read_bytes()
    assert b"\r\n" in (LAYOUTS / "nces" / "Crosswalk2010to2020.csv").read_bytes()
    assert nces.six_digit == copy.six_digit == {
        "01.0101": "01.0101", "01.0309": "01.1004", "01.1001": "01.1001",
        "11.0701": "11.0701", "60.0406": "61.0903"}
    assert nces.rows.equals(copy.rows) and len(nces.rows) == 14
    packaged = read_crosswalk().six_digit
    assert all(packaged[code] == new for code, new in nces.six_digit.items())
    assert nces.codes_2020 == {"01.0101", "01.1004", "01.0310", "01.1001", "01.1003", "11.0701"}


@pytest.mark.parametrize("header, problem", [
    ("CIPCode2010,CIPTitle2010,Action,Change,CIPCode2020,CIPTitle2020", "Change"),
    ("CIPTitle2010,CIPCode2010,Action,TextChange,CIPCode2020,CIPTitle2020", "CIPTitle2010, CIPCode2010"),
    ("CIPCode2010,CIPTitle2010,Action,TextChange,CIPCode2020", "CIPCode2020"),
])
def test_a_crosswalk_in_another_layout_is_refused_naming_its_columns(tmp_path, header, problem):
    source = (LAYOUTS / "nces-copy" / "Crosswalk2010to2020.csv").read_text().splitlines()
    path = tmp_path / "Crosswalk2010to2020.csv"
    path.write_text("\n".join([header] + source[1:]) + "\n")
    with pytest.raises(InputValidationError) as refused:
        read_crosswalk(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: not the NCES crosswalk layout: its first columns are ")
    assert problem in message and "'Text change'" in message


def test_a_bad_row_of_the_copy_is_named_by_column_and_row(tmp_path):
    lines = (LAYOUTS / "nces-copy" / "Crosswalk2010to2020.csv").read_text().splitlines()
    lines[5] = lines[5].replace("Moved to", "Moved")
    path = tmp_path / "Crosswalk2010to2020.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputValidationError, match=r"column Action: .*1 bad row\(s\); e.g. row 4: "
                                                   r"'Moved'"):
        read_crosswalk(path)
    path.write_text(lines[0] + "\n")
    with pytest.raises(InputValidationError, match="no rows"):
        read_crosswalk(path)


# --- IPEDS completions -----------------------------------------------------------------------

def test_ipeds_completions_as_shipped_drop_subtotals_and_totals():
    """C2018_A: the 64 columns of the complete data file (X* imputation flags beside each
    count), CIPCODE quoted, AWLEVEL 05, 2- and 4-digit subtotal rows and 99 totals."""
    path = LAYOUTS / "ipeds" / "C2018_A.csv"
    header = path.read_text().splitlines()[0].split(",")
    assert len(header) == 64 and header[4:6] == ["XCTOTALT", "CTOTALT"]
    awards = read_completions(path, frozenset(read_crosswalk().six_digit), "CIP-2010")
    assert awards.to_dict("records") == [
        {"unitid": "100654", "cipcode": "01.0999", "degree_level": "05", "grad_year": 2018, "awards": 6},
        {"unitid": "100654", "cipcode": "01.1001", "degree_level": "05", "grad_year": 2018, "awards": 8},
        {"unitid": "100654", "cipcode": "01.1001", "degree_level": "17", "grad_year": 2018, "awards": 4},
        {"unitid": "100654", "cipcode": "11.0701", "degree_level": "07", "grad_year": 2018, "awards": 12},
        {"unitid": "100663", "cipcode": "11.0701", "degree_level": "05", "grad_year": 2018, "awards": 231},
        {"unitid": "100663", "cipcode": "11.0701", "degree_level": "03", "grad_year": 2018, "awards": 3},
    ]


@pytest.mark.parametrize("cipcode", ["1.01", "01.010", "1", "11.07x"])
def test_a_cipcode_that_is_neither_a_program_nor_a_subtotal_is_refused(tmp_path, cipcode):
    path = tmp_path / "C2018_A.csv"
    path.write_text((LAYOUTS / "ipeds" / "C2018_A.csv").read_text()
                    .replace('100663,"11.07",', f'100663,"{cipcode}",'))
    with pytest.raises(InputValidationError, match=rf"C2018_A.csv: input rejected.*\n  column "
                                                   rf"CIPCODE: .*row 13: '0?{cipcode}'"):
        read_completions(path)


# --- BLS CPI -----------------------------------------------------------------------------------

def test_the_whole_cpi_file_keeps_only_the_annual_cpi_u():
    """cu.data.1.AllItems: every series (seasonally adjusted, other areas, the old base,
    semiannual) and period (months, M13, S01-S03); only CUUR0000SA0 M13 is used."""
    cpi = read_cpi(LAYOUTS / "bls" / "cu.data.1.AllItems")
    assert cpi.annual == {1913: Decimal("9.883"), 2015: Decimal("237.017"),
                          2016: Decimal("240.007"), 2017: Decimal("245.120"),
                          2023: Decimal("304.702")}


def test_only_the_cpi_u_rows_are_checked(tmp_path):
    """A row of another series the release does not read does not stop it; a bad CPI-U
    row does, named by its row in the file."""
    text = (LAYOUTS / "bls" / "cu.data.1.AllItems").read_text()
    path = tmp_path / "cu.data.1.AllItems"
    path.write_text(text.replace("     263.512", "           -"))
    assert read_cpi(path).value(2016) == Decimal("240.007")
    path.write_text(text.replace("     245.120", "        245,1"))
    with pytest.raises(InputValidationError, match=r"column value: .*1 bad row\(s\); e.g. row 12: "
                                                   r"'245,1'"):
        read_cpi(path)


# --- LEHD J2J and QCEW as folders of downloads ---------------------------------------------------

def S(code: str) -> int:
    return STATE_FIPS.index(code)


def reference_dir(tmp_path: Path, *folders: str) -> Path:
    """A reference folder with the fixtures' `folders` and the packaged other files."""
    directory = tmp_path / "reference"
    directory.mkdir()
    for name in ("j2j_state_flows.csv", "qcew_state_sector.csv", COVERAGE_FILE):
        shutil.copy(default_reference_dir() / name, directory / name)
    for folder in folders:
        shutil.copytree(LAYOUTS / folder, directory / folder)
        (directory / {"j2jod": J2J_FILE, "qcew": "qcew_state_sector.csv"}[folder]).unlink()
    return directory


def test_the_per_state_j2jod_files_are_concatenated(tmp_path):
    reference = load_reference_inputs(reference_dir(tmp_path, "j2jod"))
    matrix = reference.j2j_matrix()
    assert matrix[S("06"), S("06")] == 401233 + 160210 + 412870 + 171455
    assert matrix[S("06"), S("36")] == 5120 + 2333           # in both states' files: once
    assert matrix[S("36"), S("06")] == 4877 + 1950 + 4601    # a suppressed AQHire counts 0
    assert matrix[S("36"), S("36")] == 233110 + 90511
    assert matrix.sum() == matrix[[S("06"), S("36")]][:, [S("06"), S("36")]].sum()
    assert sorted(k for k in reference.fingerprints if k.startswith("j2jod/")) == [
        "j2jod/j2jod_ca_d_f_gs_ns_oslp_u.csv.gz", "j2jod/j2jod_ny_d_f_gs_ns_oslp_u.csv.gz"]
    assert all(map(is_reference_input, reference.fingerprints)) and J2J_FILE not in reference.fingerprints


def test_the_qcew_csvs_by_area_and_by_industry_are_concatenated(tmp_path):
    """Statewide files by area (2015), a county file in Windows-1252 (its rows ignored),
    and an industry file (2016): each ownership is averaged over its years, then summed."""
    reference = load_reference_inputs(reference_dir(tmp_path, "qcew"))
    cells = {(s, k): e for s, k, e in reference.qcew.itertuples(index=False)}
    assert cells == {("01", "11"): 9100.0,
                     ("01", "61"): (410 + 430) / 2 + (49800 + 50200) / 2 + (97300 + 98700) / 2
                     + (16200 + 16800) / 2,
                     ("56", "92"): 5100.0 + 6900 + 11400}   # WY 11 is suppressed ("N"): absent
    assert len([k for k in reference.fingerprints if k.startswith("qcew/")]) == 4


def test_a_bad_row_in_a_folder_is_named_by_file_and_row(tmp_path):
    directory = reference_dir(tmp_path, "j2jod")
    path = directory / "j2jod" / "j2jod_ny_d_f_gs_ns_oslp_u.csv.gz"
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    lines[3] = lines[3].replace(",4877,", ",4878,")     # conflicts with the CA file's row
    lines[1] = lines[1].replace("S,36,A,00,A00,0,0,233110", "S,3,A,00,A00,0,0,233110")
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(InputValidationError) as refused:
        load_reference_inputs(directory)
    message = str(refused.value)
    assert f"{directory / 'j2jod'}: input rejected" in message
    assert "column geography_orig: check str_matches" in message
    assert "row 6 (j2jod_ny_d_f_gs_ns_oslp_u.csv.gz row 0): '3'" in message
    assert ("unique_j2j_key failed, 2 bad row(s); e.g. row 3 (j2jod_ca_d_f_gs_ns_oslp_u.csv.gz "
            "row 3), row 8 (j2jod_ny_d_f_gs_ns_oslp_u.csv.gz row 2)") in message


def test_a_folder_beside_its_file_or_without_downloads_is_refused(tmp_path):
    directory = reference_dir(tmp_path, "qcew")
    shutil.copy(default_reference_dir() / "qcew_state_sector.csv", directory)
    (directory / J2J_FILE).unlink()
    (directory / "j2jod").mkdir()
    (directory / "j2jod" / "j2jod_ca_avail.csv").write_text("metadata\n")
    with pytest.raises(InputValidationError) as refused:
        load_reference_inputs(directory)
    assert str(refused.value).splitlines() == [
        f"{directory / 'j2jod'}: a folder without j2jod_*.csv.gz or j2jod_*.csv files",
        f"{directory}: both qcew_state_sector.csv and qcew/ are there; which one is the release's "
        "input is ambiguous: keep one"]
    assert np.all(load_reference_inputs(default_reference_dir()).j2j_matrix() >= 0)
