"""The official employment flows file (pseof_all.csv, LEHD Public Use Schema V4.14.0) from
the corrected state flows: sums nationally and by Census division, each over all industries
and by NAICS sector, in-state employment and non-employment, for the institution origin
cells, the state-of-institution cells (sums of the state's institutions) and all cohorts
(sums of the cohorts); and division suppression (technical appendix A.3.3). Privacy cost:
none (post-processing of noisy flows).

Division suppression: an origin cell observed in calendar years where some states'
earnings records are missing (the graduates working there look non-employed) has
incomplete division flows. From the institution's origin cells with full state coverage
we estimate, per division, the share of the institution's flows to that division that
goes to the states unobserved for the cell; where the share exceeds the configured
maximum, that division's flows of the cell are suppressed (status 5). When the
institution has no fully covered flows to the division to learn from, the share is
unknown and the division's flows are suppressed as well.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from pseo_das.schemas.codes import (CENSUS_DIVISIONS, DIVISION_OF_STATE, NAICS_SECTORS,
                                    NONEMPLOYED_INDUSTRY, STATE_FIPS, STATUS_NOT_AVAILABLE,
                                    STATUS_OK, STATUS_SUPPRESSED, YEARS_AFTER)
from pseo_das.schemas.pseo_layout import ALL_COHORTS, Product, layout
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.employment_flows.flow_counts import (N_DESTINATIONS, N_SECTORS, N_STATES,
                                                         NONEMPLOYED, destinations)
from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows
from pseo_das.tasks.inputs.cells import CELL_KEYS, sum_to_coarser
from pseo_das.tasks.inputs.reference_inputs import ReferenceInputs
from pseo_das.tasks.publication.official_codes import agg_level, official_cells

PRODUCT = Product.PSEOF
DIVISIONS = tuple(CENSUS_DIVISIONS)   # "1" to "9", as the official files code them
NATIONAL_GEOGRAPHY, ALL_INDUSTRIES = "00", "00"
# States (columns) -> divisions (rows) membership.
DIVISION_MEMBERSHIP = np.array([[DIVISION_OF_STATE[s] == d for s in STATE_FIPS] for d in DIVISIONS])
MEASURES = ["grads_emp", "grads_emp_instate", "grads_nme"]


def state_flows(corrected: np.ndarray) -> np.ndarray:
    """Employed flows as cells x sectors x states."""
    return corrected[:, :NONEMPLOYED].reshape(-1, N_SECTORS, N_STATES)


def unobserved_states(table: NoisyFlows, covered) -> np.ndarray:
    """cells x states: True where the state lacks earnings records in some calendar year
    the cell is observed in (cohort window years + years after). `covered(years)` gives a
    years x states boolean coverage matrix."""
    start = table.cells["grad_cohort"].to_numpy() + table.years_after
    length = table.cells["grad_cohort_years"].to_numpy()
    missing = np.zeros((len(start), N_STATES), dtype=bool)
    for first, n in set(zip(start.tolist(), length.tolist())):
        window = ~covered(np.arange(first, first + n)).all(axis=0)
        missing[(start == first) & (length == n)] = window
    return missing


def institution_state_flows(tables: list[NoisyFlows], unobserved: list[np.ndarray]) -> pd.DataFrame:
    """Per institution, corrected employed flows to each state summed over its fully covered
    origin cells (all years after, degree levels, cohorts), from the coarsest CIP level."""
    coarsest = tables[-1].cip_level
    parts = []
    for table, missing in zip(tables, unobserved):
        if table.cip_level != coarsest:
            continue
        full = ~missing.any(axis=1)
        by_state = state_flows(table.corrected[full]).sum(axis=1)
        parts.append(pd.DataFrame(by_state).assign(
            institution=table.cells["institution"].astype(str).to_numpy()[full]))
    return pd.concat(parts).groupby("institution").sum()


def divisions_at_risk(missing: np.ndarray) -> np.ndarray:
    """cells x divisions: True where the division holds one of the cell's unobserved states."""
    return (missing.astype(np.int64) @ DIVISION_MEMBERSHIP.T.astype(np.int64)) > 0


def unobserved_division_share(table: NoisyFlows, missing: np.ndarray,
                              history: pd.DataFrame) -> np.ndarray:
    """cells x divisions: estimated share of the division's flows going to the cell's
    unobserved states (0 where none of the division's states is unobserved; 1 where the
    institution's fully covered flows to the division are not positive)."""
    institutions = table.cells["institution"].astype(str).to_numpy()
    flows = history.reindex(institutions).to_numpy(na_value=0.0)   # cells x states
    to_division = flows @ DIVISION_MEMBERSHIP.T
    to_unobserved = (flows * missing) @ DIVISION_MEMBERSHIP.T
    touched = divisions_at_risk(missing)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(to_division > 0, to_unobserved / to_division, 1.0)
    return np.where(touched, share, 0.0)


@dataclass(frozen=True)
class OriginTable:
    """Corrected flows of one years-after from the origin cells of one level: institution
    (I) or state of institution (S), a CIP level, by cohort or every cohort summed."""
    inst_level: str
    cip_level: str
    by_cohort: bool
    years_after: int
    cells: pd.DataFrame        # CELL_KEYS + inst_state, grad_cohort_years, noise_terms
    corrected: np.ndarray      # cells x destinations
    suppressed: np.ndarray     # cells x divisions: the division's flows are suppressed

    @property
    def level(self) -> tuple[str, str, bool]:
        return self.inst_level, self.cip_level, self.by_cohort


def origin_tables(table: NoisyFlows, suppressed: np.ndarray) -> list[OriginTable]:
    """The institution table as corrected, and the state-of-institution and all-cohort
    tables summed from it. A summed division flow is suppressed when one of the flows it
    sums is (it would be as incomplete). Privacy cost: none (sums of corrected flows)."""
    stacked = np.hstack([table.corrected, suppressed.astype(np.int64)])
    out = []
    for inst_level, by_cohort in (("I", True), ("S", True), ("I", False), ("S", False)):
        cells, summed = (table.cells, stacked) if (inst_level, by_cohort) == ("I", True) else \
            sum_to_coarser(table.cells, stacked, inst_level, table.cip_level, table.cip_level,
                           all_cohorts=not by_cohort)
        out.append(OriginTable(inst_level, table.cip_level, by_cohort, table.years_after, cells,
                               summed[:, :N_DESTINATIONS], summed[:, N_DESTINATIONS:] > 0))
    return out


def destination_blocks(table: OriginTable) -> list[tuple[str, list[str], str, list[str],
                                                          np.ndarray, np.ndarray, np.ndarray]]:
    """Per employment geography x industry level of pseof, for every origin cell: (geo_level,
    geographies, ind_level, industries, employed, employed in-state, suppressed), the
    arrays cells x geographies x industries (geography-major, as the rows are written)."""
    by_state = state_flows(table.corrected)                            # cells x sectors x states
    home = np.searchsorted(np.array(STATE_FIPS), table.cells["inst_state"].astype(str).to_numpy())
    n = len(home)
    instate = by_state[np.arange(n), :, home]                          # cells x sectors
    home_division = DIVISION_MEMBERSHIP[:, home].T                     # cells x divisions
    by_division = by_state @ DIVISION_MEMBERSHIP.T.astype(np.int64)    # cells x sectors x divisions
    never = np.zeros((n, 1, 1), bool)
    divisions, sectors = list(DIVISIONS), list(NAICS_SECTORS)
    return [
        ("N", [NATIONAL_GEOGRAPHY], "A", [ALL_INDUSTRIES], by_state.sum(axis=(1, 2))[:, None, None],
         instate.sum(axis=1)[:, None, None], never),
        ("N", [NATIONAL_GEOGRAPHY], "S", sectors, by_state.sum(axis=2)[:, None, :],
         instate[:, None, :], never),
        ("D", divisions, "A", [ALL_INDUSTRIES], by_division.sum(axis=1)[:, :, None],
         (home_division * instate.sum(axis=1)[:, None])[:, :, None], table.suppressed[:, :, None]),
        ("D", divisions, "S", sectors, by_division.transpose(0, 2, 1),
         home_division[:, :, None] * instate[:, None, :], table.suppressed[:, :, None]),
    ]


def level_rows(tables: list[OriginTable]) -> list[pd.DataFrame]:
    """pseof rows of one origin level (its tables, one per years-after): one row per origin
    cell x geography x industry, per block of destination_blocks. A years-after the cell
    does not have is not available (-1); a suppressed division flow is 5 (non-employment,
    which has no geography, is never suppressed)."""
    inst_level, cip_level, by_cohort = tables[0].level
    union = (pd.concat([t.cells[CELL_KEYS + ["inst_state", "grad_cohort_years"]] for t in tables])
             .drop_duplicates(CELL_KEYS).sort_values(CELL_KEYS, kind="stable", ignore_index=True))
    ids = official_cells(union, inst_level, cip_level)
    keys = pd.MultiIndex.from_frame(union[CELL_KEYS].astype(str))
    position = {t.years_after: keys.get_indexer(pd.MultiIndex.from_frame(t.cells[CELL_KEYS].astype(str)))
                for t in tables}
    blocks = {t.years_after: destination_blocks(t) for t in tables}
    nonemployed = {t.years_after: t.corrected[:, NONEMPLOYED] for t in tables}
    frames = []
    for b, (geo_level, geographies, ind_level, industries, *_) in enumerate(blocks[tables[0].years_after]):
        per_cell = len(geographies) * len(industries)
        frame = ids.iloc[np.repeat(np.arange(len(ids)), per_cell)].reset_index(drop=True)
        frame.insert(0, "agg_level_pseo", agg_level(PRODUCT, inst_level, cip_level, by_cohort,
                                                    geo_level, ind_level))
        frame = frame.assign(geo_level=geo_level,
                             geography=np.tile(np.repeat(geographies, len(industries)), len(ids)),
                             ind_level=ind_level,
                             industry=np.tile(industries, len(ids) * len(geographies)))
        for k in YEARS_AFTER:
            frame = frame.assign(**_year_columns(
                k, len(ids), per_cell, position.get(k), blocks.get(k, [None] * 4)[b],
                nonemployed.get(k)))
        frames.append(frame)
    return frames


def _year_columns(k: int, n_cells: int, per_cell: int, position: np.ndarray | None,
                  block: tuple | None, nonemployed: np.ndarray | None) -> dict[str, object]:
    """The year-k measures and status flags of one block's rows."""
    emp = np.full((n_cells, per_cell), np.nan)
    instate, nme = emp.copy(), emp.copy()
    present = np.zeros((n_cells, per_cell), bool)
    hidden = present.copy()
    if position is not None:
        *_, employed, in_state, suppressed = block
        shape = (len(position), per_cell)
        emp[position] = employed.reshape(shape)
        instate[position] = in_state.reshape(shape)
        nme[position] = nonemployed[:, None]
        present[position] = True
        hidden[position] = np.broadcast_to(suppressed, employed.shape).reshape(shape)
    present, hidden = present.reshape(-1), hidden.reshape(-1)
    status = np.select([~present, hidden], [STATUS_NOT_AVAILABLE, STATUS_SUPPRESSED],
                       STATUS_OK).astype(np.int8)    # flags -1, 1, 5: one byte each
    columns = {}
    for name, values in (("grads_emp", emp), ("grads_emp_instate", instate)):
        columns[f"y{k}_{name}"] = pd.array(np.where(hidden, np.nan, values.reshape(-1)), dtype="Int64")
        columns[f"status_y{k}_{name}"] = status
    columns[f"y{k}_grads_nme"] = pd.array(nme.reshape(-1), dtype="Int64")
    columns[f"status_y{k}_grads_nme"] = np.where(present, STATUS_OK,
                                                 STATUS_NOT_AVAILABLE).astype(np.int8)
    return columns


def flows_table(origins: list[OriginTable]) -> pd.DataFrame:
    """pseof_all.csv: every origin level x employment geography x industry level of the
    schema, rows in aggregation-level order, the official columns in order."""
    levels: dict[tuple, list[OriginTable]] = {}
    for table in origins:
        levels.setdefault(table.level, []).append(table)
    frames = [frame for tables in levels.values() for frame in level_rows(tables)]
    frames.sort(key=lambda f: int(f["agg_level_pseo"].iat[0]) if len(f) else 0)
    return pd.concat(frames, ignore_index=True)[list(layout(PRODUCT).columns)]


def state_flows_table(tables: list[NoisyFlows]) -> pd.DataFrame:
    """flows_state.csv (internal): noisy and corrected count of every flow whose noisy or
    corrected count is not 0, and the total its origin cell's corrected flows match
    (`target_total`), so an auditor can check the correction cell by cell.
    Code columns stay categorical (millions of rows)."""
    dest = destinations().astype("category")
    parts = []
    for table in tables:
        rows, cols = np.nonzero((table.noisy != 0) | (table.corrected != 0))
        ids = table.cells.iloc[rows].reset_index(drop=True)
        parts.append({
            "institution": ids["institution"].array,
            "degree_level": ids["degree_level"].array,
            "cip_level": pd.Categorical([table.cip_level]).take(np.zeros(len(rows), np.int64)),
            "cipcode": ids["cipcode"].array,
            "grad_cohort": ids["grad_cohort"].to_numpy(np.int64),
            "grad_cohort_years": ids["grad_cohort_years"].to_numpy(np.int64),
            "years_after": np.full(len(rows), table.years_after, np.int64),
            "industry": dest["industry"].array.take(cols),
            "state": dest["state"].array.take(cols),
            "noisy_count": table.noisy[rows, cols],
            "corrected_count": table.corrected[rows, cols],
            "origin_total": target_total(table)[rows],
        })
    return pd.DataFrame({name: _concat([part[name] for part in parts]) for name in parts[0]})


def _concat(arrays: list) -> object:
    if isinstance(arrays[0], pd.Categorical):  # one category dtype (an empty table's may differ)
        return union_categoricals([pd.Categorical.from_codes(a.codes, a.categories.astype(object))
                                   for a in arrays], sort_categories=True)
    return np.concatenate(arrays)


SHARE_THRESHOLDS_SHOWN = (0.05, 0.10, 0.20, 0.50)


def recheck_division_sums(pseof: pd.DataFrame, flows_state: pd.DataFrame) -> tuple[int, int]:
    """Recompute every published division flow of the institution cells by cohort from
    flows_state.csv as an auditor would; return (flows compared, flows that differ)."""
    employed = flows_state[flows_state["industry"] != NONEMPLOYED_INDUSTRY]
    states = employed["state"].cat
    of_state = np.array([DIVISIONS.index(DIVISION_OF_STATE[s]) if s in DIVISION_OF_STATE else -1
                         for s in states.categories])
    division = pd.Categorical.from_codes(of_state[states.codes], list(DIVISIONS))
    keys = ["institution", "degree_level", "cip_level", "cipcode", "grad_cohort"]
    sums = (employed[keys + ["years_after", "corrected_count"]].assign(geography=division)
            .astype({"grad_cohort": str})
            .groupby(keys + ["years_after", "geography"], observed=True)["corrected_count"].sum())
    sums.index = sums.index.set_levels([level.astype(level.categories.dtype)
                                        if isinstance(level, pd.CategoricalIndex) else level
                                        for level in sums.index.levels])
    cells = pseof[(pseof["inst_level"] == "I") & (pseof["grad_cohort"] != ALL_COHORTS)
                  & (pseof["geo_level"] == "D") & (pseof["ind_level"] == "A")]
    compared = differ = 0
    for k in YEARS_AFTER:
        published = cells[cells[f"status_y{k}_grads_emp"] == STATUS_OK]
        index = pd.MultiIndex.from_frame(published[keys].assign(years_after=k)
                                         .join(published["geography"]))
        expected = sums.reindex(index).fillna(0).to_numpy()
        compared += len(published)
        differ += int((published[f"y{k}_grads_emp"].to_numpy(dtype=np.int64) != expected).sum())
    return compared, differ


def target_total(table: NoisyFlows) -> np.ndarray:
    """The total the correction matches: the measured origin counts, or the noisy sum."""
    return table.noisy.sum(axis=1) if table.total is None else table.total


def flows_invariants(tables: list[NoisyFlows], pseof: pd.DataFrame,
                     flows_state: pd.DataFrame) -> list[dict]:
    """The logical constraints the correction promises, checked on every table, the
    published flows' own (never negative, in-state within employed), and the published
    division flows recomputed from the state flows they come from."""
    negative = sum(int((t.corrected < 0).sum()) for t in tables)
    totals = sum(int((t.corrected.sum(axis=1) != np.maximum(target_total(t), 0)).sum())
                 for t in tables)
    # units are only removed, except in a cell whose measured total exceeds its kept flows
    removed_only = [np.maximum(t.noisy, 0).sum(axis=1) >= target_total(t) for t in tables]
    exceed = sum(int((t.corrected > np.maximum(t.noisy, 0))[keep].sum())
                 for t, keep in zip(tables, removed_only))
    published_negative = sum(int((pseof[f"y{k}_{name}"] < 0).sum())
                             for k in YEARS_AFTER for name in MEASURES)
    instate_over = sum(int((pseof[f"y{k}_grads_emp_instate"] > pseof[f"y{k}_grads_emp"]).sum())
                       for k in YEARS_AFTER)
    compared, differ = recheck_division_sums(pseof, flows_state)
    checks = [
        ("no corrected flow is negative", negative, "negative flows"),
        ("per origin cell, corrected total = its target (measured origin count, or the noisy "
         "sum of its flows; 0 when that is negative)", totals, "cells differ"),
        ("no corrected flow exceeds its positive noisy count where units were removed",
         exceed, "flows exceed"),
        ("no published flow is negative", published_negative, "negative values"),
        ("no published in-state count exceeds its employed count", instate_over, "rows exceed"),
        (f"every published division flow of the institution cells recomputed from "
         f"flows_state.csv ({compared:,})", differ, "differ"),
    ]
    return [{"name": name, "result": ("passed" if bad == 0 else "FAILED") + f" ({bad:,} {what})"}
            for name, bad, what in checks]


@dataclass
class FlowsRelease:
    """What the flows product publishes and reports."""
    tables: list[NoisyFlows]     # institution tables by cohort, corrected
    origins: list[OriginTable]   # every origin level of pseof_all
    pseof: pd.DataFrame          # public: pseof_all.csv
    flows_state: pd.DataFrame    # internal: noisy and corrected state flows
    correction: list[dict]       # per table: correction statistics
    suppression: dict            # division suppression statistics
    checks: list[dict]
    reference_fingerprints: dict[str, str]


@release_task("build public flows tables")
def build_flows_tables(tables: list[NoisyFlows], correction: list[dict],
                       reference: ReferenceInputs, share_max: float) -> FlowsRelease:
    """pseof_all, flows_state, division suppression statistics and the checks run, from
    the corrected flows. Privacy cost: none."""
    started = time.perf_counter()
    unobserved = [unobserved_states(t, reference.covered) for t in tables]
    history = institution_state_flows(tables, unobserved)
    shares = [unobserved_division_share(t, m, history) for t, m in zip(tables, unobserved)]
    origins = [origin for t, share in zip(tables, shares)
               for origin in origin_tables(t, share > share_max)]
    progress(f"division suppression decided, origin tables built "
             f"({time.perf_counter() - started:.1f} s)")
    pseof = flows_table(origins)
    progress(f"pseof_all assembled: {len(pseof):,} rows ({time.perf_counter() - started:.1f} s)")
    touched = np.concatenate([s[divisions_at_risk(m)]
                              for s, m in zip(shares, unobserved)])
    suppression = {
        "share_max": share_max,
        "partial_coverage_cells": int(sum(m.any(axis=1).sum() for m in unobserved)),
        "division_flows_at_risk": int(len(touched)),
        "division_flows_suppressed": int(sum((s > share_max).sum() for s in shares)),
        "by_threshold": [{"threshold": th, "suppressed": int((touched > th).sum())}
                         for th in SHARE_THRESHOLDS_SHOWN],
    }
    flows_state = state_flows_table(tables)
    progress(f"flows_state assembled: {len(flows_state):,} rows; checking the flows "
             f"invariants ({time.perf_counter() - started:.1f} s)")
    checks = flows_invariants(tables, pseof, flows_state)
    if any(c["result"].startswith("FAILED") for c in checks):
        raise RuntimeError("flows checks failed: " + "; ".join(
            f"{c['name']}: {c['result']}" for c in checks if c["result"].startswith("FAILED")))
    progress(f"public flows: pseof_all {len(pseof):,} rows, "
             f"{suppression['division_flows_suppressed']:,} division flows of institution "
             f"cells suppressed ({time.perf_counter() - started:.1f} s)")
    return FlowsRelease(tables, origins, pseof, flows_state, correction, suppression, checks,
                        reference.fingerprints)
