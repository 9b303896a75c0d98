"""Pandera schema of the BLS CPI flat files (cu.data.*: tab-separated series_id, year,
period, value, footnote_codes; fields padded with spaces), checked on their text after the
padding is stripped. Rows are identified by their position in the file (0 = first data
row)."""
from __future__ import annotations

import pandera.pandas as pa

from pseo_das.schemas.codes import code_matches

CPI_COLUMNS = ("series_id", "year", "period", "value")
CPI_U_SERIES = "CUUR0000SA0"      # CPI-U, U.S. city average, all items, not seasonally adjusted
ANNUAL_AVERAGE = "M13"            # the period code of the annual average


def cpi_schema() -> pa.DataFrameSchema:
    return pa.DataFrameSchema(
        {
            "series_id": pa.Column(str, code_matches(r"^[A-Z0-9]{4,20}$")),
            "year": pa.Column(str, code_matches(r"^(19|20)[0-9]{2}$")),
            "period": pa.Column(str, code_matches(r"^(M(0[1-9]|1[0-3])|S0[1-3])$")),
            "value": pa.Column(str, code_matches(r"^[0-9]+(\.[0-9]+)?$",
                                                         name="a positive decimal number")),
        },
        unique=["series_id", "year", "period"],
        name="BLS CPI")
