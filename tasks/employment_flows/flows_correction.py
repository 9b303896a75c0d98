"""The flows correction (technical appendix A.3.1-A.3.2, as settled in SPEC.md).
Privacy cost: none (post-processing of noisy flows; its random draws are recorded).

Per origin cell, with its total T (`flows.correction`: "measured-total", the default, takes
the cell's measured origin count; "appendix" the sum of its noisy flows, as A.3.2 writes):
(1) negative flows are set to 0; (2) a cell whose total is negative is set to 0 entirely;
(3) otherwise F = (sum after step 1) - T units are removed one at a time, each from a flow
drawn among the still-positive flows with probability proportional to its weight

    w = 1 / (J2J(home state -> destination state) x QCEW(destination state, sector)
             x INDFLOW(institution, 2-digit CIP, sector)),

each factor replaced by 1 where it is zero or negative. INDFLOW sums the measured noisy
flows over cohorts, degree levels, years after and states. The non-employed destination
gets `nonemployed_weight` times the geometric mean of the cell's employed-destination
weights (the raw weights' scale depends on the units of J2J and QCEW, so an absolute
weight would mean nothing). A measured total above the sum after step 1 is made up by
adding the missing units in proportion to the kept flows (`flows_candidates.add_in_proportion`).

The sequential draws are simulated exactly and for all cells at once with competing
exponential clocks: give each positive flow's units exponential waiting times at rate w
(a Poisson process stopped after its count), and remove the F earliest units of the
cell. At every step the next unit then comes from a still-positive flow with probability
proportional to its weight, which is the sequential procedure of A.3.2. The F earliest
units are selected within each cell (`flows_candidates.remove_units`), not by a sort of
all units.
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd

from pseo_das.schemas.codes import STATE_FIPS
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.inputs.cells import ALL_FIELDS_CIPCODE
from pseo_das.tasks.codes.destinations import NONEMPLOYED, N_SECTORS, N_STATES, destination_sector, destination_state
from pseo_das.tasks.privacy.ledger import LedgerEntry
from pseo_das.tasks.privacy.post_processing import (post_processing_exponentials,
                                                    post_processing_seed)
from pseo_das.tasks.inputs.row_files import row_blocks, sink_like
from pseo_das.tasks.employment_flows.flows_candidates import appendix_correction
from pseo_das.tasks.employment_flows.noisy_flows import PRODUCT, NoisyFlows
from pseo_das.tasks.inputs.reference_inputs import ReferenceInputs


def positive_or_one(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return np.where(values > 0, values, 1.0)


def industry_flows(measured: list[NoisyFlows]) -> pd.DataFrame:
    """INDFLOW: measured noisy flows into each sector, summed over cohorts, degree levels,
    years after and states, by (institution, 2-digit CIP); CIP '00' holds the
    institution's total over all fields. One column per sector."""
    parts = []
    for table in measured:
        by_sector = np.concatenate([
            table.noisy[block][:, :NONEMPLOYED].reshape(-1, N_SECTORS, N_STATES).sum(axis=2)
            for block in row_blocks(len(table.cells), CORRECTION_BLOCK_CELLS)])
        parts.append(pd.DataFrame(by_sector).assign(
            institution=table.cells["institution"].astype(str).to_numpy(),
            cip2=table.cells["cipcode"].astype(str).str[:2].to_numpy()))
    flows = pd.concat(parts, ignore_index=True)
    by_field = flows.groupby(["institution", "cip2"]).sum()
    all_fields = flows.drop(columns="cip2").groupby("institution").sum()
    all_fields.index = pd.MultiIndex.from_arrays(
        [all_fields.index, [ALL_FIELDS_CIPCODE] * len(all_fields)], names=["institution", "cip2"])
    return pd.concat([by_field, all_fields]).sort_index()


def log_weights(table: NoisyFlows, reference: ReferenceInputs, indflow: pd.DataFrame,
                nonemployed_weight: float) -> np.ndarray:
    """log w for every (origin cell, destination) of `table` (cells x destinations)."""
    cells = table.cells
    home = np.searchsorted(np.array(STATE_FIPS), cells["inst_state"].astype(str).to_numpy())
    cip2 = cells["cipcode"].astype(str).str[:2].to_numpy()
    cip2 = np.where(table.cip_level == "A", ALL_FIELDS_CIPCODE, cip2)
    keys = pd.MultiIndex.from_arrays([cells["institution"].astype(str).to_numpy(), cip2])
    log_j2j = np.log(positive_or_one(reference.j2j_matrix()))[home]              # cells x states
    log_emp = np.log(positive_or_one(reference.employment_matrix())).T          # sectors x states
    log_ind = np.log(positive_or_one(indflow.reindex(keys).to_numpy(na_value=0.0)))  # cells x sectors
    sector, state = destination_sector()[:NONEMPLOYED], destination_state()[:NONEMPLOYED]
    employed = -(log_j2j[:, state] + log_emp[sector, state][None, :] + log_ind[:, sector])
    nonemployed = np.log(nonemployed_weight) + employed.mean(axis=1, keepdims=True)
    return np.hstack([employed, nonemployed])


NOISY_SUM_TOTAL = "noisy sum of the flows"
MEASURED_TOTAL = "measured origin count"


def correct_values(noisy: np.ndarray, log_w: np.ndarray, exponentials,
                   total: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """Corrected flows (cells x destinations) from noisy flows and log weights, and
    statistics. `total` None: the appendix's total, the sum of the cell's noisy flows
    (never a deficit); otherwise the measured origin counts, and a kept sum below one is
    made up in proportion to the kept flows (`flows_candidates.add_in_proportion`).

    `exponentials(n)` returns n standard exponential variates (the seeded stream): one
    per unit that could be removed, in canonical (cell, destination, unit) order.
    Privacy cost: none.
    """
    target = noisy.sum(axis=1) if total is None else np.asarray(total, dtype=np.int64)
    clipped = np.where(target[:, None] >= 0, np.maximum(noisy, 0), 0)
    gap = clipped.sum(axis=1) - np.maximum(target, 0)
    corrected = appendix_correction(noisy, target, log_w, exponentials)
    stats = {
        "total": NOISY_SUM_TOTAL if total is None else MEASURED_TOTAL,
        "origin_cells": len(noisy),
        "negative_flows_set_to_zero": int((noisy < 0).sum()),
        "cells_with_negative_total": int((target < 0).sum()),
        "units_removed": int(np.maximum(gap, 0).sum()),
        "units_added": int(np.maximum(-gap, 0).sum()),
        "cells_corrected": int((gap != 0).sum()),
    }
    return corrected, stats


CORRECTION_BLOCK_CELLS = 4096   # origin cells corrected at a time: bounds the weights and units held


def correct_table(table: NoisyFlows, reference: ReferenceInputs, indflow: pd.DataFrame,
                  nonemployed_weight: float, block_cells: int = CORRECTION_BLOCK_CELLS
                  ) -> tuple[NoisyFlows, dict, list[LedgerEntry]]:
    """`table` with its corrected flows set (a new object), statistics, and the ledger
    entry of the draws. The draws come from a stream keyed by the stored measurements the
    table reads, so the same measurements are corrected the same way in every release.
    Origin cells are corrected `block_cells` at a time (the correction is per cell, and the
    blocks consume the one stream in cell order), so the weights and the units that could
    be removed are never held for a whole national table: the result does not depend on
    the block size. The corrected flows are in a file when the noisy ones are
    (`row_files`)."""
    draw, entry = post_processing_exponentials(post_processing_seed(table.sources),
                                               f"{table.tabulation_id}.corrected", PRODUCT,
                                               *table.noisy.shape, table.tabulation_id)
    corrected = sink_like(table.noisy)
    stats: dict = {}
    for start in range(0, len(table.cells), block_cells):
        block = slice(start, start + block_cells)
        noisy = table.noisy[block]
        part = replace(table, cells=table.cells.iloc[block], noisy=noisy)
        log_w = log_weights(part, reference, indflow, nonemployed_weight)
        total = None if table.total is None else table.total[block]
        values, block_stats = correct_values(noisy, log_w, draw, total)
        corrected.append(values.astype(table.noisy.dtype, copy=False))
        stats = {key: value if key == "total" else stats.get(key, 0) + value
                 for key, value in block_stats.items()}
    if not stats:
        stats = correct_values(table.noisy[:0], np.zeros((0, table.noisy.shape[1])), draw,
                               None if table.total is None else table.total[:0])[1]
    return (replace(table, corrected=corrected.result()),
            {"tabulation_id": table.tabulation_id, "cip_level": table.cip_level,
             "years_after": table.years_after, **stats}, [entry])


@release_task("correct employment flows")
def correct_flows(tables: list[NoisyFlows], reference: ReferenceInputs,
                  nonemployed_weight: float
                  ) -> tuple[list[NoisyFlows], list[dict], list[LedgerEntry]]:
    """Corrected copies of every flows table, correction statistics and ledger entries.
    Privacy cost: none."""
    started = time.perf_counter()
    indflow = industry_flows([t for t in tables if t.measured])
    results = [correct_table(t, reference, indflow, nonemployed_weight) for t in tables]
    corrected = [r[0] for r in results]
    stats = [r[1] for r in results]
    entries = [e for r in results for e in r[2]]
    progress(f"corrected {len(tables)} flows tables to "
             + " / ".join(sorted({s['total'] for s in stats})) + ": "
             f"{sum(s['units_removed'] for s in stats):,} units removed, "
             f"{sum(s['units_added'] for s in stats):,} added, "
             f"{sum(s['cells_with_negative_total'] for s in stats):,} origin cells with a "
             f"negative total set to 0 ({time.perf_counter() - started:.1f} s)")
    return corrected, stats, entries
