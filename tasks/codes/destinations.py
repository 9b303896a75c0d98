"""The destinations of employment flows: every NAICS sector x every state (50 states and
DC), in that order, then the non-employed / marginally attached destination (industry ZZ,
state Z: no job, no state or industry on record, or earnings under the floor). The same
for every origin cell; public. Privacy cost: none."""
from __future__ import annotations

import numpy as np
import pandas as pd

from pseo_das.schemas.codes import NAICS_SECTORS, NONEMPLOYED_INDUSTRY, NONEMPLOYED_STATE, STATE_FIPS

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
