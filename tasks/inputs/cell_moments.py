"""True per-cell sufficient statistics of the cell statistics product (pseom_all.csv): for
each institution x degree level x graduation cohort cell (all fields) and each statistic,
the number of observations, their sum, minimum and maximum. Privacy cost: none by itself;
its output is confidential and goes only to the measuring task (cell_statistics.py),
never to a file.

Statistics (earnings deflated to the bins' constant dollars exactly as the histograms are,
then clamped to the public domain [lower, upper]; records under the earnings floor are
outside the universe, as for the histograms):
  mean_y1, mean_y5, mean_y10  the graduates' earnings k years after graduation;
  growth_1_5                  per graduate with earnings in the universe both 1 and 5 years
                              after graduation, the change y5 - y1 (in [lower - upper,
                              upper - lower]); its mean is the cell's earnings growth, the
                              within-person OLS slope on years after times 4.
One graduate is one observation of each statistic at most, so adding or removing a
graduate adds or removes one observation (the neighbouring relation of MOS).

Values are held in whole cents (int64), so sums are exact and do not depend on the order
of chunks. They are the cell statistics' share of the release's one counting pass
(true_counts.count_chunk: each chunk of whole persons, on either engine), memory bounded by
the chunk and the cells.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.tasks.inputs.cells import (MEASURED_CELL_COLUMNS, MEASURED_CELL_KEYS, CellFrame,
                                         cell_frame)
from pseo_das.tasks.inputs.person_chunks import PersonChunk

CELL_STATISTICS_CIP_LEVEL = "A"   # all fields: no CIP recast of a statistic is needed


class CellStatistic(StrEnum):
    MEAN_Y1 = "mean_y1"
    MEAN_Y5 = "mean_y5"
    MEAN_Y10 = "mean_y10"
    GROWTH_1_5 = "growth_1_5"

    @property
    def years_after(self) -> int:
        """The years-after a cell must be observable at to have this statistic."""
        return {"mean_y1": 1, "mean_y5": 5, "mean_y10": 10, "growth_1_5": 5}[self.value]

    @property
    def is_growth(self) -> bool:
        return self is CellStatistic.GROWTH_1_5


def cell_statistics(years_after: tuple[int, ...]) -> list[CellStatistic]:
    """The statistics a configuration's years-after allow, in publication order."""
    out = [CellStatistic(f"mean_y{k}") for k in (1, 5, 10) if k in years_after]
    return out + ([CellStatistic.GROWTH_1_5] if {1, 5} <= set(years_after) else [])


@dataclass(frozen=True)
class StatisticMoments:
    """One statistic over the cells of `CellMoments.cells` (NaN bounds where n = 0)."""
    n: np.ndarray          # int64 observations per cell
    total: np.ndarray      # float64 dollars (exact sum of cents / 100)
    lowest: np.ndarray     # float64 dollars
    highest: np.ndarray    # float64 dollars


@dataclass(frozen=True)
class CellMoments:
    """The true sufficient statistics of every cell of the frame (canonical order)."""
    frame: CellFrame
    statistics: dict[CellStatistic, StatisticMoments]
    lower: float
    upper: float


def to_cents(dollars: np.ndarray) -> np.ndarray:
    return np.rint(np.asarray(dollars, np.float64) * 100).astype(np.int64)


def chunk_moments(chunk: PersonChunk, attributes: pd.DataFrame, earnings: np.ndarray,
                  sample_floor: float, lower: float, upper: float) -> pd.DataFrame:
    """One chunk reduced to its cells: MEASURED_CELL_COLUMNS, then per statistic s the
    columns s.n, s.sum (cents), s.min, s.max (cents; absent values as the int64 extremes).
    `attributes`: the chunk's graduates' cohort attributes; `earnings`: its outcome rows'
    earnings in the bins' constant dollars (NaN: no earnings)."""
    outcomes = chunk.outcomes
    frame = cell_frame(attributes, CELL_STATISTICS_CIP_LEVEL)
    n_cells = len(frame.cells)
    years_after = outcomes["years_after"].to_numpy(dtype=np.int64)
    in_universe = earnings >= sample_floor
    cents = np.zeros(len(earnings), np.int64)
    cents[in_universe] = to_cents(np.clip(earnings[in_universe], lower, upper))
    person = chunk.graduate_row
    out = frame.cells.copy()
    n_graduates = len(chunk.graduates)

    def reduce(name: str, cell: np.ndarray, value: np.ndarray) -> None:
        big = np.iinfo(np.int64)
        out[f"{name}.n"] = np.bincount(cell, minlength=n_cells).astype(np.int64)
        out[f"{name}.sum"] = np.bincount(cell, weights=value, minlength=n_cells).astype(np.int64) \
            if len(cell) else np.zeros(n_cells, np.int64)
        lowest = np.full(n_cells, big.max, np.int64)
        highest = np.full(n_cells, big.min, np.int64)
        np.minimum.at(lowest, cell, value)
        np.maximum.at(highest, cell, value)
        out[f"{name}.min"], out[f"{name}.max"] = lowest, highest

    by_year = {}
    for k in (1, 5, 10):
        rows = (years_after == k) & in_universe
        by_year[k] = rows
        statistic = f"mean_y{k}"
        reduce(statistic, frame.graduate_cell[person[rows]], cents[rows])
    first = np.full(n_graduates, -1, np.int64)
    fifth = np.full(n_graduates, -1, np.int64)
    first[person[by_year[1]]] = cents[by_year[1]]
    fifth[person[by_year[5]]] = cents[by_year[5]]
    paired = np.flatnonzero((first >= 0) & (fifth >= 0))
    reduce(CellStatistic.GROWTH_1_5.value, frame.graduate_cell[paired],
           fifth[paired] - first[paired])
    return out


def combine(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Chunks' cells added up (sums and counts added, extremes kept), canonical order."""
    table = pd.concat([p.astype({c: str for c in ("institution", "inst_state", "degree_level",
                                                    "cipcode", "cip_vintage")})
                       for p in parts], ignore_index=True)
    rules = {}
    for column in table.columns:
        if column in MEASURED_CELL_COLUMNS:
            if column not in MEASURED_CELL_KEYS:
                rules[column] = "first"
        else:
            rules[column] = {"n": "sum", "sum": "sum", "min": "min", "max": "max"}[
                column.rsplit(".", 1)[1]]
    return table.groupby(MEASURED_CELL_KEYS, sort=True).agg(rules).reset_index()


def moments_of(table: pd.DataFrame, cfg: ReleaseConfig, lower: float, upper: float
               ) -> CellMoments:
    """The combined table as CellMoments (dollars; NaN extremes where n = 0)."""
    cells = table[MEASURED_CELL_COLUMNS].copy()
    for c in ("institution", "inst_state", "degree_level", "cipcode"):
        cells[c] = pd.Categorical(cells[c], categories=sorted(set(cells[c])))
    cells["cip_vintage"] = pd.Categorical(cells["cip_vintage"], categories=["2010", "2020"])
    statistics = {}
    for statistic in cell_statistics(cfg.cells.years_after):
        name = statistic.value
        n = table[f"{name}.n"].to_numpy(np.int64)
        empty = n == 0
        statistics[statistic] = StatisticMoments(
            n, table[f"{name}.sum"].to_numpy(np.int64) / 100,
            np.where(empty, np.nan, table[f"{name}.min"].to_numpy(np.int64) / 100),
            np.where(empty, np.nan, table[f"{name}.max"].to_numpy(np.int64) / 100))
    return CellMoments(CellFrame(CELL_STATISTICS_CIP_LEVEL, cells, None), statistics,
                       lower, upper)
