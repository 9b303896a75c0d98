"""The layout of the official PSEO public-use files, `pseoe_all.csv` and `pseof_all.csv`,
as the LEHD Public Use Schema V4.14.0 defines it, and a validator of a release's public folder.

Everything comes from the schema's own files, shipped unchanged in
`pseo_das/reference/lehd-schema-v4.14.0/` (see its README), except the rules the schema
document (`lehd_public_use_schema.asciidoc`) states only in prose, which are the constants
below, each with its source:

* columns: the identifiers (`lehd_identifiers_pseo.csv`), then the product's indicators in
  order (`variables_pseoe.csv` / `variables_pseof.csv`), then their status flags in order
  of first appearance (indicators share a flag: the three earnings percentiles of a year);
* a row's `agg_level_pseo` is a level of `label_agg_level_pseo.csv` flagged 1 for the
  product, and its identifiers are as that level says (cip / inst / geo / ind level,
  `by_grad_cohort`, `by_degree_level`); every level flagged for the product appears;
* status flags: "Currently, the J2J and PSEO tables only contain status flags '-1', '1',
  '5'"; the IPEDS counts' flags take the values of `label_flags_ipeds_count.csv`. A value is
  published exactly when its flag says so: 1 (OK) of the standard flags; 1, 2 and 4 of the
  IPEDS flags (as reported, edited, partially missing: "the counts are released but
  flagged"), not 3 (not available);
* "Restricted 4-Digit CIP Tabulations in Earnings Data (PSEOE)": degree levels 07 and 17 at
  4-digit CIP have rows, but every measure is suppressed (standard flags 5; the IPEDS counts'
  flag 3, not available, the only IPEDS flag that withholds a count), every value empty;
* grad_cohort 0000 for all cohorts; grad_cohort_years 3 for bachelor's degrees (05), 5 for
  every other degree level ("will take a value (3,5)");
* `y1/y5/y10_grads_nme` (non-employed or marginally employed graduates) is a measure of the
  origin, not of a destination: the real pseof files carry it on the all-industries
  national rows of each origin only (geo_level N, ind_level A: agg levels 40 and 46 of
  institution x 2-digit CIP, ...; empty on 99.7% of the rows of the real 2022 pseof_all)
  and leave it empty on the sector and division rows, flagged -1 ("data not available to
  compute this estimate", label_flags.csv): a user adding up sectors or divisions never
  counts the non-employed twice.

Every value is read as text (codes keep their leading zeros; `1107` is not `11.07`, `1234.0`
is not an integer). Rows are numbered from 0, the first data row.
"""
from __future__ import annotations

import contextvars
import csv
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

import pseo_das
from pseo_das.errors import PseoDasError
from pseo_das.schemas.cell_keys import CellKeys
from pseo_das.schemas.coded_columns import CodedColumn, ValuesTest, coded_table, full_match, \
    is_in, level_column, row_hashes
from pseo_das.schemas.distribution import ALL_FOLDER, open_table, table_path

SCHEMA_VERSION = "V4.14.0"
SCHEMA_DIR = Path(pseo_das.__file__).parent / "reference" / "lehd-schema-v4.14.0"


class Product(StrEnum):
    PSEOE = "pseoe"   # earnings
    PSEOF = "pseof"   # employment flows

    @property
    def file_name(self) -> str:   # lehd_csv_naming: pseoe_[institution state/all].csv
        return f"{self.value}_all.csv"


# Prose rules of lehd_public_use_schema.asciidoc (see the module docstring).
STATUS_FLAGS = ("-1", "1", "5")            # section Status Flags: the only values in PSEO
FLAG_PUBLISHED = "1"                       # label_flags: 1 OK (-1 not available, 5 suppressed)
FLAG_SUPPRESSED = "5"
IPEDS_FLAG_NOT_AVAILABLE = "3"             # label_flags_ipeds_count: "IPEDS counts not available"
RESTRICTED_DEGREE_LEVELS = ("07", "17")    # Restricted 4-Digit CIP Tabulations (PSEOE)
RESTRICTED_CIP_LEVEL = "4"
RESTRICTED_PRODUCTS = (Product.PSEOE,)
ALL_COHORTS = "0000"                       # section Grad Cohort
ALL_DEGREE_LEVELS = "00"                   # label_degree_level: All Degree Levels
COHORT_YEARS_BY_DEGREE = {"05": "3"}       # section Grad Cohort Years: bachelor's 3 years,
DEFAULT_COHORT_YEARS = "5"                 # every other degree level 5
ALL_INDUSTRIES = "00"                      # label_industry, ind_level A: All NAICS Sectors
UNCLASSIFIED_DIVISION = "Z"                # label_geography_division: not a PSEO destination
# label_institution.csv codes inst_level S by the 2-digit state FIPS
# code of the 50 states and DC: label_fipsnum's states without these two.
NO_INSTITUTION_STATE_ROWS = ("72", "78")
OPEID = r"[0-9]{8}"                        # institution at inst_level I: an 8-digit OPEID
YEAR = r"[0-9]{4}"
COUNT = r"0|[1-9][0-9]*"                   # Units Count: a non-negative integer
DOLLARS = r"0|-?[1-9][0-9]*"               # Units Dollars: an integer
POSITIVE_INTEGER = r"[1-9][0-9]*"
EXAMPLES = 5                               # example rows a problem shows
ORIGIN_MEASURES = ("grads_nme",)           # pseof: measures of the origin (module docstring)
ORIGIN_MEASURE_LEVELS = ("N", "A")         # ... carried at geo_level N, ind_level A only
FLAG_NOT_AVAILABLE = "-1"                  # label_flags: data not available to compute this estimate


def carries_origin_measures(geo_level: str, ind_level: str) -> bool:
    """Whether a pseof row of this geography and industry level carries the origin's
    measures (ORIGIN_MEASURES): the all-industries national row only."""
    return (geo_level, ind_level) == ORIGIN_MEASURE_LEVELS


def is_origin_measure(indicator: str) -> bool:
    """`y5_grads_nme` is one of the ORIGIN_MEASURES."""
    return indicator.split("_", 1)[-1] in ORIGIN_MEASURES


@dataclass(frozen=True)
class Indicator:
    name: str
    status_flag: str
    units: str             # "Count" or "Dollars" (variables_*.csv)
    ipeds: bool            # an IPEDS count: its flag takes label_flags_ipeds_count values

    @property
    def pattern(self) -> str:
        return DOLLARS if self.units == "Dollars" else COUNT


@dataclass(frozen=True, eq=False)
class ProductLayout:
    product: Product
    identifiers: tuple[str, ...]
    indicators: tuple[Indicator, ...]
    levels: pd.DataFrame          # the rows of label_agg_level_pseo flagged 1 for the product

    @property
    def status_flags(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i.status_flag for i in self.indicators))

    @property
    def columns(self) -> tuple[str, ...]:
        return self.identifiers + tuple(i.name for i in self.indicators) + self.status_flags


@dataclass(frozen=True, eq=False)
class CodeLists:
    """The codes an identifier may take, from the schema's label files."""
    cipcodes: dict[str, frozenset[str]]       # cip_level -> cipcodes (label_cipcode)
    degree_levels: frozenset[str]             # label_degree_level
    institution_states: frozenset[str]        # 50 states + DC, 2-digit FIPS
    nation: frozenset[str]                    # label_fipsnum geo_level N: 00
    divisions: frozenset[str]                 # label_geography_division: 1-9
    sectors: frozenset[str]                   # label_industry ind_level S
    status_flags: frozenset[str]              # -1, 1, 5 (checked against label_flags)
    ipeds_flags: frozenset[str]               # label_flags_ipeds_count
    ipeds_published: frozenset[str]           # the IPEDS flags that publish a count


def read_label_file(name: str, strip: bool = True) -> pd.DataFrame:
    """A file of the schema as text; every value stripped unless `strip` is False
    (label_flags writes " 1")."""
    frame = pd.read_csv(SCHEMA_DIR / name, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    return frame.apply(lambda column: column.str.strip()) if strip else frame


SIMPLE_LABELS = {"inst_level": "label_inst_level.csv", "degree_level": "label_degree_level.csv",
                 "cip_level": "label_cip_level.csv", "cipcode": "label_cipcode.csv",
                 "geo_level": "label_geo_level.csv", "ind_level": "label_ind_level.csv",
                 "industry": "label_industry.csv"}


@cache
def code_labels() -> dict[str, dict]:
    """Code column -> {code: label} from the label files, labels as the files write them
    (geography: {(geo_level, code): label}; agg_level_pseo: grad_char, "by" firm_char)."""
    def read(name: str) -> pd.DataFrame:
        return read_label_file(name, strip=False)
    labels = {column: dict(zip(read(name)[column], read(name)["label"]))
              for column, name in SIMPLE_LABELS.items()}
    levels = read("label_agg_level_pseo.csv")
    labels["agg_level_pseo"] = dict(zip(levels["agg_level_pseo"], [
        grad + (f" by {firm}" if firm else "") for grad, firm in
        zip(levels["grad_char"].str.strip(), levels["firm_char"].str.strip())]))
    institutions = read("label_institution.csv")
    labels["institution"] = dict(zip(institutions["institution"], institutions["label"]))
    nation = read("label_fipsnum.csv")
    division = read("label_geography_division.csv")
    labels["geography"] = {("N", code): label for code, label in
                           zip(nation["geography"], nation["label"])} | \
                          {("D", code): label for code, label in
                           zip(division["geography"], division["label"])}
    return labels


@cache
def code_lists() -> CodeLists:
    cip = read_label_file("label_cipcode.csv")
    fips = read_label_file("label_fipsnum.csv")
    division = read_label_file("label_geography_division.csv")
    industry = read_label_file("label_industry.csv")
    flags = set(read_label_file("label_flags.csv")["flag"])
    ipeds = set(read_label_file("label_flags_ipeds_count.csv")["flag"])
    assert set(STATUS_FLAGS) <= flags and {FLAG_PUBLISHED, FLAG_SUPPRESSED} <= set(STATUS_FLAGS)
    assert IPEDS_FLAG_NOT_AVAILABLE in ipeds
    assert ALL_INDUSTRIES in set(industry.loc[industry["ind_level"] == "A", "industry"])
    return CodeLists(
        cipcodes={level: frozenset(codes) for level, codes in cip.groupby("cip_level")["cipcode"]},
        degree_levels=frozenset(read_label_file("label_degree_level.csv")["degree_level"]),
        institution_states=frozenset(set(fips.loc[fips["geo_level"] == "S", "geography"])
                                     - set(NO_INSTITUTION_STATE_ROWS)),
        nation=frozenset(fips.loc[fips["geo_level"] == "N", "geography"]),
        divisions=frozenset(set(division["geography"]) - {UNCLASSIFIED_DIVISION}),
        sectors=frozenset(industry.loc[industry["ind_level"] == "S", "industry"]),
        status_flags=frozenset(STATUS_FLAGS),
        ipeds_flags=frozenset(ipeds),
        ipeds_published=frozenset(ipeds - {IPEDS_FLAG_NOT_AVAILABLE}))


@cache
def _level_rules() -> dict[str, tuple[str, dict[str, ValuesTest]]]:
    """Per level column of label_agg_level_pseo: the identifier it governs and, per level
    code, what that identifier must be."""
    codes = code_lists()
    return {
        "inst_level": ("institution", {"I": full_match(OPEID),
                                       "S": is_in(codes.institution_states)}),
        "cip_level": ("cipcode", {level: is_in(c) for level, c in codes.cipcodes.items()}),
        "geo_level": ("geography", {"N": is_in(codes.nation), "D": is_in(codes.divisions)}),
        "ind_level": ("industry", {"A": is_in(frozenset({ALL_INDUSTRIES})),
                                   "S": is_in(codes.sectors)}),
    }


_LEVEL_RULE_TEXT = {
    "institution": "an 8-digit OPEID at inst_level I, a 2-digit state FIPS code (50 states + DC) "
                   "at inst_level S",
    "cipcode": "a CIP-2020 code of label_cipcode.csv at the level's cip_level (A: 00, 2: 11, "
               "4: 11.07)",
    "geography": "00 at geo_level N, a Census division 1-9 of label_geography_division.csv "
                 "at geo_level D",
    "industry": "00 at ind_level A, a NAICS sector of label_industry.csv at ind_level S",
}


@cache
def layout(product: Product | str) -> ProductLayout:
    product = Product(product)
    identifiers = tuple(read_label_file("lehd_identifiers_pseo.csv")["Variable"])
    variables = read_label_file(f"variables_{product.value}.csv")
    indicators = tuple(Indicator(row["Indicator Variable"], row["Status Flag"], row["Units"],
                                 row["Indicator Variable"].endswith("_ipeds_count"))
                       for _, row in variables.iterrows())
    levels = read_label_file("label_agg_level_pseo.csv")
    vocabulary = {"cip_level": "label_cip_level.csv", "inst_level": "label_inst_level.csv",
                  "geo_level": "label_geo_level.csv", "ind_level": "label_ind_level.csv"}
    for column, name in vocabulary.items():
        unknown = set(levels[column]) - set(read_label_file(name)[column])
        assert not unknown, f"label_agg_level_pseo.csv: {column} {unknown} not in {name}"
    levels = levels[levels[product.value] == "1"].reset_index(drop=True)
    for column, (_, rules) in _level_rules().items():   # a level the validator cannot check
        unchecked = set(levels[column]) - set(rules)
        assert not unchecked, f"no rule for {column} {unchecked} of {product.value}"
    return ProductLayout(product, identifiers, indicators, levels)


def published_percentiles() -> tuple[int, ...]:
    """The earnings percentiles the official earnings file has columns for (y1_p25_earnings,
    ...: 25, 50, 75), in the order of its columns."""
    found = (re.fullmatch(r"y[0-9]+_p([0-9]+)_earnings", indicator.name)
             for indicator in layout(Product.PSEOE).indicators)
    return tuple(dict.fromkeys(int(m.group(1)) for m in found if m))


def expected_columns(product: Product | str) -> tuple[str, ...]:
    return layout(product).columns


def aggregation_levels(product: Product | str) -> tuple[str, ...]:
    """The agg_level_pseo values flagged 1 for the product, as written in the files."""
    return tuple(layout(product).levels["agg_level_pseo"])


# --- the validator --------------------------------------------------------------------------

@dataclass(frozen=True)
class LayoutProblem:
    file: str
    columns: tuple[str, ...]
    rule: str
    rows: int                                   # data rows that break it (0: header / file)
    examples: tuple[tuple[int, str], ...] = ()  # (row, offending values), at most EXAMPLES

    def __str__(self) -> str:
        where = f"{self.rows:,} row{'s' if self.rows != 1 else ''}" if self.rows else "whole file"
        shown = "; ".join(f"row {row}: {values}" for row, values in self.examples)
        return (f"{self.file}: {', '.join(self.columns)}: {self.rule} [{where}]"
                + (f"\n    e.g. {shown}" if shown else ""))


@dataclass(frozen=True)
class LayoutReport:
    folder: Path
    rows: dict[str, int]                        # file name -> data rows
    problems: list[LayoutProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


class LayoutInputMissing(PseoDasError):
    """The public folder or one of its official files does not exist."""


def check_public_folder(folder: Path, note=None) -> LayoutReport:
    """Check `pseoe_all` and `pseof_all` of `folder` against the schema: a release's public
    folder (the files in its `all/` folder) or a folder holding them, each gzipped
    (`pseoe_all.csv.gz`, as published) or plain CSV (schemas/distribution.py). Raises
    LayoutInputMissing when the folder or a file is missing. `note(message)`, if given, is
    told each file's progress. The report names the files as found (`pseoe_all.csv.gz`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise LayoutInputMissing(f"{folder}: no such folder")
    paths, missing = {}, []
    for product in Product:
        try:
            paths[product] = table_path(folder, product.file_name)
        except FileNotFoundError:
            missing.append(product.file_name)
    if missing:
        raise LayoutInputMissing(f"{folder}: missing {', '.join(missing)} (the official "
                                 f"files are {', '.join(p.file_name for p in Product)}, "
                                 f"gzipped or not, in {ALL_FOLDER}/ or the folder itself)")
    rows, problems = {}, []
    for product in Product:
        count, found = check_file(paths[product], product, note)
        rows[paths[product].name] = count
        problems += found
        if note is not None:
            note(f"checked {paths[product].name}: {count:,} rows, {len(found)} problem(s)")
    return LayoutReport(folder, rows, problems)


def check_file(path: Path, product: Product | str, note=None
               ) -> tuple[int, list[LayoutProblem]]:
    """(data rows, problems) of one file of the product; `note(message)`, if given, is
    told when the file has been read."""
    product = Product(product)
    name = Path(path).name
    try:
        header = _header(path)
    except (UnicodeDecodeError, csv.Error, OSError, EOFError) as exc:   # OSError: not gzip
        return 0, [LayoutProblem(name, ("*",), f"not a UTF-8 CSV file ({exc})", 0)]
    if header is None:
        return 0, [LayoutProblem(name, ("*",), "empty file: no header", 0)]
    checked = _check_regular(path, header, name, product, note)
    if checked is not None:
        return checked
    problems = _check_header(name, header, layout(product).columns)
    # irregular: find the rows that break it, row by row
    try:
        widths = _widths(path)
    except (UnicodeDecodeError, csv.Error) as exc:
        return 0, problems + [LayoutProblem(name, ("*",), f"not a UTF-8 CSV file ({exc})", 0)]
    ragged = widths != len(header)
    if ragged.any():   # the columns of these rows cannot be trusted: stop here
        rows = np.flatnonzero(ragged)
        problems.append(LayoutProblem(
            name, ("*",), f"every row has the header's {len(header)} fields", len(rows),
            tuple((int(r), f"{widths[r]} fields") for r in rows[:EXAMPLES])))
        return len(widths), problems
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False,
                        index_col=False, encoding="utf-8")
    frame.columns = header                      # duplicates are reported, not renamed
    frame = frame.loc[:, ~frame.columns.duplicated()]
    if note is not None:
        note(f"read {name}: {len(frame):,} rows; checking their values")
    checks = _FileChecks(name, layout(product))
    checks.add(pa.Table.from_pandas(frame, preserve_index=False), 0)
    return len(frame), problems + checks.problems()


def _header(path: Path) -> list[str] | None:
    with open_table(path) as handle:
        return next(csv.reader(handle), None)


NOTE_ROWS = 1_000_000         # progress: a line each time this many more rows are checked
BATCH_BYTES = 16 * 2 ** 20   # the file is read in blocks of this size
CHECK_ROWS = 1 << 18         # rows are checked in blocks of at least this many (or the file's rest)
# Repeated cells are found over the whole file by 96 bits of hashes of each row's
# identifiers (schemas/cell_keys.py): a 64-bit hash and the top 32 bits of a second one.
CELL_HASH_KEYS = ("pseo-das-cells-1", "pseo-das-cells-2")


def text_column(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A column's values as the text a CSV file of it holds: Arrow's CSV writer casts each
    column to text (as here) and writes a null as the empty field. int8 flags without
    nulls come coded (a dictionary of their text: the layout check reads each text once)."""
    if column.type == pa.int8() and not column.null_count:   # flags: coded by their byte
        return pa.chunked_array([_int8_text(chunk) for chunk in column.chunks], _INT8_CODED) \
            if isinstance(column, pa.ChunkedArray) else _int8_text(column)
    text = column.cast(pa.string())
    return pc.fill_null(text, "") if column.null_count else text


_INT8_TEXT = pa.array([str(byte - 256 if byte > 127 else byte) for byte in range(256)],
                      pa.string())     # the text of each int8 value, by its byte
_INT8_CODED = pa.dictionary(pa.uint8(), pa.string())


def _int8_text(array: pa.Array) -> pa.DictionaryArray:
    """An int8 array's text as a dictionary array: its bytes index their text (one
    dictionary, not a string per row: the writer and the check read each text once)."""
    return pa.DictionaryArray.from_arrays(
        pa.Array.from_buffers(pa.uint8(), len(array), array.buffers(), 0, array.offset),
        _INT8_TEXT)


def text_table(table: pa.Table) -> pa.Table:
    """The table's values as the text a CSV file of it holds (`text_column`)."""
    return pa.table([text_column(column) for column in table.columns], names=table.column_names)


def as_text(table: pa.Table) -> pd.DataFrame:
    return pa.table([column.cast(pa.string()) for column in text_table(table).columns],
                    names=table.column_names).to_pandas()


class TableCheck:
    """The layout check of one official file fed its rows as tables, block by block
    (`add`): the rules of `check_file` (`pseo-das validate-layout`), which feeds it the
    blocks it reads, applied by a release to the tables as it writes them. Every value is
    checked as the text the CSV file holds (Arrow's CSV writer casts each column to text
    the same way; null is the empty field). `header`: the file's columns. A block is
    checked in a second thread while the next is written or read (one block at a time:
    memory holds two blocks, not the file)."""

    def __init__(self, name: str, product: Product | str, header: list[str], note=None):
        self.name, self.note = name, note
        self.rows = self._handed = 0               # rows added; rows handed to the checker
        product_layout = layout(product)
        self.header_problems = _check_header(name, list(header), product_layout.columns)
        self._checks = _FileChecks(name, product_layout)
        self._pending: list[pa.Table] = []      # tables not checked yet: fewer than CHECK_ROWS rows
        self._checker = ThreadPoolExecutor(1)
        self._running: Future | None = None     # the block being checked

    def add(self, table: pa.Table) -> None:
        self.add_text(text_table(table))

    def add_text(self, table: pa.Table) -> None:
        """`add` for a table already as text (`text_table`: what a writer writes)."""
        self._pending.append(table)
        self.rows += table.num_rows
        if self.rows - self._handed >= CHECK_ROWS:
            self._check_pending()

    def _check_pending(self) -> None:
        """The rows added since the last check, checked together (each check of a block has
        a fixed cost: small tables are gathered first)."""
        if not self._pending:
            return
        block, self._pending = pa.concat_tables(self._pending), []
        self._wait()
        self._running = self._checker.submit(contextvars.copy_context().run, self._check, block,
                                             self._handed)
        self._handed += block.num_rows

    def _wait(self) -> None:
        if self._running is not None:
            running, self._running = self._running, None
            running.result()

    def _check(self, block: pa.Table, first: int) -> None:
        """The block's rules; `first`: the file's row number of its first row."""
        self._checks.add(block, first)
        checked = first + block.num_rows
        if self.note is not None and checked // NOTE_ROWS > first // NOTE_ROWS:
            self.note(f"checked {checked:,} rows of {self.name}")

    def problems(self) -> list[LayoutProblem]:
        self._check_pending()
        self._wait()
        self._checker.shutdown()
        return self.header_problems + self._checks.problems()


def layout_report(folder: Path, checked: list[TableCheck]) -> LayoutReport:
    """The report of the official files' checks, in `Product` order as `check_public_folder`."""
    return LayoutReport(folder, {c.name: c.rows for c in checked},
                        [p for c in checked for p in c.problems()])


def _check_regular(path: Path, header: list[str], name: str, product: Product,
                   note=None) -> tuple[int, list[LayoutProblem]] | None:
    """(data rows, problems), reading every value as text with Arrow's reader one block
    at a time (memory: one block, not the file), when every row has the header's fields,
    the file is UTF-8 and no column name repeats; None otherwise."""
    if len(set(header)) != len(header):
        return None
    check = TableCheck(name, product, header, note)
    try:
        reader = pa_csv.open_csv(
            path, read_options=pa_csv.ReadOptions(column_names=header, skip_rows=1,
                                                  block_size=BATCH_BYTES),
            parse_options=pa_csv.ParseOptions(ignore_empty_lines=False),
            convert_options=pa_csv.ConvertOptions(
                column_types={c: pa.string() for c in header}, null_values=[],
                strings_can_be_null=False, quoted_strings_can_be_null=False))
        for batch in reader:
            check.add(pa.Table.from_batches([batch]))
        problems = check.problems()
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    return check.rows, problems


class _FileChecks:
    """The row checks of one file, added up over blocks of rows (`add`): each rule's count
    of bad rows and its first EXAMPLES rows; the aggregation levels seen; and the cells'
    identifiers, whose repeats are found over the whole file."""

    def __init__(self, name: str, product_layout: ProductLayout):
        self.name, self.layout = name, product_layout
        self.found: dict[tuple, list] = {}          # (columns, rule) -> [rows, examples]
        self.levels_seen: set[str] = set()
        self.cell_keys: CellKeys | None = None       # of each row's identifiers, in files
        self.cell_levels: list[np.ndarray] = []      # each row's agg_level_pseo, numbered
        self.level_numbers: dict[str, int] = {}      # agg_level_pseo text -> its number
        self.has_level = False

    def add(self, table: pa.Table, offset: int) -> None:
        """The rules over a block of rows, a table of text; `offset`: the file's row number
        of its first row."""
        block = coded_table(table)
        checks = _RowChecks(self.name, self.layout, block, table.num_rows, offset)
        for problem in checks.run():
            entry = self.found.setdefault((problem.columns, problem.rule), [0, []])
            entry[0] += problem.rows
            entry[1] = (entry[1] + list(problem.examples))[:EXAMPLES]
        if "agg_level_pseo" in block:
            self.has_level = True
            self.levels_seen |= set(block["agg_level_pseo"].distinct())
        keys = [block[c] for c in self.layout.identifiers if c in block]
        if len(keys) == len(self.layout.identifiers):
            first, second = (row_hashes(keys, key) for key in CELL_HASH_KEYS)
            if self.cell_keys is None:
                self.cell_keys = CellKeys()
            self.cell_keys.add(first, (second >> np.uint64(32)).astype(np.uint32))
            # a number per row, not its text, in a byte while the file has fewer than 256
            # levels (only shown in examples; a national pseof_all.csv has tens of millions
            # of rows)
            agg = block["agg_level_pseo"]
            numbers = [self.level_numbers.setdefault(t, len(self.level_numbers))
                       for t in agg.distinct()]
            self.cell_levels.append(np.array(numbers, dtype=np.min_scalar_type(
                len(self.level_numbers)))[agg.index])

    def problems(self) -> list[LayoutProblem]:
        out = [LayoutProblem(self.name, columns, rule, rows, tuple(examples))
               for (columns, rule), (rows, examples) in self.found.items()]
        if self.has_level:
            flagged = set(self.layout.levels["agg_level_pseo"])
            absent = sorted(flagged - self.levels_seen, key=int)
            if absent:
                out.append(LayoutProblem(
                    self.name, ("agg_level_pseo",), f"every level flagged for "
                    f"{self.layout.product.value} appears at least once; absent: "
                    f"{', '.join(absent)}", 0))
        if self.cell_keys is not None:
            with self.cell_keys as keys:
                rows = keys.repeated_rows()
            self.cell_keys = None
            if len(rows):
                levels = np.concatenate(self.cell_levels)
                text = list(self.level_numbers)
                out.append(LayoutProblem(
                    self.name, tuple(self.layout.identifiers),
                    "one row per cell (the identifiers are unique)", len(rows),
                    tuple((int(r), f"agg_level_pseo={text[levels[r]]!r}") for r in rows[:EXAMPLES])))
        return out


def _widths(path: Path) -> np.ndarray:
    """The number of fields of every data row."""
    with open_table(path) as handle:
        reader = csv.reader(handle)
        next(reader, None)
        return np.fromiter((len(row) for row in reader), dtype=np.int64)


def _check_header(name: str, header: list[str], expected: tuple[str, ...]) -> list[LayoutProblem]:
    if tuple(header) == expected:
        return []
    problems = []
    missing = [c for c in expected if c not in header]
    extra = [c for c in dict.fromkeys(header) if c not in expected]
    twice = [c for c in dict.fromkeys(header) if header.count(c) > 1]
    if missing:
        problems.append(LayoutProblem(name, tuple(missing), "missing column(s)", 0))
    if extra:
        problems.append(LayoutProblem(name, tuple(extra), "column(s) not in the schema", 0))
    if twice:
        problems.append(LayoutProblem(name, tuple(twice), "column(s) appear more than once", 0))
    present = [c for c in dict.fromkeys(header) if c in expected]
    in_order = [c for c in expected if c in present]
    if present != in_order:
        moved = tuple(c for c, want in zip(present, in_order) if c != want)
        problems.append(LayoutProblem(
            name, moved, "columns out of the schema's order (expected "
            + ", ".join(expected) + ")", 0))
    return problems


class _RowChecks:
    """The row checks of a block of rows, every rule evaluated on each column's distinct
    values (`CodedColumn`) and spread to the rows."""

    def __init__(self, name: str, product_layout: ProductLayout, block: dict[str, CodedColumn],
                 rows: int, offset: int = 0):
        self.name, self.layout, self.block, self.rows = name, product_layout, block, rows
        self.offset = offset                    # the file's row number of the block's first
        self.product = product_layout.product
        self.codes = code_lists()
        self.problems: list[LayoutProblem] = []
        levels = product_layout.levels
        if "agg_level_pseo" in block:
            number = {level: i for i, level in enumerate(levels["agg_level_pseo"])}
            agg = block["agg_level_pseo"]
            row_level = np.array([number.get(v, -1) for v in agg.distinct()],
                                 dtype=np.int64)[agg.index]
        else:
            row_level = np.full(rows, -1, dtype=np.int64)
        self.level = {column: level_column(levels[column].tolist(), row_level)
                      for column in levels.columns}
        self.known_level = row_level >= 0

    def run(self) -> list[LayoutProblem]:
        self._aggregation_level()
        self._identifiers()
        self._flags_and_values()
        self._origin_measures()
        if self.product in RESTRICTED_PRODUCTS:
            self._restricted_cip()
        return self.problems

    def has(self, *columns: str) -> bool:
        return all(c in self.block for c in columns)

    def report(self, columns: tuple[str, ...], rule: str, bad: np.ndarray,
               show: tuple[str, ...] | None = None) -> None:
        rows = np.flatnonzero(bad)
        if len(rows) == 0:
            return
        show = tuple(c for c in (show or columns) if c in self.block)
        examples = tuple((int(r) + self.offset,
                          ", ".join(f"{c}={self.block[c].text(r)!r}" for c in show))
                         for r in rows[:EXAMPLES])
        self.problems.append(LayoutProblem(self.name, columns, rule, len(rows), examples))

    # -- aggregation levels --
    def _aggregation_level(self) -> None:
        if not self.has("agg_level_pseo"):
            return
        value = self.block["agg_level_pseo"]
        every = set(read_label_file("label_agg_level_pseo.csv")["agg_level_pseo"])
        flagged = set(self.layout.levels["agg_level_pseo"])
        self.report(("agg_level_pseo",), "an aggregation level of label_agg_level_pseo.csv",
                    ~value.isin(every))
        self.report(("agg_level_pseo",), f"a level flagged 1 for {self.product.value} in "
                    f"label_agg_level_pseo.csv (this one is flagged 0)",
                    value.isin(every - flagged))

    # -- identifiers --
    def _identifiers(self) -> None:
        known = self.known_level
        for level_column_name, (identifier, rules) in _level_rules().items():
            expected = self.level[level_column_name]
            if self.has(level_column_name):
                self.report((level_column_name,), f"{level_column_name} as "
                            "label_agg_level_pseo.csv gives it for the row's agg_level_pseo",
                            known & self.block[level_column_name].pairs(expected, str.__ne__),
                            ("agg_level_pseo", level_column_name))
            if self.has(identifier):
                values = self.block[identifier]
                ok = np.zeros(self.rows, dtype=bool)
                for code, rule in rules.items():
                    ok |= expected.eq(code) & values.where(rule)
                self.report((identifier,), _LEVEL_RULE_TEXT[identifier], known & ~ok,
                            ("agg_level_pseo", identifier))
        if self.has("grad_cohort"):
            cohort = self.block["grad_cohort"]
            by_cohort = self.level["by_grad_cohort"]
            self.report(("grad_cohort",), f"{ALL_COHORTS} at a level without graduation cohorts",
                        known & by_cohort.eq("0") & ~cohort.eq(ALL_COHORTS),
                        ("agg_level_pseo", "grad_cohort"))
            self.report(("grad_cohort",), f"a 4-digit year (not {ALL_COHORTS}) at a level by "
                        "graduation cohort", known & by_cohort.eq("1")
                        & ~(cohort.fullmatch(YEAR) & ~cohort.eq(ALL_COHORTS)),
                        ("agg_level_pseo", "grad_cohort"))
        if self.has("degree_level"):
            degree = self.block["degree_level"]
            by_degree = self.level["by_degree_level"]
            self.report(("degree_level",), f"{ALL_DEGREE_LEVELS} at a level without degree levels",
                        known & by_degree.eq("0") & ~degree.eq(ALL_DEGREE_LEVELS),
                        ("agg_level_pseo", "degree_level"))
            self.report(("degree_level",), "a degree level of label_degree_level.csv (not "
                        f"{ALL_DEGREE_LEVELS} at a level by degree level)",
                        (known & by_degree.eq("1")
                         & ~degree.isin(self.codes.degree_levels - {ALL_DEGREE_LEVELS}))
                        | (~known & ~degree.isin(self.codes.degree_levels)),
                        ("agg_level_pseo", "degree_level"))
        if self.has("grad_cohort_years"):
            years = self.block["grad_cohort_years"]
            positive = years.fullmatch(POSITIVE_INTEGER)
            self.report(("grad_cohort_years",), "a positive integer", ~positive)
            if self.has("degree_level"):
                self.report(("grad_cohort_years", "degree_level"), "3 for bachelor's degrees "
                            "(05), 5 for every other degree level (schema: Grad Cohort Years)",
                            positive & years.pairs(self.block["degree_level"], _wrong_cohort_years))

    # -- status flags and measures --
    def _flags_and_values(self) -> None:
        for flag in self.layout.status_flags:
            ipeds = any(i.ipeds for i in self.layout.indicators if i.status_flag == flag)
            allowed = self.codes.ipeds_flags if ipeds else self.codes.status_flags
            if self.has(flag):
                self.report((flag,), "a flag of " + ("label_flags_ipeds_count.csv ("
                            if ipeds else "the PSEO tables (") + ", ".join(sorted(allowed, key=int))
                            + ")", ~self.block[flag].isin(allowed))
        for indicator in self.layout.indicators:
            if not self.has(indicator.name):
                continue
            value = self.block[indicator.name]
            empty = value.eq("")
            what = ("an integer (dollars)" if indicator.units == "Dollars"
                    else "a non-negative integer (count)")
            self.report((indicator.name,), f"{what} or empty",
                        ~empty & ~value.fullmatch(indicator.pattern))
            if not self.has(indicator.status_flag):
                continue
            flags = self.block[indicator.status_flag]
            published = (flags.isin(self.codes.ipeds_published) if indicator.ipeds
                         else flags.eq(FLAG_PUBLISHED))
            valid = flags.isin(self.codes.ipeds_flags if indicator.ipeds
                               else self.codes.status_flags)
            columns = (indicator.name, indicator.status_flag)
            self.report(columns, "a value where the flag publishes one", valid & published & empty)
            self.report(columns, "empty where the flag withholds the value",
                        valid & ~published & ~empty)

    def _origin_measures(self) -> None:
        """Non-employment only on the all-industries national rows (module docstring)."""
        detail = self.known_level & ~(self.level["geo_level"].eq(ORIGIN_MEASURE_LEVELS[0])
                                      & self.level["ind_level"].eq(ORIGIN_MEASURE_LEVELS[1]))
        if not detail.any():
            return
        for indicator in self.layout.indicators:
            if not (is_origin_measure(indicator.name) and self.has(indicator.name)):
                continue
            columns = (indicator.name, indicator.status_flag)
            bad = detail & ~self.block[indicator.name].eq("")
            if self.has(indicator.status_flag):
                bad |= detail & ~self.block[indicator.status_flag].eq(FLAG_NOT_AVAILABLE)
            self.report(columns, "a measure of the origin: empty with flag -1 (data not "
                        "available) on the sector and division rows; only the all-industries "
                        "national row (geo_level N, ind_level A) carries it",
                        bad, ("agg_level_pseo",) + columns)

    def _restricted_cip(self) -> None:
        if not self.has("degree_level"):
            return
        restricted = (self.known_level & self.level["cip_level"].eq(RESTRICTED_CIP_LEVEL)
                      & self.block["degree_level"].isin(RESTRICTED_DEGREE_LEVELS))
        if not restricted.any():
            return
        rule = ("degree levels " + " and ".join(RESTRICTED_DEGREE_LEVELS)
                + " at 4-digit CIP: every measure suppressed (schema: Restricted 4-Digit CIP "
                "Tabulations); ")
        for flag in self.layout.status_flags:
            if not self.has(flag):
                continue
            ipeds = any(i.ipeds for i in self.layout.indicators if i.status_flag == flag)
            want = IPEDS_FLAG_NOT_AVAILABLE if ipeds else FLAG_SUPPRESSED
            self.report((flag,), rule + f"flag {want}", restricted & ~self.block[flag].eq(want),
                        ("agg_level_pseo", "degree_level", "cipcode", flag))
        for indicator in self.layout.indicators:
            if self.has(indicator.name):
                self.report((indicator.name,), rule + "no value",
                            restricted & ~self.block[indicator.name].eq(""),
                            ("agg_level_pseo", "degree_level", "cipcode", indicator.name))


def _wrong_cohort_years(years: str, degree_level: str) -> bool:
    return years != COHORT_YEARS_BY_DEGREE.get(degree_level, DEFAULT_COHORT_YEARS)
