"""The IPEDS counts of pseoe: `y1/y5/y10_ipeds_count`, "Count of IPEDS Reported Graduates
of Programs Included in Year k Earnings", and their flags `status_y1/y5/y10_ipeds_count`
(label_flags_ipeds_count: 1 as reported, 2 edited for consistency with PSEO categories, 3
not available, 4 partially missing). Privacy cost: none. The counts are sums of public
IPEDS completions over programs and years that the public frame of the release names; no
confidential record and no noisy value enters them except through the published status
flags of the earnings, so they spend no epsilon and need no noise.

The schema (IPEDS Count Status Flag): "Counts are linked to graduation cohorts in the PSEO
data and included in the PSEOE tables. In a small number of cases, misalignment in programs
(CIPCODE) is observed between the IPEDS and PSEO counts. In these cases, the IPEDS counts
are adjusted to be consistent with those on PSEO, and the count is flagged accordingly. For
higher level aggregations (e.g., all cohorts, all CIPCODE), IPEDS totals may sum over
cohorts or programs for which graduate counts were not available. The counts are released
but flagged to indicate missing data. IPEDS counts may be suppressed and flagged as not
available in some cases when PSEO earnings data do not meet Census Bureau publication
standards." Settled here as follows.

* Programs and cohorts of a row. The release's programs are its 4-digit CIP cells: the
  institution-level rows at cip_level 4 of one cohort window (`grad_cohort` YYYY,
  `grad_cohort_years` long), its *components*. A row's year-k count covers the components
  of its institution (inst_level I) or of the state's institutions in the release
  (inst_level S, `institution_state`), of its degree level, of its field (cip_level 4: that
  code; 2: the codes of the family; A: all) and of its cohort: the row's window, or at
  `grad_cohort` 0000 every window with year-k earnings (window end + k <=
  `cells.last_earnings_year`, as the cell frame has it).
* The count: the IPEDS first-major awards (CIP-2020 codes, see
  tasks/inputs/ipeds_counts.py) of the components' institution, degree level and 4-digit
  code in the graduation years of their windows, summed.
* Flags, in this order (the first that applies):
  3 not available, value empty: the row's year-k earnings are not available (status -1) or
  suppressed (5: "may be suppressed and flagged as not available ... when PSEO earnings data
  do not meet Census Bureau publication standards"; we always do, so that a count is
  published exactly beside published earnings); degree levels 07 and 17 at cip_level 4
  (Restricted 4-Digit CIP Tabulations: all measures suppressed); or IPEDS shows no award
  at all for the row (no completions file for any of its years, or none of its programs
  reported in them).
  4 partially missing, value published: some graduation year of the row has no completions
  file, or some of its components have no award in IPEDS in their years (a program PSEO
  has and IPEDS does not report).
  2 edited, value published: some awards in the count were reported under a CIP-2010 code
  whose CIP-2020 code is another code at the row's level (a "Moved to" code, or a deleted
  one reported under another; at cip_level A no code changes the row). This is the
  adjustment of IPEDS counts to PSEO's categories: PSEO publishes CIP-2020 for all years.
  The NCES crosswalk gives every 6-digit CIP-2010 code one CIP-2020 code, so no award is
  split between codes.
  1 as reported, value published: otherwise.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.config import CellsConfig
from pseo_das.schemas.codes import STATUS_OK
from pseo_das.schemas.pseo_layout import (ALL_COHORTS, IPEDS_FLAG_NOT_AVAILABLE,
                                          RESTRICTED_CIP_LEVEL, RESTRICTED_DEGREE_LEVELS)

AS_REPORTED, EDITED, NOT_AVAILABLE, PARTIALLY_MISSING = 1, 2, int(IPEDS_FLAG_NOT_AVAILABLE), 4


@dataclass(frozen=True)
class IpedsCounts:
    """What the counts of a release are computed from (kept in its publication record)."""
    awards: pd.DataFrame     # tasks/inputs/ipeds_counts.py AWARD_COLUMNS, CIP-2020 codes
    years: frozenset[int]    # the graduation years with a completions file
YEARS_AFTER = (1, 5, 10)            # the pseoe indicators y1, y5, y10
ALL_FIELDS = "00"
KEYS = ["inst_level", "institution", "degree_level", "cip_level", "cipcode", "grad_cohort"]
SUMS = ["awards", "moved", "years_needed", "years_present", "programs", "programs_reported"]


def ipeds_count_columns() -> list[str]:
    return ([f"y{k}_ipeds_count" for k in YEARS_AFTER]
            + [f"status_y{k}_ipeds_count" for k in YEARS_AFTER])


def components(rows: pd.DataFrame, awards: pd.DataFrame, years: Collection[int],
               institution_state: Mapping[str, str]) -> pd.DataFrame:
    """One row per component (institution-level 4-digit cell of one cohort window) with
    its state, window, and the sums over the window's years: awards, awards moved into its
    4-digit and 2-digit code, years needed and years with a completions file."""
    cells = rows[(rows["inst_level"] == "I") & (rows["cip_level"] == RESTRICTED_CIP_LEVEL)
                 & (rows["grad_cohort"] != ALL_COHORTS)]
    cells = cells[["institution", "degree_level", "cipcode", "grad_cohort",
                   "grad_cohort_years"]].drop_duplicates(KEYS[1:3] + ["cipcode", "grad_cohort"])
    state = cells["institution"].map(dict(institution_state))
    if state.isna().any():
        missing = sorted(set(cells.loc[state.isna(), "institution"]))
        raise ValueError(f"institution_state: no state for institution(s) {', '.join(missing[:5])}"
                         f" ({len(missing)} in all)")
    start = cells["grad_cohort"].astype(int).to_numpy()
    window = cells["grad_cohort_years"].astype(int).to_numpy()
    comp = pd.DataFrame({"institution": cells["institution"].to_numpy(), "state": state.to_numpy(),
                         "degree_level": cells["degree_level"].to_numpy(),
                         "cip4": cells["cipcode"].to_numpy(), "start": start, "window": window})
    comp["component"] = np.arange(len(comp))
    offsets = np.concatenate([np.arange(w) for w in window]) if len(comp) else np.array([], int)
    per_year = comp.loc[comp.index.repeat(window), ["component", "institution", "degree_level",
                                                    "cip4"]].reset_index(drop=True)
    per_year["grad_year"] = np.repeat(start, window) + offsets
    per_year["present"] = per_year["grad_year"].isin(list(years))
    per_year = per_year.merge(_awards_by_program(awards), how="left",
                              on=["institution", "degree_level", "cip4", "grad_year"])
    sums = per_year.groupby("component").agg(
        awards=("awards", "sum"), moved4=("moved4", "sum"), moved2=("moved2", "sum"),
        years_needed=("grad_year", "size"), years_present=("present", "sum"))
    return comp.join(sums, on="component")


def _awards_by_program(awards: pd.DataFrame) -> pd.DataFrame:
    """Awards by institution, degree level, 4-digit CIP-2020 code and year, with the awards
    whose reported code was another 4-digit (moved4) or 2-digit (moved2) code."""
    current, reported = awards["cipcode"].astype(str), awards["reported_cipcode"].astype(str)
    n = awards["awards"].astype(np.int64)
    frame = pd.DataFrame({"institution": awards["institution"], "degree_level": awards["degree_level"],
                          "cip4": current.str[:5], "grad_year": awards["grad_year"].astype(np.int64),
                          "awards": n, "moved4": n.where(current.str[:5] != reported.str[:5], 0),
                          "moved2": n.where(current.str[:2] != reported.str[:2], 0)})
    return frame.groupby(["institution", "degree_level", "cip4", "grad_year"], as_index=False).sum()


def _aggregates(comp: pd.DataFrame, k: int | None, last_earnings_year: int) -> pd.DataFrame:
    """SUMS for every row key (KEYS) the components make up: the by-cohort rows when `k` is
    None (the same at every years-after), else the all-cohort rows at year k (only the
    cohorts observed k years after graduation)."""
    all_cohorts = k is not None
    keep = (comp["start"] + comp["window"] - 1 + k <= last_earnings_year) if all_cohorts \
        else np.ones(len(comp), bool)
    parts = []
    for inst_level, unit in (("I", "institution"), ("S", "state")):
        for cip_level, field, moved in (("4", comp["cip4"], comp["moved4"]),
                                        ("2", comp["cip4"].str[:2], comp["moved2"]),
                                        ("A", ALL_FIELDS, 0)):
            part = pd.DataFrame({
                "inst_level": inst_level, "institution": comp[unit],
                "degree_level": comp["degree_level"], "cip_level": cip_level,
                "cipcode": field,
                "grad_cohort": ALL_COHORTS if all_cohorts else comp["start"].astype(str),
                "awards": comp["awards"], "moved": moved,
                "years_needed": comp["years_needed"], "years_present": comp["years_present"],
                "programs": 1, "programs_reported": (comp["awards"] > 0).astype(int)})
            parts.append(part[np.asarray(keep)])
    return pd.concat(parts, ignore_index=True).groupby(KEYS, as_index=False)[SUMS].sum()


def ipeds_counts(rows: pd.DataFrame, cells: CellsConfig, awards: pd.DataFrame,
                 years: Collection[int], institution_state: Mapping[str, str]) -> pd.DataFrame:
    """y1/y5/y10_ipeds_count (Int64, empty where not published) and
    status_y1/y5/y10_ipeds_count (int 1-4) for each row of `rows`, in the same order and
    with the same index (rules in the module docstring).

    `rows`: pseoe rows in the official layout, identifiers as text (inst_level I/S,
    institution an OPEID at I and a state FIPS code at S, degree_level, cip_level A/2/4,
    cipcode 00/11/11.07 in CIP-2020, grad_cohort YYYY or 0000, grad_cohort_years) and the
    integer status_y1/y5/y10_earnings (1, 5 or -1). `awards`: the IPEDS awards in CIP-2020
    codes (tasks/inputs/ipeds_counts.py: institution, degree_level, grad_year, cipcode,
    reported_cipcode, awards); `years`: the graduation years that have a completions file;
    `institution_state`: OPEID -> state FIPS code of every institution in `rows`.
    """
    comp = components(rows, awards, years, institution_state)
    out = pd.DataFrame(index=rows.index)
    keys = rows[KEYS].astype(str)
    restricted = (rows["degree_level"].isin(RESTRICTED_DEGREE_LEVELS)
                  & (rows["cip_level"] == RESTRICTED_CIP_LEVEL)).to_numpy()
    by_cohort = _aggregates(comp, None, cells.last_earnings_year)
    for k in YEARS_AFTER:
        aggregates = pd.concat([by_cohort, _aggregates(comp, k, cells.last_earnings_year)],
                               ignore_index=True)
        sums = keys.merge(aggregates, how="left", on=KEYS)
        sums = sums[SUMS].fillna(0).astype(np.int64).to_numpy().T
        total, moved, needed, present, programs, reported = sums
        earnings = rows[f"status_y{k}_earnings"].to_numpy()
        status = np.select(
            [(earnings != STATUS_OK) | restricted | (present == 0) | (total == 0),
             (present < needed) | (reported < programs),
             moved > 0],
            [NOT_AVAILABLE, PARTIALLY_MISSING, EDITED], AS_REPORTED)
        out[f"y{k}_ipeds_count"] = pd.array(np.where(status == NOT_AVAILABLE, 0, total),
                                            dtype="Int64")
        out.loc[status == NOT_AVAILABLE, f"y{k}_ipeds_count"] = pd.NA
        out[f"status_y{k}_ipeds_count"] = status.astype(np.int64)
    return out[ipeds_count_columns()]
