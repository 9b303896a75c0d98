"""Transition shares of the CIP recast (technical appendix B, step 1). Privacy cost: none
(public IPEDS counts and the NCES crosswalk only).

IPEDS completions in CIP-2010 codes are cast to CIP-2020 at 6 digits with the crosswalk
and counted by (2010 code, 2020 code) at 2 or 4 digits, at four levels of detail:

    1  degree level x institution x graduation cohort
    2  degree level x institution (all cohorts)
    3  degree level (all institutions)
    4  all degree levels

For a cell's 2010 code, the shares of its possible 2020 codes (from the crosswalk) come
from the most detailed level at which IPEDS shows that 2010 code at all; a possible
transition IPEDS never shows there gets the small weight `unseen_weight` (relative to
one award) instead of zero. A code IPEDS never shows at any level splits by equal weights.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from pseo_das.tasks.inputs.cells import sorted_groups

LEVELS = {1: ["degree_level", "institution", "grad_cohort"], 2: ["degree_level", "institution"],
          3: ["degree_level"], 4: []}
DEFAULT_UNSEEN_WEIGHT = 1e-6
WIDTH = {2: 2, 4: 5}


def transition_counts(completions: pd.DataFrame, six_digit: Mapping[str, str | None],
                      digits: int) -> pd.DataFrame:
    """IPEDS awards by degree_level, institution, grad_cohort, cip2010, cip2020 (codes
    cut to `digits`). `completions`: degree_level, institution, grad_cohort, cipcode
    (6-digit CIP-2010), awards; `six_digit`: the crosswalk's 6-digit map; codes it has no
    destination for are left out."""
    width = WIDTH[digits]
    destination = completions["cipcode"].map(six_digit)
    kept = completions[destination.notna()]
    counts = kept.assign(cip2010=kept["cipcode"].str[:width],
                         cip2020=destination[destination.notna()].str[:width])
    return counts.groupby(LEVELS[1] + ["cip2010", "cip2020"], as_index=False)["awards"].sum()


KEYS = LEVELS[1] + ["cip2010"]   # a cell of the shares: its population and CIP-2010 code


class Destinations:
    """The possible CIP-2020 codes of each CIP-2010 code (`transitions`: cip2010, cip2020,
    and any other columns, e.g. share), found for many codes at once: each code's rows
    are consecutive, in the order of `transitions`."""

    def __init__(self, transitions: pd.DataFrame):
        order = np.argsort(transitions["cip2010"].to_numpy(dtype=object), kind="stable")
        self.rows = transitions.iloc[order].reset_index(drop=True)
        self.codes = self.rows["cip2010"].to_numpy(dtype=object)

    def of(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each code's first row (of `rows`) and number of destinations (0: none)."""
        index, distinct = pd.factorize(codes)    # each distinct code looked up once
        first = np.searchsorted(self.codes, distinct, "left")
        return first[index], (np.searchsorted(self.codes, distinct, "right") - first)[index]


def expanded(first: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items with rows first[i] to first[i] + n[i] - 1: each row's item and the row."""
    item = np.repeat(np.arange(len(n)), n)
    return item, first[item] + np.arange(len(item)) - np.repeat(np.cumsum(n) - n, n)


class IpedsSums:
    """IPEDS awards (`transition_counts`) summed at each level of detail by CIP-2010 code
    and by (CIP-2010, CIP-2020) code pair, looked up for many cells at once by integer
    keys: computed once per CIP level of a release, not per table."""
    COLUMNS = KEYS + ["cip2020"]

    def __init__(self, counts: pd.DataFrame):
        self.known = {c: np.unique(counts[c].to_numpy()) for c in self.COLUMNS}
        if np.prod([len(v) + 1.0 for v in self.known.values()]) >= 2 ** 62:
            raise ValueError("too many distinct IPEDS keys for 64-bit lookups")
        codes = self._codes({c: counts[c].to_numpy() for c in self.COLUMNS})
        awards = counts["awards"].to_numpy(dtype=np.int64)
        self.sums = {}
        for group in LEVELS.values():
            for columns in (group + ["cip2010"], group + ["cip2010", "cip2020"]):
                keys, inverse = np.unique(self._key(codes, columns), return_inverse=True)
                sums = np.zeros(len(keys), dtype=np.int64)
                np.add.at(sums, inverse, awards)
                self.sums[tuple(columns)] = keys, sums

    def _codes(self, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each value's position among the IPEDS values of its column (-1: not there)."""
        codes = {}
        for column, known in self.known.items():
            index, distinct = pd.factorize(columns[column])   # each value looked up once
            at = np.searchsorted(known, distinct).clip(max=max(len(known) - 1, 0))
            codes[column] = (np.where(known[at] == distinct, at, -1) if len(known)
                             else np.full(len(distinct), -1))[index]
        return codes

    def _key(self, codes: dict[str, np.ndarray], columns: list[str]) -> np.ndarray:
        key = np.zeros(len(codes["cip2010"]), dtype=np.int64)
        for column in columns:
            key = key * (len(self.known[column]) + 1) + codes[column]
        return np.where(np.all([codes[c] >= 0 for c in columns], axis=0), key, -1)

    def _summed(self, codes: dict[str, np.ndarray], columns: list[str]) -> np.ndarray:
        """The awards of each cell's `columns` (0 where IPEDS has none)."""
        keys, sums = self.sums[tuple(columns)]
        query = self._key(codes, columns)
        if not len(keys):
            return np.zeros(len(query), dtype=np.int64)
        at = np.searchsorted(keys, query).clip(max=len(keys) - 1)
        return np.where((query >= 0) & (keys[at] == query), sums[at], 0)

    def shares(self, cells: pd.DataFrame, destinations: Destinations,
               unseen_weight: float = DEFAULT_UNSEEN_WEIGHT) -> pd.DataFrame:
        """`transition_shares` of `cells`."""
        distinct = cells[KEYS].drop_duplicates()
        first, n = destinations.of(distinct["cip2010"].to_numpy(dtype=object))
        several = n > 1
        cell, row = expanded(first[several], n[several])
        choices = {c: distinct[c].to_numpy()[several][cell] for c in KEYS}
        choices["cip2020"] = destinations.rows["cip2020"].to_numpy(dtype=object)[row]
        codes = self._codes(choices)
        level = np.full(len(row), 5)
        weight = np.ones(len(row))
        for number in (4, 3, 2, 1):              # the most detailed supported level wins
            group = LEVELS[number]
            supported = self._summed(codes, group + ["cip2010"]) > 0
            awards = self._summed(codes, group + ["cip2010", "cip2020"])[supported]
            level[supported] = number
            weight[supported] = np.where(awards > 0, awards, unseen_weight)
        # each cell's total by pandas' groupby over the cells in sorted order, as earlier
        # versions summed it: its rounding depends on pandas' path (a sorted sum, or added
        # row by row with compensation), and the split's draws on the shares' last bit
        of_cell = np.repeat(sorted_groups([distinct[c].to_numpy()[several] for c in KEYS])[1],
                            n[several])
        share = weight / pd.Series(weight).groupby(of_cell).transform("sum").to_numpy()
        return pd.DataFrame({**{c: pd.Series(v, dtype=cells[c].dtype)
                                for c, v in choices.items() if c in KEYS},
                             "cip2020": choices["cip2020"], "level": level, "share": share})


def transition_shares(cells: pd.DataFrame, counts: pd.DataFrame, transitions: pd.DataFrame,
                      unseen_weight: float = DEFAULT_UNSEEN_WEIGHT) -> pd.DataFrame:
    """For every cell (degree_level, institution, grad_cohort, cip2010) with more than one
    possible destination: one row per destination with its share and the level it came
    from (1-4, or 5 when IPEDS never shows the code). A release's recast uses the sums
    of its `RecastContext` (`IpedsSums.shares`), made once."""
    return IpedsSums(counts).shares(cells, Destinations(transitions), unseen_weight)
