"""The true employment flows of the flows accuracy study, from synthetic microdata with the
release's own cell frame (tasks/inputs/cells.py) and flow counts
(tasks/employment_flows/flow_counts.py): per years-after, the measured 2-digit CIP origin
cells (institution x degree level x 2-digit CIP x cohort) and the all-fields cells they sum
to, each with its 1,021 destinations.

Per all-fields cell also the true earnings-universe count (graduates with earnings at or
above the floor, the universe of pseoe's grads_earn), to compare with the published
employed count.

For synthetic data only: the outputs are true counts, meant for the accuracy study and never
for a release. Privacy cost: none (nothing here is released).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.tasks import progress
from pseo_das.tasks.employment_flows.flow_counts import graduate_destinations, true_flows
from pseo_das.tasks.earnings.histograms import earnings_records, true_histograms
from pseo_das.tasks.inputs.cells import ALL_FIELDS_CIPCODE, cell_frame, cohort_attributes
from pseo_das.tasks.inputs.ingest import ValidatedInputs

MEASURED_LEVEL, ALL_FIELDS_LEVEL = "2", "A"
ORIGIN_KEYS = ["institution", "degree_level", "grad_cohort"]   # an all-fields cell


@dataclass(frozen=True)
class TrueFlows:
    """True flows of one years-after: the measured 2-digit CIP cells and the all-fields
    cells (cells x destinations, int64), and for each 2-digit cell its all-fields cell."""
    years_after: int
    field_cells: pd.DataFrame
    field_flows: np.ndarray
    all_fields_cells: pd.DataFrame
    all_fields_flows: np.ndarray
    all_fields_of: np.ndarray        # row of all_fields_cells for each row of field_cells
    # per all-fields cell, graduates in the earnings universe (earnings at or above the
    # floor: pseoe's grads_earn before noise); None for a stand-in truth
    earnings_universe: np.ndarray | None = None

    @classmethod
    def of_field_flows(cls, years_after: int, field_cells: pd.DataFrame,
                       field_flows: np.ndarray) -> "TrueFlows":
        """2-digit CIP flows and the all-fields cells they sum to (institution x degree
        level x cohort, in the order of their keys; cipcode 00), as the release derives
        them. For a stand-in truth built from published values."""
        keys = field_cells[ORIGIN_KEYS].astype(str)
        order = keys.drop_duplicates().sort_values(ORIGIN_KEYS, kind="stable").index
        all_cells = (field_cells.loc[order].reset_index(drop=True)
                     .assign(cipcode=ALL_FIELDS_CIPCODE))
        of = pd.MultiIndex.from_frame(keys.loc[order]).get_indexer(pd.MultiIndex.from_frame(keys))
        table = cls(years_after, field_cells, field_flows, all_cells, np.empty((0,)), of)
        return replace(table, all_fields_flows=table.sum_to_all_fields(field_flows))

    def sum_to_all_fields(self, values: np.ndarray) -> np.ndarray:
        """Rows of a 2-digit CIP array summed into the all-fields cells (a sum: the release
        derives all-fields flows this way)."""
        out = np.zeros((len(self.all_fields_cells),) + values.shape[1:], dtype=values.dtype)
        np.add.at(out, self.all_fields_of, values)
        return out


def true_flows_by_years_after(inputs: ValidatedInputs, cfg: ReleaseConfig) -> list[TrueFlows]:
    """The study's true flows for every years-after of the configuration. Every graduate is
    coded in one CIP vintage (the study needs no recast)."""
    attributes = cohort_attributes(inputs.graduates, cfg.cells)
    frames = {level: cell_frame(attributes, level) for level in (MEASURED_LEVEL, ALL_FIELDS_LEVEL)}
    out = []
    for years_after in cfg.cells.years_after:
        destination = graduate_destinations(inputs, years_after, cfg.earnings.sample_floor)
        field_cells, field_flows = true_flows(frames[MEASURED_LEVEL], destination, years_after,
                                              cfg.cells.last_earnings_year)
        all_cells, all_flows = true_flows(frames[ALL_FIELDS_LEVEL], destination, years_after,
                                          cfg.cells.last_earnings_year)
        keys = pd.MultiIndex.from_frame(all_cells[ORIGIN_KEYS].astype(str))
        of = keys.get_indexer(pd.MultiIndex.from_frame(field_cells[ORIGIN_KEYS].astype(str)))
        records = earnings_records(inputs, years_after, cfg.earnings.bin_edges,
                                  cfg.earnings.sample_floor)
        earn_cells, histograms = true_histograms(frames[ALL_FIELDS_LEVEL], records,
                                                 cfg.cells.last_earnings_year, cfg.earnings.n_bins)
        table = TrueFlows(years_after, field_cells, field_flows, all_cells, all_flows, of,
                          histograms.sum(axis=1))
        if (of < 0).any() or not np.array_equal(table.sum_to_all_fields(field_flows), all_flows):
            raise AssertionError("the 2-digit CIP flows do not sum to the all-fields flows")
        if not earn_cells[ORIGIN_KEYS].astype(str).equals(all_cells[ORIGIN_KEYS].astype(str)):
            raise AssertionError("the earnings and flows all-fields cells differ")
        out.append(table)
        progress(f"flows study: {years_after} years after: {len(field_cells):,} 2-digit CIP "
                 f"cells, {len(all_cells):,} all-fields cells, {int(all_flows.sum()):,} graduates")
    return out
