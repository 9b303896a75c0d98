"""Pandera schemas of the confidential inputs (graduates and their earnings outcomes).

String identifiers arrive as pandas categoricals (ingest converts them), so format
checks run once per distinct code rather than once per row.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pandera.pandas as pa

from pseo_das.schemas.codes import (CIP2010_PATTERN, DEGREE_LEVELS, NAICS_SECTORS, OPEID_PATTERN,
                           STATE_FIPS, STATE_FIPS_PATTERN, YEARS_AFTER)

GRADUATE_COLUMNS = ("person_id", "institution", "inst_state", "degree_level", "cipcode",
                    "grad_year")
OUTCOME_COLUMNS = ("person_id", "years_after", "earnings", "emp_state", "industry")
# The agency's layout of earnings: one row per person, calendar year and job (nominal dollars
# of that year at that employer); tasks/inputs/degree_records.py derives the outcomes.
JOB_COLUMNS = ("person_id", "year", "earnings", "emp_state", "industry")
JOB_YEARS = (1900, 2100)
# Optional: the establishment of the job (text; empty = no job or unknown). Needed only by
# the employer-protecting flows mechanisms (flows.mechanism other than "geometric").
EMPLOYER_COLUMN = "employer_id"
EMPLOYER_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
# The columns that whole-table checks read (pandera reports every column for them).
TABLE_CHECK_COLUMNS = {
    "unique_person_id_years_after": "person_id, years_after",
    "one_inst_state_per_institution": "institution, inst_state",
    "cipcode_in_vintage_of_grad_year": "cipcode, grad_year",
    "unique_degree": ", ".join(GRADUATE_COLUMNS),
}
CODE_COLUMNS = ("institution", "inst_state", "degree_level", "cipcode", "emp_state",
                "industry", EMPLOYER_COLUMN)


def _valid_codes(values: pd.Series, valid) -> pd.Series:
    """Apply `valid` (categories -> booleans) once per distinct code, then spread it to the
    rows by their category codes. Nulls pass here: the column's `nullable` rules on them."""
    ok = np.append(np.asarray(valid(values.cat.categories), dtype=bool), True)  # code -1: null
    return pd.Series(ok[values.cat.codes.to_numpy()], index=values.index)


def _code(pattern: str | None = None, allowed=None, nullable: bool = False,
          required: bool = True) -> pa.Column:
    checks = []
    if pattern:
        checks.append(pa.Check(lambda s: _valid_codes(s, lambda c: c.str.fullmatch(pattern)),
                               name=f"str_matches('{pattern}')", ignore_na=False))
    if allowed is not None:
        allowed = list(allowed)
        checks.append(pa.Check(lambda s: _valid_codes(s, lambda c: c.isin(allowed)),
                               name=f"isin({allowed})", ignore_na=False))
    return pa.Column("category", checks, nullable=nullable, required=required)


class CipVintages:
    """The CIP codes valid in each vintage, and the first graduation year coded in
    CIP-2020: a graduate's code must exist in the vintage of their graduation year."""

    def __init__(self, codes_2010: frozenset[str], codes_2020: frozenset[str], switch_year: int):
        self.codes_2010, self.codes_2020, self.switch_year = codes_2010, codes_2020, switch_year

    def check(self, df: pd.DataFrame) -> pd.Series:
        codes = df["cipcode"]
        valid = np.stack([codes.cat.categories.isin(list(self.codes_2010)),
                          codes.cat.categories.isin(list(self.codes_2020))])
        vintage = (df["grad_year"].to_numpy() >= self.switch_year).astype(np.intp)
        known = codes.cat.codes.to_numpy()
        ok = valid[vintage, np.maximum(known, 0)] & (known >= 0)
        return pd.Series(ok, index=df.index)


def graduates_schema(first_year: int, last_year: int,
                     cip_vintages: CipVintages | None = None,
                     degrees_per_person: bool = False) -> pa.DataFrameSchema:
    """One row per graduate: the privacy unit. Duplicated person_id would put one
    graduate in two cells of a tabulation and break its sensitivity of 1. With
    `degrees_per_person` (the jobs layout), one row per degree instead: a person may hold
    several (the contribution bound keeps at most k of them), an exact duplicate row is
    refused. With `cip_vintages`, each code must be a 6-digit code of the CIP vintage of
    its graduation year (CIP-2010 before the switch year, CIP-2020 from it)."""
    vintage_checks = [] if cip_vintages is None else [
        pa.Check(cip_vintages.check, name="cipcode_in_vintage_of_grad_year")]
    person_checks = [] if degrees_per_person else [pa.Check(_unique_values, name="unique")]
    if degrees_per_person:
        vintage_checks.append(pa.Check(_unique_degree, name="unique_degree"))
    return pa.DataFrameSchema(
        {
            "person_id": pa.Column("int64", person_checks),
            "institution": _code(OPEID_PATTERN),
            "inst_state": _code(STATE_FIPS_PATTERN, STATE_FIPS),
            "degree_level": _code(allowed=DEGREE_LEVELS),
            "cipcode": _code(CIP2010_PATTERN),
            "grad_year": pa.Column("int64", pa.Check.in_range(first_year, last_year)),
        },
        checks=[pa.Check(_one_state_per_institution, name="one_inst_state_per_institution")]
        + vintage_checks,
        name="graduates")


def outcomes_schema() -> pa.DataFrameSchema:
    """One row per graduate and years after graduation."""
    return pa.DataFrameSchema(
        {
            "person_id": pa.Column("int64"),
            "years_after": pa.Column("int64", pa.Check(
                lambda y: pd.Series(np.isin(y.to_numpy(), YEARS_AFTER), index=y.index),
                name=f"isin({list(YEARS_AFTER)})")),
            "earnings": pa.Column("float64", [  # NaN (no job) passes both checks
                pa.Check(lambda e: ~np.isinf(e), name="finite", ignore_na=False),
                pa.Check(lambda e: ~(e < 0), name="greater_than_or_equal_to(0)", ignore_na=False)],
                nullable=True),
            "emp_state": _code(STATE_FIPS_PATTERN, STATE_FIPS, nullable=True),
            "industry": _code(allowed=NAICS_SECTORS, nullable=True),
            EMPLOYER_COLUMN: _code(EMPLOYER_ID_PATTERN, nullable=True, required=False),
        },
        checks=[pa.Check(_unique_person_year, name="unique_person_id_years_after")],
        name="outcomes")


def jobs_schema() -> pa.DataFrameSchema:
    """One row per person, calendar year and job: earnings (nominal dollars of that year at
    that employer, required) and the job's state and industry (empty: not on record)."""
    return pa.DataFrameSchema(
        {
            "person_id": pa.Column("int64"),
            "year": pa.Column("int64", pa.Check.in_range(*JOB_YEARS)),
            "earnings": pa.Column("float64", [
                pa.Check(lambda e: ~np.isinf(e), name="finite"),
                pa.Check(lambda e: ~(e < 0), name="greater_than_or_equal_to(0)")]),
            "emp_state": _code(STATE_FIPS_PATTERN, STATE_FIPS, nullable=True),
            "industry": _code(allowed=NAICS_SECTORS, nullable=True),
            EMPLOYER_COLUMN: _code(EMPLOYER_ID_PATTERN, nullable=True, required=False),
        },
        name="jobs")


def duplicated_rows(*keys: np.ndarray) -> np.ndarray:
    """Rows whose key (a tuple of integer columns) occurs more than once.

    Inputs usually arrive sorted by key, which is checked in one pass; otherwise a sort
    finds the duplicates (hashing ten million keys is several times slower).
    """
    n = len(keys[0])
    if n < 2:
        return np.zeros(n, dtype=bool)
    increasing = np.zeros(n - 1, dtype=bool)
    tied = np.ones(n - 1, dtype=bool)
    for key in keys:  # lexicographic comparison of consecutive rows
        step = np.diff(key)
        increasing |= tied & (step > 0)
        tied &= step == 0
    if increasing.all():
        return np.zeros(n, dtype=bool)
    order = np.lexsort(keys[::-1])
    same = np.ones(n - 1, dtype=bool)
    for key in keys:
        ordered = key[order]
        same &= ordered[1:] == ordered[:-1]
    in_sorted = np.zeros(n, dtype=bool)
    in_sorted[1:] |= same
    in_sorted[:-1] |= same
    duplicated = np.empty(n, dtype=bool)
    duplicated[order] = in_sorted
    return duplicated


def _unique_values(ids: pd.Series) -> pd.Series:
    return pd.Series(~duplicated_rows(ids.to_numpy()), index=ids.index)


def _unique_degree(df: pd.DataFrame) -> pd.Series:
    """Rows that no other row repeats exactly (the same degree twice would count twice)."""
    keys = [df["person_id"].to_numpy(), df["grad_year"].to_numpy()] + [
        df[c].cat.codes.to_numpy().astype(np.int64)
        if isinstance(df[c].dtype, pd.CategoricalDtype) else pd.factorize(df[c])[0]
        for c in ("institution", "inst_state", "degree_level", "cipcode")]
    return pd.Series(~duplicated_rows(*keys), index=df.index)


def _unique_person_year(df: pd.DataFrame) -> pd.Series:
    return pd.Series(~duplicated_rows(df["person_id"].to_numpy(), df["years_after"].to_numpy()),
                     index=df.index)


def _one_state_per_institution(df: pd.DataFrame) -> pd.Series:
    """Rows whose institution has exactly one inst_state in `df` (missing states not
    counted; a missing institution fails). Counted on the category codes: no groupby."""
    institution, state = df["institution"], df["inst_state"]
    if not (isinstance(institution.dtype, pd.CategoricalDtype)
            and isinstance(state.dtype, pd.CategoricalDtype)):
        return df.groupby("institution", observed=True)["inst_state"].transform("nunique") == 1
    inst = institution.cat.codes.to_numpy().astype(np.int64)
    code = state.cat.codes.to_numpy().astype(np.int64)
    n_inst, n_states = len(institution.cat.categories), len(state.cat.categories)
    known = (inst >= 0) & (code >= 0)
    pairs = np.unique(inst[known] * n_states + code[known])
    states = np.append(np.bincount(pairs // max(n_states, 1), minlength=n_inst), 0)
    return pd.Series(states[inst] == 1, index=df.index)  # code -1 picks the appended 0
