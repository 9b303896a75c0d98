"""True employment-flow counts: the only flows step that reads microdata.
Privacy cost: none by itself; its output is confidential and goes only to the mechanism
layer (tasks/privacy/geometric.py, employer_side.py), never to an output file.

A flow is (origin cell, years after) -> destination (tasks/codes/destinations.py: public,
the same for every origin cell). Each graduate of an
origin cell lands in exactly one destination per years-after (a graduate with no outcome
row for that years-after counts as non-employed), so a tabulation has sensitivity 1.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pseo_das.tasks.codes.destinations import N_DESTINATIONS, NONEMPLOYED, employed_destination
from pseo_das.tasks.inputs.cells import CellFrame
from pseo_das.tasks.inputs.ingest import ValidatedInputs


def graduate_destinations(inputs: ValidatedInputs, years_after: int,
                          sample_floor: float) -> np.ndarray:
    """Destination of every graduate (row of inputs.graduates) `years_after` years out."""
    rows = inputs.outcomes["years_after"].to_numpy() == years_after
    destination = np.full(len(inputs.graduates), NONEMPLOYED, dtype=np.int64)
    destination[inputs.graduate_row[rows]] = employed_destination(inputs.outcomes[rows],
                                                                  sample_floor)
    return destination


def true_flows(frame: CellFrame, destination: np.ndarray, years_after: int,
               last_earnings_year: int, populations: pd.DataFrame | None = None
               ) -> tuple[pd.DataFrame, np.ndarray]:
    """Counts per (origin cell, destination) for the cells observable at `years_after`
    (and, if given, in `populations`).

    Returns the cells (canonical order) and a cells x N_DESTINATIONS int64 array, zeros included.
    """
    observable = frame.measured_cells(years_after, last_earnings_year, populations)
    n_cells = int(observable.sum())
    position = np.full(len(frame.cells), -1, dtype=np.int64)
    position[observable] = np.arange(n_cells)
    cell = position[frame.graduate_cell]
    kept = cell >= 0
    flat = cell[kept] * N_DESTINATIONS + destination[kept]
    counts = np.bincount(flat, minlength=n_cells * N_DESTINATIONS)
    return (frame.cells[observable].reset_index(drop=True),
            counts.reshape(n_cells, N_DESTINATIONS).astype(np.int64))
