"""The NCES CIP-2010 to CIP-2020 crosswalk: the real file loads, the NCES download's
formula cells are accepted, bad rows are refused by file, column and row, and the 2- and
4-digit transitions follow from the 6-digit map."""
from __future__ import annotations

import csv
import io

import pytest

from pseo_das.tasks.inputs.cip_crosswalk import default_crosswalk_path, read_crosswalk
from pseo_das.tasks.inputs.ingest import InputValidationError


def test_the_real_crosswalk_loads_with_its_2699_rows():
    crosswalk = read_crosswalk()
    assert len(crosswalk.rows) == 2699
    assert crosswalk.sha256 == "1295978549846e8c87ddcafb87603e4939d56cc34a50452cdc8a0c3a85b4cca6"
    assert crosswalk.six_digit["01.0000"] == "01.0000"          # no substantive change
    assert crosswalk.six_digit["01.0309"] == "01.1004"          # moved to another family
    assert crosswalk.six_digit["60.0406"] == "61.0903"          # deleted, report under
    assert len(crosswalk.six_digit) == 1720


def test_transitions_at_two_and_four_digits_follow_the_six_digit_moves():
    crosswalk = read_crosswalk()
    four = crosswalk.transitions(4)
    assert set(four.loc[four["cip2010"] == "01.03", "cip2020"]) == {"01.03", "01.10"}
    assert set(four.loc[four["cip2010"] == "19.00", "cip2020"]) == {"19.10"}   # moved whole
    two = crosswalk.transitions(2)
    assert set(two.loc[two["cip2010"] == "60", "cip2020"]) >= {"60", "61"}
    assert not four.duplicated().any() and four["cip2020"].str.fullmatch(r"\d{2}\.\d{2}").all()


def _field(value: str) -> str:
    """One value as a CSV field (quoted when it needs to be)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow([value])
    return out.getvalue()


@pytest.mark.parametrize("quoted", [False, True])
def test_the_nces_download_with_formula_cells_is_accepted(tmp_path, quoted):
    """Codes written as ="01.0101", bare (as the download has them) or CSV-quoted."""
    with open(default_crosswalk_path(), newline="") as fh:
        header, *rows = list(csv.reader(fh))
    codes = {header.index("CIPCode2010"), header.index("CIPCode2020")}
    lines = [",".join(header)]
    for row in rows:
        cells = [(_field(f'="{v}"') if quoted else f'="{v}"') if i in codes and v else _field(v)
                 for i, v in enumerate(row)]
        lines.append(",".join(cells))
    path = tmp_path / "Crosswalk2010to2020.csv"
    path.write_text("\n".join(lines) + "\n")
    assert ('"=""01.0101"""' if quoted else '="01.0101",') in path.read_text()
    assert read_crosswalk(path).six_digit == read_crosswalk().six_digit


def test_a_corrupted_crosswalk_is_refused_naming_file_column_and_row(tmp_path):
    lines = default_crosswalk_path().read_text().splitlines()
    assert lines[3].startswith("01.0000,")
    lines[3] = lines[3].replace("01.0000,", "1.0000,", 1).replace("No substantive changes",
                                                                 "Renamed")
    path = tmp_path / "Crosswalk2010to2020.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputValidationError) as refused:
        read_crosswalk(path)
    message = str(refused.value)
    assert f"{path}: input rejected" in message
    assert "column CIPCode2010" in message and "row 2: '1.0000'" in message
    assert "column Action" in message and "row 2: 'Renamed'" in message
    with pytest.raises(InputValidationError, match="crosswalk file not found"):
        read_crosswalk(tmp_path / "nowhere.csv")
