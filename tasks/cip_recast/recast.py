"""Recast a noisy table from CIP-2010 to CIP-2020 codes (technical appendix B, step 2),
on noisy values only. Privacy cost: none (post-processing; the random split is drawn
from a stream keyed by the stored measurements it reads, recorded in the ledger).

In the priority order of the appendix, a cell's 2010 code (2 or 4 digits)
  1. with a single possible destination moves there directly;
  2. with a hard-coded transition is split by its hard-coded shares;
  3. otherwise is split by the cell's IPEDS transition shares (`transition_shares`).
A split divides every noisy value of the cell (each bin, or each destination of a flow)
at random: its magnitude multinomially by the shares, each part keeping its sign. The
values of a population (institution x degree x cohort, per years after) therefore total
the same in both vintages, value by value.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.tasks.inputs.cells import CELL_COLUMNS
from pseo_das.tasks.privacy.mechanism import LedgerEntry, post_processing_split

CELL_KEYS = ["degree_level", "institution", "grad_cohort", "cip2010"]
DIRECT, HARD_CODED, SHARES = "direct", "hard-coded", "IPEDS shares"


class RecastError(ValueError):
    """A 2010 code has no destination: neither the crosswalk nor a hard-coded transition."""


@dataclass(frozen=True)
class RecastTable:
    cells: pd.DataFrame          # CELL_COLUMNS, cipcode in CIP-2020
    values: np.ndarray           # (cells, columns) int64
    how: pd.Series               # cells recast by each route (direct, hard-coded, shares)
    entry: LedgerEntry


def recast_table(cells: pd.DataFrame, values: np.ndarray, transitions: pd.DataFrame,
                 hard_coded: pd.DataFrame, shares: pd.DataFrame, stream_seed: bytes,
                 step_id: str, product: str, derived_from: str) -> RecastTable:
    """`cells` (CELL_COLUMNS, cipcode in CIP-2010 at one level) and their noisy `values`
    -> the same table in CIP-2020 codes. `transitions`: cip2010, cip2020 (the crosswalk's
    at this level); `hard_coded`: cip2010, cip2020, share; `shares`: the output of
    `transition_shares` for these cells."""
    frame = cells[CELL_COLUMNS].reset_index(drop=True).assign(
        cip2010=cells["cipcode"].astype(str).to_numpy(), row=np.arange(len(cells)))
    for column in ("institution", "degree_level"):
        frame[column] = frame[column].astype(str)
    destinations = transitions.groupby("cip2010")["cip2020"].agg(list)
    single = frame["cip2010"].map(lambda c: len(destinations.get(c, [])) == 1).to_numpy()
    hard = frame["cip2010"].isin(set(hard_coded["cip2010"])).to_numpy()
    route = np.where(single, DIRECT, np.where(hard, HARD_CODED, SHARES))
    missing = sorted(set(frame.loc[route == SHARES, "cip2010"]) - set(destinations.index))
    if missing:
        raise RecastError(f"CIP-2010 code(s) {', '.join(missing)} have no CIP-2020 destination "
                          "in the crosswalk and no hard-coded transition")
    weights = pd.concat([
        frame.loc[route == DIRECT, ["row", "cip2010"]].assign(
            cip2020=lambda f: f["cip2010"].map(lambda c: destinations[c][0]), share=1.0),
        frame.loc[route == HARD_CODED, ["row", "cip2010"]].merge(hard_coded, on="cip2010"),
        frame.loc[route == SHARES, ["row"] + CELL_KEYS].merge(
            shares[CELL_KEYS + ["cip2020", "share"]], on=CELL_KEYS)[
                ["row", "cip2010", "cip2020", "share"]],
    ], ignore_index=True).sort_values(["row", "cip2020"], kind="stable", ignore_index=True)
    lacking = sorted(set(frame.loc[route == SHARES, "row"]) - set(weights["row"]))
    if lacking:
        raise RecastError(f"{len(lacking)} cell(s) have no transition shares (e.g. "
                          f"{frame.loc[lacking[0], CELL_KEYS].to_dict()})")
    # one share vector per cell (padded with zeros), each value of the cell split by it
    slot = weights.groupby("row").cumcount().to_numpy()
    width = int(slot.max()) + 1 if len(weights) else 1
    matrix = np.zeros((len(frame), width))
    matrix[weights["row"].to_numpy(), slot] = weights["share"].to_numpy()
    n_columns = values.shape[1]
    parts, entry = post_processing_split(
        stream_seed, step_id, product, len(frame), n_columns, derived_from,
        values.reshape(-1), np.repeat(matrix, n_columns, axis=0))
    parts = parts.reshape(len(frame), n_columns, width)          # cell, column, slot
    target = weights.assign(slot=slot)
    out_values = parts[target["row"].to_numpy(), :, target["slot"].to_numpy()]
    out_cells = frame.loc[target["row"].to_numpy(), CELL_COLUMNS].reset_index(drop=True)
    out_cells["cipcode"] = target["cip2020"].to_numpy()
    summed = pd.concat([out_cells, pd.DataFrame(out_values)], axis=1) \
        .groupby(CELL_COLUMNS, as_index=False, sort=True).sum()
    how = pd.Series(route).value_counts()
    return RecastTable(summed[CELL_COLUMNS], summed.drop(columns=CELL_COLUMNS).to_numpy(np.int64),
                       how, entry)
