"""True earnings histograms: the only step that reads earnings microdata.
Privacy cost: none by itself; its output is confidential and goes only to the
mechanism layer (tasks/privacy/geometric.py), never to an output file.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.tasks.codes.earnings_bins import earnings_bin
from pseo_das.tasks.inputs.cells import CellFrame
from pseo_das.tasks.inputs.ingest import ValidatedInputs


@dataclass
class EarningsRecords:
    """Outcome records of one years-after that are in the earnings universe."""
    years_after: int
    graduate_row: np.ndarray  # row of the graduate in ValidatedInputs.graduates
    bin: np.ndarray           # 0-based earnings bin


def earnings_records(inputs: ValidatedInputs, years_after: int, bin_edges: tuple[int, ...],
                     sample_floor: float) -> EarningsRecords:
    """Records with earnings >= the floor; earnings at or above the top edge fall in the last bin."""
    earnings = inputs.outcomes["earnings"].to_numpy(dtype=np.float64, na_value=np.nan)
    years = inputs.outcomes["years_after"].to_numpy()
    in_universe = (years == years_after) & (earnings >= sample_floor)
    return EarningsRecords(years_after, inputs.graduate_row[in_universe],
                           earnings_bin(earnings[in_universe], bin_edges))


def true_histograms(frame: CellFrame, records: EarningsRecords, last_earnings_year: int,
                    n_bins: int, populations: pd.DataFrame | None = None
                    ) -> tuple[pd.DataFrame, np.ndarray]:
    """Counts per (frame cell, bin) for the cells observable at records.years_after (and,
    if given, in `populations`).

    Returns the cells (canonical order) and a cells x bins int64 array, zero rows included.
    """
    observable = frame.measured_cells(records.years_after, last_earnings_year, populations)
    n_cells = int(observable.sum())
    position = np.full(len(frame.cells), -1, dtype=np.int64)
    position[observable] = np.arange(n_cells)
    cell = position[frame.graduate_cell[records.graduate_row]]
    kept = cell >= 0
    flat = cell[kept] * n_bins + records.bin[kept]
    counts = np.bincount(flat, minlength=n_cells * n_bins).reshape(n_cells, n_bins)
    return frame.cells[observable].reset_index(drop=True), counts.astype(np.int64)
