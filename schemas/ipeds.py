"""Pandera schemas of the IPEDS files the CIP recast reads: completions (C{YYYY}_A) and
the institutional directory (HD{YYYY}), checked on their text as published. Rows are
identified by their position in the file (0 = first data row)."""
from __future__ import annotations

import pandera.pandas as pa

from pseo_das.schemas.codes import code_matches

COMPLETIONS_COLUMNS = ("UNITID", "CIPCODE", "MAJORNUM", "AWLEVEL", "CTOTALT")
DIRECTORY_COLUMNS = ("UNITID", "OPEID", "INSTNM", "STABBR")
TOTAL_CIPCODE = "99"             # completions rows that total all programs
SUBTOTAL_CIPCODE = r"^[0-9]{2}(\.[0-9]{2})?$"   # 2- and 4-digit subtotal rows (and the 99 totals)
# IPEDS award level (AWLEVEL) -> PSEO degree level. 1-8, 17 and 18 are the same levels;
# 20 (certificates under 12 weeks) and 21 (12 weeks to 1 year), used from 2020-21, are both
# "certificate < 1 year" (01); 19 (doctor's degree - other) has no PSEO degree level.
AWLEVEL_DEGREE = {"1": "01", "20": "01", "21": "01", "2": "02", "3": "03", "4": "04",
                  "5": "05", "6": "06", "7": "07", "8": "08", "17": "17", "18": "18"}
AWLEVELS = tuple(AWLEVEL_DEGREE) + ("19",)


def completions_schema(codes: frozenset[str] | None = None,
                       vintage: str = "") -> pa.DataFrameSchema:
    """`codes`: the 6-digit CIP codes of the file's vintage (named `vintage`, e.g.
    CIP-2010), when CIPCODE must be one of them."""
    cipcode = [code_matches(r"^[0-9]{2}\.[0-9]{4}$")]
    if codes is not None:
        cipcode.append(pa.Check(lambda s: s.isin(codes), element_wise=False,
                                name=f"a {vintage} code"))
    return pa.DataFrameSchema(
        {
            "UNITID": pa.Column(str, code_matches(r"^[0-9]{6}$")),
            "CIPCODE": pa.Column(str, cipcode),
            "MAJORNUM": pa.Column(str, pa.Check.isin(["1", "2"])),
            "AWLEVEL": pa.Column(str, pa.Check.isin(list(AWLEVELS))),
            "CTOTALT": pa.Column(str, code_matches(r"^[0-9]+$")),
        }, name="IPEDS completions")


def directory_schema() -> pa.DataFrameSchema:
    return pa.DataFrameSchema(
        {
            "UNITID": pa.Column(str, code_matches(r"^[0-9]{6}$")),
            "OPEID": pa.Column(str, code_matches(r"^([0-9]{8}|-[0-9])$")),
            "INSTNM": pa.Column(str),
            "STABBR": pa.Column(str, code_matches(r"^[A-Z]{2}$")),
        }, name="IPEDS directory")
