"""The release explorer's data: a release's public tables (pseoe_all, pseoh_all, pseof_all,
pseo_all_institutions.csv, release_notes.md) rearranged into small JavaScript files the page
loads from disk, one per institution or state (`units`) and one of the release's facts and
labels (`release_facts`). Read from the public files only, so nothing internal reaches it
(a release hands over pseof_all's rows as it writes them instead: `FlowCells`).

A published value is its number; a value whose status flag is not 1 is the flag's word
(`SUPPRESSED` for 5, null for -1, "not available"): the page shows words, never flag codes.
Privacy cost: none (the public files, rearranged)."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from pseo_das.errors import PseoDasError
from pseo_das.schemas.distribution import ALL_FOLDER, open_table, table_path
from pseo_das.tasks.inputs.row_files import MappedZeros
from pseo_das.tasks.publication.document_context import HISTOGRAMS_FILE
from pseo_das.schemas.pseo_layout import (ALL_COHORTS, ALL_INDUSTRIES, FLAG_PUBLISHED,
                                          FLAG_SUPPRESSED, SCHEMA_DIR, Product, layout,
                                          text_column)

INSTITUTIONS = "pseo_all_institutions.csv"
NOTES = "release_notes.md"
VERSION = "version_pseo.txt"
YEARS_AFTER = (1, 5, 10)
PERCENTILES = (25, 50, 75)
SUPPRESSED = "s"          # a value whose status flag is 5: shown as "suppressed"
NATION = ("N", "00")
# the pseoe columns of one cell, in the order of its array in a unit file
EARNINGS_FIELDS = tuple(f"y{k}_{m}" for k in YEARS_AFTER for m in
                        [f"p{p}_earnings" for p in PERCENTILES] + ["grads_earn"])
IPEDS_FIELDS = tuple(f"y{k}_ipeds_count" for k in YEARS_AFTER)


class ExplorerInputError(PseoDasError):
    """A file the explorer is made from is missing or not as a release writes it."""

    quotes_records = False       # public files and documents only


UNREAD = ("agg_level_pseo", "cip_level")     # implied by the other identifiers


def _read_codes(path: Path, identifiers: list[str]) -> pd.DataFrame:
    """A public table with its identifiers as categories of text and its values as numbers
    (NaN: empty)."""
    with open_table(path) as text:
        header = text.readline().strip().split(",")
    types = {c: pa.dictionary(pa.int32(), pa.string()) for c in identifiers}
    table = pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
        column_types=types, strings_can_be_null=False,
        include_columns=[c for c in header if c not in UNREAD]))
    return table.to_pandas()


def _as_read(frame: pd.DataFrame, identifiers: list[str]) -> pd.DataFrame:
    """`_read_codes` of the CSV file written from `frame` (a table of integers and text
    codes: pseoh_all, pseoe_all), without reading it: the identifiers as categories of
    the text the file holds (`text_column`), in the order they first come, the integers as
    they are (not copied: a national pseoh_all is millions of rows; pseoe_all's values stay
    nullable integers where the file reads back floats, the same numbers)."""
    frame = frame[[c for c in frame.columns if c not in UNREAD]]
    return frame.assign(**{c: _code_as_read(frame[c]) for c in frame.columns if c in identifiers})


def _code_as_read(column: pd.Series) -> pd.Categorical:
    """An identifier column as `_read_codes` reads it back: text categories renumbered in
    the order they first come (`_first_come`: from the codes, not a string per row), other
    values by their CSV text (`text_column`), dictionary-encoded in that order."""
    if _text_categories(column):
        return _first_come(column)
    return text_column(pa.array(column)).dictionary_encode().to_pandas().array


def _find(public: Path, name: str) -> Path:
    try:
        return table_path(public, name, ALL_FOLDER if name == VERSION else None)
    except FileNotFoundError as exc:
        raise ExplorerInputError(f"{exc}; the explorer is made from a release's public "
                                   "files") from None


NOT_AVAILABLE_CODE, SUPPRESSED_CODE = -1, -5   # in the integer arrays, before encoding


def flagged(values: pd.Series, status: pd.Series) -> np.ndarray:
    """Integers: the value where its flag is 1, SUPPRESSED_CODE where 5, NOT_AVAILABLE_CODE
    otherwise. Published values are counts and dollars, never negative (checked)."""
    flags = status.to_numpy()
    published = flags == int(FLAG_PUBLISHED)
    numbers = values.to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(numbers[published]).any() or (numbers[published] < 0).any():
        raise ExplorerInputError(f"{values.name}: a published value is empty or negative")
    out = np.where(published, np.nan_to_num(numbers), NOT_AVAILABLE_CODE).astype(np.int64)
    out[flags == int(FLAG_SUPPRESSED)] = SUPPRESSED_CODE
    return out


def flagged_column(values: pa.ChunkedArray, status: pa.ChunkedArray, name: str) -> np.ndarray:
    """`flagged` of Arrow columns (integers, null where empty; flags), from their buffers:
    a null taken as NOT_AVAILABLE_CODE, a published value is empty or negative exactly
    when fewer values than are published are left not negative."""
    flags = status.to_numpy()
    published = flags == int(FLAG_PUBLISHED)
    out = np.where(published, pc.fill_null(values, NOT_AVAILABLE_CODE).to_numpy(),
                   NOT_AVAILABLE_CODE)
    if np.count_nonzero(out >= 0) != np.count_nonzero(published):
        raise ExplorerInputError(f"{name}: a published value is empty or negative")
    out[flags == int(FLAG_SUPPRESSED)] = SUPPRESSED_CODE
    return out


def _status_of(product: Product) -> dict[str, str]:
    return {i.name: i.status_flag for i in layout(product).indicators}


CELL = ("degree_level", "cipcode", "grad_cohort")


def _cell_key(frame: pd.DataFrame) -> pd.Series:
    """"05|11.07|2016": a cell of a unit (degree level, field, cohort)."""
    return frame[CELL[0]].astype(str) + "|" + frame[CELL[1]].astype(str) + "|" + \
        frame[CELL[2]].astype(str)


def _positions(column: pd.Series, order: list[str]) -> np.ndarray:
    """The index in `order` of each value of a categorical column; ValueError if one is
    not in it."""
    where = {code: n for n, code in enumerate(order)}
    of_category = np.array([where.get(c, -1) for c in column.cat.categories] + [-1])
    positions = of_category[column.cat.codes.to_numpy()]
    if (positions < 0).any():
        raise ExplorerInputError(f"{column.name}: a code outside {order}")
    return positions


def _origins(frame: pd.DataFrame, columns: tuple[str, ...]) -> tuple[np.ndarray, list[tuple]]:
    """(each row's origin number, the origins as tuples of codes) of the combination of
    categorical `columns`."""
    codes = [frame[c].cat.codes.to_numpy().astype(np.int64) for c in columns]
    sizes = [len(frame[c].cat.categories) for c in columns]
    combined = np.ravel_multi_index(codes, sizes) if codes[0].size else np.zeros(0, np.int64)
    unique, inverse = np.unique(combined, return_inverse=True)
    parts = np.unravel_index(unique, sizes)
    names = [np.asarray(frame[c].cat.categories)[p] for c, p in zip(columns, parts)]
    return inverse, list(zip(*names))


def _coded(column: pd.Series) -> pd.Categorical:
    """A column of codes as categories of their text (as the explorer reads them)."""
    return column.array if isinstance(column.dtype, pd.CategoricalDtype) \
        else pd.Categorical(column.astype(str))


class UnitTexts(Mapping):
    """unit -> its cells in one part of the explorer (earnings, flows), a unit's made from
    its JSON text (`text`) when it is asked for. `_units`: unit -> what `text` reads."""
    _units: dict

    def text(self, unit: str) -> str:
        """The JSON text (`json_text`) of `self[unit]`."""
        raise NotImplementedError

    def __getitem__(self, unit: str) -> dict:
        return json.loads(self.text(unit))

    def __contains__(self, unit) -> bool:      # not Mapping's, which makes the unit's cells
        return unit in self._units

    def __iter__(self) -> Iterator[str]:
        return iter(self._units)

    def __len__(self) -> int:
        return len(self._units)


TEXT_BLOCK_ROWS = 1 << 17     # pseoe rows whose cells' text is made at a time


def _cells_text(pseoe: pd.DataFrame) -> pa.Array:
    """Each row's cell as JSON text (`EarningsUnits`): "[3,40001,\"s\",null,...,\"1\"]"."""
    status = _status_of(Product.PSEOE)
    pieces = [pc.cast(pa.array(pseoe["grad_cohort_years"].to_numpy(np.int64)), pa.string())]
    pieces += [_values_text(flagged(pseoe[f], pseoe[status[f]]))
               for f in EARNINGS_FIELDS + IPEDS_FIELDS]
    pieces += [pc.binary_join_element_wise(     # the flags as text: '"1"'
        '"', pc.cast(pa.array(pseoe[status[f]].to_numpy(np.int64)), pa.string()), '"', "")
        for f in IPEDS_FIELDS]
    return pc.binary_join_element_wise("[", pc.binary_join_element_wise(*pieces, ","), "]", "")


class EarningsUnits(UnitTexts):
    """unit -> cell key ("05|11.07|2016") -> [cohort years, EARNINGS_FIELDS..., IPEDS
    counts..., IPEDS flags...] of pseoe_all (earnings and counts as the page shows them,
    `_values_text`; the IPEDS flags as codes 1-4, which the page names from
    label_flags_ipeds_count; a key twice in a unit: its last row). Held as each cell's JSON
    text (Arrow), a unit's made when it is asked for: memory holds one unit's lists, not
    every unit's (a national release's were 0.8 GB of Python lists). `text`: a unit's JSON
    text (`json_text` of its cells), which the explorer's files are written from."""

    def __init__(self, pseoe: pd.DataFrame):
        unit, *key = (_coded(pseoe[c]) for c in ("institution",) + CELL)
        cells = pd.DataFrame({"unit": unit.codes, "key": np.ravel_multi_index(
            [k.codes for k in key], [max(len(k.categories), 1) for k in key])})
        rows = cells.drop_duplicates(keep="last").index.to_numpy()   # as a dict keeps the last
        rows = rows[np.argsort(cells["unit"].to_numpy()[rows], kind="stable")]
        text = pa.chunked_array([_cells_text(pseoe.iloc[start:start + TEXT_BLOCK_ROWS])
                                 for start in range(0, len(pseoe), TEXT_BLOCK_ROWS)], pa.string())
        taken = pa.array(rows)
        self._text = text.take(taken).combine_chunks()
        self._keys = pc.binary_join_element_wise(
            *[pa.array(k.categories.astype(str).to_numpy(object), pa.string()).take(
                pa.array(k.codes).take(taken)) for k in key], "|")
        units = unit.codes[rows]
        edges = np.flatnonzero(np.r_[True, units[1:] != units[:-1], True]) if len(units) \
            else np.zeros(1, np.int64)
        self._units = {str(unit.categories[units[a]]): (int(a), int(b))
                       for a, b in zip(edges[:-1], edges[1:])}

    def text(self, unit: str) -> str:
        a, b = self._units[unit]
        return _object(dict(zip(self._keys[a:b].to_pylist(), self._text[a:b].to_pylist())))


def bins_of(pseoh: pd.DataFrame) -> list[list[int]]:
    """[[lower, upper] per bin]: the same for every cell (the bins are public)."""
    bins = pseoh[["bin", "bin_lower", "bin_upper"]].drop_duplicates().sort_values("bin")
    if bins["bin"].duplicated().any():
        raise ExplorerInputError(f"{HISTOGRAMS_FILE}: the bin edges differ between cells")
    return bins[["bin_lower", "bin_upper"]].astype(int).to_numpy().tolist()


HISTOGRAM = ["institution", "degree_level", "cipcode", "grad_cohort", "years_after"]


def _sort_codes(column: pd.Series) -> np.ndarray:
    """Integers that sort as `sort_values` sorts the column (a categorical by its
    categories' order, integers as they are, other values by value)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy()
    if pd.api.types.is_integer_dtype(column.dtype):
        return column.to_numpy()
    return pd.factorize(column, sort=True)[0]


class HistogramUnits(Mapping):
    """unit -> "cell key|years after" -> the noisy counts of the bins, in bin order, of
    pseoh_all's rows (as read: `_read_codes`, `_as_read`); a unit's lists are made when it
    is asked for: memory holds the counts as one array, not the table (a national release's
    pseoh_all is millions of rows). `bins`: `bins_of` the rows; `rows`: how many."""

    def __init__(self, pseoh: pd.DataFrame):
        # the rows in histogram order, by bin: each histogram's rows follow each other
        codes = [_sort_codes(pseoh[c]) for c in HISTOGRAM]
        order = np.lexsort([_sort_codes(pseoh["bin"])] + codes[::-1]) if len(pseoh) \
            else np.zeros(0, np.int64)
        new = np.ones(len(order), dtype=bool)   # a histogram's first row: a code changes
        if len(order):
            new[1:] = False
            for code in codes:     # a column at a time: not a copy of them all
                ordered = code[order]
                new[1:] |= ordered[1:] != ordered[:-1]
        starts = np.flatnonzero(new)
        self._index(bins_of(pseoh), pseoh["noisy_count"].to_numpy(dtype=np.int64)[order],
                    np.r_[starts, len(order)], pseoh.iloc[order[starts]])

    @classmethod
    def of_histograms(cls, cells: pd.DataFrame, counts: np.ndarray,
                      bins: list[list[int]]) -> "HistogramUnits":
        """The units of a table of `counts` (histograms x bins, `bins`: `bins_of` its rows)
        whose histograms' identifiers are the rows of `cells` (as read), in the table's
        order: the same as of the table's rows, sorting histograms, not rows."""
        units = cls.__new__(cls)
        order = np.lexsort([_sort_codes(cells[c]) for c in HISTOGRAM][::-1]) if len(cells) \
            else np.zeros(0, np.int64)
        units._index(bins, counts[order].reshape(-1),
                     np.arange(len(order) + 1) * counts.shape[1], cells.iloc[order])
        return units

    def _index(self, bins: list[list[int]], counts: np.ndarray, bounds: np.ndarray,
               first: pd.DataFrame) -> None:
        """`counts`: every histogram's counts one after the other, histogram n's from
        bounds[n] to bounds[n + 1]; `first`: each histogram's identifiers."""
        self.bins, self.rows = bins, len(counts)
        self._counts, self._bounds = counts, bounds
        # each histogram's key by its number among the distinct keys (a 100m national
        # release's 1.7 million keys as strings, 96 MB more held; distinct: 5,262)
        columns = first[list(CELL) + ["years_after"]]
        self._key = columns.groupby(list(columns.columns), sort=False, observed=True,
                                    dropna=False).ngroup().to_numpy(np.int32)
        _, at = np.unique(self._key, return_index=True)
        distinct = columns.iloc[at]
        self._key_text = (_cell_key(distinct) + "|"
                          + distinct["years_after"].astype(str)).to_numpy(dtype=object)
        self._units: dict[str, tuple[int, int]] = {}     # unit -> its histograms' numbers
        for n, unit in enumerate(first["institution"].astype(str)):
            low, _ = self._units.get(unit, (n, n))
            self._units[unit] = (low, n + 1)

    def __getitem__(self, unit: str) -> dict[str, list[int]]:
        low, high = self._units[unit]
        bounds = self._bounds[low:high + 1].tolist()
        return {key: self._counts[a:b].tolist() for key, a, b in zip(
            self._key_text[self._key[low:high]].tolist(), bounds[:-1], bounds[1:])}

    def __contains__(self, unit) -> bool:
        return unit in self._units

    def __iter__(self) -> Iterator[str]:
        return iter(self._units)

    def __len__(self) -> int:
        return len(self._units)


def written_histograms(cells: pd.DataFrame, counts: np.ndarray,
                       bins: pd.DataFrame) -> HistogramUnits:
    """The explorer's histograms of the table pseoh_all is written from (its histograms'
    identifiers `cells`, in its order; their `counts`, histograms x bins; one histogram's
    `bins`), as `explorer_data` would read them from the file (then the table need not be
    kept for the explorer)."""
    return HistogramUnits.of_histograms(
        _as_read(cells[HISTOGRAM], list(layout(Product.PSEOE).identifiers)), counts,
        bins_of(bins) if len(cells) else [])


def _text_categories(column: pd.Series) -> bool:
    """Whether `column` holds text codes as categories (pseoh_all in a release)."""
    return isinstance(column.dtype, pd.CategoricalDtype) and \
        pd.api.types.is_string_dtype(column.dtype.categories)


def _first_come(column: pd.Series) -> pd.Categorical:
    """`_as_read` of a column of text categories, from its codes: its categories in the
    order they first come (the text is its own CSV text), not a string per row."""
    codes = column.cat.codes.to_numpy()
    firsts = pd.unique(codes)
    renumbered = np.empty(len(column.cat.categories), dtype=codes.dtype)
    renumbered[firsts] = np.arange(len(firsts), dtype=codes.dtype)
    return pd.Categorical.from_codes(renumbered[codes],
                                     categories=column.cat.categories[firsts])


@dataclass(frozen=True)
class FlowColumns:
    """The destinations of an origin cell's flows, in the order of its arrays: the nation
    (all industries, then each sector), then each division likewise."""
    sectors: list[str]
    divisions: list[str]

    @property
    def destinations(self) -> list[tuple[str, str, str]]:
        """Every (geo_level, geography, industry): a `sectors` index of a unit file's flows."""
        industries = [ALL_INDUSTRIES] + self.sectors
        return [(*NATION, i) for i in industries] + \
            [("D", d, i) for d in self.divisions for i in industries]


def flow_cells(pseof: pd.DataFrame, columns: FlowColumns) -> "FlowUnits":
    """unit -> cell key -> {"y1": {"emp": [value per national destination and per division
    (all industries)], "sectors": [destination index, value, ...] for the division x sector
    flows that are not 0, "instate": [value per national destination], "nme": value}, ...},
    values as the page shows them (`_values_text`): of pseof_all as read (`FlowCells`
    gathers the same from its rows as they are written)."""
    cells = FlowCells(columns)
    codes, origins = _origins(pseof, ("institution",) + CELL)
    cells.add(origins, codes, cells.where(pseof["geography"], pseof["industry"]), pseof)
    return cells.units()


def _text(column: pd.Series | pa.ChunkedArray) -> list[str]:
    """The values as a CSV file of them holds them (`pseo_layout.text_column`)."""
    return text_column(column if isinstance(column, pa.ChunkedArray) else pa.array(column)
                       ).to_pylist()


class FlowCells:
    """The explorer's flows (`flow_cells`) gathered block by block from pseof_all's rows:
    each origin cell's values by destination (`columns`), as `flagged` integers. A
    release hands it the rows as it writes them (`add_rows`), so the explorer does not
    read pseof_all back; `cipcodes` and `rows` are what the release facts say of it."""

    def __init__(self, columns: FlowColumns, origins: int = 0):
        self.columns = columns
        self.industries = [ALL_INDUSTRIES] + columns.sectors
        self.geographies = [NATION[1]] + columns.divisions
        self.width = len(self.industries)
        self.n_destinations = self.width * len(self.geographies)
        self._destination = {(geography, industry): n for n, (_, geography, industry)
                             in enumerate(columns.destinations)}
        self.cipcodes: set[str] = set()
        self.rows = 0
        self._origin_row: dict[str, int] = {}
        # per origin, per years after: emp by destination, instate by national
        # destination, nme, each stored as value - NOT_AVAILABLE_CODE (0: pseof_all has no
        # row). Room for `origins` origin cells at first (the number expected: in a file
        # mapped into memory, `row_files.MappedZeros`, whose pages go back to the system
        # after each block of rows; a national release's are 0.86 GB), more made as needed.
        shape = (origins, len(YEARS_AFTER), self.n_destinations + self.width + 1)
        self._mapped = MappedZeros(shape, np.int32) if origins else None
        self._values = np.zeros(shape, np.int32) if self._mapped is None else self._mapped.array

    def where(self, geography: pd.Series, industry: pd.Series) -> np.ndarray:
        """The destination index (`FlowColumns.destinations`) of each row's geography and
        industry (categorical columns)."""
        return _positions(geography, self.geographies) * self.width \
            + _positions(industry, self.industries)

    def add_rows(self, rows: pa.Table, per_cell: int) -> None:
        """pseof rows (`division_flows.part_table`) of whole origin cells, `per_cell` rows
        each, every cell's rows to the same destinations in the same order
        (`division_flows.pseof_chunks`). The codes are taken as the CSV file holds them
        (Arrow's text of each value), the values from the Arrow columns (`flagged_column`):
        only the columns the explorer shows (of a file read back, `add` checks them all)."""
        if not rows.num_rows:
            return
        first = rows.select(("institution",) + CELL).take(np.arange(0, rows.num_rows, per_cell))
        keys = [text_column(column) for column in first.columns]
        self.cipcodes.update(pc.unique(keys[2]).to_pylist())
        at = self._rows(pc.binary_join_element_wise(*keys, "|").to_pylist())[:, None]
        self.rows += rows.num_rows
        pattern = self._pattern(rows, per_cell)
        national, total = np.flatnonzero(pattern < self.width), np.flatnonzero(pattern == 0)
        shown = {"grads_emp": (np.arange(per_cell), pattern),     # columns of a cell's rows,
                 "grads_emp_instate": (national, self.n_destinations + pattern[national]),
                 "grads_nme": (total, -1)}                        # their places in _values
        status = _status_of(Product.PSEOF)
        for k in YEARS_AFTER:
            for measure, (columns, places) in shown.items():
                if len(columns):
                    f = f"y{k}_{measure}"
                    values = flagged_column(rows[f], rows[status[f]], f).reshape(-1, per_cell)
                    self._store(k, at, places,
                                values if len(columns) == per_cell else values[:, columns])
        self._release()

    def _pattern(self, rows: pa.Table, per_cell: int) -> np.ndarray:
        """The destination index of each of a cell's rows (the first cell's geography and
        industry)."""
        cell = zip(*(_text(rows[c][:per_cell]) for c in ("geography", "industry")))
        try:
            return np.array([self._destination[destination] for destination in cell], np.int64)
        except KeyError as exc:
            raise ExplorerInputError(f"geography and industry {exc}: not a destination of "
                                     f"{self.columns}") from None

    def add(self, origins: list[tuple], of_row: np.ndarray, where: np.ndarray,
            rows: pd.DataFrame) -> None:
        """Rows of pseof_all: `origins` (institution and CELL codes), each row's origin
        (index in `origins`) and destination (`where`)."""
        self.rows += len(rows)
        at = self._rows(["|".join(origin) for origin in origins])[of_row]
        status = _status_of(Product.PSEOF)
        national, total = where < self.width, where == 0
        for k in YEARS_AFTER:
            emp, instate, nme = (flagged(rows[f"y{k}_{m}"], rows[status[f"y{k}_{m}"]])
                                 for m in ("grads_emp", "grads_emp_instate", "grads_nme"))
            self._store(k, at, where, emp)
            self._store(k, at[national], self.n_destinations + where[national], instate[national])
            self._store(k, at[total], -1, nme[total])
        self._release()

    def _store(self, k: int, at: np.ndarray, places, values: np.ndarray) -> None:
        """`flagged` values of years after `k` of origins (rows of `_values`) `at` to their
        destinations (`places` in a years-after's values)."""
        stored = values - NOT_AVAILABLE_CODE
        if stored.size and stored.max() > np.iinfo(np.int32).max:
            raise ExplorerInputError(f"y{k}: a published flow is not a count of graduates")
        self._values[at, YEARS_AFTER.index(k), places] = stored

    def _rows(self, origins: list[str]) -> np.ndarray:
        """The row of `_values` of each origin ("institution|degree level|cipcode|cohort"),
        a new origin's the next (room made for twice as many when it is full)."""
        known = self._origin_row
        rows = np.array([known.setdefault(origin, len(known)) for origin in origins], np.int64)
        if len(known) > len(self._values):
            more = np.zeros_like(self._values, shape=(
                max(len(known), 2 * len(self._values), 64) - len(self._values),)
                + self._values.shape[1:])
            self._values = np.concatenate([self._values, more])     # in memory
            self._mapped = None
        return rows

    def _release(self) -> None:
        """The mapped values' pages given back to the system (they stay in their file)."""
        if self._mapped is not None:
            self._mapped.release()

    def units(self) -> "FlowUnits":
        """unit -> cell key -> the cell's flows (`flow_cells`), each unit's made when it is
        asked for (`FlowUnits`)."""
        return FlowUnits(self)

    def cells_text(self, rows: list[int]) -> list[str]:
        """The JSON text (`json_text`) of the flows (`flow_cells`) of each origin cell `rows`
        (in `_values`), written from the integers without Python lists of them."""
        width, n_destinations = self.width, self.n_destinations
        totals = list(range(0, n_destinations, width))                  # all industries
        sector_columns = np.array([c for c in range(width, n_destinations) if c % width])
        values = self._values[rows] + NOT_AVAILABLE_CODE
        self._release()
        years = {}
        for j, k in enumerate(YEARS_AFTER):
            emp = values[:, j, :n_destinations]
            sectors = emp[:, sector_columns]
            at, columns = np.nonzero(sectors)             # the flows that are not 0
            pairs = np.stack([sector_columns[columns], sectors[at, columns]], axis=1)
            years[f"y{k}"] = _objects({
                "emp": _arrays(emp[:, totals[:1] + list(range(1, width)) + totals[1:]]),
                "sectors": _arrays(pairs, 2 * np.searchsorted(at, np.arange(len(rows) + 1))),
                "instate": _arrays(values[:, j, n_destinations:-1]),
                "nme": _values_text(values[:, j, -1])})
        return _objects(years).to_pylist()


def _values_text(numbers: np.ndarray) -> pa.Array:
    """The JSON text of each `flagged` integer as the page shows it: the number where its
    flag is 1 ("12"), SUPPRESSED where 5 ('"s"'), "null" otherwise (not available)."""
    numbers = pa.array(numbers.ravel())
    shown = pc.if_else(pc.equal(numbers, SUPPRESSED_CODE), json.dumps(SUPPRESSED), "null")
    return pc.if_else(pc.less(numbers, 0), shown, pc.cast(numbers, pa.string()))


def _arrays(numbers: np.ndarray, bounds: np.ndarray | None = None) -> pa.Array:
    """The JSON text of arrays of `flagged` integers (`_values_text`), "[1,\"s\",null]": each
    row of `numbers`, or its values cut at `bounds` (offsets into them, one more than
    arrays)."""
    if bounds is None:
        bounds = np.arange(0, numbers.size + 1, numbers.shape[-1])
    arrays = pa.ListArray.from_arrays(pa.array(bounds, pa.int64()), _values_text(numbers))
    return pc.binary_join_element_wise("[", pc.binary_join(arrays, ","), "]", "")


def _objects(members: dict[str, pa.Array]) -> pa.Array:
    """The JSON text of objects, one per row of `members` (key -> the text of each row's
    value), keys sorted as json.dumps' sort_keys sorts them."""
    pieces: list = []
    for n, key in enumerate(sorted(members)):
        pieces += [("{" if n == 0 else ",") + json.dumps(key) + ":", members[key]]
    return pc.binary_join_element_wise(*pieces, "}", "")


def _object(members: Mapping[str, str]) -> str:
    """`_objects` of one object."""
    return "{" + ",".join(f"{json.dumps(key)}:{members[key]}" for key in sorted(members)) + "}"


class FlowUnits(UnitTexts):
    """unit -> cell key -> the cell's flows (`flow_cells`) of a `FlowCells`, a unit's made
    when it is asked for: memory holds one unit's, not every unit's (a national release's
    were several GB of Python lists at once in "write release files"). `text`: a unit's as
    JSON text, which the explorer's files are written from."""

    def __init__(self, cells: FlowCells):
        self._cells = cells
        self._units: dict[str, tuple[list[int], list[str]]] = {}
        for n, origin in enumerate(cells._origin_row):
            unit, cell = origin.split("|", 1)
            rows, keys = self._units.setdefault(unit, ([], []))
            rows.append(n)
            keys.append(cell)

    def text(self, unit: str) -> str:
        rows, keys = self._units[unit]
        return _object(dict(zip(keys, self._cells.cells_text(rows))))


def labels(name: str, code: str = "", keep=None) -> dict[str, str]:
    """code -> label of one of the schema's label files (stripped)."""
    frame = pd.read_csv(SCHEMA_DIR / name, dtype=str, keep_default_na=False,
                        encoding="utf-8-sig").apply(lambda c: c.str.strip())
    code = code or frame.columns[0]
    if keep is not None:
        frame = frame[frame[code].isin(keep)]
    return dict(zip(frame[code], frame["label"]))


def release_id(notes: str) -> str | None:
    """The release id the release notes' title names."""
    title = re.match(r"# PSEO release (\S+): release notes", notes)
    return title.group(1) if title else None


def dollar_years(notes: str) -> dict[str, str | None]:
    """The publication's and the bins' dollar years as the release notes state them."""
    published = re.search(r"are in \*\*(\d{4}) dollars\*\*", notes)
    bins = re.search(r"\*\*(\d{4}) dollars\*\* \(technical appendix", notes)
    return {"published": published.group(1) if published else None,
            "bins": bins.group(1) if bins else None}


class UnitData(Mapping):
    """unit -> its data file's content, {"earnings": ..., "histograms": ..., "flows": ...}
    (`parts`, each unit -> its cells; {} where a part has none), made when it is asked for:
    the flows of one unit at a time (`FlowUnits`)."""

    def __init__(self, units: list[str], parts: dict[str, Mapping[str, dict]]):
        self._units, self._known, self._parts = units, set(units), parts

    def part(self, name: str) -> Mapping[str, dict]:
        """unit -> the cells of one part (`earnings`, `histograms` or `flows`), made when
        asked for; units without such cells are left out."""
        return self._parts[name]

    def __getitem__(self, unit: str) -> dict[str, dict]:
        if unit not in self._known:
            raise KeyError(unit)
        return {name: part.get(unit, {}) for name, part in self._parts.items()}

    def text(self, unit: str) -> str:
        """The JSON text (`json_text`) of `self[unit]`: its flows' written from their
        integers (`FlowUnits.text`)."""
        if unit not in self._known:
            raise KeyError(unit)
        return _object({name: part.text(unit) if isinstance(part, UnitTexts) and unit in part
                        else json_text(part.get(unit, {}))
                        for name, part in self._parts.items()})

    def __iter__(self) -> Iterator[str]:
        return iter(self._units)

    def __len__(self) -> int:
        return len(self._units)


@dataclass(frozen=True)
class ExplorerData:
    """The explorer's data files: `facts` (release.js) and one file per unit."""
    facts: dict
    units: UnitData


def explorer_data(public: Path, pseof_flows: FlowCells | None = None,
                  pseoh: HistogramUnits | None = None,
                  pseoe_written: pd.DataFrame | None = None) -> ExplorerData:
    """Read a release's public folder and arrange it for the explorer. `pseof_flows`:
    pseof_all's flows as the release gathered them while writing it (then pseof_all is
    not read); `pseoh`: the `written_histograms` of the table pseoh_all was written from
    (then it is not read); `pseoe_written`: the table pseoe_all was written from (then it
    is not read: `_as_read` of it, not a copy)."""
    public = Path(public)
    identifiers = list(layout(Product.PSEOE).identifiers)
    pseoe = _read_codes(_find(public, Product.PSEOE.file_name), identifiers) \
        if pseoe_written is None else _as_read(pseoe_written, identifiers)
    histograms = pseoh if pseoh is not None else HistogramUnits(
        _read_codes(_find(public, HISTOGRAMS_FILE), identifiers))
    if pseof_flows is None:
        pseof = _read_codes(_find(public, Product.PSEOF.file_name), identifiers)
        columns = FlowColumns(sorted(set(pseof["industry"].cat.categories) - {ALL_INDUSTRIES}),
                              sorted(set(pseof["geography"].cat.categories) - {NATION[1]}))
        flows = flow_cells(pseof, columns)
        pseof_cipcodes, pseof_rows = set(pseof["cipcode"].cat.categories), len(pseof)
    else:
        columns, flows = pseof_flows.columns, pseof_flows.units()
        pseof_cipcodes, pseof_rows = pseof_flows.cipcodes, pseof_flows.rows
    sectors, divisions = columns.sectors, columns.divisions
    institutions = pd.read_csv(_find(public, INSTITUTIONS), dtype=str, keep_default_na=False)
    notes_path = public / NOTES
    notes = notes_path.read_text() if notes_path.is_file() else ""
    version_lines = []   # a release id that names no quarter writes no version_pseo.txt
    if (public / ALL_FOLDER / VERSION).is_file():
        with open_table(_find(public, VERSION)) as versions:
            version_lines = versions.read().splitlines()
    earnings = EarningsUnits(pseoe)
    state_rows = pseoe[pseoe["inst_level"] == "S"]
    states = sorted(set(state_rows["institution"].astype(str)) | set(institutions["statefips"]))
    fips = labels("label_fipsnum.csv", keep=states)
    postal = dict(zip(institutions["statefips"], institutions["institution_state"]))
    units = sorted(set(earnings) | set(histograms) | set(flows))
    facts = {
        "release": release_id(notes),
        "version": version_lines,
        "dollars": dollar_years(notes),
        "states": [{"fips": s, "name": fips.get(s, s), "postal": postal.get(s, "")}
                   for s in states],
        "institutions": [{"id": r.institution, "name": r.label, "state": r.statefips}
                         for r in institutions.itertuples(index=False)],
        "units": units,
        "earnings_fields": list(EARNINGS_FIELDS), "ipeds_fields": list(IPEDS_FIELDS),
        "years_after": list(YEARS_AFTER), "percentiles": list(PERCENTILES),
        "all_cohorts": ALL_COHORTS,
        "bins": histograms.bins,
        "sectors": sectors, "divisions": divisions,
        "flow_destinations": [list(d) for d in columns.destinations],
        "labels": {
            "degree": labels("label_degree_level.csv"),
            "cip": labels("label_cipcode.csv", keep=set(pseoe["cipcode"].cat.categories)
                          | pseof_cipcodes),
            "industry": labels("label_industry.csv", keep=[ALL_INDUSTRIES] + sectors),
            "division": labels("label_geography_division.csv", keep=divisions),
            "flag": labels("label_flags.csv"),
            "ipeds_flag": labels("label_flags_ipeds_count.csv"),
        },
        "rows": {"pseoe": len(pseoe), "pseoh": histograms.rows, "pseof": pseof_rows},
    }
    return ExplorerData(facts, UnitData(units, {"earnings": earnings, "histograms": histograms,
                                                "flows": flows}))


def json_text(value) -> str:
    """Deterministic JSON text (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(',', ':'))


def script(name: str, text: str) -> str:
    """A data file: a script that hands the value of the JSON `text` to the page (`PSEO.add`):
    pages opened from disk may load scripts but not fetch files."""
    return f"PSEO.add({json.dumps(name)},{text});\n"
