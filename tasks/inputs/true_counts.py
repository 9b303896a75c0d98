"""True counts: the only step of a release that reads microdata. Privacy cost: none by
itself; its output is confidential and goes only to the mechanism layer, never to a file.

The inputs are read in chunks of whole persons (person_chunks), and each chunk is reduced
to its cells: per measured CIP level, the cells of its graduates (the cell frame is
built from the graduates only, see cells.py), their number of graduates, and per
years-after the earnings-bin counts of the records in the earnings universe and the
counts of employed destinations; with the cell statistics (mos.enabled), their sufficient
statistics (cell_moments.py). A chunk's counts (a `ChunkCounts`) are keyed by the
cells' codes, so they add up across chunks, and across the workers of the Dask engine
(dask_engine.py), to exactly the same integers in any order. Memory is bounded by the
chunk and by the cell-level arrays, never by the number of records.

Non-employed flows are not counted record by record: every graduate of an origin cell is
in exactly one destination per years-after (no outcome row counts as non-employed), so
the non-employed count of a cell is its number of graduates minus its employed ones.
"""
from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.config import EarningsConfig, ReleaseConfig
from pseo_das.schemas.inputs import (EMPLOYER_COLUMN, OUTCOME_COLUMNS, CipVintages,
                                     graduates_schema, outcomes_schema)
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.codes.destinations import N_DESTINATIONS, NONEMPLOYED, employed_destination
from pseo_das.tasks.codes.earnings_bins import earnings_bin
from pseo_das.tasks.inputs.cell_moments import CellMoments, chunk_moments, combine, moments_of
from pseo_das.tasks.inputs.cells import (CIP_VINTAGES, MEASURED_CELL_COLUMNS,
                                         MEASURED_CELL_KEYS, CellFrame, cell_frame,
                                         cohort_attributes)
from pseo_das.tasks.inputs.constant_dollars import deflated
from pseo_das.tasks.inputs.cpi import ConsumerPrices
from pseo_das.tasks.inputs.degree_records import bound_checks, write_degree_records
from pseo_das.tasks.inputs.ingest import (CHUNK_ROWS, InputFiles, InputLayout,
                                          InputValidationError, find_input_files, find_inputs,
                                          input_layout)
from pseo_das.tasks.inputs.person_chunks import PersonChunk, Validator, person_chunks
from pseo_das.tasks.inputs.sparse_counts import SparseCounts


@dataclass(frozen=True)
class CountingRules:
    """What a chunk is reduced to: public configuration only (sent to Dask workers)."""
    cfg: ReleaseConfig
    cip_switch_year: int
    cpi: ConsumerPrices
    earnings_levels: tuple[str, ...]
    flows_levels: tuple[str, ...]
    employers: bool = False   # count x_v, the largest number at one establishment, per flow
    employer_table: bool = False   # keep the graduates at each establishment per cell too
    # the cell statistics' public bounds (lower, upper): their moments are counted too
    moment_bounds: tuple[float, float] | None = None

    @classmethod
    def of(cls, cfg: ReleaseConfig, cip_switch_year: int, cpi: ConsumerPrices) -> "CountingRules":
        table = cfg.employer_table.enabled
        return cls(cfg, cip_switch_year, cpi, tuple(cfg.privacy.measured_levels()),
                   tuple(cfg.flows.measured_levels()), cfg.flows.protects_employers or table,
                   table, cfg.mos.bounds(cfg.earnings) if cfg.mos.enabled else None)

    @classmethod
    def moments_only(cls, cfg: ReleaseConfig, cpi: ConsumerPrices, lower: float, upper: float
                     ) -> "CountingRules":
        """Only the cell statistics' moments, within [lower, upper] (the accuracy study)."""
        return cls(cfg, cfg.cip.switch_year, cpi, (), (), moment_bounds=(lower, upper))

    @property
    def table_level(self) -> str:
        """The CIP level whose cells the employer-side table sums (any level holds every
        graduate once): the finest measured flows level."""
        return self.flows_levels[0]

    @property
    def levels(self) -> list[str]:
        return sorted(set(self.earnings_levels) | set(self.flows_levels))


@dataclass
class LevelChunkCounts:
    """One chunk's counts at one CIP level, in the chunk's own cells."""
    cells: pd.DataFrame                  # MEASURED_CELL_COLUMNS
    graduates: np.ndarray                # per cell
    histograms: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    employed: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # years_after -> (flat index cell * width + bin or destination, count), sparse
    at_employer: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    # years_after -> (flat cell * N_DESTINATIONS + destination, employer code, count): the
    # graduates of each flow at each establishment (code -1: no employer_id on record);
    # jobs under the earnings floor at the non-employed destination
    employer_names: pd.Index | None = None   # the chunk's employer codes' ids


@dataclass
class ChunkCounts:
    """One chunk's counts: per CIP level, and the cell statistics' moments (cell_moments.py:
    one table of the chunk's all-fields cells) when the rules ask for them."""
    levels: dict[str, LevelChunkCounts]
    moments: pd.DataFrame | None = None


# The bit fields of a cell's composite key (LevelTotals): at most 2**20 institutions, ...
KEY_BITS = {"institution": 20, "degree_level": 6, "cip_vintage": 1, "cipcode": 14,
            "grad_cohort": 16}
CODED_KEYS = ["institution", "degree_level", "cip_vintage", "cipcode"]


def _sparse(flat: np.ndarray, space: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of `flat` (all in [0, space)) and their counts."""
    if space <= 8 * len(flat):
        counts = np.bincount(flat, minlength=space)
        keys = np.flatnonzero(counts)
        return keys, counts[keys]
    keys, counts = np.unique(flat, return_counts=True)
    return keys, counts.astype(np.int64)


def count_chunk(chunk: PersonChunk, rules: CountingRules) -> ChunkCounts:
    """The counts of one validated chunk of persons (module doc)."""
    cfg = rules.cfg
    outcomes = chunk.outcomes
    years_after = outcomes["years_after"].to_numpy(dtype=np.int64)
    grad_year = chunk.graduates["grad_year"].to_numpy(dtype=np.int64)[chunk.graduate_row]
    earnings = outcomes["earnings"].to_numpy(dtype=np.float64, na_value=np.nan)
    if len(earnings):
        earnings = deflated(earnings, grad_year + years_after, rules.cpi, cfg.earnings.dollar_year)
    destination = employed_destination(outcomes.assign(earnings=earnings),
                                       cfg.earnings.sample_floor)
    records = {k: YearRecords.of(chunk.graduate_row, years_after == k, earnings, destination,
                                 cfg.earnings, rules.employers)
               for k in cfg.cells.years_after if rules.levels}   # none: only the moments
    attributes = cohort_attributes(chunk.graduates, cfg.cells, rules.cip_switch_year)
    if rules.employers:
        employer = outcomes[EMPLOYER_COLUMN]
        employer_code = employer.cat.codes.to_numpy().astype(np.int64)
    counts = ChunkCounts({})
    for level in rules.levels:
        frame = cell_frame(attributes, level)
        cell = frame.graduate_cell
        level_counts = LevelChunkCounts(frame.cells, np.bincount(cell, minlength=len(frame.cells)))
        for k, year in records.items():
            if level in rules.earnings_levels:
                level_counts.histograms[k] = _sparse(
                    cell[year.earnings_graduate] * cfg.earnings.n_bins + year.earnings_bin,
                    len(frame.cells) * cfg.earnings.n_bins)
            if level in rules.flows_levels:
                level_counts.employed[k] = _sparse(
                    cell[year.employed_graduate] * N_DESTINATIONS + year.employed_destination,
                    len(frame.cells) * N_DESTINATIONS)
                if rules.employers:   # jobs under the floor too, at the non-employed destination
                    job = year.job_row
                    level_counts.at_employer[k] = _at_employer(
                        cell[chunk.graduate_row[job]] * N_DESTINATIONS + destination[job],
                        employer_code[job], len(employer.cat.categories))
                    level_counts.employer_names = employer.cat.categories
        counts.levels[level] = level_counts
    if rules.moment_bounds is not None:
        counts.moments = chunk_moments(chunk, attributes, earnings, cfg.earnings.sample_floor,
                                       *rules.moment_bounds)
    return counts


@dataclass(frozen=True)
class YearRecords:
    """A chunk's outcome rows of one years-after, as every CIP level counts them: the
    earnings universe's graduates and bins, the employed records' graduates and
    destinations, and (employer protection) the rows with a job, under the floor too."""
    earnings_graduate: np.ndarray
    earnings_bin: np.ndarray
    employed_graduate: np.ndarray
    employed_destination: np.ndarray
    job_row: np.ndarray | None

    @classmethod
    def of(cls, graduate_row: np.ndarray, rows: np.ndarray, earnings: np.ndarray,
           destination: np.ndarray, cfg: EarningsConfig, jobs: bool) -> "YearRecords":
        in_universe = np.flatnonzero(rows & (earnings >= cfg.sample_floor))
        employed = rows & (destination != NONEMPLOYED)
        at_employed = np.flatnonzero(employed)
        return cls(graduate_row[in_universe], earnings_bin(earnings[in_universe], cfg.bin_edges),
                   graduate_row[at_employed], destination[at_employed],
                   np.flatnonzero(employed | (rows & ~np.isnan(earnings))) if jobs else None)


def _at_employer(flat: np.ndarray, employer: np.ndarray, n_employers: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (flow, employer) pairs of some records and their numbers of graduates."""
    width = n_employers + 1
    keys, counts = np.unique(flat * width + (employer + 1), return_counts=True)
    return keys // width, keys % width - 1, counts.astype(np.int64)


# Rows of (flow, employer) counts kept before they are added up (bounded memory).
EMPLOYER_ROWS_BEFORE_SUM = 2_000_000
# Records a level's histograms hold as int32 (no cell's bin can then overflow it)
NARROW_HISTOGRAM_RECORDS = np.iinfo(np.int32).max
EMPLOYED_PARTS_BEFORE_SUM = 3   # chunks' employed counts kept before they are summed


class LevelTotals:
    """The counts of one CIP level added up over chunks, in cells numbered as first seen."""

    def __init__(self, n_bins: int, years_after: tuple[int, ...]):
        self.n_bins, self.years_after = n_bins, years_after
        self.vocabularies = {c: {} for c in CODED_KEYS}   # code -> number, as first seen
        self.keys = np.zeros(0, np.int64)                  # the composite key of each cell
        self.lookup = pd.Index(self.keys)
        self.rows: list[pd.DataFrame] = []                 # the cells, as first seen
        self.graduates = np.zeros(0, np.int64)
        # years_after -> cells x bins, int32 while the records added could not overflow it
        # (a national frame's three: 411 -> 205 MB), int64 beyond
        self.histograms: dict[int, np.ndarray] = {}
        self.histogram_records = 0
        # years_after -> (flat cell * N_DESTINATIONS + destination, count) of each chunk added
        # since the last sum, cells numbered as first seen (added to `employed_sum` every
        # EMPLOYED_PARTS_BEFORE_SUM parts)
        self.employed: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        self.employed_sum: dict[int, SparseCounts] = {}
        self.employer_ids: dict[str, int] = {}             # employer_id -> number
        self.at_employer: dict[int, list[pd.DataFrame]] = {}

    def _composite(self, cells: pd.DataFrame) -> np.ndarray:
        """One int64 per cell: its codes' numbers and its cohort, in fixed bit fields."""
        key = np.zeros(len(cells), np.int64)
        for column, bits in KEY_BITS.items():
            if column in CODED_KEYS:
                vocabulary = self.vocabularies[column]
                codes = cells[column].cat.categories.astype(str)
                number = np.array([vocabulary.setdefault(c, len(vocabulary)) for c in codes],
                                  dtype=np.int64)
                value = number[cells[column].cat.codes.to_numpy()]
            else:
                value = cells[column].to_numpy(dtype=np.int64)
            if value.size and (value.min() < 0 or value.max() >= 1 << bits):
                raise ValueError(f"{column}: more distinct values than the cell key holds")
            key = (key << bits) | value
        return key

    def _grow(self, n: int) -> None:
        capacity = len(self.graduates)
        if n <= capacity:
            return
        # Twice what is needed: np.zeros pages take memory only when written, and the
        # later chunks' few new cells then fit without copying every array.
        new = max(2 * n, 2 * capacity, 1024)

        def grown(a: np.ndarray) -> np.ndarray:
            b = np.zeros((new,) + a.shape[1:], a.dtype)
            b[:len(a)] = a
            return b
        self.graduates = grown(self.graduates)
        self.histograms = {k: grown(a) for k, a in self.histograms.items()}

    def add(self, part: LevelChunkCounts) -> None:
        keys = self._composite(part.cells)
        ids = self.lookup.get_indexer(keys)
        new = ids < 0
        if new.any():
            ids[new] = len(self.keys) + np.arange(int(new.sum()))
            self.keys = np.concatenate([self.keys, keys[new]])
            self.lookup = pd.Index(self.keys)
            self.rows.append(part.cells[new].astype(
                {c: object for c in CODED_KEYS + ["inst_state"]}))
        self._grow(len(self.keys))
        self.graduates[ids] += part.graduates
        self.histogram_records += sum(int(count.sum()) for _, count in part.histograms.values())
        wide = self.histogram_records > NARROW_HISTOGRAM_RECORDS
        if wide:
            self.histograms = {k: a.astype(np.int64, copy=False)
                               for k, a in self.histograms.items()}
        for k, (flat, count) in part.histograms.items():
            if k not in self.histograms:
                self.histograms[k] = np.zeros((len(self.graduates), self.n_bins),
                                              np.int64 if wide else np.int32)
            self.histograms[k][ids[flat // self.n_bins], flat % self.n_bins] += count
        for k, (flat, count) in part.employed.items():   # sparse: cells x 1,021 mostly zeros
            parts = self.employed.setdefault(k, [])
            parts.append((ids[flat // N_DESTINATIONS] * N_DESTINATIONS + flat % N_DESTINATIONS,
                          count.astype(np.int64)))
            if len(parts) > EMPLOYED_PARTS_BEFORE_SUM:
                self.employed_sum[k] = self.employed_counts(k, len(self.keys))
                self.employed[k] = []
        for k, (flat, employer, count) in part.at_employer.items():
            number = np.array([self.employer_ids.setdefault(str(e), len(self.employer_ids))
                               for e in part.employer_names] + [-1], dtype=np.int64)
            parts = self.at_employer.setdefault(k, [])
            parts.append(pd.DataFrame({
                "flow": ids[flat // N_DESTINATIONS] * N_DESTINATIONS + flat % N_DESTINATIONS,
                "employer": number[employer], "graduates": count}))
            if sum(len(p) for p in parts) > EMPLOYER_ROWS_BEFORE_SUM:
                self.at_employer[k] = [_summed(parts)]

    def employed_counts(self, years_after: int, n: int) -> SparseCounts:
        """The employed graduates of every flow (cells as numbered here x N_DESTINATIONS)."""
        parts = self.employed.get(years_after, [])
        nothing = np.zeros(0, np.int64)
        summed = self.employed_sum.get(years_after,
                                       SparseCounts(n, N_DESTINATIONS, nothing, nothing))
        return summed.added(n, np.concatenate([p[0] for p in parts] or [nothing]),
                            np.concatenate([p[1] for p in parts] or [nothing]))

    def largest_at_one_employer(self, years_after: int, n: int) -> np.ndarray:
        """x_v of every flow (cells as numbered here x N_DESTINATIONS), int64: the largest
        number of the flow's graduates at one establishment. Graduates without an
        employer_id are counted as one establishment per flow (they might all work at one:
        the conservative choice). The non-employed destination gets the largest number of
        the cell's graduates at one establishment, whatever their destination (jobs under
        the earnings floor included; the cell's graduates without employer_id as one):
        moving alpha of them into or out of employment changes it by as much."""
        largest = np.zeros((n, N_DESTINATIONS), np.int64)
        parts = self.at_employer.get(years_after)
        if parts:
            summed = _summed(parts)
            destination = summed["flow"].to_numpy() % N_DESTINATIONS
            best = summed[destination != NONEMPLOYED].groupby("flow")["graduates"].max()
            flow = best.index.to_numpy()
            largest[flow // N_DESTINATIONS, flow % N_DESTINATIONS] = best.to_numpy()
            at_one = summed.assign(cell=summed["flow"].to_numpy() // N_DESTINATIONS) \
                .groupby(["cell", "employer"])["graduates"].sum().groupby(level="cell").max()
            largest[at_one.index.to_numpy(), NONEMPLOYED] = at_one.to_numpy()
        return largest

    def employed_at_employer(self, years_after: int, canonical: np.ndarray) -> pd.DataFrame:
        """The employed graduates of every cell (`canonical`: each cell's position in
        canonical order, by its number here) at each establishment, by destination (cell,
        destination, employer, graduates; employer -1: graduates without employer_id, one
        establishment per cell and destination): what the employer-side table's x_v is
        computed from, for any set of populations."""
        parts = self.at_employer.get(years_after)
        if not parts:
            return pd.DataFrame({c: np.zeros(0, np.int64)
                                 for c in ("cell", "destination", "employer", "graduates")})
        summed = _summed(parts)
        flow = summed["flow"].to_numpy()
        employed = flow % N_DESTINATIONS != NONEMPLOYED
        return pd.DataFrame({"cell": canonical[flow[employed] // N_DESTINATIONS],
                             "destination": flow[employed] % N_DESTINATIONS,
                             "employer": summed["employer"].to_numpy()[employed],
                             "graduates": summed["graduates"].to_numpy()[employed]})

    def largest_by_destination(self, years_after: int) -> np.ndarray:
        """Per employed destination (state x sector, N_DESTINATIONS - 1), the largest number
        of graduates of every cell at one establishment: x_v of the employer-side table
        (graduates without employer_id as one establishment per destination)."""
        largest = np.zeros(NONEMPLOYED, np.int64)
        parts = self.at_employer.get(years_after)
        if parts:
            summed = _summed(parts)
            destination = summed["flow"].to_numpy() % N_DESTINATIONS
            employed = summed.assign(destination=destination)[destination != NONEMPLOYED]
            best = employed.groupby(["destination", "employer"])["graduates"].sum() \
                .groupby(level="destination").max()
            largest[best.index.to_numpy()] = best.to_numpy()
        return largest

    def frame(self, level: str) -> tuple[CellFrame, np.ndarray]:
        """The cell frame in canonical order, and the order of the cells as numbered here."""
        cells = (pd.concat(self.rows, ignore_index=True) if self.rows else
                 pd.DataFrame({c: pd.Series(dtype=object) for c in MEASURED_CELL_COLUMNS}))
        order = cells.sort_values(MEASURED_CELL_KEYS).index.to_numpy()
        cells = cells.iloc[order].reset_index(drop=True)
        for c in ("institution", "inst_state", "degree_level", "cipcode"):
            cells[c] = pd.Categorical(cells[c], categories=sorted(set(cells[c])))
        cells["cip_vintage"] = pd.Categorical(cells["cip_vintage"], categories=list(CIP_VINTAGES))
        for c in ("grad_cohort", "grad_cohort_years"):
            cells[c] = cells[c].astype(np.int64)
        return CellFrame(level, cells[MEASURED_CELL_COLUMNS], None), order


def _summed(parts: list[pd.DataFrame]) -> pd.DataFrame:
    return (pd.concat(parts, ignore_index=True).groupby(["flow", "employer"], sort=False)
            ["graduates"].sum().reset_index())


@dataclass
class LevelCounts:
    """The true counts of one CIP level over every cell of its frame (canonical order)."""
    frame: CellFrame
    graduates: np.ndarray                  # per cell
    histograms: dict[int, np.ndarray]      # years_after -> cells x bins (int32 or int64)
    employed: dict[int, SparseCounts]      # years_after -> cells x destinations (no ZZ/Z)
    # years_after -> cells x destinations: x_v (employer-side protection only)
    largest_at_one_employer: dict[int, np.ndarray] = field(default_factory=dict)
    # years_after -> x_v of each state x sector over every cell (the employer-side table)
    largest_by_destination: dict[int, np.ndarray] = field(default_factory=dict)
    # years_after -> employed graduates per (cell, destination, employer) (employer_table)
    employed_at_employer: dict[int, pd.DataFrame] = field(default_factory=dict)


@dataclass
class TrueCounts:
    """Every true count a release measures, by CIP level; what the aggregation read."""
    levels: dict[str, LevelCounts]
    fingerprints: dict[str, str]
    checks: list[dict]
    rows: dict[str, int]                   # graduates, outcomes
    moments: CellMoments | None = None     # the cell statistics' (mos.enabled)
    # the contribution bound k the counts were taken with: each person in at most k degree
    # records (the measurements' sensitivity; degree_records.py)
    max_degrees_per_person: int = 1

    @property
    def frames(self) -> dict[str, CellFrame]:
        return {level: counts.frame for level, counts in self.levels.items()}

    def histograms(self, level: str, years_after: int, last_earnings_year: int,
                   populations: pd.DataFrame | None = None) -> tuple[pd.DataFrame, np.ndarray]:
        """Cells (canonical order) and cells x bins counts of the cells observable at
        `years_after` (and, if given, in `populations`), zero rows included."""
        counts = self.levels[level]
        selected = counts.frame.measured_cells(years_after, last_earnings_year, populations)
        histograms = counts.histograms.get(years_after)
        return (counts.frame.cells[selected].reset_index(drop=True),
                histograms[selected].astype(np.int64))

    def flows(self, level: str, years_after: int, last_earnings_year: int,
              populations: pd.DataFrame | None = None) -> tuple[pd.DataFrame, np.ndarray]:
        """Cells and cells x N_DESTINATIONS flows, the non-employed destination last."""
        cells, entries = self.flow_entries(level, years_after, last_earnings_year, populations)
        return cells, entries.toarray()

    def flow_entries(self, level: str, years_after: int, last_earnings_year: int,
                     populations: pd.DataFrame | None = None
                     ) -> tuple[pd.DataFrame, SparseCounts]:
        """`flows` as their non-zero entries (a national table is never held dense)."""
        counts = self.levels[level]
        selected = np.flatnonzero(counts.frame.measured_cells(years_after, last_earnings_year,
                                                              populations))
        employed = counts.employed[years_after][selected]
        n = len(selected)
        row = employed.flat // N_DESTINATIONS
        nonemployed = counts.graduates[selected] - np.bincount(
            row, weights=employed.count, minlength=n).round().astype(np.int64)
        entries = SparseCounts.summed(
            n, N_DESTINATIONS,
            np.concatenate([employed.flat, np.arange(n) * N_DESTINATIONS + NONEMPLOYED]),
            np.concatenate([employed.count, nonemployed]))
        return counts.frame.cells.iloc[selected].reset_index(drop=True), entries

    def origin_counts(self, level: str, years_after: int, last_earnings_year: int,
                      populations: pd.DataFrame | None = None
                      ) -> tuple[pd.DataFrame, np.ndarray]:
        """The cells of `flows` and their graduates (cells x 1): each flows row's sum, every
        graduate of a cell being in one destination, without the cells x destinations."""
        counts = self.levels[level]
        selected = counts.frame.measured_cells(years_after, last_earnings_year, populations)
        return (counts.frame.cells[selected].reset_index(drop=True),
                counts.graduates[selected].astype(np.int64)[:, None])

    def employer_side_table(self, level: str, years_after: int,
                            last_earnings_year: int) -> tuple[np.ndarray, np.ndarray]:
        """The employer-side table (only establishment attributes: the strong notion): per
        state x sector, the employed graduates of the observable cells, and x_v, the largest
        number of graduates at one establishment there (over every cell: at least as large)."""
        _, flows = self.flows(level, years_after, last_earnings_year)
        return (flows[:, :NONEMPLOYED].sum(axis=0),
                self.levels[level].largest_by_destination[years_after])

    def employer_table(self, level: str, years_after: int, last_earnings_year: int,
                       populations: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """One cohort's row of the employer-side table: per state x sector (the employed
        destinations, flow_counts order), the employed graduates of the observable cells of
        `populations`, and x_v, the largest number of those graduates at one establishment
        there (graduates without employer_id as one establishment per state x sector). Only the
        cells of `populations` are read, so the measurement depends on their graduates
        alone."""
        counts = self.levels[level]
        if years_after not in counts.employed_at_employer:
            raise ValueError("the graduates at each employer were not counted: the release "
                             "reads them only with employer_table.enabled")
        selected = counts.frame.measured_cells(years_after, last_earnings_year, populations)
        _, flows = self.flows(level, years_after, last_earnings_year, populations)
        at = counts.employed_at_employer[years_after]
        at = at[selected[at["cell"].to_numpy()]]
        largest = np.zeros(NONEMPLOYED, np.int64)
        if len(at):
            best = at.groupby(["destination", "employer"])["graduates"].sum() \
                .groupby(level="destination").max()
            largest[best.index.to_numpy()] = best.to_numpy()
        return flows[:, :NONEMPLOYED].sum(axis=0), largest

    def largest_at_one_employer(self, level: str, years_after: int, last_earnings_year: int,
                                populations: pd.DataFrame | None = None) -> np.ndarray:
        """x_v of the cells of flows() (same rows and columns): the largest number of a
        flow's graduates at one establishment (LevelTotals.largest_at_one_employer)."""
        counts = self.levels[level]
        if years_after not in counts.largest_at_one_employer:
            raise ValueError("the largest number at one employer was not counted: the "
                             "release reads employer_id only for an employer-protecting "
                             "flows.mechanism")
        selected = counts.frame.measured_cells(years_after, last_earnings_year, populations)
        return counts.largest_at_one_employer[years_after][selected]


class CountsAccumulator:
    """Adds ChunkCounts up, by CIP level; `result` puts the cells in canonical order."""

    def __init__(self, rules: CountingRules):
        self.rules = rules
        self.totals = {level: LevelTotals(rules.cfg.earnings.n_bins, rules.cfg.cells.years_after)
                       for level in rules.levels}

        self.moment_parts: list[pd.DataFrame] = []

    def add(self, counts: ChunkCounts) -> None:
        for level, part in counts.levels.items():
            self.totals[level].add(part)
        if counts.moments is not None:
            self.moment_parts.append(counts.moments)
            if len(self.moment_parts) > 8:   # sums, counts and extremes: any grouping
                self.moment_parts = [combine(self.moment_parts)]

    def moments(self) -> CellMoments | None:
        """The cell statistics' moments of every chunk added (None: not counted)."""
        if self.rules.moment_bounds is None:
            return None
        return moments_of(combine(self.moment_parts), self.rules.cfg, *self.rules.moment_bounds)

    def result(self) -> dict[str, LevelCounts]:
        """The counts of every level, cells in canonical order. The totals are let go as
        their arrays are put in order, one at a time (a national frame's counts are not held
        twice: 0.6 GB at 100m, 364 MB of flows and 205 of histograms): call once, after the
        last `add`."""
        levels = {}
        rules, years = self.rules, self.rules.cfg.cells.years_after
        for level in list(self.totals):
            totals = self.totals.pop(level)
            frame, order = totals.frame(level)
            n = len(order)
            graduates = totals.graduates[:n][order]
            histograms: dict[int, np.ndarray] = {}
            if level in rules.earnings_levels:
                for k in years:
                    histograms[k] = _full(totals.histograms.pop(k, None), n, totals.n_bins,
                                          np.int32)[order]
            employed: dict[int, SparseCounts] = {}
            largest: dict[int, np.ndarray] = {}
            by_destination: dict[int, np.ndarray] = {}
            at_employer: dict[int, pd.DataFrame] = {}
            for k in years if level in rules.flows_levels else ():
                summed = totals.employed_counts(k, n)
                totals.employed.pop(k, None)
                totals.employed_sum.pop(k, None)
                employed[k] = summed[order]
                del summed
                if rules.employers:
                    largest[k] = totals.largest_at_one_employer(k, n)[order]
                    by_destination[k] = totals.largest_by_destination(k)
                if rules.employer_table and level == rules.table_level:
                    at_employer[k] = totals.employed_at_employer(k, _positions(order))
                totals.at_employer.pop(k, None)
            levels[level] = LevelCounts(frame, graduates, histograms, employed, largest,
                                        by_destination, at_employer)
        return levels


def _positions(order: np.ndarray) -> np.ndarray:
    """Each cell's canonical position, by its number as first seen (inverse of `order`)."""
    positions = np.empty(len(order), np.int64)
    positions[order] = np.arange(len(order))
    return positions


def _full(array: np.ndarray | None, n: int, width: int, dtype) -> np.ndarray:
    return np.zeros((n, width), dtype) if array is None else array[:n]


def read_counts(data_dir: Path, cfg: ReleaseConfig, cip_vintages: CipVintages | None,
                cpi: ConsumerPrices, chunk_rows: int = CHUNK_ROWS,
                rules: CountingRules | None = None) -> TrueCounts:
    """Validate the inputs of `data_dir` and count them, chunk by chunk (module doc), by
    `rules` (default: the configuration's). Bad input raises InputValidationError naming
    the file, column and rows, after both inputs were read through, so that one run
    reports every problem."""
    started = time.perf_counter()
    data_dir = Path(data_dir)
    graduates, outcomes = find_inputs(data_dir)
    validator = Validator(graduates, outcomes,
                          graduates_schema(cfg.cells.first_cohort_year,
                                           cfg.cells.last_earnings_year, cip_vintages),
                          outcomes_schema())
    rules = rules or CountingRules.of(cfg, cfg.cip.switch_year, cpi)
    outcome_columns = OUTCOME_COLUMNS
    if rules.employers:
        check_employer_column(outcomes, cfg)
        outcome_columns = OUTCOME_COLUMNS + (EMPLOYER_COLUMN,)
    accumulator = CountsAccumulator(rules)
    rows = {"graduates": 0, "outcomes": 0}
    shown = time.perf_counter()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pseo-das-hash") as hasher, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="pseo-das-count") as counter:
        hashed = [hasher.submit(source.fingerprints, data_dir) for source in (graduates, outcomes)]
        counting = None   # the previous chunk's count: one at a time, added in chunk order
        for chunk in person_chunks(graduates, outcomes, validator, chunk_rows, progress,
                                   outcome_columns):
            rows["graduates"] += len(chunk.graduates)
            rows["outcomes"] += len(chunk.outcomes)
            if counting is not None:
                counting.result()
            counting = (None if validator.failed
                        else counter.submit(_count_into, accumulator, chunk, rules))
            if time.perf_counter() - shown > 5:
                shown = time.perf_counter()
                progress(f"read {rows['graduates']:,} graduates, {rows['outcomes']:,} outcome "
                         f"rows ({shown - started:.0f} s)")
        if counting is not None:
            counting.result()
        fingerprints = {**hashed[0].result(), **hashed[1].result()}
    return TrueCounts(accumulator.result(), fingerprints, input_checks(graduates, outcomes, rows),
                      rows, accumulator.moments())


def read_cell_moments(data_dir: Path, cfg: ReleaseConfig, cpi: ConsumerPrices, lower: float,
                      upper: float, chunk_rows: int = CHUNK_ROWS) -> CellMoments:
    """Validate the inputs and count only the cell statistics' moments within [lower,
    upper] (the accuracy study's pass). Privacy cost: none; the result is confidential."""
    counts = read_counts(data_dir, cfg, None, cpi, chunk_rows,
                         CountingRules.moments_only(cfg, cpi, lower, upper))
    assert counts.moments is not None
    return counts.moments


def _count_into(accumulator: "CountsAccumulator", chunk: PersonChunk, rules: CountingRules) -> None:
    accumulator.add(count_chunk(chunk, rules))


def check_employer_column(outcomes: InputFiles, cfg: ReleaseConfig) -> None:
    """The employer protection needs employer_id: InputValidationError (nothing read or
    spent) when the outcomes lack it."""
    if outcomes.has_column(EMPLOYER_COLUMN):
        return
    if cfg.flows.protects_employers:
        raise InputValidationError(
            f"{outcomes.path}: flows.mechanism = \"{cfg.flows.mechanism}\" protects "
            f"employers and needs the column {EMPLOYER_COLUMN} (the establishment of each "
            "job), which this input does not have: add it (`pseo-das synth --employers` "
            "writes it) or set flows.mechanism = \"geometric\"")
    raise InputValidationError(
        f"{outcomes.path}: employer_table.enabled = true (the employer-side table, "
        f"pseoemp_all.csv) needs the column {EMPLOYER_COLUMN} (the establishment of each "
        "job), which this input does not have: add it (`pseo-das synth --employers` writes "
        "it) or set employer_table.enabled = false")


def input_checks(graduates: InputFiles, outcomes: InputFiles, rows: dict[str, int]) -> list[dict]:
    """The input checks that passed, for the audit report."""
    return [
        {"name": f"{graduates.path.name} passes the graduates schema",
         "result": f"passed ({rows['graduates']:,} rows)"},
        {"name": f"{outcomes.path.name} passes the outcomes schema",
         "result": f"passed ({rows['outcomes']:,} rows)"},
        {"name": "every outcome belongs to a known graduate", "result": "passed"},
    ]


class EngineKind(StrEnum):
    LOCAL = "local"    # this process, in chunks
    DASK = "dask"      # the workers of a Dask cluster (dask_engine.py)


@dataclass(frozen=True)
class Engine:
    """How the inputs are read and counted; it changes no count (so no published value)."""
    kind: EngineKind = EngineKind.LOCAL
    scheduler: str | None = None       # Dask: a running cluster's scheduler address
    workers: int = 2                   # Dask: LocalCluster worker processes, without scheduler
    chunk_rows: int = CHUNK_ROWS       # graduates per chunk (local) or per task (Dask)

    def describe(self) -> str:
        if self.kind == EngineKind.LOCAL:
            return f"in-process, chunks of {self.chunk_rows:,} rows"
        where = self.scheduler or f"LocalCluster of {self.workers} workers"
        return f"Dask ({where}), tasks of about {self.chunk_rows:,} graduates"


@release_task("validate and count the inputs")
def count_inputs(data_dir: Path, cfg: ReleaseConfig, cip_vintages: CipVintages | None,
                 cpi: ConsumerPrices, engine: Engine = Engine()) -> TrueCounts:
    """The release's true counts, by the chosen engine, with progress lines."""
    started = time.perf_counter()
    progress(f"validating and counting the inputs in {data_dir} ({engine.describe()})")
    if input_layout(data_dir) is InputLayout.JOBS:
        counts = _count_degree_records(data_dir, cfg, cip_vintages, cpi, engine)
    else:
        counts = _count_by_engine(data_dir, cfg, cip_vintages, cpi, engine)
    counts = replace(counts, max_degrees_per_person=cfg.privacy.max_degrees_per_person)
    progress(f"inputs valid: {counts.rows['graduates']:,} graduates, "
             f"{counts.rows['outcomes']:,} outcome rows; "
             + ", ".join(f"CIP level {k}: {len(c.frame.cells):,} cells"
                         for k, c in counts.levels.items())
             + f" ({time.perf_counter() - started:.1f} s)")
    return counts


def _count_by_engine(data_dir: Path, cfg: ReleaseConfig, cip_vintages: CipVintages | None,
                     cpi: ConsumerPrices, engine: Engine) -> TrueCounts:
    if engine.kind == EngineKind.DASK:
        from pseo_das.tasks.inputs.dask_engine import dask_counts
        return dask_counts(data_dir, cfg, cip_vintages, cpi, engine.scheduler,
                           engine.chunk_rows, engine.workers)
    return read_counts(data_dir, cfg, cip_vintages, cpi, engine.chunk_rows)


def _count_degree_records(data_dir: Path, cfg: ReleaseConfig, cip_vintages: CipVintages | None,
                          cpi: ConsumerPrices, engine: Engine) -> TrueCounts:
    """The jobs layout (degree_records.py): the bounded degree records, written to a
    temporary folder (in TMPDIR, removed after counting), counted by the engine; the
    fingerprints and input checks are the agency's files'."""
    k = cfg.privacy.max_degrees_per_person
    employers = CountingRules.of(cfg, cfg.cip.switch_year, cpi).employers
    with tempfile.TemporaryDirectory(prefix="pseo-das-degrees-") as tmp:
        prints, bounded = write_degree_records(
            Path(data_dir), Path(tmp), cfg.cells.first_cohort_year,
            cfg.cells.last_earnings_year, tuple(cfg.cells.years_after), k, employers,
            cip_vintages)
        progress(f"degree records: {bounded.degree_rows - bounded.dropped:,} of "
                 f"{bounded.degree_rows:,} kept ({bounded.persons:,} persons, at most {k} "
                 f"each); {bounded.job_rows:,} job rows")
        counts = _count_by_engine(Path(tmp), cfg, cip_vintages, cpi, engine)
    names = {name: find_input_files(Path(data_dir), name).path.name
             for name in ("graduates", "jobs")}
    return replace(counts, fingerprints=prints,
                   checks=bound_checks(names["graduates"], names["jobs"], bounded))
