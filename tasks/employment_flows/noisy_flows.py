"""Noisy employment flows: measured tabulations (geometric noise, epsilon each) and
coarser CIP levels derived from them by summation (post-processing, zero epsilon).

With the measured-total correction (`flows.correction`), each flows tabulation has a
companion: the origin cells' graduate counts, measured as their own tabulation (product
TOTAL_PRODUCT, one column, flows.total_epsilon_per_tabulation; each graduate is in one
origin cell, so sensitivity 1), summed to the coarser levels like the flows."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.inputs.cells import coarser_cells, institution_blocks, sum_to_coarser
from pseo_das.tasks.codes.destinations import N_DESTINATIONS
from pseo_das.tasks.privacy.employer_side import measure_with_employer_protection
from pseo_das.tasks.privacy.geometric import measure_with_geometric_noise
from pseo_das.tasks.privacy.ledger import LedgerEntry, NoisyMeasurement, derived_entry
from pseo_das.tasks.inputs.row_files import RowSink, SpilledRows, sum_rows

if TYPE_CHECKING:
    from pseo_das.tasks.inputs.true_counts import TrueCounts
    from pseo_das.tasks.privacy.question import PendingMeasurement

PRODUCT = "employment flows"
TOTAL_PRODUCT = "employment flows origin counts"
DERIVE_BLOCK_CELLS = 8192   # origin cells summed to a coarser CIP level at a time


@dataclass(frozen=True)
class NoisyFlows:
    """Institution-level flows of one years-after at one CIP level: one row per origin
    cell, one column per destination (tasks.employment_flows.flow_counts.destinations order)."""
    tabulation_id: str
    cip_level: str
    years_after: int
    cells: pd.DataFrame        # CELL_KEYS + inst_state, grad_cohort_years, noise_terms
    # cells x destinations, integers, may be negative; in a file (row_files.SpilledRows)
    # in a release: read a block of cells at a time
    noisy: "np.ndarray | SpilledRows"
    measured_from: tuple[str, ...]
    sources: tuple[str, ...] = ()  # SHA-256 of the stored measurements it comes from
    corrected: "np.ndarray | SpilledRows | None" = None  # set by the flows correction (a copy)
    total: np.ndarray | None = None      # measured noisy graduate count per origin cell, if any

    @property
    def measured(self) -> bool:
        return self.measured_from == (self.tabulation_id,)


def tabulation_id(cip_level: str, years_after: int) -> str:
    return f"flows.I.cip{cip_level}.y{years_after}"


def total_tabulation_id(cip_level: str, years_after: int) -> str:
    """The origin cells' measured graduate counts that go with flows tabulation_id()."""
    return f"flows_total.I.cip{cip_level}.y{years_after}"


# a measurement of more values is drawn into a file, a block of cells at a time (a national
# 1-year flows table: 385,114 cells x 1,021 destinations, 3.1 GB in memory)
SPILLED_VALUES = 1 << 26


def _sink(shape: tuple[int, int]) -> RowSink | None:
    return RowSink(shape[1], np.int64, spill=True) if shape[0] * shape[1] > SPILLED_VALUES \
        else None


@release_task("measure employment flows")
def measure_flows(pending: dict[int, list["PendingMeasurement"]], counts: "TrueCounts",
                  cfg: ReleaseConfig) -> list[NoisyMeasurement]:
    """Noisy flows of the plan's pending flows and origin-count measurements (by years
    after; new populations only). An origin count is the row sum of the cell's true flows
    (every graduate of the cell is in exactly one destination). Privacy cost: the
    question's epsilon per measurement (flows.epsilon_per_tabulation, or
    flows.total_epsilon_per_tabulation for an origin count), on its populations only.
    With an employer-protecting flows.mechanism, the flows (not the origin counts, which
    have no establishment attribute) get that mechanism instead of the geometric one:
    graduates keep epsilon-DP, employers get weak (alpha, epsilon) per flow.
    True counts stay inside."""
    started = time.perf_counter()
    measured = []
    for years_after, mine in pending.items():
        for measurement in mine:
            question = measurement.question
            (statement,) = question.statements(measurement.measurement_id)
            of = (question.cip_level, years_after, cfg.cells.last_earnings_year,
                  measurement.populations)
            if statement.employer is None:   # the geometric noise adds the non-zero counts
                cells, entries = (counts.origin_counts(*of) if question.product == TOTAL_PRODUCT
                                  else counts.flow_entries(*of))
                measured.append(measure_with_geometric_noise(
                    measurement.seed.bits, statement, cells, entries,
                    counts.max_degrees_per_person, _sink(entries.shape)))
                del entries
            else:   # flows with graduate attributes: the weak employer notion
                cells, true_counts = counts.flows(*of)
                largest = counts.largest_at_one_employer(*of)
                measured.append(measure_with_employer_protection(
                    measurement.seed.bits, statement, cells, true_counts,
                    largest))
                del largest, true_counts
    progress("measured flows: " + (", ".join(
        f"{m.measurement_id} ({len(m.cells):,} cells x {m.values.shape[1]:,} "
        f"{'destinations' if m.values.shape[1] == N_DESTINATIONS else 'count'})"
        for m in measured) or "nothing new") + f" ({time.perf_counter() - started:.1f} s)")
    return measured


def derive_flows(source: NoisyFlows, cip_level: str) -> tuple[NoisyFlows, list[LedgerEntry]]:
    """Sum `source`'s noisy flows (and its measured origin counts, if any) up to a coarser
    CIP level, a block of whole institutions at a time (in a file when `source`'s are:
    `row_files`). Privacy cost: none."""
    cells, group = coarser_cells(source.cells, "I", cip_level, source.cip_level)
    noisy = sum_rows(source.noisy, group, len(cells),
                     institution_blocks(source.cells, DERIVE_BLOCK_CELLS))
    tab_id = tabulation_id(cip_level, source.years_after)
    entries = [derived_entry(tab_id, PRODUCT, len(cells), noisy.shape[1], source.tabulation_id)]
    total = None
    if source.total is not None:
        total = sum_to_coarser(source.cells, source.total[:, None], "I", cip_level,
                               source.cip_level)[1][:, 0]
        entries.append(derived_entry(total_tabulation_id(cip_level, source.years_after),
                                     TOTAL_PRODUCT, len(cells), 1,
                                     total_tabulation_id(source.cip_level, source.years_after)))
    return NoisyFlows(tab_id, cip_level, source.years_after,
                      cells, noisy, source.measured_from, source.sources, total=total), entries


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
                table, derived = derive_flows(finer, level)
                entries += derived
            tables.append(table)
            finer = table
    progress(f"derived {sum(e.product == PRODUCT for e in entries)} flows tables by summation "
             "(zero epsilon)")
    return tables, entries
