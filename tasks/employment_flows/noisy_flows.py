"""Noisy employment flows: measured tabulations (geometric noise, epsilon each) and
coarser CIP levels derived from them by summation (post-processing, zero epsilon)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.inputs.cells import CellFrame, sum_to_coarser
from pseo_das.tasks.employment_flows.flow_counts import N_DESTINATIONS, graduate_destinations, true_flows
from pseo_das.tasks.inputs.ingest import ValidatedInputs
from pseo_das.tasks.privacy.mechanism import (LedgerEntry, NoisyMeasurement, derived_entry,
                                              measure_with_geometric_noise)

if TYPE_CHECKING:
    from pseo_das.tasks.privacy.release_plan import PendingMeasurement

PRODUCT = "employment flows"


@dataclass(frozen=True)
class NoisyFlows:
    """Institution-level flows of one years-after at one CIP level: one row per origin
    cell, one column per destination (tasks.employment_flows.flow_counts.destinations order)."""
    tabulation_id: str
    cip_level: str
    years_after: int
    cells: pd.DataFrame        # CELL_KEYS + inst_state, grad_cohort_years, noise_terms
    noisy: np.ndarray          # cells x destinations, int64, may be negative
    measured_from: tuple[str, ...]
    sources: tuple[str, ...] = ()  # SHA-256 of the stored measurements it comes from
    corrected: np.ndarray | None = None  # a copy with it set is returned by the flows correction

    @property
    def measured(self) -> bool:
        return self.measured_from == (self.tabulation_id,)


def tabulation_id(cip_level: str, years_after: int) -> str:
    return f"flows.I.cip{cip_level}.y{years_after}"


@release_task("measure employment flows")
def measure_flows(pending: dict[int, list["PendingMeasurement"]], inputs: ValidatedInputs,
                  frames: dict[str, CellFrame], cfg: ReleaseConfig) -> list[NoisyMeasurement]:
    """Noisy flows of the plan's pending flows measurements (by years after; new
    populations only). Privacy cost: flows.epsilon_per_tabulation per measurement, on its
    populations only. True counts stay inside."""
    started = time.perf_counter()
    measured = []
    for years_after, mine in pending.items():
        destination = graduate_destinations(inputs, years_after, cfg.earnings.sample_floor)
        for measurement in mine:
            question = measurement.question
            cells, true_counts = true_flows(frames[question.cip_level], destination, years_after,
                                            cfg.cells.last_earnings_year, measurement.populations)
            measured.append(measure_with_geometric_noise(
                bytes.fromhex(measurement.seed_hex), measurement.measurement_id,
                question.tabulation_id, PRODUCT, cells, true_counts, question.epsilon))
            del true_counts
    progress("measured flows: " + (", ".join(
        f"{m.measurement_id} ({len(m.cells):,} cells x {N_DESTINATIONS:,} destinations)"
        for m in measured) or "nothing new") + f" ({time.perf_counter() - started:.1f} s)")
    return measured


def derive_flows(source: NoisyFlows, cip_level: str) -> tuple[NoisyFlows, LedgerEntry]:
    """Sum `source`'s noisy flows up to a coarser CIP level. Privacy cost: none."""
    cells, noisy = sum_to_coarser(source.cells, source.noisy, "I", cip_level, source.cip_level)
    tab_id = tabulation_id(cip_level, source.years_after)
    entry = derived_entry(tab_id, PRODUCT, len(cells), noisy.shape[1], source.tabulation_id)
    return NoisyFlows(tab_id, cip_level, source.years_after, cells, noisy, source.measured_from,
                      source.sources), entry


@release_task("derive employment flows")
def derive_all_flows(measured: list[NoisyFlows], cfg: ReleaseConfig
                     ) -> tuple[list[NoisyFlows], list[LedgerEntry]]:
    """Every flows CIP level of every years-after: measured ones as they are, the others
    summed from the next finer level. Privacy cost: none."""
    tables, entries = [], []
    for years_after in cfg.cells.years_after:
        by_level = {t.cip_level: t for t in measured if t.years_after == years_after}
        finer = None
        for level in cfg.flows.levels():
            table = by_level.get(level)
            if table is None:
                table, entry = derive_flows(finer, level)
                entries.append(entry)
            tables.append(table)
            finer = table
    progress(f"derived {len(entries)} flows tables by summation (zero epsilon)")
    return tables, entries
