"""Pandera schemas of the confidential inputs (graduates and their earnings outcomes).

String identifiers arrive as pandas categoricals (ingest converts them), so format
checks run once per distinct code rather than once per row.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pandera.pandas as pa

from schemas.codes import (CIP2010_PATTERN, DEGREE_LEVELS, NAICS_SECTORS, OPEID_PATTERN,
                           STATE_FIPS_PATTERN, YEARS_AFTER)

GRADUATE_COLUMNS = ("person_id", "institution", "inst_state", "degree_level", "cipcode",
                    "grad_year")
OUTCOME_COLUMNS = ("person_id", "years_after", "earnings", "emp_state", "industry")
# The columns that whole-table checks read (pandera reports every column for them).
TABLE_CHECK_COLUMNS = {
    "unique_person_id_years_after": "person_id, years_after",
    "one_inst_state_per_institution": "institution, inst_state",
}
CODE_COLUMNS = ("institution", "inst_state", "degree_level", "cipcode", "emp_state",
                "industry")


def _code(pattern: str | None = None, allowed=None, nullable: bool = False) -> pa.Column:
    checks = []
    if pattern:
        checks.append(pa.Check.str_matches(pattern))
    if allowed is not None:
        checks.append(pa.Check.isin(list(allowed)))
    return pa.Column("category", checks, nullable=nullable)


def graduates_schema(first_year: int, last_year: int) -> pa.DataFrameSchema:
    """One row per graduate: the privacy unit. Duplicated person_id would put one
    graduate in two cells of a tabulation and break its sensitivity of 1."""
    return pa.DataFrameSchema(
        {
            "person_id": pa.Column("int64", unique=True),
            "institution": _code(OPEID_PATTERN),
            "inst_state": _code(STATE_FIPS_PATTERN),
            "degree_level": _code(allowed=DEGREE_LEVELS),
            "cipcode": _code(CIP2010_PATTERN),
            "grad_year": pa.Column("int64", pa.Check.in_range(first_year, last_year)),
        },
        checks=[pa.Check(_one_state_per_institution, name="one_inst_state_per_institution")],
        strict="filter", name="graduates")


def outcomes_schema() -> pa.DataFrameSchema:
    """One row per graduate and years after graduation."""
    return pa.DataFrameSchema(
        {
            "person_id": pa.Column("int64"),
            "years_after": pa.Column("int64", pa.Check.isin(list(YEARS_AFTER))),
            "earnings": pa.Column("float64", [
                pa.Check(np.isfinite, name="finite"),
                pa.Check.ge(0)], nullable=True),
            "emp_state": _code(STATE_FIPS_PATTERN, nullable=True),
            "industry": _code(allowed=NAICS_SECTORS, nullable=True),
        },
        checks=[pa.Check(_unique_person_year, name="unique_person_id_years_after")],
        strict="filter", name="outcomes")


def _unique_person_year(df: pd.DataFrame) -> pd.Series:
    return ~df.duplicated(["person_id", "years_after"], keep=False)


def _one_state_per_institution(df: pd.DataFrame) -> pd.Series:
    states = df.groupby("institution", observed=True)["inst_state"].transform("nunique")
    return states == 1
