"""The identifier columns of the official PSEO files (LEHD Public Use Schema V4.14.0) for
the cells of pseo-das's noisy tables: the aggregation level of label_agg_level_pseo.csv and
the codes as the schema writes them. Privacy cost: none.

Inside pseo-das a cell keeps the codes it was measured with (the privacy store holds them):
a state is the institution `000000` + FIPS, a 4-digit CIP code has no dot, all cohorts is
grad_cohort 0. The official files write the state as its 2-digit FIPS code, `11.07`, and
`0000`.
"""
from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd

from pseo_das.schemas.pseo_layout import ALL_COHORTS, Product, layout
from pseo_das.schemas.cells import ALL_COHORTS as ALL_COHORTS_CELL

CELL_IDENTIFIERS = ["inst_level", "institution", "degree_level", "cip_level", "cipcode",
                    "grad_cohort", "grad_cohort_years"]
NATIONAL = ("N", "00")            # geo_level, geography of the whole country
ALL_INDUSTRIES = ("A", "00")      # ind_level, industry of every industry


@cache
def _levels(product: Product) -> dict[tuple[str, str, str, str, bool], int]:
    levels = layout(product).levels
    return {(r.inst_level, r.cip_level, r.geo_level, r.ind_level, r.by_grad_cohort == "1"):
            int(r.agg_level_pseo) for r in levels.itertuples()}


def agg_level(product: Product, inst_level: str, cip_level: str, by_cohort: bool,
              geo_level: str = NATIONAL[0], ind_level: str = ALL_INDUSTRIES[0]) -> int:
    """The agg_level_pseo of label_agg_level_pseo.csv flagged for `product` at these levels
    (every official level is by degree level)."""
    try:
        return _levels(Product(product))[(inst_level, cip_level, geo_level, ind_level, by_cohort)]
    except KeyError:
        raise ValueError(f"{Product(product).value}: no aggregation level of the schema for "
                         f"inst_level {inst_level}, cip_level {cip_level}, geo_level "
                         f"{geo_level}, ind_level {ind_level}, "
                         f"{'by cohort' if by_cohort else 'all cohorts'}") from None


def official_cipcode(code: str) -> str:
    """'1107' -> '11.07'; '11' and '00' stay."""
    return f"{code[:2]}.{code[2:]}" if len(code) == 4 else code


def per_code(values: pd.Series, fn) -> np.ndarray:
    """fn of each row's code as text, called once per distinct code (not once per row)."""
    rows, codes = pd.factorize(values.astype(str).to_numpy())
    return np.array([fn(c) for c in codes] + [None], dtype=object)[rows]


def official_cells(cells: pd.DataFrame, inst_level: str, cip_level: str) -> pd.DataFrame:
    """CELL_IDENTIFIERS of `cells` (the cells of one noisy table) as the official files
    write them, one row per cell, in order."""
    institution = (cells["inst_state"] if inst_level == "S" else cells["institution"])
    cohort = cells["grad_cohort"].to_numpy(dtype=np.int64)
    return pd.DataFrame({
        "inst_level": inst_level,
        "institution": institution.astype(str).to_numpy(),
        "degree_level": cells["degree_level"].astype(str).to_numpy(),
        "cip_level": cip_level,
        "cipcode": per_code(cells["cipcode"], official_cipcode),
        "grad_cohort": np.where(cohort == ALL_COHORTS_CELL, ALL_COHORTS,
                                pd.Series(cohort).astype(str).str.zfill(4)),
        "grad_cohort_years": cells["grad_cohort_years"].to_numpy(dtype=np.int64),
    })
