"""Noisy earnings histograms: measured tabulations (geometric noise, epsilon each) and
tables derived from them by summation (post-processing, zero epsilon)."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.config import CIP_LEVELS, ReleaseConfig
from tasks import progress, release_task
from tasks.cells import CellFrame, sum_to_coarser
from tasks.histograms import earnings_records, true_histograms
from tasks.ingest import ValidatedInputs
from tasks.mechanism import PrivacyLedger, add_geometric_noise

PRODUCT = "earnings histograms"


@dataclass
class NoisyHistograms:
    """Noisy histograms of one years-after at one institution level and CIP level."""
    tabulation_id: str
    inst_level: str               # I institution, S state, N national
    cip_level: str                # 4, 2, A
    years_after: int
    cells: pd.DataFrame           # CELL_KEYS + inst_state, grad_cohort_years, noise_terms
    counts: np.ndarray            # cells x bins, int64, may be negative
    measured_from: tuple[str, ...]  # the measured tabulations whose noise it carries

    @property
    def measured(self) -> bool:
        return self.measured_from == (self.tabulation_id,)


def tabulation_id(inst_level: str, cip_level: str, years_after: int) -> str:
    return f"earnings.{inst_level}.cip{cip_level}.y{years_after}"


def measure_histograms(ledger: PrivacyLedger, release_seed: bytes, cells: pd.DataFrame,
                       true_counts: np.ndarray, cip_level: str, years_after: int,
                       epsilon: float) -> NoisyHistograms:
    """Institution-level noisy histograms. Privacy cost: `epsilon` (one tabulation)."""
    tab_id = tabulation_id("I", cip_level, years_after)
    noisy = add_geometric_noise(ledger, release_seed, tab_id, PRODUCT, true_counts, epsilon)
    return NoisyHistograms(tab_id, "I", cip_level, years_after,
                           cells.assign(noise_terms=1), noisy, (tab_id,))


def derive_histograms(ledger: PrivacyLedger, source: NoisyHistograms, inst_level: str,
                      cip_level: str) -> NoisyHistograms:
    """Sum `source`'s noisy histograms up to a coarser institution or CIP level.
    Privacy cost: none (post-processing); recorded in the ledger as derived."""
    summed, counts = sum_to_coarser(source.cells, source.counts, inst_level, cip_level,
                                    source.cip_level)
    tab_id = tabulation_id(inst_level, cip_level, source.years_after)
    ledger.record_derived(tab_id, PRODUCT, len(summed), counts.shape[1], source.tabulation_id)
    return NoisyHistograms(tab_id, inst_level, cip_level, source.years_after, summed, counts,
                           source.measured_from)


@release_task("measure earnings histograms")
def measure_earnings(ledger: PrivacyLedger, release_seed: bytes, inputs: ValidatedInputs,
                     frames: dict[str, CellFrame], years_after: int,
                     cfg: ReleaseConfig) -> list[NoisyHistograms]:
    """Noisy institution histograms of one years-after at every measured CIP level.
    Privacy cost: epsilon_per_tabulation per measured level. True counts stay inside."""
    started = time.perf_counter()
    records = earnings_records(inputs, years_after, cfg.earnings.bin_edges, cfg.earnings.sample_floor)
    measured = []
    for level in cfg.privacy.measured_levels():
        cells, true_counts = true_histograms(frames[level], records, cfg.cells.last_earnings_year,
                                             cfg.earnings.n_bins)
        measured.append(measure_histograms(ledger, release_seed, cells, true_counts, level,
                                           years_after, cfg.privacy.epsilon_per_tabulation))
        del true_counts
    progress(f"measured {years_after}-year earnings: "
             + ", ".join(f"{t.tabulation_id} ({len(t.cells):,} cells)" for t in measured)
             + f" ({time.perf_counter() - started:.1f} s)")
    return measured


@release_task("derive earnings histograms")
def derive_earnings(ledger: PrivacyLedger, measured: list[NoisyHistograms],
                    cfg: ReleaseConfig) -> list[NoisyHistograms]:
    """Institution tables of derived CIP levels, then state and national tables of every
    CIP level, by summing noisy histograms. Privacy cost: none."""
    tables = []
    for years_after in cfg.cells.years_after:
        by_level = {t.cip_level: t for t in measured if t.years_after == years_after}
        finer = None
        for level in CIP_LEVELS:
            table = by_level.get(level) or derive_histograms(ledger, finer, "I", level)
            tables.append(table)
            finer = table
        for institution_table in list(tables[-len(CIP_LEVELS):]):
            for inst_level in ("S", "N"):
                tables.append(derive_histograms(ledger, institution_table, inst_level,
                                                institution_table.cip_level))
    progress(f"derived {len(tables) - len(measured)} tables by summation (zero epsilon)")
    return tables
