"""pseoemp_all.csv, the optional employer-side table (a pseo-das extension, not part of the
LEHD schema), and what the release notes and the DRB report say about it. Privacy cost:
none (post-processing of the stored noisy table; the all-cohort rows are sums).

Columns: `grad_cohort` (first graduation year of the cohort window, as the schema writes it;
`0000` for all cohorts), then the schema's `geo_level`/`geography` (`S` with the 2-digit
state FIPS code of the job) and `ind_level`/`industry` (`S` with the NAICS sector, as in
pseof), then `y{k}_grads_emp` (noisy employed graduates, whole graduates, may be negative)
and `status_y{k}_grads_emp` (`1` published; `-1` not available: no population of the cohort
is observed that many years after).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.schemas.outputs import pseoemp_schema
from pseo_das.tasks.employment_flows.employer_table import NoisyEmployerTable
from pseo_das.tasks.codes.destinations import NONEMPLOYED, destinations

EMPLOYER_TABLE_FILE = "pseoemp_all.csv"
ALL_COHORTS = "0000"


def employer_table_file(table: NoisyEmployerTable, years_after: tuple[int, ...]
                        ) -> pd.DataFrame:
    """One row per (cohort, state, sector), cohorts ascending then all cohorts, states by
    FIPS, sectors in NAICS order; every cohort measured at some years-after has its rows."""
    places = destinations().iloc[:NONEMPLOYED]
    order = np.lexsort((np.arange(NONEMPLOYED), places["state"].to_numpy()))
    cohorts = sorted(set(table.rows["grad_cohort"]))
    blocks = []
    for cohort in [*cohorts, None]:
        block = pd.DataFrame({
            "grad_cohort": ALL_COHORTS if cohort is None else f"{cohort:04d}",
            "geo_level": "S", "geography": places["state"].to_numpy()[order],
            "ind_level": "S", "industry": places["industry"].to_numpy()[order]})
        values, statuses = {}, {}
        for k in years_after:
            mine = (table.rows["years_after"] == k).to_numpy().copy()
            if cohort is not None:
                mine &= (table.rows["grad_cohort"] == cohort).to_numpy()
            measured = bool(mine.any())
            summed = table.noisy[mine].sum(axis=0)[order]   # all cohorts: a sum (zero epsilon)
            values[f"y{k}_grads_emp"] = pd.array(summed if measured else [pd.NA] * NONEMPLOYED,
                                                 dtype="Int64")
            statuses[f"status_y{k}_grads_emp"] = "1" if measured else "-1"
        blocks.append(block.assign(**values, **statuses))
    return pd.concat(blocks, ignore_index=True)


def checked_employer_table_file(table: NoisyEmployerTable, years_after: tuple[int, ...]
                                ) -> tuple[pd.DataFrame, dict]:
    """The file's rows, validated by its output schema (pandera raises on a problem), and
    the check for the DRB report."""
    rows = pseoemp_schema(years_after).validate(employer_table_file(table, years_after))
    return rows, {"name": f"{EMPLOYER_TABLE_FILE} passes its output schema (codes, one row "
                          "per cohort x state x sector, values exactly where published)",
                  "result": f"passed ({len(rows):,} rows)"}


def employer_table_context(cfg: ReleaseConfig, table: NoisyEmployerTable | None,
                           rows: int) -> dict | None:
    """What the documents say: mechanism, parameters, per years after the cohorts and the
    employers' worst case (the ledger's), the file's rows. x_v is never reported."""
    if table is None:
        return None
    return {"file": EMPLOYER_TABLE_FILE, "rows": rows, "mechanism": table.mechanism,
            "config_mechanism": cfg.employer_table.mechanism, "alpha": table.alpha,
            "epsilon": table.epsilon, "delta": table.delta,
            "flows_geometric": not cfg.flows.protects_employers,
            "tabulations": [{"tabulation_id": e.tabulation_id, "cohorts": e.n_cells,
                             "notion": e.employer_notion, "employer_epsilon": e.employer_epsilon}
                            for e in table.entries]}
