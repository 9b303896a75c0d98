"""Public employment flows (pseof) from the corrected state flows: sums by Census
division and nationally, in-state employment, non-employment, and division suppression
(technical appendix A.3.3). Privacy cost: none (post-processing of noisy flows).

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
                           NONEMPLOYED_INDUSTRY, STATE_FIPS, STATUS_NOT_AVAILABLE, STATUS_OK,
                           STATUS_SUPPRESSED)
from pseo_das.schemas.outputs import pseof_schema
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.employment_flows.flow_counts import N_SECTORS, N_STATES, NONEMPLOYED, destinations
from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows
from pseo_das.tasks.earnings.earnings_tables import ID_COLUMNS
from pseo_das.tasks.inputs.reference_inputs import ReferenceInputs

DIVISIONS = tuple(CENSUS_DIVISIONS)
NATIONAL_GEOGRAPHY, ALL_INDUSTRIES = "00", "00"
# States (columns) -> divisions (rows) membership.
DIVISION_MEMBERSHIP = np.array([[DIVISION_OF_STATE[s] == d for s in STATE_FIPS] for d in DIVISIONS])
GEO_COLUMNS = ["geo_level", "geography", "ind_level", "industry"]
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


def cell_rows(table: NoisyFlows, share: np.ndarray, share_max: float) -> pd.DataFrame:
    """Long rows (cell x geography x industry) of one table: measures and a suppressed flag."""
    by_state = state_flows(table.corrected)
    home = np.searchsorted(np.array(STATE_FIPS), table.cells["inst_state"].astype(str).to_numpy())
    cells = np.arange(len(home))
    instate_by_sector = by_state[cells, :, home]                       # cells x sectors
    division_emp = by_state.sum(axis=1) @ DIVISION_MEMBERSHIP.T        # cells x divisions
    home_division = DIVISION_MEMBERSHIP[:, home].T                     # cells x divisions
    blocks = [  # (geo_level, geography, ind_level, industry, emp, instate, suppressed)
        ("N", [NATIONAL_GEOGRAPHY], "A", [ALL_INDUSTRIES], by_state.sum(axis=(1, 2))[:, None],
         instate_by_sector.sum(axis=1)[:, None], np.zeros((len(cells), 1), bool)),
        ("N", [NATIONAL_GEOGRAPHY], "S", list(NAICS_SECTORS), by_state.sum(axis=2),
         instate_by_sector, np.zeros((len(cells), N_SECTORS), bool)),
        ("D", [d.zfill(2) for d in DIVISIONS], "A", [ALL_INDUSTRIES], division_emp,
         home_division * instate_by_sector.sum(axis=1)[:, None], share > share_max),
    ]
    nonemployed = table.corrected[:, NONEMPLOYED]
    frames = []
    for geo_level, geographies, ind_level, industries, emp, instate, suppressed in blocks:
        n = emp.shape[1]
        frames.append(pd.DataFrame({
            "cell": np.repeat(cells, n),
            "geo_level": geo_level,
            "geography": np.tile(np.repeat(geographies, len(industries)), len(cells)),
            "ind_level": ind_level,
            "industry": np.tile(np.tile(industries, len(geographies)), len(cells)),
            "grads_emp": emp.reshape(-1),
            "grads_emp_instate": instate.reshape(-1),
            "grads_nme": np.repeat(nonemployed, n),
            "suppressed": suppressed.reshape(-1),
        }))
    rows = pd.concat(frames, ignore_index=True)
    ids = table.cells.iloc[rows.pop("cell").to_numpy()].reset_index(drop=True)
    return pd.concat([pd.DataFrame({
        "inst_level": "I",
        "institution": ids["institution"].astype(str),
        "degree_level": ids["degree_level"].astype(str),
        "cip_level": table.cip_level,
        "cipcode": ids["cipcode"].astype(str),
        "grad_cohort": ids["grad_cohort"].astype(np.int64),
        "grad_cohort_years": ids["grad_cohort_years"].astype(np.int64),
        "years_after": table.years_after,
    }), rows], axis=1)


def flows_table(rows: pd.DataFrame, years_after: tuple[int, ...]) -> pd.DataFrame:
    """pseof: one row per origin cell x geography x industry; y{k}_ values, then status
    flags, per years-after (-1: the cohort cannot have that years-after; 5: suppressed)."""
    keys = ID_COLUMNS + GEO_COLUMNS
    out = rows[keys].drop_duplicates().sort_values(keys, kind="stable", ignore_index=True)
    index = pd.MultiIndex.from_frame(out)
    values, statuses = {}, {}
    for k in years_after:
        aligned = rows[rows["years_after"] == k].set_index(keys).reindex(index)
        present = aligned["grads_emp"].notna().to_numpy()
        suppressed = aligned["suppressed"].fillna(False).to_numpy(dtype=bool)
        for name in MEASURES:
            column = aligned[name].to_numpy(dtype=np.float64)
            hidden = suppressed & (name != "grads_nme")   # non-employment has no geography
            values[f"y{k}_{name}"] = pd.array(np.where(hidden, np.nan, column), dtype="Int64")
            statuses[f"status_y{k}_{name}"] = np.select(
                [~present, hidden], [STATUS_NOT_AVAILABLE, STATUS_SUPPRESSED], STATUS_OK)
    return pd.concat([out, pd.DataFrame(values), pd.DataFrame(statuses)], axis=1)


def state_flows_table(tables: list[NoisyFlows]) -> pd.DataFrame:
    """flows_state.csv (internal): noisy and corrected count of every flow whose noisy or
    corrected count is not 0, so an auditor can check the correction cell by cell.
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
        })
    return pd.DataFrame({name: _concat([part[name] for part in parts]) for name in parts[0]})


def _concat(arrays: list) -> object:
    if isinstance(arrays[0], pd.Categorical):  # one category dtype (an empty table's may differ)
        return union_categoricals([pd.Categorical.from_codes(a.codes, a.categories.astype(object))
                                   for a in arrays], sort_categories=True)
    return np.concatenate(arrays)


SHARE_THRESHOLDS_SHOWN = (0.05, 0.10, 0.20, 0.50)


def recheck_division_sums(pseof: pd.DataFrame, flows_state: pd.DataFrame,
                          years_after: tuple[int, ...]) -> tuple[int, int]:
    """Recompute every published division flow from flows_state.csv as an auditor would;
    return (flows compared, flows that differ)."""
    employed = flows_state[flows_state["industry"] != NONEMPLOYED_INDUSTRY]
    states = employed["state"].cat
    geographies = [d.zfill(2) for d in DIVISIONS]
    of_state = np.array([DIVISIONS.index(DIVISION_OF_STATE[s]) if s in DIVISION_OF_STATE else -1
                         for s in states.categories])
    division = pd.Categorical.from_codes(of_state[states.codes], geographies)
    keys = ID_COLUMNS[1:] + ["years_after"]
    sums = (employed[keys + ["corrected_count"]].assign(geography=division)
            .groupby(keys + ["geography"], observed=True)["corrected_count"].sum())
    sums.index = sums.index.set_levels([level.astype(level.categories.dtype)
                                        if isinstance(level, pd.CategoricalIndex) else level
                                        for level in sums.index.levels])
    compared = differ = 0
    for k in years_after:
        published = pseof[(pseof["geo_level"] == "D") & (pseof[f"status_y{k}_grads_emp"] == STATUS_OK)]
        index = pd.MultiIndex.from_frame(published[ID_COLUMNS[1:]].assign(years_after=k)
                                         .join(published["geography"]))
        expected = sums.reindex(index).fillna(0).to_numpy()
        compared += len(published)
        differ += int((published[f"y{k}_grads_emp"].to_numpy(dtype=np.int64) != expected).sum())
    return compared, differ


def flows_invariants(tables: list[NoisyFlows], pseof: pd.DataFrame, flows_state: pd.DataFrame,
                     years_after: tuple[int, ...]) -> list[dict]:
    """The logical constraints the correction promises, checked on every table, and the
    published division flows recomputed from the state flows they come from."""
    negative = sum(int((t.corrected < 0).sum()) for t in tables)
    totals = sum(int((t.corrected.sum(axis=1) != np.maximum(t.noisy.sum(axis=1), 0)).sum())
                 for t in tables)
    exceed = sum(int((t.corrected > np.maximum(t.noisy, 0)).sum()) for t in tables)
    compared, differ = recheck_division_sums(pseof, flows_state, years_after)
    checks = [
        ("no corrected flow is negative", negative, "negative flows"),
        ("per origin cell, corrected total = noisy total (0 when that is negative)", totals,
         "cells differ"),
        ("no corrected flow exceeds its positive noisy count", exceed, "flows exceed"),
        (f"every published division flow recomputed from flows_state.csv ({compared:,})",
         differ, "differ"),
    ]
    return [{"name": name, "result": ("passed" if bad == 0 else "FAILED") + f" ({bad:,} {what})"}
            for name, bad, what in checks]


@dataclass
class FlowsRelease:
    """What the flows product publishes and reports."""
    tables: list[NoisyFlows]
    pseof: pd.DataFrame         # public
    flows_state: pd.DataFrame   # internal: noisy and corrected state flows
    correction: list[dict]      # per table: correction statistics
    suppression: dict           # division suppression statistics
    checks: list[dict]
    reference_fingerprints: dict[str, str]


@release_task("build public flows tables")
def build_flows_tables(tables: list[NoisyFlows], correction: list[dict],
                       reference: ReferenceInputs, share_max: float,
                       years_after: tuple[int, ...]) -> FlowsRelease:
    """pseof, flows_state, division suppression statistics and the checks run, from the
    corrected flows. Privacy cost: none."""
    started = time.perf_counter()
    unobserved = [unobserved_states(t, reference.covered) for t in tables]
    history = institution_state_flows(tables, unobserved)
    shares = [unobserved_division_share(t, m, history) for t, m in zip(tables, unobserved)]
    rows = pd.concat([cell_rows(t, s, share_max) for t, s in zip(tables, shares)],
                     ignore_index=True)
    pseof = flows_table(rows, years_after)
    pseof_schema(years_after).validate(pseof, lazy=True)
    touched = np.concatenate([s[divisions_at_risk(m)]
                              for s, m in zip(shares, unobserved)])
    suppression = {
        "share_max": share_max,
        "partial_coverage_cells": int(sum(m.any(axis=1).sum() for m in unobserved)),
        "division_flows_at_risk": int(len(touched)),
        "division_flows_suppressed": int(rows["suppressed"].sum()),
        "by_threshold": [{"threshold": th, "suppressed": int((touched > th).sum())}
                         for th in SHARE_THRESHOLDS_SHOWN],
    }
    flows_state = state_flows_table(tables)
    checks = [{"name": "pseof.csv passes its output schema", "result": "passed"},
              *flows_invariants(tables, pseof, flows_state, years_after)]
    if any(c["result"].startswith("FAILED") for c in checks):
        raise RuntimeError("flows checks failed: " + "; ".join(
            f"{c['name']}: {c['result']}" for c in checks if c["result"].startswith("FAILED")))
    progress(f"public flows: pseof {len(pseof):,} rows, {suppression['division_flows_suppressed']:,} "
             f"division flows suppressed ({time.perf_counter() - started:.1f} s)")
    return FlowsRelease(tables, pseof, flows_state, correction, suppression, checks,
                        reference.fingerprints)
