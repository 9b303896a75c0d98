"""Public earnings tables from noisy histograms: the official pseoe_all.csv (LEHD Public
Use Schema V4.14.0) and pseo-das's pseoh_all.csv of the noisy histograms. Privacy cost:
none (post-processing of noisy counts only).

Status flags follow the LEHD public-use convention:
  1  value published;  -1  not available (the cohort cannot have this years-after yet);
  5  suppressed: the noisy graduate count is below the publication minimum, or the cell is
     one of the schema's Restricted 4-Digit CIP Tabulations (degree levels 07 and 17).
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.config import EarningsConfig, ReleaseConfig
from pseo_das.schemas.codes import STATUS_NOT_AVAILABLE, STATUS_OK, STATUS_SUPPRESSED, YEARS_AFTER
from pseo_das.schemas.outputs import pseoh_schema
from pseo_das.schemas.pseo_layout import (IPEDS_FLAG_NOT_AVAILABLE, RESTRICTED_CIP_LEVEL,
                                          RESTRICTED_DEGREE_LEVELS, Product, layout)
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.earnings.noisy_histograms import NoisyHistograms
from pseo_das.tasks.earnings.percentiles import protected_percentiles, round_dollars
from pseo_das.tasks.inputs.constant_dollars import DollarYears
from pseo_das.tasks.codes.ipeds_counts import IpedsCounts, ipeds_counts
from pseo_das.tasks.codes.official_codes import (ALL_INDUSTRIES, CELL_IDENTIFIERS, NATIONAL,
                                                       agg_level, official_cells)
from pseo_das.tasks.codes.text_codes import Factorized, combined_keys, found_at

IPEDS_NOT_AVAILABLE = int(IPEDS_FLAG_NOT_AVAILABLE)

PRODUCT = Product.PSEOE
IDENTIFIERS = list(layout(PRODUCT).identifiers)
CELL_KEYS = ["agg_level_pseo", *CELL_IDENTIFIERS]
SORT_KEYS = ["agg_level_pseo", "institution", "degree_level", "cipcode", "grad_cohort"]


def restricted_cells(cip_level: str, degree_level: pd.Series) -> np.ndarray:
    """The schema's Restricted 4-Digit CIP Tabulations: degree levels 07 and 17 at 4-digit
    CIP publish no measure."""
    return ((cip_level == RESTRICTED_CIP_LEVEL)
            & degree_level.astype(str).isin(RESTRICTED_DEGREE_LEVELS).to_numpy())


def cell_years(table: NoisyHistograms, cfg: EarningsConfig, dollar_factor: float) -> pd.DataFrame:
    """One row per cell of `table`: official identifiers, noisy count, percentiles
    (converted by `dollar_factor` to the publication year's dollars, then rounded), whether
    it is published (noisy count at least the minimum, not restricted)."""
    total = table.counts.sum(axis=1)
    restricted = restricted_cells(table.cip_level, table.cells["degree_level"])
    values = round_dollars(dollar_factor * protected_percentiles(
        table.counts, np.array(cfg.bin_edges), np.array(cfg.bin_upper), cfg.percentiles))
    frame = official_cells(table.cells, table.inst_level, table.cip_level)
    frame.insert(0, "agg_level_pseo", agg_level(PRODUCT, table.inst_level, table.cip_level,
                                                table.by_cohort))
    frame = frame.assign(years_after=table.years_after, grads_earn=total,
                         published=(total >= cfg.min_publish_count) & ~restricted,
                         restricted=restricted,
                         noise_terms=table.cells["noise_terms"].to_numpy())
    for k, p in enumerate(cfg.percentiles):
        frame[f"p{p}_earnings"] = values[:, k]
    return frame


def _sort(frame: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    return frame.sort_values(SORT_KEYS + extra, kind="stable", ignore_index=True)


def _with_national_all_industries(frame: pd.DataFrame) -> pd.DataFrame:
    """The employment geography and industry identifiers of an earnings row: the nation,
    every industry."""
    return frame.assign(geo_level=NATIONAL[0], geography=NATIONAL[1],
                        ind_level=ALL_INDUSTRIES[0], industry=ALL_INDUSTRIES[1])


def earnings_table(cells: pd.DataFrame, cfg: EarningsConfig) -> pd.DataFrame:
    """pseoe_all.csv: one row per cell, the official columns in order. Years after that the
    configuration does not tabulate are not available (-1). The IPEDS counts are not
    available (flag 3) until `with_ipeds_counts` links them. A cell's values of each years
    after go to its row by position (`_cell_rows`), not by an index of its text keys. The
    cells' codes stay categoricals of their text and the flags are int8 (written as the
    text and integers are; at 100m national 509 -> 319 MB)."""
    value_names = [f"p{p}_earnings" for p in cfg.percentiles] + ["grads_earn"]
    out, row_of = _cell_rows(cells)
    restricted = out.pop("restricted").to_numpy(dtype=bool)
    years_after = cells["years_after"].to_numpy()
    published_cells = cells["published"].to_numpy(dtype=bool)
    columns = {}
    for k in YEARS_AFTER:
        mine = np.flatnonzero(years_after == k)
        at = row_of[mine]
        if len(np.unique(at)) != len(at):
            raise ValueError(f"the per-cell summary has a cell twice for {k} years after")
        present = np.zeros(len(out), dtype=bool)
        present[at] = True
        published = np.zeros(len(out), dtype=bool)
        published[at] = published_cells[mine]
        for name in value_names:
            column = np.full(len(out), np.nan)
            column[at] = cells[name].to_numpy()[mine]     # only this years after's rows
            columns[f"y{k}_{name}"] = pd.array(np.where(published, column, np.nan), dtype="Int64")
        status = np.select([published, present | restricted],
                           [STATUS_OK, STATUS_SUPPRESSED], STATUS_NOT_AVAILABLE).astype(np.int8)
        columns[f"status_y{k}_earnings"] = status
        columns[f"status_y{k}_grads_earn"] = status
        columns[f"y{k}_ipeds_count"] = pd.array(np.full(len(out), np.nan), dtype="Int64")
        columns[f"status_y{k}_ipeds_count"] = np.full(len(out), IPEDS_NOT_AVAILABLE, np.int8)
    identifiers = _with_national_all_industries(out)
    columns |= {name: identifiers[name].array for name in identifiers.columns}
    return pd.DataFrame({name: columns[name] for name in layout(PRODUCT).columns}, copy=False)


def _cell_rows(cells: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The cells of the per-cell summary `cells` (its CELL_KEYS and `restricted`, each
    cell's first row) in the order of pseoe_all, and the row of pseoe_all of each row of
    `cells`."""
    cell = cells.groupby(CELL_KEYS, sort=False, observed=True, dropna=False).ngroup().to_numpy()
    _, first = np.unique(cell, return_index=True)   # cell numbers: in order of first rows
    ordered = _sort(cells[CELL_KEYS + ["restricted"]].iloc[first].reset_index(drop=True)
                    .assign(_cell=np.arange(len(first))), [])
    row_of_cell = np.empty(len(first), dtype=np.intp)
    row_of_cell[ordered.pop("_cell").to_numpy()] = np.arange(len(first))
    return ordered, row_of_cell[cell]


PSEOH_BLOCK_ROWS = 1 << 20   # pseoh_all rows made (and schema-checked) at a time


@dataclass(frozen=True)
class HistogramTable:
    """pseoh_all.csv: noisy histograms in long form, for the cells whose values are
    published; the official identifiers, then years_after, bin, its bounds and the noisy
    count. Held as its histograms, one row each, and made a block of rows at a time as it
    is read (`blocks`): a national table is tens of millions of rows, each cell's codes
    repeated once per bin (35.9 million rows, 959 MB at 100 million outcome rows national,
    against 161 MB held as its 1.7 million histograms). `cells`: the
    identifiers and years_after of each histogram, in the table's order, the text codes as
    categories of the same text and each integer column in its smallest integer type;
    `counts`: their noisy counts (histograms x bins); `bins`: one histogram's bin,
    bin_lower and bin_upper. The files are the same as of the table in text and int64
    (their writers give each column its published type, as `check_histogram_table`
    checks it)."""
    cells: pd.DataFrame
    counts: np.ndarray
    bins: pd.DataFrame

    def __len__(self) -> int:
        return self.counts.size

    def blocks(self, rows: int = PSEOH_BLOCK_ROWS) -> Iterator[pd.DataFrame]:
        """The table's rows in whole histograms, about `rows` at a time (at least one
        histogram; one empty block for an empty table), indexed by their row in the table."""
        step = max(rows // len(self.bins), 1)
        for start in range(0, max(len(self.cells), 1), step):
            yield self._rows(start, min(start + step, len(self.cells)))

    def _rows(self, first: int, end: int) -> pd.DataFrame:
        n_bins = len(self.bins)
        cells = self.cells.iloc[first:end]
        rows = pd.DataFrame({name: _each_repeated(cells[name], n_bins) for name in cells.columns},
                            index=pd.RangeIndex(first * n_bins, end * n_bins))
        for name in self.bins.columns:
            rows[name] = np.tile(self.bins[name].to_numpy(), end - first)
        rows["noisy_count"] = self.counts[first:end].reshape(-1)
        return rows


BIN_COLUMNS = ["bin", "bin_lower", "bin_upper"]


def histogram_table(tables: list[NoisyHistograms], cfg: EarningsConfig,
                    cells: pd.DataFrame) -> HistogramTable:
    """pseoh_all of `tables`, whose per-cell summary `cells` holds one row per histogram of
    `tables`, in the same order: its published cell-years, sorted."""
    n_bins = cfg.n_bins
    published = cells.loc[cells["published"].to_numpy(), CELL_KEYS + ["years_after"]]
    ordered = _sort(published.assign(_row=published.index), ["years_after"])  # sort cells, not rows
    rows = ordered.pop("_row").to_numpy()
    identifiers = _with_national_all_industries(ordered)[IDENTIFIERS + ["years_after"]]
    ordered = text_as_categories(identifiers.assign(**{   # the categories its histograms have
        name: identifiers[name].cat.remove_unused_categories()
        for name, dtype in identifiers.dtypes.items() if isinstance(dtype, pd.CategoricalDtype)}))
    ordered = ordered.astype({name: _smallest_integers(ordered[name].to_numpy()).dtype
                              for name in ordered.columns
                              if pd.api.types.is_integer_dtype(ordered[name])})
    bins = pd.DataFrame({name: _smallest_integers(np.asarray(values)) for name, values in
                         zip(BIN_COLUMNS, [np.arange(1, n_bins + 1), cfg.bin_edges,
                                               cfg.bin_upper])})
    return HistogramTable(ordered, _histograms_at(tables, rows, n_bins), bins)


def _smallest_integers(values: np.ndarray) -> np.ndarray:
    """Integer `values` in the smallest integer type that holds them."""
    return pd.to_numeric(values, downcast="integer")


def _histograms_at(tables: list[NoisyHistograms], rows: np.ndarray, n_bins: int) -> np.ndarray:
    """The histograms at `rows` of the tables' histograms one after the other, in the
    smallest integer type that holds every count of the tables, taken from each table in
    place (a national release's histograms of every level are 888 MB: not copied into one
    array first)."""
    counts = [t.counts for t in tables if t.counts.size]
    extremes = np.array([min(c.min() for c in counts), max(c.max() for c in counts)]) \
        if counts else np.zeros(1, np.int64)
    out = np.empty((len(rows), n_bins), dtype=_smallest_integers(extremes).dtype)
    starts = np.cumsum([0] + [len(t.counts) for t in tables])
    which = np.searchsorted(starts, rows, side="right") - 1   # each row's table
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(len(tables) + 1))
    for k, table in enumerate(tables):
        at = order[bounds[k]:bounds[k + 1]]
        out[at] = table.counts[rows[at] - starts[k]]
    return out


def _each_repeated(column: pd.Series, times: int) -> pd.Categorical | np.ndarray:
    """Each value of `column` `times` times in a row; categories as categories of the same
    text."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return pd.Categorical.from_codes(np.repeat(column.cat.codes.to_numpy(), times),
                                         dtype=column.dtype)
    return np.repeat(column.to_numpy(), times)


def categories_as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its categorical columns as their categories' text."""
    return frame.astype({name: dtype.categories.dtype for name, dtype in frame.dtypes.items()
                         if isinstance(dtype, pd.CategoricalDtype)})


def check_histogram_table(pseoh: HistogramTable) -> None:
    """pseoh_all's output schema, on each histogram's identifiers once and on each bin once:
    the schema's checks are row by row, on a row's identifiers or on its bin (the counts are
    only integers), so its verdict on every histogram's first row and on every row of the
    first histogram is its verdict on the whole table (35.9 million rows at 100m national,
    of 21 bins each: 31 s to check row by row). SchemaErrors names a failing row by its
    row in the table."""
    n_bins = len(pseoh.bins)
    first_rows = pseoh.cells.assign(**{name: pseoh.bins[name].iloc[0] for name in BIN_COLUMNS},
                                    noisy_count=pseoh.counts[:, 0])
    first_rows.index = pd.RangeIndex(0, len(first_rows) * n_bins, n_bins)
    check_histogram_rows(first_rows)
    check_histogram_rows(next(pseoh.blocks(rows=1)))   # the first histogram's rows


def check_histogram_rows(pseoh: pd.DataFrame) -> None:
    """pseoh_all's output schema on every row of `pseoh`, PSEOH_BLOCK_ROWS rows at a time
    with their codes as text and their integers as int64, as the file holds them: the
    schema's checks are row by row, so its verdict is that on the whole table, without a
    copy of the whole table (pandera.errors.SchemaErrors names the failing rows by their
    index in `pseoh`)."""
    schema = pseoh_schema()
    for start in range(0, max(len(pseoh), 1), PSEOH_BLOCK_ROWS):
        block = categories_as_text(pseoh.iloc[start:start + PSEOH_BLOCK_ROWS])
        schema.validate(block.astype({name: np.int64 for name, dtype in block.dtypes.items()
                                      if pd.api.types.is_integer_dtype(dtype)}), lazy=True)


def institution_states(tables: list[NoisyHistograms]) -> dict[str, str]:
    """OPEID -> state FIPS code of every institution in the release's earnings cells."""
    pairs = pd.concat([t.cells[["institution", "inst_state"]].astype(str) for t in tables
                       if t.inst_level == "I"]).drop_duplicates()
    return dict(zip(pairs["institution"], pairs["inst_state"]))


def histogram_publication(tables: list[NoisyHistograms], cfg: EarningsConfig,
                          dollar_factor: float = 1.0) -> tuple[HistogramTable, pd.DataFrame]:
    """(pseoh_all, per-cell summary): all that is made of the histograms themselves. The
    summary's codes are categories of their text, each table's made so as it is summarised
    (a 100m national summary: 490 MB as text, 271 MB as categories)."""
    cells = _with_common_categories([text_as_categories(cell_years(t, cfg, dollar_factor))
                                     for t in tables])
    return histogram_table(tables, cfg, cells), cells


def _with_common_categories(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """`frames` one after the other, each categorical column with the categories of all
    (sorted, as `text_as_categories` of the frames' text one after the other has them)."""
    categorical = [name for name, dtype in frames[0].dtypes.items()
                   if isinstance(dtype, pd.CategoricalDtype)] if frames else []
    common = {name: pd.CategoricalDtype(pd.Index(pd.concat(
        [pd.Series(f[name].cat.categories) for f in frames]).unique()).sort_values())
        for name in categorical}
    return pd.concat([f.astype(common) for f in frames], ignore_index=True)


# What the release reads of the per-cell summary once the earnings files are written: the
# documents' variance and suppression tables, the flows' consistency with grads_earn, the
# review request and the audit run's metrics. A 10m national summary: 426 MB -> 99 MB.
KEPT_CELL_COLUMNS = ["agg_level_pseo", "inst_level", "institution", "degree_level",
                     "cip_level", "grad_cohort", "years_after", "noise_terms", "published"]


def text_as_categories(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its text columns as categoricals of that text (sorted: grouped, compared
    and written as the text was); `categories_as_text` undoes it."""
    return frame.astype({name: "category" for name in frame.columns
                         if pd.api.types.is_string_dtype(frame[name])})


def kept_cell_summary(cells: pd.DataFrame) -> pd.DataFrame:
    """The per-cell summary's KEPT_CELL_COLUMNS, its codes as categoricals."""
    return text_as_categories(cells[KEPT_CELL_COLUMNS])


def kept_earnings_table(pseoe: pd.DataFrame) -> pd.DataFrame:
    """pseoe_all as a release keeps it once its file is written (for the state files, the
    folder files, the consistency table and the explorer): every code a categorical and
    every flag int8 (`earnings_table` makes most of them so), the same text in every file
    made of it."""
    return text_as_categories(pseoe).astype({name: np.int8 for name in pseoe.columns
                                             if name.startswith("status_")})


def with_ipeds_counts(pseoe: pd.DataFrame, cfg: ReleaseConfig, ipeds: IpedsCounts,
                      states: dict[str, str]) -> pd.DataFrame:
    """pseoe_all with the IPEDS counts and their flags (public data: no epsilon)."""
    counts = ipeds_counts(pseoe, cfg.cells, ipeds.awards, ipeds.years, states)
    return pseoe.assign(**{name: counts[name] for name in counts.columns})


def recheck_percentiles(pseoe: pd.DataFrame, pseoh: HistogramTable, cfg: EarningsConfig,
                        dollar_factor: float = 1.0) -> tuple[int, int]:
    """Recompute every published percentile and count of pseoe_all from the published
    histograms (pseoh_all's rows, a block at a time), as a user would (percentiles in the
    bins' dollars times `dollar_factor`); return (values compared, values that disagree:
    0 expected)."""
    n_bins = cfg.n_bins
    recomputed = []
    for rows in pseoh.blocks():
        if not (rows["bin"].to_numpy() == np.tile(np.arange(1, n_bins + 1),
                                                  len(rows) // n_bins)).all():
            raise RuntimeError("pseoh_all.csv is not in blocks of bins 1..n per cell")
        counts = rows["noisy_count"].to_numpy().reshape(-1, n_bins)
        values = round_dollars(dollar_factor * protected_percentiles(
            counts, np.array(cfg.bin_edges), np.array(cfg.bin_upper), cfg.percentiles))
        recomputed.append(rows.iloc[::n_bins][IDENTIFIERS + ["years_after"]].assign(
            grads_earn=counts.sum(axis=1),
            **{f"p{p}_earnings": values[:, i] for i, p in enumerate(cfg.percentiles)}))
    recomputed = pd.concat(recomputed, ignore_index=True)
    identifiers = [_distinct_values(recomputed[name]) for name in IDENTIFIERS]
    compared = mismatches = 0
    for k in YEARS_AFTER:
        published = pseoe[pseoe[f"status_y{k}_earnings"] == STATUS_OK]
        mine = recomputed[recomputed["years_after"] == k]
        found = _one_to_one(_identifier_keys(published, identifiers),
                            _identifier_keys(mine, identifiers))
        for name in [f"p{p}_earnings" for p in cfg.percentiles] + ["grads_earn"]:
            theirs = np.where(found >= 0, mine[name].to_numpy("float64")[found], np.nan)
            compared += len(published)
            mismatches += int((published[f"y{k}_{name}"].to_numpy("float64", na_value=np.nan)
                               != theirs).sum())
    return compared, mismatches


def _distinct_values(column: pd.Series) -> pd.Index:
    """The values a column can hold (a categorical's categories)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return pd.Index(column.cat.categories)
    return pd.Index(column.unique())


def _identifier_keys(frame: pd.DataFrame, identifiers: list[pd.Index]) -> np.ndarray:
    """Each row's IDENTIFIERS as one int64, each value by its position in `identifiers`
    (the recheck compares rows without merging their text); -1: a value not among them."""
    return combined_keys([Factorized.of(frame[name]).positions(among)
                          for name, among in zip(IDENTIFIERS, identifiers)],
                         [len(among) for among in identifiers])


def _one_to_one(keys: np.ndarray, others: np.ndarray) -> np.ndarray:
    """The position in `others` of each of `keys` (-1: none, or an unknown key); a key
    twice on either side is an error (a published cell-year is one row, and one histogram)."""
    for side in (keys[keys >= 0], others[others >= 0]):
        if len(np.unique(side)) != len(side):
            raise RuntimeError("pseoe_all.csv or pseoh_all.csv has a cell-year twice")
    if not len(others):
        return np.full(len(keys), -1, np.int64)
    order = np.argsort(others, kind="stable")
    at = found_at(others[order], keys)
    return np.where(at >= 0, order[at], -1)


def _dollar_factor(dollars: DollarYears | None) -> float:
    """Percentiles in the dollars of `dollars.publication_year`; None: in the bins'
    dollars, as releases of earlier versions published them."""
    return float(dollars.factor) if dollars is not None else 1.0


@release_task("build public earnings histograms")
def build_histogram_table(tables: list[NoisyHistograms], cfg: ReleaseConfig,
                          dollars: DollarYears | None) -> tuple[HistogramTable, pd.DataFrame]:
    """pseoh_all, checked against its output schema (`check_histogram_table`), and the
    per-cell summary of `tables` (every level; codes as categoricals: 406 -> 225 MB at 10m
    national), before pseoe_all is built, so that the release can keep only the measured
    histograms from then on (a 10m national release's histograms of every level are
    888 MB). Privacy cost: none."""
    started = time.perf_counter()
    pseoh, cells = histogram_publication(tables, cfg.earnings, _dollar_factor(dollars))
    check_histogram_table(pseoh)
    progress(f"public histograms: pseoh_all {len(pseoh):,} rows "
             f"({time.perf_counter() - started:.1f} s)")
    return pseoh, cells


@release_task("build public earnings tables")
def build_publication_tables(pseoh: HistogramTable, cells: pd.DataFrame, cfg: ReleaseConfig,
                             dollars: DollarYears | None, ipeds: IpedsCounts | None,
                             states: dict[str, str]) -> tuple[pd.DataFrame, list[dict]]:
    """pseoe_all of the per-cell summary `cells`, and the checks run on it and `pseoh`
    (`build_histogram_table`); percentiles in the dollars of `dollars` (`_dollar_factor`);
    IPEDS counts from `ipeds` (None: not available, flag 3, as releases of earlier versions
    had none) and `states` (`institution_states` of the histograms). Privacy cost: none."""
    started = time.perf_counter()
    factor = _dollar_factor(dollars)
    pseoe = earnings_table(cells, cfg.earnings)
    if ipeds is not None:
        pseoe = with_ipeds_counts(pseoe, cfg, ipeds, states)
    compared, mismatches = recheck_percentiles(pseoe, pseoh, cfg.earnings, factor)
    if mismatches:
        raise RuntimeError(f"{mismatches} published values differ from their recomputation "
                           "from the published histograms")
    checks = [
        {"name": "pseoh_all.csv passes its output schema", "result": "passed"},
        {"name": "every published percentile and count of pseoe_all.csv recomputed from "
                 "pseoh_all.csv", "result": f"passed ({compared:,} values, 0 differences)"},
    ]
    progress(f"public tables: pseoe_all {len(pseoe):,} rows, pseoh_all {len(pseoh):,} rows, "
             f"{int((~cells['published']).sum()):,} of {len(cells):,} cell-years suppressed "
             f"({time.perf_counter() - started:.1f} s)")
    return pseoe, checks
