"""Pandera schema of pseo-das's extension file pseoh_all.csv (the noisy histograms). The
official files, pseoe_all.csv and pseof_all.csv, are checked by the layout validator
(schemas/pseo_layout.py) against the schema's own label files."""
from __future__ import annotations

import pandera.pandas as pa

from pseo_das.schemas.codes import YEARS_AFTER, code_matches
from pseo_das.schemas.pseo_layout import Product, layout


def pseoh_schema() -> pa.DataFrameSchema:
    """The official identifiers (text codes), then years_after, bin, bounds, noisy count."""
    columns = {name: pa.Column(str) for name in layout(Product.PSEOE).identifiers}
    columns.update({
        "agg_level_pseo": pa.Column("int64", pa.Check.isin(
            [int(a) for a in layout(Product.PSEOE).levels["agg_level_pseo"]])),
        "grad_cohort_years": pa.Column("int64", pa.Check.in_range(1, 10)),
        "years_after": pa.Column("int64", pa.Check.isin(list(YEARS_AFTER)),
                                 description="years after graduation (1, 5 or 10)"),
        "bin": pa.Column("int64", pa.Check.ge(1),
                         description="earnings bin, 1 = lowest"),
        "bin_lower": pa.Column("int64", pa.Check.ge(0),
                               description="lower bound of the bin in the bins' dollars "
                               "(inclusive; see Dollars)"),
        "bin_upper": pa.Column("int64",
                               description="upper bound of the bin in dollars (exclusive); for "
                               "the last bin, the bound used for interpolation"),
        "noisy_count": pa.Column("int64", description="noisy number of graduates with earnings "
                                 "in the bin; may be negative"),
    })
    return pa.DataFrameSchema(columns, strict=True, ordered=True, name="pseoh_all",
                              checks=[pa.Check(lambda df: df["bin_upper"] > df["bin_lower"],
                                               name="bin_upper > bin_lower")])


def pseoemp_schema(years_after: tuple[int, ...]) -> pa.DataFrameSchema:
    """pseoemp_all.csv, the optional employer-side table: cohort (4 digits, 0000 for all),
    the schema's state geography and NAICS sector codes, then per years after the noisy
    count (whole graduates, may be negative) and its status: 1 with a value, -1 without."""
    from pseo_das.schemas.codes import NAICS_SECTORS, STATE_FIPS
    columns = {
        "grad_cohort": pa.Column(str, code_matches(r"^[0-9]{4}$")),
        "geo_level": pa.Column(str, pa.Check.isin(["S"])),
        "geography": pa.Column(str, pa.Check.isin(list(STATE_FIPS))),
        "ind_level": pa.Column(str, pa.Check.isin(["S"])),
        "industry": pa.Column(str, pa.Check.isin(list(NAICS_SECTORS))),
    }
    columns.update({f"y{k}_grads_emp": pa.Column("Int64", nullable=True) for k in years_after})
    columns.update({f"status_y{k}_grads_emp": pa.Column(str, pa.Check.isin(["1", "-1"]))
                    for k in years_after})
    return pa.DataFrameSchema(
        columns, strict=True, ordered=True, name="pseoemp_all",
        unique=["grad_cohort", "geography", "industry"],
        checks=[pa.Check(lambda df, k=k: (df[f"y{k}_grads_emp"].notna()
                                          == (df[f"status_y{k}_grads_emp"] == "1")),
                         name=f"y{k}_grads_emp present exactly where status is 1")
                for k in years_after])
