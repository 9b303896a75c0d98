"""Noisy earnings histograms: measured tabulations (geometric noise, epsilon each) and
tables derived from them by summation (post-processing, zero epsilon)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pseo_das.config import CIP_LEVELS, ReleaseConfig
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.inputs.cells import sum_to_coarser
from pseo_das.tasks.privacy.geometric import measure_with_geometric_noise
from pseo_das.tasks.privacy.ledger import LedgerEntry, NoisyMeasurement, derived_entry

if TYPE_CHECKING:
    from pseo_das.tasks.inputs.true_counts import TrueCounts
    from pseo_das.tasks.privacy.question import PendingMeasurement

PRODUCT = "earnings histograms"


@dataclass(frozen=True)
class NoisyHistograms:
    """Noisy histograms of one years-after at one institution level and CIP level, by
    graduation cohort or summed over every cohort."""
    tabulation_id: str
    inst_level: str               # I institution, S state
    cip_level: str                # 4, 2, A
    years_after: int
    cells: pd.DataFrame           # CELL_KEYS + inst_state, grad_cohort_years, noise_terms
    counts: np.ndarray            # cells x bins, int64, may be negative
    measured_from: tuple[str, ...]  # the measured tabulations whose noise it carries
    sources: tuple[str, ...] = ()   # SHA-256 of the stored measurements it comes from
    by_cohort: bool = True        # False: every cohort summed (grad_cohort ALL_COHORTS)

    @property
    def measured(self) -> bool:
        return self.measured_from == (self.tabulation_id,)


def tabulation_id(inst_level: str, cip_level: str, years_after: int,
                  by_cohort: bool = True) -> str:
    cohorts = "" if by_cohort else ".all-cohorts"
    return f"earnings.{inst_level}.cip{cip_level}{cohorts}.y{years_after}"


def derive_histograms(source: NoisyHistograms, inst_level: str, cip_level: str,
                      by_cohort: bool = True) -> tuple[NoisyHistograms, LedgerEntry]:
    """Sum `source`'s noisy histograms up to a coarser institution or CIP level, or over
    every cohort. Privacy cost: none (post-processing); returns its ledger entry as derived."""
    summed, counts = sum_to_coarser(source.cells, source.counts, inst_level, cip_level,
                                    source.cip_level, all_cohorts=not by_cohort)
    tab_id = tabulation_id(inst_level, cip_level, source.years_after, by_cohort)
    entry = derived_entry(tab_id, PRODUCT, len(summed), counts.shape[1], source.tabulation_id)
    return NoisyHistograms(tab_id, inst_level, cip_level, source.years_after, summed, counts,
                           source.measured_from, source.sources, by_cohort), entry


@release_task("measure earnings histograms")
def measure_earnings(pending: dict[int, list["PendingMeasurement"]], counts: "TrueCounts",
                     cfg: ReleaseConfig) -> list[NoisyMeasurement]:
    """Noisy institution histograms of the plan's pending earnings measurements (by years
    after; new populations only). Privacy cost: epsilon_per_tabulation per measurement, on
    its populations only. True counts stay inside."""
    started = time.perf_counter()
    measured = []
    for years_after, mine in pending.items():
        for measurement in mine:
            question = measurement.question
            cells, true_counts = counts.histograms(question.cip_level, years_after,
                                                   cfg.cells.last_earnings_year,
                                                   measurement.populations)
            (statement,) = question.statements(measurement.measurement_id)
            measured.append(measure_with_geometric_noise(
                measurement.seed.bits, statement, cells, true_counts,
                counts.max_degrees_per_person))
            del true_counts
    progress("measured earnings: " + (", ".join(
        f"{m.measurement_id} ({len(m.cells):,} cells)" for m in measured) or "nothing new")
        + f" ({time.perf_counter() - started:.1f} s)")
    return measured


@release_task("derive earnings histograms")
def derive_earnings(measured: list[NoisyHistograms], cfg: ReleaseConfig
                    ) -> tuple[list[NoisyHistograms], list[LedgerEntry]]:
    """Institution tables of derived CIP levels, then state tables of every CIP level, then
    the all-cohort tables of both, by summing noisy histograms: every level of the official
    earnings file. Privacy cost: none."""
    tables, entries = [], []

    def derive(source, inst_level, cip_level, by_cohort=True):
        table, entry = derive_histograms(source, inst_level, cip_level, by_cohort)
        entries.append(entry)
        return table

    for years_after in cfg.cells.years_after:
        by_level = {t.cip_level: t for t in measured if t.years_after == years_after}
        finer = None
        for level in CIP_LEVELS:
            table = by_level.get(level) or derive(finer, "I", level)
            tables.append(table)
            finer = table
        by_cohort = tables[-len(CIP_LEVELS):]
        by_cohort += [derive(table, "S", table.cip_level) for table in by_cohort]
        tables += by_cohort[len(CIP_LEVELS):]
        tables += [derive(table, table.inst_level, table.cip_level, by_cohort=False)
                   for table in by_cohort]
    progress(f"derived {len(entries)} tables by summation (zero epsilon)")
    return tables, entries
