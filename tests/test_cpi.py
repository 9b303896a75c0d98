"""The BLS CPI-U reader: the packaged extract loads with its real values, a real BLS
download with other series and monthly periods keeps only the annual CPI-U, and bad rows
or missing years are refused naming the file, column, row or years."""
from __future__ import annotations

from decimal import Decimal

import pytest

from pseo_das.tasks.inputs.cpi import default_cpi_path, read_cpi
from pseo_das.tasks.inputs.ingest import InputValidationError

HEADER = "series_id        \tyear\tperiod\t       value\tfootnote_codes\n"


def test_the_packaged_extract_has_the_real_annual_averages():
    cpi = read_cpi()
    assert sorted(cpi.annual) == list(range(1997, 2025))
    # BLS annual averages of CUUR0000SA0 (the bins' base year, the schema's dollar year)
    assert (cpi.value(2016), cpi.value(2023), cpi.value(2001)) == \
        (Decimal("240.007"), Decimal("304.702"), Decimal("177.100"))


def test_a_real_download_keeps_only_the_annual_cpi_u(tmp_path):
    path = tmp_path / "cu.data.1.AllItems"
    path.write_text(HEADER
                    + "CUUR0000SA0      \t2016\tM01\t     236.916\t\n"
                    + "CUUR0000SA0      \t2016\tM13\t     240.007\t\n"
                    + "CUSR0000SA0      \t2016\tM13\t     999.000\t\n"
                    + "CUUR0000SA0      \t2016\tS01\t     238.778\t\n"
                    + "CUUR0000SA0      \t2023\tM13\t     304.702\t\n")
    assert read_cpi(path).annual == {2016: Decimal("240.007"), 2023: Decimal("304.702")}


def test_bad_rows_and_missing_years_are_refused(tmp_path):
    path = tmp_path / "cu.data.bad"
    path.write_text(HEADER + "CUUR0000SA0\t2016\tM13\t240.007\t\n"
                    + "CUUR0000SA0\t2017\tM13\t-245.1\t\n")
    with pytest.raises(InputValidationError, match=r"cu.data.bad: input rejected.*\n.*column "
                       r"value.*1 bad row\(s\); e.g. row 1: '-245.1'"):
        read_cpi(path)
    with pytest.raises(InputValidationError, match=r"no CPI-U annual average \(CUUR0000SA0, "
                       r"M13\) for 1990, 2030; the file has 1997-2024"):
        read_cpi(default_cpi_path()).require([2016, 1990, 2030])
    path.write_text("year,value\n2016,240.007\n")
    with pytest.raises(InputValidationError, match="missing column"):
        read_cpi(path)


@pytest.mark.parametrize("value, expected", [
    ("0.001", ["2016 = 0.001 after 2015 = 237.017 (-100.0%)", "2017 = 245.120 after 2016 = 0.001"]),
    ("0.000", ["2016 = 0.000: not positive"]),
    ("24.0007", ["2016 = 24.0007 after 2015 = 237.017 (-89.9%)"]),     # a slipped decimal
    ("290.007", ["2016 = 290.007 after 2015 = 237.017 (+22.4%)"]),
])
def test_an_implausible_annual_average_is_refused_before_anything(tmp_path, value, expected):
    """The series is positive and, from 1950, moves by -1% to +15% a year (issue 31: a 2016
    value of 0.001 published median earnings of $11 billion)."""
    path = tmp_path / "cu.data.1.AllItems"
    path.write_text(default_cpi_path().read_text().replace("     240.007", f"{value:>12}"))
    with pytest.raises(InputValidationError) as refused:
        read_cpi(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: implausible CPI-U annual averages (CUUR0000SA0, M13): ")
    for part in expected:
        assert part in message, message


def test_the_band_compounds_over_missing_years_and_holds_the_real_deflation_of_2009():
    from pseo_das.tasks.inputs.cpi import implausible_values
    real = read_cpi().annual
    assert real[2009] < real[2008] and implausible_values(real) == []
    assert implausible_values({2016: Decimal("240.007"), 2023: Decimal("304.702")}) == []
    assert implausible_values({1920: Decimal("20.0"), 1921: Decimal("17.9")}) == []   # 1921
