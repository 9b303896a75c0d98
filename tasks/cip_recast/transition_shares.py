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


def transition_shares(cells: pd.DataFrame, counts: pd.DataFrame, transitions: pd.DataFrame,
                      unseen_weight: float = DEFAULT_UNSEEN_WEIGHT) -> pd.DataFrame:
    """For every cell (degree_level, institution, grad_cohort, cip2010) with more than one
    possible destination: one row per destination with its share and the level it came
    from (1-4, or 5 when IPEDS never shows the code)."""
    keys = LEVELS[1] + ["cip2010"]
    choices = cells[keys].drop_duplicates().merge(transitions, on="cip2010")
    several = choices.groupby(keys)["cip2020"].transform("size") > 1
    choices = choices[several].reset_index(drop=True)
    choices["level"] = 5
    choices["weight"] = 1.0
    for level in (4, 3, 2, 1):                    # the most detailed supported level wins
        group = LEVELS[level]
        by_pair = counts.groupby(group + ["cip2010", "cip2020"], as_index=False)["awards"].sum()
        by_code = by_pair.groupby(group + ["cip2010"], as_index=False)["awards"].sum() \
            .rename(columns={"awards": "code_total"})
        here = choices[group + ["cip2010", "cip2020"]] \
            .merge(by_pair, on=group + ["cip2010", "cip2020"], how="left") \
            .merge(by_code, on=group + ["cip2010"], how="left")
        supported = (here["code_total"].fillna(0) > 0).to_numpy()
        awards = here["awards"].fillna(0).to_numpy(dtype=float)
        choices.loc[supported, "level"] = level
        choices.loc[supported, "weight"] = np.where(awards[supported] > 0, awards[supported],
                                                    unseen_weight)
    total = choices.groupby(keys)["weight"].transform("sum")
    return choices.assign(share=choices["weight"] / total).drop(columns="weight")
