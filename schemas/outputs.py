"""Pandera schemas of the public files (pseoe.csv, pseoh.csv, pseof.csv)."""
from __future__ import annotations

import pandas as pd
import pandera.pandas as pa

from pseo_das.schemas.codes import (CENSUS_DIVISIONS, DEGREE_LEVELS, NAICS_SECTORS, OPEID_PATTERN,
                           STATUS_NOT_AVAILABLE, STATUS_OK, STATUS_SUPPRESSED)

STATUS_CODES = [STATUS_OK, STATUS_NOT_AVAILABLE, STATUS_SUPPRESSED]
_ids = {
    "inst_level": pa.Column(str, pa.Check.isin(["I", "S", "N"])),
    "institution": pa.Column(str, pa.Check.str_matches(OPEID_PATTERN)),
    "degree_level": pa.Column(str, pa.Check.isin(list(DEGREE_LEVELS))),
    "cip_level": pa.Column(str, pa.Check.isin(["A", "2", "4"])),
    "cipcode": pa.Column(str, pa.Check.str_matches(r"^(\d{2}|\d{4})$")),
    "grad_cohort": pa.Column("int64", pa.Check.in_range(1900, 2100)),
    "grad_cohort_years": pa.Column("int64", pa.Check.in_range(1, 10)),
}


def pseoe_schema(years_after: tuple[int, ...], percentiles: tuple[int, ...]) -> pa.DataFrameSchema:
    columns = dict(_ids)
    for k in years_after:
        for p in percentiles:
            columns[f"y{k}_p{p}_earnings"] = pa.Column("Int64", pa.Check.ge(0), nullable=True)
        columns[f"y{k}_grads_earn"] = pa.Column("Int64", pa.Check.ge(0), nullable=True)
    for k in years_after:
        for what in ("earnings", "grads_earn"):
            columns[f"status_y{k}_{what}"] = pa.Column("int64", pa.Check.isin(STATUS_CODES))
    return pa.DataFrameSchema(
        columns, strict=True, ordered=True, name="pseoe",
        unique=["inst_level", "institution", "degree_level", "cip_level", "cipcode", "grad_cohort"],
        checks=[pa.Check(lambda df: _published_iff_status_ok(df, years_after),
                         name="values present exactly where status is 1")])


def _published_iff_status_ok(df: pd.DataFrame, years_after: tuple[int, ...]) -> pd.Series:
    ok = pd.Series(True, index=df.index)
    for k in years_after:
        ok &= df[f"y{k}_grads_earn"].notna() == (df[f"status_y{k}_grads_earn"] == 1)
    return ok


def pseoh_schema() -> pa.DataFrameSchema:
    columns = dict(_ids)
    columns.update({
        "years_after": pa.Column("int64", pa.Check.isin([1, 5, 10])),
        "bin": pa.Column("int64", pa.Check.ge(1)),
        "bin_lower": pa.Column("int64", pa.Check.ge(0)),
        "bin_upper": pa.Column("int64"),
        "noisy_count": pa.Column("int64"),  # may be negative: noisy counts are not clipped
    })
    return pa.DataFrameSchema(columns, strict=True, ordered=True, name="pseoh",
                              checks=[pa.Check(lambda df: df["bin_upper"] > df["bin_lower"],
                                               name="bin_upper > bin_lower")])


def pseof_schema(years_after: tuple[int, ...]) -> pa.DataFrameSchema:
    """Public employment flows: origin cell x geography x industry, per years-after."""
    columns = dict(_ids)
    columns.update({
        "geo_level": pa.Column(str, pa.Check.isin(["N", "D"])),
        "geography": pa.Column(str, pa.Check.isin(["00"] + [d.zfill(2) for d in CENSUS_DIVISIONS])),
        "ind_level": pa.Column(str, pa.Check.isin(["A", "S"])),
        "industry": pa.Column(str, pa.Check.isin(["00", *NAICS_SECTORS])),
    })
    measures = ("grads_emp", "grads_emp_instate", "grads_nme")
    for k in years_after:  # published flows are never negative
        for name in measures:
            columns[f"y{k}_{name}"] = pa.Column("Int64", pa.Check.ge(0), nullable=True)
    for k in years_after:
        for name in measures:
            columns[f"status_y{k}_{name}"] = pa.Column("int64", pa.Check.isin(STATUS_CODES))
    return pa.DataFrameSchema(
        columns, strict=True, ordered=True, name="pseof",
        unique=["institution", "degree_level", "cip_level", "cipcode", "grad_cohort",
                "geo_level", "geography", "ind_level", "industry"],
        checks=[pa.Check(lambda df: _flows_published_iff_status_ok(df, years_after, measures),
                         name="values present exactly where status is 1"),
                pa.Check(lambda df: _instate_within_total(df, years_after),
                         name="grads_emp_instate <= grads_emp")])


def _flows_published_iff_status_ok(df: pd.DataFrame, years_after, measures) -> pd.Series:
    ok = pd.Series(True, index=df.index)
    for k in years_after:
        for name in measures:
            ok &= df[f"y{k}_{name}"].notna() == (df[f"status_y{k}_{name}"] == STATUS_OK)
    return ok


def _instate_within_total(df: pd.DataFrame, years_after) -> pd.Series:
    ok = pd.Series(True, index=df.index)
    for k in years_after:
        ok &= (df[f"y{k}_grads_emp_instate"] <= df[f"y{k}_grads_emp"]).fillna(True)
    return ok
