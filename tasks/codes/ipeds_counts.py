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
from pseo_das.tasks.codes.text_codes import Factorized, combined_keys, found_at

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
    # these columns only of the rows (all of a 100m national pseoe's rows: 275 MB)
    cells = rows.loc[(rows["inst_level"] == "I") & (rows["cip_level"] == RESTRICTED_CIP_LEVEL)
                     & (rows["grad_cohort"] != ALL_COHORTS),
                     ["institution", "degree_level", "cipcode", "grad_cohort", "grad_cohort_years"]]
    cells = cells.drop_duplicates(KEYS[1:3] + ["cipcode", "grad_cohort"])
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
    per_year = np.repeat(comp["component"].to_numpy(), window)
    offsets = np.concatenate([np.arange(w) for w in window]) if len(comp) else np.array([], int)
    grad_year = np.repeat(start, window) + offsets
    # the awards summed by program-year and each component-year's looked up, both on the
    # program's key as one integer (a groupby on the text of 2.8 million awards peaked
    # 951 MB over components()' start at 100m national; this way 675 MB, on the same
    # input): a component-year without awards in IPEDS adds 0
    key = _ProgramKey(comp, awards, grad_year)
    found = key.find(key.of(comp, per_year, grad_year))
    matched = found >= 0
    sums = pd.DataFrame({name: np.bincount(per_year[matched], minlength=len(comp),
                                           weights=key.sums[name][found[matched]])
                         .astype(np.int64) for name in ("awards", "moved4", "moved2")})
    sums["years_needed"] = window
    sums["years_present"] = np.bincount(per_year, weights=np.isin(grad_year, list(years)),
                                        minlength=len(comp)).astype(np.int64)
    return comp.join(sums, on="component")


class _ProgramKey:
    """A program-year (institution, degree level, 4-digit CIP-2020 code, graduation year)
    as one int64, each text by its position among those of the components and the awards,
    and the awards summed by program-year on those keys (`sums`: awards, and those whose
    reported code was another 4-digit (moved4) or 2-digit (moved2) code). Each text column
    of the awards is hashed once (factorized); no text is grouped or merged."""

    COLUMNS = ("institution", "degree_level", "cip4")

    def __init__(self, comp: pd.DataFrame, awards: pd.DataFrame, grad_year: np.ndarray):
        current = Factorized.of(awards["cipcode"].astype(str))
        reported = Factorized.of(awards["reported_cipcode"].astype(str))
        text = {"institution": Factorized.of(awards["institution"]),
                "degree_level": Factorized.of(awards["degree_level"]),
                "cip4": current.prefix(5)}
        self.codes = {c: pd.Index(pd.concat([comp[c], pd.Series(text[c].values)],
                                            ignore_index=True).unique())
                      for c in self.COLUMNS}
        award_year = awards["grad_year"].to_numpy(np.int64)
        years = np.concatenate([grad_year, award_year])
        self.first_year = int(years.min()) if len(years) else 0
        self.sizes = [len(self.codes[c]) for c in self.COLUMNS] + \
            [(int(years.max()) - self.first_year + 1) if len(years) else 1]
        known = (text["institution"].codes >= 0) & (text["degree_level"].codes >= 0)
        keys = np.asarray(np.ravel_multi_index(
            [text[c].positions(self.codes[c])[known] for c in self.COLUMNS]
            + [award_year[known] - self.first_year], self.sizes))
        self.programs, program = np.unique(keys, return_inverse=True)
        n = awards["awards"].to_numpy(np.int64)[known]
        moved = {"moved4": current.prefix(5).differs(reported.prefix(5)),
                 "moved2": current.prefix(2).differs(reported.prefix(2))}
        self.sums = {name: np.bincount(program, minlength=len(self.programs),
                                       weights=n if name == "awards" else
                                       np.where(moved[name][known], n, 0)).astype(np.int64)
                     for name in ("awards", "moved4", "moved2")}

    def of(self, frame: pd.DataFrame, rows: np.ndarray, grad_year: np.ndarray) -> np.ndarray:
        """The key of `frame`'s `rows` in `grad_year`."""
        return np.asarray(np.ravel_multi_index(
            [self.codes[c].get_indexer(frame[c])[rows] for c in self.COLUMNS]
            + [grad_year - self.first_year], self.sizes))

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The program (index into `sums`) of each key; -1 where no award has it."""
        return found_at(self.programs, keys)


class _KeyCodes:
    """The row keys (KEYS) as integers: each column's text by its position in the codes the
    components can make (unknown text: -1), the six combined into one int64, so that the
    aggregates are grouped and looked up without hashing text per row."""

    def __init__(self, comp: pd.DataFrame):
        cip2 = comp["cip4"].str[:2]
        starts = np.unique(comp["start"].to_numpy(np.int64))
        self.codes = {
            "inst_level": pd.Index(["I", "S"]),
            "institution": _distinct(comp["institution"], comp["state"]),
            "degree_level": _distinct(comp["degree_level"]),
            "cip_level": pd.Index(["4", "2", "A"]),
            "cipcode": _distinct(comp["cip4"], cip2, pd.Series([ALL_FIELDS])),
            "grad_cohort": pd.Index([str(y) for y in starts] + [ALL_COHORTS])}
        self.sizes = [len(self.codes[c]) for c in KEYS]
        position = {c: self.codes[c].get_indexer for c in KEYS}
        self.institution = position["institution"](comp["institution"])
        self.state = position["institution"](comp["state"])
        self.degree_level = position["degree_level"](comp["degree_level"])
        self.cip4, self.cip2 = position["cipcode"](comp["cip4"]), position["cipcode"](cip2)
        self.start = np.searchsorted(starts, comp["start"].to_numpy(np.int64))

    def combined(self, columns: list, n: int) -> np.ndarray:
        """One int64 for each of `n` rows of the six codes (KEYS order; a code or an array
        of them); -1 where one is unknown."""
        columns = [np.broadcast_to(np.asarray(c, np.int64), n) for c in columns]
        return combined_keys(columns, self.sizes)

    def of_rows(self, rows: pd.DataFrame) -> np.ndarray:
        """`combined` of rows whose KEYS are text or categoricals of text, each distinct
        value looked up once."""
        return self.combined([Factorized.of(rows[c]).mapped(str).positions(self.codes[c])
                              for c in KEYS], len(rows))


def _distinct(*columns: pd.Series) -> pd.Index:
    """The text values of `columns`, each once, in the order they first come."""
    return pd.Index(pd.concat(columns, ignore_index=True).astype(str).unique())


def _aggregates(comp: pd.DataFrame, codes: _KeyCodes, k: int | None,
                last_earnings_year: int) -> tuple[np.ndarray, np.ndarray]:
    """SUMS for every row key (KEYS) the components make up: the by-cohort rows when `k` is
    None (the same at every years-after), else the all-cohort rows at year k (only the
    cohorts observed k years after graduation). Returns the keys (`_KeyCodes.combined`,
    ascending) and their sums (keys x SUMS)."""
    all_cohorts = k is not None
    keep = (comp["start"] + comp["window"] - 1 + k <= last_earnings_year).to_numpy() \
        if all_cohorts else np.ones(len(comp), bool)
    cohort = codes.codes["grad_cohort"].get_loc(ALL_COHORTS) if all_cohorts else codes.start
    awards = comp["awards"].to_numpy(np.int64)[keep]
    needed, present = (comp[c].to_numpy(np.int64)[keep] for c in ("years_needed",
                                                                   "years_present"))
    programs, reported = np.ones(len(awards), np.int64), (awards > 0).astype(np.int64)
    keys, moved = [], []
    for inst_level, unit in ((0, codes.institution), (1, codes.state)):
        for cip_level, field, moved_at in ((0, codes.cip4, comp["moved4"].to_numpy(np.int64)),
                                           (1, codes.cip2, comp["moved2"].to_numpy(np.int64)),
                                           (2, codes.codes["cipcode"].get_loc(ALL_FIELDS),
                                            np.zeros(len(comp), np.int64))):
            keys.append(codes.combined([inst_level, unit, codes.degree_level, cip_level, field,
                                        cohort], len(comp))[keep])
            moved.append(moved_at[keep])
    # summed by key one sum at a time, the components in key order (a 10m national
    # release's components: six arrays of 3.5 million keys; a frame of the six sums of
    # each, grouped, held 0.5 GB)
    combos, every_key = len(keys), np.concatenate(keys)
    order = np.argsort(every_key, kind="stable")
    ordered = every_key[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(ordered) \
        else np.zeros(0, np.int64)
    sums = np.zeros((len(starts), len(SUMS)), np.int64)
    for j, column in enumerate([np.tile(awards, combos), np.concatenate(moved),
                                np.tile(needed, combos), np.tile(present, combos),
                                np.tile(programs, combos), np.tile(reported, combos)]):  # SUMS
        if len(starts):
            sums[:, j] = np.add.reduceat(column[order], starts)
    return ordered[starts], sums


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
    codes = _KeyCodes(comp)
    out = pd.DataFrame(index=rows.index)
    row_keys = codes.of_rows(rows)
    restricted = (rows["degree_level"].isin(RESTRICTED_DEGREE_LEVELS)
                  & (rows["cip_level"] == RESTRICTED_CIP_LEVEL)).to_numpy()
    by_cohort = _sums_of_rows(row_keys, *_aggregates(comp, codes, None, cells.last_earnings_year))
    for k in YEARS_AFTER:   # a row is by cohort or of all cohorts: one of the two sums is 0
        sums = by_cohort + _sums_of_rows(row_keys, *_aggregates(comp, codes, k,
                                                                cells.last_earnings_year))
        total, moved, needed, present, programs, reported = sums.T
        earnings = rows[f"status_y{k}_earnings"].to_numpy()
        status = np.select(
            [(earnings != STATUS_OK) | restricted | (present == 0) | (total == 0),
             (present < needed) | (reported < programs),
             moved > 0],
            [NOT_AVAILABLE, PARTIALLY_MISSING, EDITED], AS_REPORTED)
        out[f"y{k}_ipeds_count"] = pd.array(np.where(status == NOT_AVAILABLE, 0, total),
                                            dtype="Int64")
        out.loc[status == NOT_AVAILABLE, f"y{k}_ipeds_count"] = pd.NA
        out[f"status_y{k}_ipeds_count"] = status.astype(np.int8)
    return out[ipeds_count_columns()]


def _sums_of_rows(row_keys: np.ndarray, key: np.ndarray, summed: np.ndarray) -> np.ndarray:
    """Each row's SUMS (rows x SUMS; 0 where no component makes up its key)."""
    at = found_at(key, row_keys)
    out = np.zeros((len(row_keys), len(SUMS)), np.int64)
    out[at >= 0] = summed[at[at >= 0]]
    return out
