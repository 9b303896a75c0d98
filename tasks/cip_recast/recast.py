"""Recast a noisy table from CIP-2010 to CIP-2020 codes (technical appendix B, step 2),
on noisy values only. Privacy cost: none (post-processing; the random split is drawn
from a stream keyed by the stored measurements it reads, recorded in the ledger).

In the priority order of the appendix, a cell's 2010 code (2 or 4 digits)
  1. with a single possible destination moves there directly;
  2. with a hard-coded transition is split by its hard-coded shares;
  3. otherwise is split by the cell's IPEDS transition shares (`transition_shares`).
A split divides every noisy value of the cell (each bin, or each destination of a flow)
at random: its magnitude multinomially by the shares, each part keeping its sign. The
values of a population (institution x degree x cohort, per years after) therefore total
the same in both vintages, value by value.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pseo_das.errors import PseoDasError
from pseo_das.config import CellsConfig, ReleaseConfig
from pseo_das.tasks.cip_recast.transition_shares import (WIDTH, Destinations, IpedsSums, expanded,
                                                         transition_counts)
from pseo_das.tasks.inputs.cells import (CELL_COLUMNS, CIP_2010, CIP_2020, institution_blocks,
                                         sorted_groups, sum_by_group)
from pseo_das.tasks.inputs.row_files import RowSink
from pseo_das.tasks.privacy.ledger import LedgerEntry
from pseo_das.tasks.privacy.post_processing import (SPLIT_BLOCK, post_processing_split_blocks,
                                                    post_processing_split_stream)

if TYPE_CHECKING:
    from pseo_das.tasks.cip_recast.recast_inputs import RecastInputs
    from pseo_das.tasks.inputs.cells import CellFrame

CELL_KEYS = ["degree_level", "institution", "grad_cohort", "cip2010"]
DIRECT, HARD_CODED, SHARES = "direct", "hard-coded", "IPEDS shares"
TEXT_KEYS = ("institution", "inst_state", "degree_level", "cipcode")


class RecastError(PseoDasError, ValueError):
    """A 2010 code has no destination: neither the crosswalk nor a hard-coded transition."""


@dataclass(frozen=True)
class RecastTable:
    cells: pd.DataFrame          # CELL_COLUMNS, cipcode in CIP-2020
    values: np.ndarray           # (cells, columns) int64
    how: pd.Series               # cells recast by each route (direct, hard-coded, shares)
    entry: LedgerEntry
    share_levels: pd.Series = None   # cells split by IPEDS shares, by fallback level (1-5)
    split_variance: np.ndarray | None = None  # per source cell: sum of |c| (1 - sum_j p_j^2)

    @property
    def added_variance(self) -> float:
        """The variance the random split adds: over the split values, |c| (1 - sum_j p_j^2)."""
        return 0.0 if self.split_variance is None else float(self.split_variance.sum())


def merged_recast(parts: list[RecastTable]) -> RecastTable:
    """The recast of one table done block by block (`to_cip_2020`), as one: its routes,
    share levels, split variance and ledger entry (one step, its cells counted once);
    its cells and values are the blocks' (added to the table's cells): empty here."""
    first = parts[0]
    return RecastTable(
        first.cells.iloc[:0], first.values[:0],
        pd.concat([p.how for p in parts]).groupby(level=0).sum(),
        replace(first.entry, n_cells=sum(p.entry.n_cells for p in parts)),
        pd.concat([p.share_levels for p in parts]).groupby(level=0).sum().sort_index(),
        np.concatenate([p.split_variance for p in parts]))


def recast_table(cells: pd.DataFrame, values: np.ndarray, transitions: pd.DataFrame,
                 hard_coded: pd.DataFrame, shares: pd.DataFrame, stream_seed: bytes,
                 step_id: str, product: str, derived_from: str, stream=None,
                 kept: tuple[pd.DataFrame, np.ndarray] | None = None) -> RecastTable:
    """`cells` (CELL_COLUMNS, cipcode in CIP-2010 at one level) and their noisy `values`
    -> the same table in CIP-2020 codes. `transitions`: cip2010, cip2020 (the crosswalk's
    at this level); `hard_coded`: cip2010, cip2020, share; `shares`: the output of
    `transition_shares` for these cells; `stream`: the split's stream when a table is
    recast block by block (None: the step's own stream from its start); `kept`: cells
    already in CIP-2020 (codes written as the crosswalk writes them) and their values,
    added to the recast cells of the same code (the table's measured CIP-2020 cells)."""
    frame = cells[CELL_COLUMNS].reset_index(drop=True).assign(
        cip2010=cells["cipcode"].astype(str).to_numpy())
    for column in ("institution", "degree_level"):
        frame[column] = frame[column].astype(str)
    code = frame["cip2010"].to_numpy(dtype=object)
    crosswalk, hard = Destinations(transitions), Destinations(hard_coded)
    first, n = crosswalk.of(code)
    hard_first, hard_n = hard.of(code)
    route = np.where(n == 1, DIRECT, np.where(hard_n > 0, HARD_CODED, SHARES))
    missing = sorted(set(code[(route == SHARES) & (n == 0)]))
    if missing:
        raise RecastError(f"CIP-2010 code(s) {', '.join(missing)} have no CIP-2020 destination "
                          "in the crosswalk and no hard-coded transition")
    # each cell's parts (cell, CIP-2020 code, share): its one destination, its hard-coded
    # shares or its IPEDS shares (a join by integer keys, not a merge of frames)
    direct = np.flatnonzero(route == DIRECT)
    by_hand = np.flatnonzero(route == HARD_CODED)
    hard_cell, hard_row = expanded(hard_first[by_hand], hard_n[by_hand])
    by_shares = np.flatnonzero(route == SHARES)
    shares_cell, shares_row = _joined(frame.iloc[by_shares], shares, CELL_KEYS)
    rows = np.concatenate([direct, by_hand[hard_cell], by_shares[shares_cell]])
    cip2020 = np.concatenate([crosswalk.rows["cip2020"].to_numpy(dtype=object)[first[direct]],
                              hard.rows["cip2020"].to_numpy(dtype=object)[hard_row],
                              shares["cip2020"].to_numpy(dtype=object)[shares_row]])
    share = np.concatenate([np.ones(len(direct)), hard.rows["share"].to_numpy(dtype=float)[hard_row],
                            shares["share"].to_numpy(dtype=float)[shares_row]])
    lacking = np.setdiff1d(by_shares, rows)
    if len(lacking):
        raise RecastError(f"{len(lacking)} cell(s) have no transition shares (e.g. "
                          f"{frame.loc[lacking[0], CELL_KEYS].to_dict()})")
    order = np.argsort(pd.factorize(cip2020, sort=True)[0], kind="stable")
    order = order[np.argsort(rows[order], kind="stable")]      # by cell, then CIP-2020 code
    rows, cip2020, share = rows[order], cip2020[order], share[order]
    # one share vector per cell (padded with zeros), each value of the cell split by it
    parts_of = np.bincount(rows, minlength=len(frame))
    slot = np.arange(len(rows)) - (np.cumsum(parts_of) - parts_of)[rows]
    width = int(slot.max()) + 1 if len(rows) else 1
    matrix = np.zeros((len(frame), width))
    matrix[rows, slot] = share
    # the cells of the result: each part's (cell x CIP-2020 code), then the kept cells
    parts_cells = frame[CELL_COLUMNS].take(rows).reset_index(drop=True)
    parts_cells["cipcode"] = cip2020
    n_columns = values.shape[1]
    kept_values = np.zeros((0, n_columns), dtype=np.int64) if kept is None else kept[1]
    all_cells = parts_cells if kept is None else pd.concat([parts_cells, kept[0][CELL_COLUMNS]],
                                                           ignore_index=True)
    first, group, n_out = _cell_groups(all_cells)
    # each part is added straight to its cell of the result (the slots a cell lacks hold
    # zeros and are skipped): memory holds one block of parts, not every cell x column x slot
    summed = np.zeros((n_out, n_columns), dtype=np.int64)
    np.add.at(summed, group[len(rows):], kept_values)
    destination = np.zeros((len(frame), width), dtype=np.int64)
    destination[rows, slot] = group[:len(rows)]
    blocks, entry = post_processing_split_blocks(
        stream_seed, step_id, product, len(frame), n_columns, derived_from,
        values.reshape(-1), matrix, repeat=n_columns, stream=stream,
        block=max(SPLIT_BLOCK // n_columns, 1) * n_columns)    # whole cells at a time
    for first_count, parts in blocks:
        start = first_count // n_columns
        parts = parts.reshape(-1, n_columns, width)
        for j in range(width):   # slot j of the cells with a j-th part
            mine = np.flatnonzero(parts_of[start:start + len(parts)] > j)
            np.add.at(summed, destination[start + mine, j], parts[mine, :, j])
    how = pd.Series(route).value_counts()
    # the level of each cell split by IPEDS shares (its first share's: all its shares')
    matched = np.r_[True, shares_cell[1:] != shares_cell[:-1]] if len(shares_cell) else []
    level = pd.Series(shares["level"].to_numpy()[shares_row[matched]], name="level")
    # the split's own variance: part j of |c| is Binomial(|c|, p_j), variance |c| p_j (1 - p_j)
    spread = 1.0 - (matrix ** 2).sum(axis=1)
    return RecastTable(all_cells.iloc[first].reset_index(drop=True), summed, how, entry,
                       level.value_counts().sort_index(), np.abs(values).sum(axis=1) * spread)


def dotted(code: str) -> str:
    """A cell's CIP code as the crosswalk writes it: '1107' -> '11.07'; '11' stays."""
    return f"{code[:2]}.{code[2:]}" if len(code) == 4 else code


@dataclass(frozen=True)
class RecastContext:
    """What the recast of one CIP level (2 or 4 digits) needs, from public inputs only."""
    digits: int
    transitions: pd.DataFrame    # cip2010, cip2020 (dotted)
    hard_coded: pd.DataFrame     # cip2010, cip2020, share, at this level
    counts: pd.DataFrame         # IPEDS transition counts (transition_counts)
    unseen_weight: float

    @cached_property
    def sums(self) -> IpedsSums:
        """The IPEDS sums of `counts`, made once for every table recast at this level."""
        return IpedsSums(self.counts)


def recast_context(inputs: "RecastInputs", cells_cfg: CellsConfig, cip_level: str,
                   unseen_weight: float) -> RecastContext | None:
    """The recast context of a CIP level; None for all fields ('00' in both vintages)."""
    if cip_level not in ("2", "4"):
        return None
    digits = int(cip_level)
    completions = inputs.completions
    window = completions["degree_level"].map(cells_cfg.cohort_years).to_numpy(dtype=np.int64)
    offset = completions["grad_year"].to_numpy(dtype=np.int64) - cells_cfg.first_cohort_year
    keyed = completions.assign(grad_cohort=cells_cfg.first_cohort_year + offset // window * window)
    six_digit = dict(zip(inputs.crosswalk["cip2010"], inputs.crosswalk["cip2020"]))
    hard_coded = inputs.hard_coded[inputs.hard_coded["cip2010"].str.len() == WIDTH[digits]]
    return RecastContext(digits, inputs.transitions(digits), hard_coded.reset_index(drop=True),
                         transition_counts(keyed, six_digit, digits), unseen_weight)


def as_coded(cells: pd.DataFrame, values: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """A measured table with its codes as measured (CELL_COLUMNS, sorted): cells of the two
    vintages with the same code are added. Privacy cost: none (a sum)."""
    return _summed(cells[CELL_COLUMNS].astype({c: str for c in TEXT_KEYS}), values)


def _summed(cells: pd.DataFrame, values: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per distinct cell (CELL_COLUMNS, sorted), the values of its rows added: a
    sort and np.add.reduceat on the values array (a groupby over a wide frame of values
    is several times slower)."""
    cells = cells[CELL_COLUMNS].reset_index(drop=True)
    values = np.asarray(values, dtype=np.int64)
    if not len(cells):
        return cells, values.reshape(0, values.shape[1] if values.ndim == 2 else 0)
    first, group, n_groups = _cell_groups(cells)
    return cells.iloc[first].reset_index(drop=True), sum_by_group(values, group, n_groups)


def _cell_groups(cells: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
    """The distinct cells of `cells` (CELL_COLUMNS) in sorted order: each one's first row,
    each row's cell (0 to n - 1) and n (the cells of a groupby, sorted: one integer key
    per row from each column's sorted codes, not a groupby of a frame)."""
    return sorted_groups([cells[column] for column in CELL_COLUMNS])


def _joined(left: pd.DataFrame, right: pd.DataFrame, columns: list[str]
            ) -> tuple[np.ndarray, np.ndarray]:
    """The (left row, right row) pairs equal in `columns`, by left row then right row (the
    rows of an inner DataFrame.merge), by integer keys (`sorted_groups` of both sides)."""
    keys = sorted_groups([np.concatenate([left[column].to_numpy(), right[column].to_numpy()])
                          for column in columns])[1]
    order = np.argsort(keys[len(left):], kind="stable")
    ordered = keys[len(left):][order]
    first = np.searchsorted(ordered, keys[:len(left)], "left")
    cell, row = expanded(first, np.searchsorted(ordered, keys[:len(left)], "right") - first)
    return cell, order[row]


RECAST_BLOCK_CELLS = 8192   # measured cells recast at a time (whole institutions)


def to_cip_2020(cells: pd.DataFrame, values: np.ndarray, context: RecastContext | None,
                stream_seed: bytes, step_id: str, product: str, derived_from: str,
                dtype: type | None = None, block_cells: int = RECAST_BLOCK_CELLS,
                spill: bool = False) -> tuple[pd.DataFrame, np.ndarray, RecastTable | None]:
    """A measured table (MEASURED_CELL_COLUMNS: codes in each cell's vintage) -> the same
    table in CIP-2020 codes (CELL_COLUMNS, sorted by institution block), recasting its
    CIP-2010 cells (`recast_table`) and adding them to the CIP-2020 cells of the same
    population and code; the values in `dtype` (None: int64). Returns the recast (None
    when no cell needed one). Whole institutions are recast `block_cells` rows at a time,
    the blocks continuing one stream in row order, so memory holds one block's copies
    and the result does not depend on the block size; `values` may be in a file
    (`inputs.row_files.SpilledRows`), and with `spill` the result goes to one block by
    block. Privacy cost: none."""
    old = (cells["cip_vintage"].astype(str) == CIP_2010).to_numpy()
    if context is None or not old.any():
        return cells[CELL_COLUMNS].reset_index(drop=True), values, None
    stream = post_processing_split_stream(stream_seed, step_id)
    source = _crosswalk_coded(cells.loc[old, CELL_COLUMNS])   # the CIP-2010 cells
    shares = context.sums.shares(source.rename(columns={"cipcode": "cip2010"}),
                                 Destinations(context.transitions), context.unseen_weight)
    in_source = np.r_[0, np.cumsum(old)]      # rows of `source` before each row of `cells`
    out_cells, recasts = [], []
    out_values = RowSink(values.shape[1], dtype or np.int64, spill)
    for block in institution_blocks(cells, block_cells):
        mine, mine_old, block_values = cells.iloc[block], old[block], values[block]
        kept = mine.loc[~mine_old, CELL_COLUMNS].astype({c: str for c in TEXT_KEYS})
        if mine_old.any():   # the block's CIP-2020 cells are added to its recast cells
            recast = recast_table(
                source.iloc[in_source[block.start]:in_source[block.stop]], block_values[mine_old],
                context.transitions, context.hard_coded, shares, stream_seed, step_id, product,
                derived_from, stream, (_crosswalk_coded(kept), block_values[~mine_old]))
            # copies, not views: a view of no rows keeps the block's whole arrays alive
            # (a national flows table's blocks: 1.37 GB of sums held to the table's end)
            recasts.append(replace(recast, cells=recast.cells.iloc[:0].copy(),
                                   values=recast.values[:0].copy()))
            summed = (recast.cells.assign(
                cipcode=recast.cells["cipcode"].str.replace(".", "", regex=False)), recast.values)
            del recast
        else:
            summed = _summed(kept, block_values)
        out_cells.append(summed[0])
        out_values.append(summed[1])
    return pd.concat(out_cells, ignore_index=True), out_values.result(), merged_recast(recasts)


def _crosswalk_coded(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells (CELL_COLUMNS) with their codes dotted as the crosswalk writes them, and their
    institution and degree level as text (as `transition_shares` joins them)."""
    return cells.reset_index(drop=True).assign(
        cipcode=lambda c: c["cipcode"].astype(str).map(dotted),
        institution=lambda c: c["institution"].astype(str),
        degree_level=lambda c: c["degree_level"].astype(str))


def check_recastable(frames: dict[str, "CellFrame"], inputs: "RecastInputs") -> None:
    """Refuse, before any noise, CIP-2010 codes of the measured cells that the crosswalk
    and the hard-coded transitions give no CIP-2020 destination. Privacy cost: none."""
    problems = []
    for level, frame in frames.items():
        if level not in ("2", "4"):
            continue
        cells = frame.cells[frame.cells["cip_vintage"].astype(str) == CIP_2010]
        codes = set(cells["cipcode"].astype(str).map(dotted))
        known = set(inputs.transitions(int(level))["cip2010"]) | set(inputs.hard_coded["cip2010"])
        problems += [f"{code} ({level}-digit)" for code in sorted(codes - known)]
    if problems:
        raise RecastError("refused before any noise was drawn: graduates coded in CIP-2010 "
                          f"under {', '.join(problems)} have no CIP-2020 destination in the "
                          "crosswalk; give them one in cip_hard_coded_transitions.csv of the "
                          "reference folder")


@dataclass(frozen=True)
class RecastPlan:
    """What post-processing takes of the recast inputs: the recast context of each measured
    CIP level and what the documents say of the inputs; not the inputs (the IPEDS
    completions: 142 MB at 100m national, held through every step otherwise)."""
    contexts: dict[str, "RecastContext | None"]
    packaged_inputs: tuple[str, ...]
    ipeds_years: tuple[int, ...]
    hard_coded: int


def recast_plan(inputs: "RecastInputs | None", cfg: ReleaseConfig) -> RecastPlan | None:
    """The `RecastPlan` of `inputs` for the release's measured CIP levels (None: no recast,
    the codes published as measured)."""
    if inputs is None:
        return None
    return RecastPlan({level: recast_context(inputs, cfg.cells, level,
                                             cfg.cip.unseen_transition_weight)
                       for level in cfg.measured_cip_levels()}, tuple(inputs.packaged),
                      tuple(sorted({int(y) for y in inputs.completions["grad_year"]})),
                      len(inputs.hard_coded))


def recast_notes(plan: RecastPlan | None, recasts: list[dict]) -> dict:
    """What the release notes and the DRB report say about the recast."""
    if plan is None:
        return {"published_vintage": "as measured", "tabulations": []}
    return {"published_vintage": CIP_2020, "tabulations": recasts,
            "packaged_inputs": list(plan.packaged_inputs),
            "ipeds_years": list(plan.ipeds_years), "hard_coded": plan.hard_coded}
