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
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pseo_das.schemas.codes import (CENSUS_DIVISIONS, DIVISION_OF_STATE, NAICS_SECTORS,
                                    STATE_FIPS, STATUS_NOT_AVAILABLE,
                                    STATUS_OK, STATUS_SUPPRESSED, YEARS_AFTER)
from pseo_das.schemas.pseo_layout import Product, carries_origin_measures, layout
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.codes.destinations import NONEMPLOYED, N_SECTORS, N_STATES, destinations
from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows
from pseo_das.tasks.inputs.row_files import SpilledRows, row_blocks, sum_rows
from pseo_das.tasks.inputs.cells import CELL_KEYS, coarser_cells, institution_blocks, sum_to_coarser
from pseo_das.tasks.inputs.reference_inputs import ReferenceInputs
from pseo_das.tasks.codes.official_codes import agg_level, official_cells

PRODUCT = Product.PSEOF
DIVISIONS = tuple(CENSUS_DIVISIONS)   # "1" to "9", as the official files code them
NATIONAL_GEOGRAPHY, ALL_INDUSTRIES = "00", "00"
# States (columns) -> divisions (rows) membership.
DIVISION_MEMBERSHIP = np.array([[DIVISION_OF_STATE[s] == d for s in STATE_FIPS] for d in DIVISIONS])
STATES_OF_DIVISION = [np.flatnonzero(member) for member in DIVISION_MEMBERSHIP]
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
        full = np.asarray(~missing.any(axis=1))
        by_state = np.concatenate([
            state_flows(table.corrected[block][full[block]]).sum(axis=1)
            for block in row_blocks(len(table.cells), DESTINATION_BLOCK_CELLS)])
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


def home_state_index(cells: pd.DataFrame) -> np.ndarray:
    """Each origin cell's state of institution as its index in STATE_FIPS (the in-state
    destinations)."""
    return np.searchsorted(np.array(STATE_FIPS), cells["inst_state"].astype(str).to_numpy())


@dataclass(frozen=True)
class OriginTable:
    """Corrected flows of one years-after from the origin cells of one level: institution
    (I) or state of institution (S), a CIP level, by cohort or every cohort summed."""
    inst_level: str
    cip_level: str
    by_cohort: bool
    years_after: int
    cells: pd.DataFrame        # CELL_KEYS + inst_state, grad_cohort_years, noise_terms
    corrected: "np.ndarray | SpilledRows"   # cells x destinations (row_files)
    suppressed: np.ndarray     # cells x divisions: the division's flows are suppressed

    @property
    def level(self) -> tuple[str, str, bool]:
        return self.inst_level, self.cip_level, self.by_cohort

    @cached_property
    def home_state(self) -> np.ndarray:
        """`home_state_index` of the table's cells, found once per table, not per block
        of rows."""
        return home_state_index(self.cells)


def origin_tables(table: NoisyFlows, suppressed: np.ndarray) -> list[OriginTable]:
    """The institution table as corrected, and the state-of-institution and all-cohort
    tables summed from it, a block of whole institutions at a time (in files when the
    corrected flows are in one: `row_files.sum_rows`). A summed division flow is
    suppressed when one of the flows it sums is (it would be as incomplete). Privacy cost:
    none (sums of corrected flows)."""
    out = [OriginTable("I", table.cip_level, True, table.years_after, table.cells,
                       table.corrected, suppressed)]
    blocks = institution_blocks(table.cells, DESTINATION_BLOCK_CELLS)
    for inst_level, by_cohort in (("S", True), ("I", False), ("S", False)):
        cells, group = coarser_cells(table.cells, inst_level, table.cip_level, table.cip_level,
                                     all_cohorts=not by_cohort)
        summed = sum_rows(table.corrected, group, len(cells), blocks)
        hidden = sum_to_coarser(table.cells, suppressed.astype(np.int64), inst_level,
                                table.cip_level, table.cip_level, all_cohorts=not by_cohort)[1]
        out.append(OriginTable(inst_level, table.cip_level, by_cohort, table.years_after, cells,
                               summed, hidden > 0))
    return out


# The employment geography x industry levels of pseof, in the order of its rows per origin
# cell: (geo_level, geographies, ind_level, industries).
DESTINATION_LEVELS = (
    ("N", [NATIONAL_GEOGRAPHY], "A", [ALL_INDUSTRIES]),
    ("N", [NATIONAL_GEOGRAPHY], "S", list(NAICS_SECTORS)),
    ("D", list(DIVISIONS), "A", [ALL_INDUSTRIES]),
    ("D", list(DIVISIONS), "S", list(NAICS_SECTORS)),
)
DESTINATION_BLOCK_CELLS = 8192   # origin cells whose destination levels are summed at a time


def destination_level(table: OriginTable, rows: np.ndarray, block: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One employment geography x industry level of pseof (DESTINATION_LEVELS[block]) for
    the origin cells `rows` of `table`: (employed, employed in-state, suppressed), the
    arrays cells x geographies x industries (geography-major, as the rows are written),
    and the cells' non-employed (their rows read once). Only what the level needs is
    summed (the divisions x sectors for the last alone)."""
    rows = np.asarray(rows)
    corrected = table.corrected[rows]
    by_state, nonemployed = state_flows(corrected), corrected[:, NONEMPLOYED].copy()
    home = table.home_state[rows]
    n = len(home)
    instate = by_state[np.arange(n), :, home]                          # cells x sectors
    never = np.zeros((n, 1, 1), bool)
    if block == 0:
        return (by_state.sum(axis=(1, 2))[:, None, None], instate.sum(axis=1)[:, None, None],
                never, nonemployed)
    if block == 1:
        return by_state.sum(axis=2)[:, None, :], instate[:, None, :], never, nonemployed
    home_division = DIVISION_MEMBERSHIP[:, home].T                     # cells x divisions
    suppressed = table.suppressed[rows][:, :, None]
    if block == 2:
        return (division_totals(by_state.sum(axis=1))[:, :, None],
                (home_division * instate.sum(axis=1)[:, None])[:, :, None], suppressed,
                nonemployed)
    by_division = division_totals(by_state)                            # cells x sectors x divisions
    return (by_division.transpose(0, 2, 1), home_division[:, :, None] * instate[:, None, :],
            suppressed, nonemployed)


def division_totals(by_state: np.ndarray) -> np.ndarray:
    """... x states summed over the states of each division: ... x divisions, the integers
    of `by_state @ DIVISION_MEMBERSHIP.T` (NumPy's integer matrix product, without BLAS, took
    about 3 times as long on a chunk's cells x sectors x states)."""
    return np.stack([by_state[..., states].sum(axis=-1) for states in STATES_OF_DIVISION],
                    axis=-1)


def destination_block(table: OriginTable, rows: np.ndarray, block: int,
                      block_cells: int | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`destination_level(table, rows, block)`, summed `block_cells` origin cells at a
    time (None: DESTINATION_BLOCK_CELLS): memory holds one block of cells x destinations,
    never the table's."""
    block_cells = block_cells or DESTINATION_BLOCK_CELLS
    pieces = [destination_level(table, rows[start:start + block_cells], block)
              for start in range(0, len(rows), block_cells)]
    if not pieces:
        pieces = [destination_level(table, rows, block)]
    employed, in_state, suppressed, nonemployed = (np.concatenate([p[i] for p in pieces])
                                                   for i in range(4))
    return employed, in_state, suppressed, nonemployed


@dataclass(frozen=True)
class OriginLevelRows:
    """What the pseof rows of one origin level (its tables, one per years-after) are built
    from: the union of the tables' cells in canonical order with their official identifiers,
    where each union cell is in each table (-1: the cell has no such years-after), and each
    table (its destination levels are summed as the rows are built: `destination_block`)."""
    inst_level: str
    cip_level: str
    by_cohort: bool
    ids: pd.DataFrame                          # official identifiers, one row per union cell
    in_table: dict[int, np.ndarray]            # years-after -> table row of each union cell
    tables: dict[int, OriginTable]             # years-after -> origin table

    @cached_property
    def id_table(self) -> pa.Table:
        """`ids` as Arrow columns (what each chunk of rows takes its identifiers from)."""
        return pa.Table.from_pandas(self.ids, preserve_index=False)


@dataclass(frozen=True)
class PseofPart:
    """The rows of one aggregation level of pseof_all: one origin level x one block of
    DESTINATION_LEVELS (employment geography x industry level)."""
    agg_level: int
    origin: OriginLevelRows
    block: int
    geo_level: str
    geographies: list[str]
    ind_level: str
    industries: list[str]

    @property
    def rows_per_cell(self) -> int:
        return len(self.geographies) * len(self.industries)

    @property
    def n_cells(self) -> int:
        return len(self.origin.ids)

    @property
    def n_rows(self) -> int:
        return self.n_cells * self.rows_per_cell


def origin_level_rows(tables: list[OriginTable]) -> OriginLevelRows:
    inst_level, cip_level, by_cohort = tables[0].level
    union = (pd.concat([t.cells[CELL_KEYS + ["inst_state", "grad_cohort_years"]] for t in tables])
             .drop_duplicates(CELL_KEYS).sort_values(CELL_KEYS, kind="stable", ignore_index=True))
    keys = pd.MultiIndex.from_frame(union[CELL_KEYS].astype(str))
    in_table = {}
    for t in tables:
        position = keys.get_indexer(pd.MultiIndex.from_frame(t.cells[CELL_KEYS].astype(str)))
        where = np.full(len(union), -1, dtype=np.int64)
        where[position] = np.arange(len(position))
        in_table[t.years_after] = where
    return OriginLevelRows(inst_level, cip_level, by_cohort,
                           official_cells(union, inst_level, cip_level), in_table,
                           {t.years_after: t for t in tables})


def pseof_parts(origins: list[OriginTable]) -> list[PseofPart]:
    """Every aggregation level of pseof_all, in the file's order (aggregation level)."""
    levels: dict[tuple, list[OriginTable]] = {}
    for table in origins:
        levels.setdefault(table.level, []).append(table)
    parts = []
    for tables in levels.values():
        origin = origin_level_rows(tables)
        for b, (geo_level, geographies, ind_level, industries) in enumerate(DESTINATION_LEVELS):
            parts.append(PseofPart(
                agg_level(PRODUCT, origin.inst_level, origin.cip_level, origin.by_cohort,
                          geo_level, ind_level),
                origin, b, geo_level, list(geographies), ind_level, list(industries)))
    return sorted(parts, key=lambda part: part.agg_level)


def part_table(part: PseofPart, start: int = 0, stop: int | None = None) -> pa.Table:
    """pseof rows of the origin cells start:stop of one part, the official columns in order:
    one row per origin cell x geography x industry, built as Arrow columns (what the files
    are written from). A years-after the cell does not have is not available (-1); a
    suppressed division flow is 5 (non-employment, which has no geography, is never
    suppressed). Non-employment is a measure of the origin, not of a destination: published
    on the nation's all-industries row only, empty and not available (-1) on the sector and
    division rows, as the real files carry it (`pseo_layout.ORIGIN_MEASURE_LEVELS`)."""
    origin, per_cell = part.origin, part.rows_per_cell
    stop = part.n_cells if stop is None else min(stop, part.n_cells)
    n = max(stop - start, 0)
    ids = origin.id_table.take(np.repeat(np.arange(start, start + n), per_cell))
    destination = np.tile(np.arange(per_cell), n)      # geography-major, industry-minor
    everywhere = np.zeros(n * per_cell, np.int8)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "agg_level_pseo": pa.array(np.full(n * per_cell, part.agg_level, np.int64)),
        **{name: ids.column(name) for name in ids.column_names},
        "geo_level": _codes([part.geo_level], everywhere),
        "geography": _codes(part.geographies, destination // len(part.industries)),
        "ind_level": _codes([part.ind_level], everywhere),
        "industry": _codes(part.industries, destination % len(part.industries))}
    for k in YEARS_AFTER:
        rows = origin.in_table[k][start:stop] if k in origin.in_table else None
        table, block, nonemployed = origin.tables.get(k), None, None
        if rows is not None and table is not None:
            at = rows[rows >= 0]
            employed, in_state, suppressed, nonemployed = destination_block(table, at,
                                                                            part.block)
            block = employed, in_state, suppressed
        columns.update(_year_columns(k, n, per_cell, rows, block, nonemployed,
                                     carries_origin_measures(part.geo_level, part.ind_level)))
    return pa.table([columns[name] for name in layout(PRODUCT).columns],
                    names=list(layout(PRODUCT).columns))


def part_rows(part: PseofPart, start: int = 0, stop: int | None = None) -> pd.DataFrame:
    """`part_table` as a frame (`pseof_frame`)."""
    return pseof_frame(part_table(part, start, stop))


def pseof_frame(rows: pa.Table) -> pd.DataFrame:
    """pseof rows (`part_table`) as a frame: codes as text, measures as Int64 (empty: NA),
    flags int8."""
    return rows.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)


def _year_columns(k: int, n_cells: int, per_cell: int, rows: np.ndarray | None,
                  block: tuple | None, nonemployed: np.ndarray | None,
                  with_nonemployed: bool = True) -> dict[str, pa.Array]:
    """The year-k measures and status flags of n_cells origin cells' rows; `rows` gives each
    cell's row in the year-k table (-1: none); `block` (employed, in-state, suppressed) and
    `nonemployed` are of the cells that have one, in order; `with_nonemployed` False: rows
    that do not carry the origin's non-employment (empty, flag -1)."""
    emp = np.full((n_cells, per_cell), np.nan)
    instate, nme = emp.copy(), emp.copy()
    present = np.zeros((n_cells, per_cell), bool)
    hidden = present.copy()
    if rows is not None:
        employed, in_state, suppressed = block
        mine = rows >= 0
        count = int(mine.sum())
        emp[mine] = employed.reshape(count, per_cell)
        instate[mine] = in_state.reshape(count, per_cell)
        nme[mine] = nonemployed[:, None]
        present[mine] = True
        hidden[mine] = np.broadcast_to(suppressed, employed.shape).reshape(count, per_cell)
    present, hidden = present.reshape(-1), hidden.reshape(-1)
    status = pa.array(np.select([~present, hidden], [STATUS_NOT_AVAILABLE, STATUS_SUPPRESSED],
                                STATUS_OK).astype(np.int8))    # flags -1, 1, 5: one byte each
    columns = {}
    for name, values in (("grads_emp", emp), ("grads_emp_instate", instate)):
        columns[f"y{k}_{name}"] = _counts(np.where(hidden, np.nan, values.reshape(-1)))
        columns[f"status_y{k}_{name}"] = status
    carried = present & with_nonemployed
    columns[f"y{k}_grads_nme"] = _counts(np.where(carried, nme.reshape(-1), np.nan))
    columns[f"status_y{k}_grads_nme"] = pa.array(np.where(carried, STATUS_OK,
                                                          STATUS_NOT_AVAILABLE).astype(np.int8))
    return columns


def _codes(values: list[str], index: np.ndarray) -> pa.Array:
    """values[index] as text (through a dictionary: quicker than a column of references)."""
    return pa.DictionaryArray.from_arrays(index, pa.array(values, pa.large_string())
                                          ).cast(pa.large_string())


def _counts(values: np.ndarray) -> pa.Array:
    """Whole counts held as floats, NaN for none: int64, null where NaN."""
    empty = np.isnan(values)
    return pa.array(np.where(empty, 0, values).astype(np.int64), mask=empty)


ROWS_PER_CHUNK = 250_000    # pseof rows built at a time: memory holds one chunk, not the file


def pseof_chunks(parts: list[PseofPart], rows_per_chunk: int = ROWS_PER_CHUNK):
    """pseof_all's rows in file order, in chunks of whole origin cells (about
    rows_per_chunk rows each): (part, first origin cell of the chunk, rows)."""
    for part in parts:
        step = max(1, rows_per_chunk // part.rows_per_cell)
        for start in range(0, part.n_cells, step):
            yield part, start, part_table(part, start, start + step)


def flows_table(origins: list[OriginTable]) -> pd.DataFrame:
    """pseof_all.csv as one frame: every origin level x employment geography x industry
    level of the schema, rows in aggregation-level order, the official columns in order
    (small releases and tests; a release writes it in chunks, `pseof_chunks`)."""
    frames = [part_rows(part) for part in pseof_parts(origins)]
    return pd.concat(frames, ignore_index=True)[list(layout(PRODUCT).columns)]


# internal/flows_state.parquet (flows_state.csv in releases before issue 34): codes as
# text, counts as integers
FLOWS_STATE_FILE = "flows_state.parquet"
FLOWS_STATE_CSV = "flows_state.csv"      # the name and format of earlier releases
FLOWS_STATE_SCHEMA = pa.schema(
    [(name, pa.string()) for name in ("institution", "degree_level", "cip_level", "cipcode")]
    + [(name, pa.int64()) for name in ("grad_cohort", "grad_cohort_years", "years_after")]
    + [(name, pa.string()) for name in ("industry", "state")]
    + [(name, pa.int64()) for name in ("noisy_count", "corrected_count", "origin_total")])
FLOWS_STATE_COLUMNS = FLOWS_STATE_SCHEMA.names
# its code columns as `flows_state_rows` makes them (dictionary-coded), written so
FLOWS_STATE_CODED_SCHEMA = pa.schema(
    [pa.field(f.name, pa.dictionary(pa.int32(), f.type)) if pa.types.is_string(f.type) else f
     for f in FLOWS_STATE_SCHEMA])


def flows_state_rows(table: NoisyFlows, start: int = 0, stop: int | None = None
                     ) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """flows_state's rows of one table (internal), or of its origin cells start to
    stop: noisy and corrected count of every flow whose noisy or corrected count is not 0,
    and the total its origin cell's corrected flows match (`origin_total`), so an auditor
    can check the correction cell by cell; with each row's origin cell (row of the table)
    and destination (column). An Arrow table whose code columns are dictionary-encoded
    (millions of rows)."""
    block = slice(start, len(table.cells) if stop is None else stop)
    noisy, corrected = table.noisy[block], table.corrected[block]
    rows, cols = np.nonzero((noisy != 0) | (corrected != 0))
    dest = destinations()

    def coded(values, at: np.ndarray) -> pa.DictionaryArray:
        codes = pd.Categorical(values)
        return pa.DictionaryArray.from_arrays(codes.codes[at], codes.categories.astype(str))

    cells = table.cells.iloc[block]
    target = noisy.sum(axis=1) if table.total is None else table.total[block]
    columns = [
        coded(cells["institution"], rows), coded(cells["degree_level"], rows),
        coded([table.cip_level], np.zeros(len(rows), np.int8)), coded(cells["cipcode"], rows),
        cells["grad_cohort"].to_numpy(np.int64)[rows],
        cells["grad_cohort_years"].to_numpy(np.int64)[rows],
        np.full(len(rows), table.years_after, np.int64),
        coded(dest["industry"], cols), coded(dest["state"], cols),
        noisy[rows, cols].astype(np.int64), corrected[rows, cols].astype(np.int64),
        np.asarray(target, dtype=np.int64)[rows],
    ]
    return pa.table(columns, names=FLOWS_STATE_COLUMNS), rows + block.start, cols


DIVISION_OF_STATE_INDEX = DIVISION_MEMBERSHIP.argmax(axis=0)     # state index -> division index


def division_sums(n_cells: int, rows: np.ndarray, cols: np.ndarray,
                  corrected_count: np.ndarray) -> np.ndarray:
    """cells x divisions: the employed flows of flows_state rows (origin cell `rows`,
    destination `cols`) summed over the states of each Census division."""
    employed = cols < NONEMPLOYED
    division = DIVISION_OF_STATE_INDEX[cols[employed] % N_STATES]
    sums = np.bincount(rows[employed] * len(DIVISIONS) + division,
                       weights=corrected_count[employed], minlength=n_cells * len(DIVISIONS))
    return np.rint(sums).astype(np.int64).reshape(n_cells, len(DIVISIONS))


SHARE_THRESHOLDS_SHOWN = (0.05, 0.10, 0.20, 0.50)


def target_total(table: NoisyFlows) -> np.ndarray:
    """The total the correction matches: the measured origin counts, or the noisy sum."""
    if table.total is not None:
        return table.total
    return np.concatenate([table.noisy[block].sum(axis=1)
                           for block in row_blocks(len(table.cells), DESTINATION_BLOCK_CELLS)])


def flows_invariants(tables: list[NoisyFlows], block_cells: int = 8192) -> list[dict]:
    """The logical constraints the correction promises, checked on every table, a block of
    origin cells at a time (the published rows are checked as they are written:
    `PublishedFlowsChecks`)."""
    negative = totals = exceed = 0
    for t in tables:
        target = target_total(t)
        for start in range(0, len(t.cells), block_cells):
            block = slice(start, start + block_cells)
            corrected, kept = t.corrected[block], np.maximum(t.noisy[block], 0)
            negative += int((corrected < 0).sum())
            totals += int((corrected.sum(axis=1) != np.maximum(target[block], 0)).sum())
            # units are only removed, except in a cell whose measured total exceeds its kept flows
            removed_only = kept.sum(axis=1) >= target[block]
            exceed += int((corrected > kept)[removed_only].sum())
    return _check_results([
        ("no corrected flow is negative", negative, "negative flows"),
        ("per origin cell, corrected total = its target (measured origin count, or the noisy "
         "sum of its flows; 0 when that is negative)", totals, "cells differ"),
        ("no corrected flow exceeds its positive noisy count where units were removed",
         exceed, "flows exceed"),
    ])


def _trues(flags: pa.ChunkedArray) -> int:
    return pc.sum(flags).as_py() or 0


def _check_results(checks: list[tuple[str, int, str]]) -> list[dict]:
    return [{"name": name, "result": ("passed" if bad == 0 else "FAILED") + f" ({bad:,} {what})"}
            for name, bad, what in checks]


class PublishedFlowsChecks:
    """The published flows' own constraints, checked chunk by chunk as pseof_all is
    written: never negative, in-state within employed, and every published division flow
    of the institution cells by cohort recomputed from the flows_state rows of its
    origin cell (`expect_divisions`, as flows_state is written, possibly at the same
    time in another thread: the division flows are compared in `results`)."""

    def __init__(self) -> None:
        self.negative = self.instate_over = 0
        self.division_sums: dict[tuple[str, int], np.ndarray] = {}
        # (CIP level, years after) -> the published division flows, table cells x divisions,
        # and where one is published (held as the tables' shape: a national release
        # publishes millions of them)
        self.published: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}

    def expect_divisions(self, table: NoisyFlows, state_rows: pa.Table, rows: np.ndarray,
                         cols: np.ndarray) -> None:
        """Add the division sums of flows_state rows of the table (`flows_state_rows`: the
        whole table, or one block of its origin cells at a time)."""
        sums = self.division_sums.setdefault((table.cip_level, table.years_after), np.zeros(
            (len(table.cells), len(DIVISIONS)), dtype=np.int64))
        sums += division_sums(len(table.cells), rows, cols,
                              state_rows["corrected_count"].to_numpy())

    def add(self, part: PseofPart, start: int, rows: pa.Table) -> None:
        """pseof rows (`part_table`) of the origin cells from `start` of `part`."""
        for k in YEARS_AFTER:
            self.negative += sum(_trues(pc.less(rows[f"y{k}_{name}"], 0)) for name in MEASURES)
            self.instate_over += _trues(pc.greater(rows[f"y{k}_grads_emp_instate"],
                                                   rows[f"y{k}_grads_emp"]))
        origin = part.origin
        if not (origin.inst_level == "I" and origin.by_cohort and part.geo_level == "D"
                and part.ind_level == "A"):
            return
        cell = start + np.arange(rows.num_rows) // part.rows_per_cell
        division = rows["geography"].cast(pa.int64()).to_numpy() - 1
        for k in YEARS_AFTER:
            if k not in origin.in_table:
                continue
            if (origin.cip_level, k) not in self.published:
                shape = (len(origin.tables[k].cells), len(DIVISIONS))
                self.published[origin.cip_level, k] = (np.zeros(shape, np.int64),
                                                       np.zeros(shape, bool))
            values, shown = self.published[origin.cip_level, k]
            published = pc.equal(rows[f"status_y{k}_grads_emp"], STATUS_OK).to_numpy()
            at = origin.in_table[k][cell[published]], division[published]
            values[at] = pc.fill_null(rows[f"y{k}_grads_emp"], 0).to_numpy()[published]
            shown[at] = True

    def results(self) -> list[dict]:
        compared = differ = 0
        for key, (values, shown) in self.published.items():
            sums = self.division_sums.get(key)
            compared += int(shown.sum())
            differ += int(shown.sum()) if sums is None else int((values != sums)[shown].sum())
        return _check_results([
            ("no published flow is negative", self.negative, "negative values"),
            ("no published in-state count exceeds its employed count", self.instate_over,
             "rows exceed"),
            (f"every published division flow of the institution cells recomputed from "
             f"{FLOWS_STATE_FILE} ({compared:,})", differ, "differ"),
        ])


@dataclass
class FlowsRelease:
    """What the flows product publishes and reports. pseof_all is not held whole: its
    parts are built and written in chunks (`pseof_chunks`)."""
    tables: list[NoisyFlows]     # institution tables by cohort, corrected
    origins: list[OriginTable]   # every origin level of pseof_all
    pseof: list[PseofPart]       # public: pseof_all.csv, by aggregation level
    n_state_rows: int            # rows of internal flows_state
    correction: list[dict]       # per table: correction statistics
    suppression: dict            # division suppression statistics
    checks: list[dict]
    reference_fingerprints: dict[str, str]

    n_pseof_rows: int = field(init=False)   # rows of pseof_all.csv
    drawn: int = field(init=False)          # noisy values measured (flows and origin counts)

    def __post_init__(self) -> None:
        self.n_pseof_rows = sum(part.n_rows for part in self.pseof)
        self.drawn = sum(t.noisy.size + (0 if t.total is None else t.total.size)
                         for t in self.tables if t.measured)

    def release_tables(self) -> None:
        """Forget the tables (cells x destinations arrays: gigabytes in a national release)
        once the flows files are written and the documents' figures taken from them; the
        counts, statistics and checks stay."""
        self.tables, self.origins, self.pseof = [], [], []


@release_task("build public flows tables")
def build_flows_tables(tables: list[NoisyFlows], correction: list[dict],
                       reference: ReferenceInputs, share_max: float) -> FlowsRelease:
    """The origin tables of pseof_all, division suppression statistics and the checks of
    the corrected flows. Privacy cost: none."""
    started = time.perf_counter()
    unobserved = [unobserved_states(t, reference.covered) for t in tables]
    history = institution_state_flows(tables, unobserved)
    shares = [unobserved_division_share(t, m, history) for t, m in zip(tables, unobserved)]
    origins = [origin for t, share in zip(tables, shares)
               for origin in origin_tables(t, share > share_max)]
    parts = pseof_parts(origins)
    progress(f"division suppression decided, origin tables built "
             f"({time.perf_counter() - started:.1f} s)")
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
    n_state_rows = 0     # flows_state's rows: flows whose noisy or corrected count is not 0
    for t in tables:
        for block in row_blocks(len(t.cells), DESTINATION_BLOCK_CELLS):
            n_state_rows += int(np.count_nonzero((t.noisy[block] != 0) | (t.corrected[block] != 0)))
    checks = flows_invariants(tables)
    if any(c["result"].startswith("FAILED") for c in checks):
        raise RuntimeError("flows checks failed: " + "; ".join(
            f"{c['name']}: {c['result']}" for c in checks if c["result"].startswith("FAILED")))
    release = FlowsRelease(tables, origins, parts, n_state_rows, correction, suppression,
                           checks, reference.fingerprints)
    progress(f"public flows: pseof_all {release.n_pseof_rows:,} rows to write, "
             f"{suppression['division_flows_suppressed']:,} division flows of institution "
             f"cells suppressed ({time.perf_counter() - started:.1f} s)")
    return release
