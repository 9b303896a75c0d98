"""Pandera schemas of the public reference inputs of the flows post-processing:
LEHD Job-to-Job origin-destination flows (J2JOD), BLS QCEW annual averages, and the
states' earnings-record coverage by year.

Each file has two schemas: a *layout* schema for the rows the loader keeps from the
public file, checked while every value is still text (codes keep their leading zeros,
and a number that does not parse is reported with its row instead of turning into a
missing value), and a *table* schema for the aggregated frame the release uses.
Rows are identified by their position in the file (0 = first data row).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pandera.pandas as pa

from pseo_das.schemas.codes import NAICS_SECTORS, STATE_FIPS, STATE_FIPS_PATTERN, code_matches

# --- LEHD J2J origin-destination (j2jod) -------------------------------------------------
# Identifiers of the j2jod layout (LEHD public-use schema, "Identifiers for j2jod"): the
# destination job first, then the origin job (_orig). Indicators EE and AQHire follow.
J2J_AGGREGATE = {          # the one slice kept: state to state, everything else "all"
    "periodicity": "Q",    # quarterly data
    "seasonadj": "U",      # not seasonally adjusted (counts are summed over quarters)
    "geo_level": "S", "geo_level_orig": "S",        # state -> state
    "ind_level": "A", "industry": "00",             # all NAICS sectors (destination)
    "ind_level_orig": "A", "industry_orig": "00",   # all NAICS sectors (origin)
    "ownercode": "A00", "ownercode_orig": "A00",    # state and local government + private
    "sex": "0", "agegrp": "A00", "race": "A0", "ethnicity": "A0", "education": "E0",
    "firmage": "0", "firmsize": "0", "firmage_orig": "0", "firmsize_orig": "0",
}
J2J_HIRES = ("EE", "AQHire")  # job-to-job hires: continuous employment + brief nonemployment
J2J_COLUMNS = tuple(J2J_AGGREGATE) + ("geography", "geography_orig", "year", "quarter") + J2J_HIRES
J2J_KEY = ("geography_orig", "geography", "year", "quarter")

# --- BLS QCEW annual averages (open-data / downloadable CSV layout) ------------------------
QCEW_STATE_SECTOR_LEVEL = "54"          # agglvl_code "State, NAICS Sector -- by ownership sector"
QCEW_ALL_SIZES, QCEW_ANNUAL = "0", "A"  # size_code, qtr
# own_code at that level: 1 federal, 2 state, 3 local government, 5 private. Their sum is
# a sector's total covered employment (BLS publishes own_code 0 only for industry 10).
QCEW_OWNERSHIPS = ("1", "2", "3", "5")
QCEW_UNCLASSIFIED = "99"                # "Unclassified" sector: published, not a PSEO sector
QCEW_TERRITORIES = ("72000", "78000")   # Puerto Rico, Virgin Islands: outside the 51 states
QCEW_COLUMNS = ("area_fips", "own_code", "industry_code", "agglvl_code", "size_code", "year",
                "qtr", "disclosure_code", "annual_avg_emplvl")
QCEW_KEY = ("area_fips", "own_code", "industry_code", "year")

# --- State coverage (earnings records available, by year) -----------------------------------
COVERAGE_COLUMNS = ("state", "first_year", "last_year")
EARLIEST_YEAR, LATEST_YEAR = 1990, 2100  # plausibility bounds of the coverage years

# Columns named in the message of each whole-table check (pandera reports none for them).
TABLE_CHECK_COLUMNS = {
    "unique_j2j_key": ", ".join(J2J_KEY),
    "unique_qcew_key": ", ".join(QCEW_KEY),
    "unique_origin_destination": "origin_state, destination_state",
    "unique_state_industry": "state, industry",
    "first_year_le_last_year": "first_year, last_year",
}


def _state_code() -> list[pa.Check]:
    return [code_matches(STATE_FIPS_PATTERN),
            pa.Check(lambda s: s.isin(STATE_FIPS), name="isin(STATE_FIPS: 50 states + DC)")]


def _number(nullable: bool) -> pa.Column:
    """A count that arrives as text: it must parse as a finite number >= 0 (empty passes
    when nullable: LEHD and BLS leave suppressed values empty)."""
    def parses(s: pd.Series) -> pd.Series:
        value = pd.to_numeric(s, errors="coerce")
        return s.isna() | (value.notna() & np.isfinite(value))

    def non_negative(s: pd.Series) -> pd.Series:
        return ~(pd.to_numeric(s, errors="coerce") < 0)

    return pa.Column(str, [pa.Check(parses, name="is_number", ignore_na=False),
                           pa.Check(non_negative, name="greater_than_or_equal_to(0)",
                                    ignore_na=False)],
                     nullable=nullable)


def _year() -> pa.Column:
    return pa.Column(str, code_matches(r"^[0-9]{4}$"))


def _unique(columns: tuple[str, ...], name: str) -> pa.Check:
    return pa.Check(lambda df: ~df.duplicated(list(columns), keep=False), name=name)


def j2j_layout_schema() -> pa.DataFrameSchema:
    """The state-to-state aggregate rows of a j2jod file (all other rows are ignored).
    One row per origin, destination and quarter: overlapping files may repeat a row,
    identical repeats are dropped before this check, conflicting ones are rejected."""
    return pa.DataFrameSchema(
        {
            "geography_orig": pa.Column(str, _state_code()),
            "geography": pa.Column(str, _state_code()),
            "year": _year(),
            "quarter": pa.Column(str, pa.Check.isin(["1", "2", "3", "4"])),
            "EE": _number(nullable=True),
            "AQHire": _number(nullable=True),
        },
        checks=[_unique(J2J_KEY, "unique_j2j_key")],
        name="j2j_state_flows")


def qcew_layout_schema() -> pa.DataFrameSchema:
    """The state x NAICS sector x ownership annual-average rows of a QCEW file."""
    return pa.DataFrameSchema(
        {
            "area_fips": pa.Column(str, [
                code_matches(r"^[0-9]{2}000$"),
                pa.Check(lambda s: s.str[:2].isin(STATE_FIPS),
                         name="state part isin(STATE_FIPS: 50 states + DC)")]),
            "industry_code": pa.Column(str, pa.Check(
                lambda s: s.isin(NAICS_SECTORS + (QCEW_UNCLASSIFIED,)),
                name="isin(NAICS sectors 11 .. 92, 99)")),
            "year": _year(),
            "annual_avg_emplvl": _number(nullable=True),
        },
        checks=[_unique(QCEW_KEY, "unique_qcew_key")],
        name="qcew_state_sector")


def coverage_layout_schema() -> pa.DataFrameSchema:
    """state_coverage.csv as text: one row per covered state."""
    return pa.DataFrameSchema(
        {
            "state": pa.Column(str, _state_code(), unique=True),
            "first_year": _year(),
            "last_year": _year(),
        },
        name="state_coverage")


def j2j_schema() -> pa.DataFrameSchema:
    """J2J hires summed over the file's quarters: one row per (origin, destination)."""
    return pa.DataFrameSchema(
        {
            "origin_state": pa.Column(str, _state_code()),
            "destination_state": pa.Column(str, _state_code()),
            "hires": pa.Column("float64", [pa.Check.ge(0), pa.Check(np.isfinite, name="finite")]),
        },
        checks=[_unique(("origin_state", "destination_state"), "unique_origin_destination")],
        strict=True, name="j2j")


def qcew_schema() -> pa.DataFrameSchema:
    """QCEW employment averaged over the file's years: one row per (state, sector)."""
    return pa.DataFrameSchema(
        {
            "state": pa.Column(str, _state_code()),
            "industry": pa.Column(str, pa.Check(lambda s: s.isin(NAICS_SECTORS),
                                                name="isin(NAICS_SECTORS)")),
            "employment": pa.Column("float64", [pa.Check.ge(0),
                                                pa.Check(np.isfinite, name="finite")]),
        },
        checks=[_unique(("state", "industry"), "unique_state_industry")],
        strict=True, name="qcew")


def coverage_schema() -> pa.DataFrameSchema:
    """Coverage with integer years; a state covers first_year..last_year inclusive."""
    return pa.DataFrameSchema(
        {
            "state": pa.Column(str, _state_code(), unique=True),
            "first_year": pa.Column("int64", pa.Check.in_range(EARLIEST_YEAR, LATEST_YEAR)),
            "last_year": pa.Column("int64", pa.Check.in_range(EARLIEST_YEAR, LATEST_YEAR)),
        },
        checks=[pa.Check(lambda df: df["first_year"] <= df["last_year"],
                         name="first_year_le_last_year")],
        strict=True, name="coverage")
