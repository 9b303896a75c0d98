"""Noisy employment flows: measured tabulations (geometric noise, epsilon each) and
coarser CIP levels derived from them by summation (post-processing, zero epsilon)."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from tasks import progress, release_task
from tasks.cells import CellFrame, sum_to_coarser
from tasks.flow_counts import N_DESTINATIONS, graduate_destinations, true_flows
from tasks.ingest import ValidatedInputs
from tasks.mechanism import PrivacyLedger, add_geometric_noise

PRODUCT = "employment flows"


@dataclass
class NoisyFlows:
    """Institution-level flows of one years-after at one CIP level: one row per origin
    cell, one column per destination (tasks.flow_counts.destinations order)."""
    tabulation_id: str
    cip_level: str
    years_after: int
    cells: pd.DataFrame        # CELL_KEYS + inst_state, grad_cohort_years, noise_terms
    noisy: np.ndarray          # cells x destinations, int64, may be negative
    measured_from: tuple[str, ...]
    corrected: np.ndarray | None = None  # set by the flows correction (tasks/flows_correction.py)

    @property
    def measured(self) -> bool:
        return self.measured_from == (self.tabulation_id,)


def tabulation_id(cip_level: str, years_after: int) -> str:
    return f"flows.I.cip{cip_level}.y{years_after}"


@release_task("measure employment flows")
def measure_flows(ledger: PrivacyLedger, release_seed: bytes, inputs: ValidatedInputs,
                  frames: dict[str, CellFrame], years_after: int,
                  cfg: ReleaseConfig) -> list[NoisyFlows]:
    """Noisy flows of one years-after at every measured flows CIP level.
    Privacy cost: flows.epsilon_per_tabulation per measured level. True counts stay inside."""
    started = time.perf_counter()
    destination = graduate_destinations(inputs, years_after, cfg.earnings.sample_floor)
    measured = []
    for level in cfg.flows.measured_levels():
        cells, true_counts = true_flows(frames[level], destination, years_after,
                                        cfg.cells.last_earnings_year)
        tab_id = tabulation_id(level, years_after)
        noisy = add_geometric_noise(ledger, release_seed, tab_id, PRODUCT, true_counts,
                                    cfg.flows.epsilon_per_tabulation)
        del true_counts
        measured.append(NoisyFlows(tab_id, level, years_after, cells.assign(noise_terms=1),
                                   noisy, (tab_id,)))
    progress(f"measured {years_after}-year flows: "
             + ", ".join(f"{t.tabulation_id} ({len(t.cells):,} cells x {N_DESTINATIONS:,} "
                         "destinations)" for t in measured)
             + f" ({time.perf_counter() - started:.1f} s)")
    return measured


def derive_flows(ledger: PrivacyLedger, source: NoisyFlows, cip_level: str) -> NoisyFlows:
    """Sum `source`'s noisy flows up to a coarser CIP level. Privacy cost: none."""
    cells, noisy = sum_to_coarser(source.cells, source.noisy, "I", cip_level, source.cip_level)
    tab_id = tabulation_id(cip_level, source.years_after)
    ledger.record_derived(tab_id, PRODUCT, len(cells), noisy.shape[1], source.tabulation_id)
    return NoisyFlows(tab_id, cip_level, source.years_after, cells, noisy, source.measured_from)


@release_task("derive employment flows")
def derive_all_flows(ledger: PrivacyLedger, measured: list[NoisyFlows],
                     cfg: ReleaseConfig) -> list[NoisyFlows]:
    """Every flows CIP level of every years-after: measured ones as they are, the others
    summed from the next finer level. Privacy cost: none."""
    tables = []
    for years_after in cfg.cells.years_after:
        by_level = {t.cip_level: t for t in measured if t.years_after == years_after}
        finer = None
        for level in cfg.flows.levels():
            table = by_level.get(level) or derive_flows(ledger, finer, level)
            tables.append(table)
            finer = table
    progress(f"derived {len(tables) - len(measured)} flows tables by summation (zero epsilon)")
    return tables

