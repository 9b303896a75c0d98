"""True employment-flow counts: the only flows step that reads microdata.
Privacy cost: none by itself; its output is confidential and goes only to the mechanism
layer (tasks/mechanism.py), never to an output file.

A flow is (origin cell, years after) -> destination. The destinations are public and
the same for every origin cell: every NAICS sector x every state (50 states and DC),
then the non-employed / marginally attached destination (industry ZZ, state Z: no job,
no state or industry on record, or earnings under the floor). Each graduate of an
origin cell lands in exactly one destination per years-after (a graduate with no outcome
row for that years-after counts as non-employed), so a tabulation has sensitivity 1.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pseo_das.schemas.codes import NAICS_SECTORS, NONEMPLOYED_INDUSTRY, NONEMPLOYED_STATE, STATE_FIPS
from pseo_das.tasks.inputs.cells import CellFrame
from pseo_das.tasks.inputs.ingest import ValidatedInputs

N_STATES, N_SECTORS = len(STATE_FIPS), len(NAICS_SECTORS)
NONEMPLOYED = N_SECTORS * N_STATES      # index of the ZZ/Z destination
N_DESTINATIONS = NONEMPLOYED + 1


def destinations() -> pd.DataFrame:
    """The destination frame in canonical order: (industry, state) by sector then state, ZZ/Z last."""
    return pd.DataFrame({
        "industry": [*np.repeat(NAICS_SECTORS, N_STATES), NONEMPLOYED_INDUSTRY],
        "state": [*np.tile(STATE_FIPS, N_SECTORS), NONEMPLOYED_STATE],
    })


def destination_sector() -> np.ndarray:
    """Sector index of each destination; -1 for the non-employed destination."""
    return np.append(np.repeat(np.arange(N_SECTORS), N_STATES), -1)


def destination_state() -> np.ndarray:
    """State index (in STATE_FIPS) of each destination; -1 for the non-employed destination."""
    return np.append(np.tile(np.arange(N_STATES), N_SECTORS), -1)


def code_index(codes: pd.Series, universe: tuple[str, ...]) -> np.ndarray:
    """Position in `universe` of each row's code; -1 for a missing code."""
    position = np.array([universe.index(c) for c in codes.cat.categories] + [-1], dtype=np.int64)
    return position[codes.cat.codes.to_numpy()]  # code -1 (missing) picks the appended -1


def employed_destination(outcomes: pd.DataFrame, sample_floor: float) -> np.ndarray:
    """Each outcome row's employed destination (sector x state), or NONEMPLOYED: no job,
    no state or industry on record, or earnings under the floor."""
    earnings = outcomes["earnings"].to_numpy(dtype=np.float64, na_value=np.nan)
    sector = code_index(outcomes["industry"], NAICS_SECTORS)
    state = code_index(outcomes["emp_state"], STATE_FIPS)
    employed = (earnings >= sample_floor) & (sector >= 0) & (state >= 0)
    return np.where(employed, sector * N_STATES + state, NONEMPLOYED)


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
