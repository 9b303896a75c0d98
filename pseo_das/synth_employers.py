"""Synthetic establishments for the employer-side protection of the flows (`pseo-das synth
--employers`): an `employer_id` for every synthetic job. SYNTHETIC, like the rest of the
synthetic data.

Every state x NAICS sector has ESTABLISHMENTS_PER_STATE_SECTOR establishments whose hiring
weights are Pareto-distributed (most small, a few large, as establishment sizes are), and in
a share DOMINANT_SHARE of the state x sector pairs one dominant employer hires DOMINANT_WEIGHT
of the graduates who work there (a hospital hiring most of a state's health-care graduates).
A job's establishment is drawn from the weights of its state and sector. The draws come from
their own stream (EMPLOYER_STREAM), after every other draw of a chunk, so the graduates,
earnings, states and industries are byte for byte those of the same seed without employers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pseo_das.schemas.codes import NAICS_SECTORS, STATE_FIPS

EMPLOYER_STREAM = 2              # SeedSequence spawn keys: (2,) universe, (2, k) chunk k
ESTABLISHMENTS_PER_STATE_SECTOR = 150
PARETO_SHAPE = 1.1               # establishment hiring weights ~ 1 + Pareto(1.1)
DOMINANT_SHARE = 0.15            # share of state x sector pairs with one dominant employer
DOMINANT_WEIGHT = 0.4            # the dominant employer's share of that pair's hires


@dataclass(frozen=True)
class EmployerUniverse:
    """Cumulative hiring weights per state x sector (rows: sector * states + state)."""
    cdf: np.ndarray              # (sectors x states, establishments), rows end at 1
    labels: np.ndarray           # employer_id of (pair, establishment), flattened

    @classmethod
    def make(cls, seed: int) -> "EmployerUniverse":
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(
            EMPLOYER_STREAM,))))
        pairs, j = len(NAICS_SECTORS) * len(STATE_FIPS), ESTABLISHMENTS_PER_STATE_SECTOR
        weights = 1 + rng.pareto(PARETO_SHAPE, (pairs, j))
        dominant = rng.random(pairs) < DOMINANT_SHARE
        rest = weights[:, 1:].sum(axis=1)
        weights[dominant, 0] = rest[dominant] * DOMINANT_WEIGHT / (1 - DOMINANT_WEIGHT)
        cdf = np.cumsum(weights, axis=1)
        cdf /= cdf[:, -1:]
        sector = np.repeat(np.array(NAICS_SECTORS), len(STATE_FIPS))
        state = np.tile(np.array(STATE_FIPS), len(NAICS_SECTORS))
        labels = np.array([f"E{st}{se}{k:04d}" for st, se in zip(state, sector)
                           for k in range(j)])
        return cls(cdf, labels)

    def draw(self, seed: int, chunk: int, state: np.ndarray, sector: np.ndarray) -> np.ndarray:
        """The establishment (index into `labels`) of each job; -1 where there is no job
        (state or sector -1). `state`, `sector`: indices into STATE_FIPS, NAICS_SECTORS."""
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(
            EMPLOYER_STREAM, chunk))))
        u = rng.random(len(state))
        job = (state >= 0) & (sector >= 0)
        pair = sector[job] * len(STATE_FIPS) + state[job]
        j = self.cdf.shape[1]
        within = (self.cdf[pair] < u[job, None]).sum(axis=1)
        out = np.full(len(state), -1, np.int64)
        out[job] = pair * j + np.minimum(within, j - 1)
        return out


def employer_column(index: np.ndarray, labels: np.ndarray) -> pa.Array:
    """The employer_id column: text, null where there is no job."""
    missing = index < 0
    return pa.array(np.where(missing, "", labels[np.maximum(index, 0)]).astype(object),
                    pa.string(), mask=missing)
