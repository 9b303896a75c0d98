"""The labelled XLSX variant of a public table (the schema's Basic Schema: "In some cases,
visually formatted Excel (XLSX) files are also available, containing the same information
together with header lines on each sheet"): `all/pseoe_all.xlsx`, the earnings file with,
after each code column, its label from the schema's label files, and a second sheet naming
every column. Privacy cost: none (published values and public labels).

* sheet `pseoe_all`: one header line (the column names), then the rows of pseoe_all as
  published; codes as text (`08`, `11.07`), measures and flags as numbers, empty where the
  file is empty. `<code>_label` follows each code column: agg_level_pseo (grad_char, and
  firm_char where there is one, of label_agg_level_pseo.csv), inst_level, institution
  (label_institution.csv: the institution's name, or "Institutions in Colorado"),
  degree_level, cip_level, cipcode, geo_level, geography (label_fipsnum.csv at geo_level N,
  label_geography_division.csv at D), ind_level, industry;
* sheet `variables`: every column of the first sheet with its description
  (lehd_identifiers_pseo.csv, variables_pseoe.csv; the flags' and labels' own lines).

Only the earnings file: pseof_all has many more rows than a worksheet holds (1,048,576) and
its state copies would take minutes to write; XlsxWriter writes about 10^5 cells a second.
A national pseoe_all of more rows continues on sheets `pseoe_all (2)`, `pseoe_all (3)`, ...,
each with its header line.
The bytes are the same on every run: XlsxWriter dates the zip members 1980-01-01 and the
document's creation time is the release's production time (`created`)."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from itertools import chain
from pathlib import Path

import pandas as pd
import xlsxwriter

from pseo_das.schemas.distribution import ALL_FOLDER, table_path
from pseo_das.schemas.pseo_layout import Product, code_labels, layout, read_label_file
from pseo_das.tasks.publication.metadata_files import release_production

XLSX_ROWS = 1_048_576            # rows of a worksheet
WORKBOOK_BLOCK_ROWS = 50_000     # rows turned into worksheet cells at a time
LABEL_SUFFIX = "_label"


def labelled_table(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` (a public table, every value as text) with `<code>_label` after each code
    column that has a label file (module docstring); a code without a label gets ""."""
    labels = code_labels()
    out = {}
    for column in frame.columns:
        out[column] = frame[column]
        if column not in labels:
            continue
        if column == "geography":
            keys = pd.Series(list(zip(frame["geo_level"], frame[column])), index=frame.index)
        else:
            keys = frame[column]
        out[column + LABEL_SUFFIX] = keys.map(labels[column]).fillna("")
    return pd.DataFrame(out)


def column_descriptions(product: Product, columns: list[str]) -> list[tuple[str, str]]:
    """(column, description) of every column of the labelled table."""
    identifiers = read_label_file("lehd_identifiers_pseo.csv", strip=False)
    described = dict(zip(identifiers["Variable"], identifiers["label"]))
    variables = read_label_file(f"variables_{product.value}.csv", strip=False)
    described |= dict(zip(variables["Indicator Variable"], variables["Indicator Name"]))
    for flag, indicator in zip(variables["Status Flag"], variables["Indicator Variable"]):
        described.setdefault(flag, f"Status flag of {indicator} (label_flags.csv)")
    return [(c, described.get(c) or (f"Label of {c.removesuffix(LABEL_SUFFIX)} (schema label "
                                     "files)" if c.endswith(LABEL_SUFFIX) else ""))
            for c in columns]


def cell_values(column: pd.Series, numeric: bool) -> list:
    """A column's cells as Python objects for the worksheet: integers for a numeric column,
    text otherwise, None for an empty or missing value (not written)."""
    present = column.notna() & (column.astype(str) != "")
    values = pd.to_numeric(column.where(present)).astype("Int64") if numeric else column
    return values.astype(object).where(present, None).tolist()


def write_labelled_workbook(frame: pd.DataFrame | Iterable[pd.DataFrame], path: Path,
                            product: Product, created: datetime) -> int:
    """`path` (.xlsx): the labelled table of `frame` (every value as text, as published;
    or its rows in blocks, in order, the first block holding the columns even if it has no
    row) and its variables sheet. Returns the data rows. A table of more rows than a
    worksheet holds continues on further sheets, each with the header line (`data_sheets`).
    Memory holds one block's cells, not the table's."""
    blocks = _blocks(frame) if isinstance(frame, pd.DataFrame) else iter(frame)
    first = next(blocks)
    columns = list(labelled_table(first.head(0)).columns)
    numeric = {c for c in layout(product).columns if c not in layout(product).identifiers} \
        | {"agg_level_pseo", "grad_cohort_years"}
    workbook = xlsxwriter.Workbook(str(path), {"constant_memory": True})
    rows = 0
    try:
        workbook.set_properties({"created": created.replace(tzinfo=None),
                                 "title": path.stem, "comments": "LEHD Public Use Schema"})
        header = workbook.add_format({"bold": True})
        sheet, start = _data_sheet(workbook, path.stem, 0, columns, header), 0
        for block in chain([first], blocks):
            table = labelled_table(block)
            # one (column, numeric, values) per column, values as Python objects (None: empty)
            cells = [(c, column in numeric, cell_values(table[column], column in numeric))
                     for c, column in enumerate(columns)]
            writers = _cell_writers(sheet, cells)
            for r in range(len(table)):
                if rows - start == XLSX_ROWS - 1:
                    sheet, start = _data_sheet(workbook, path.stem, rows, columns, header), rows
                    writers = _cell_writers(sheet, cells)
                for c, write, values in writers:
                    if values[r] is not None:
                        write(rows - start + 1, c, values[r])
                rows += 1
        variables = workbook.add_worksheet("variables")
        variables.write_row(0, 0, ["variable", "description"], header)
        for r, (column, text) in enumerate(column_descriptions(product, columns)):
            variables.write_row(r + 1, 0, [column, text])
    finally:
        workbook.close()
    return rows


def _cell_writers(sheet, cells: list[tuple[int, bool, list]]) -> list[tuple[int, Callable, list]]:
    return [(c, sheet.write_number if is_number else sheet.write_string, values)
            for c, is_number, values in cells]


def _blocks(frame: pd.DataFrame) -> Iterator[pd.DataFrame]:
    for start in range(0, max(len(frame), 1), WORKBOOK_BLOCK_ROWS):
        yield frame.iloc[start:start + WORKBOOK_BLOCK_ROWS]


def _data_sheet(workbook, name: str, first_row: int, columns: list[str], header):
    """The data sheet whose first row is the table's `first_row` (`data_sheets`' names),
    with its header line."""
    sheet = workbook.add_worksheet(sheet_name(name, first_row))
    sheet.freeze_panes(1, 0)
    for c, column in enumerate(columns):
        sheet.write_string(0, c, column, header)
    return sheet


def data_sheets(name: str, rows: int) -> list[tuple[str, int, int]]:
    """(sheet name, first row, end row) of the table's sheets: `name` holds the first
    XLSX_ROWS - 1 rows (under its header line), `name (2)` the next, and so on; one sheet
    for an empty table."""
    per_sheet = XLSX_ROWS - 1
    return [(sheet_name(name, start), start, min(start + per_sheet, rows))
            for start in range(0, max(rows, 1), per_sheet)]


def sheet_name(name: str, first_row: int) -> str:
    """The name of the data sheet whose first row is the table's `first_row` (0, or a
    multiple of XLSX_ROWS - 1): `name`, then `name (2)`, `name (3)`, ..."""
    k = first_row // (XLSX_ROWS - 1)
    return name if k == 0 else f"{name} ({k + 1})"


WORKBOOK_NAME = "pseoe_all.xlsx"
NO_PRODUCTION_TIME = datetime(1980, 1, 1)    # a release id that names no time (the zip's epoch)


def write_release_workbook(public: Path | str, release_id: str) -> Path:
    """all/pseoe_all.xlsx of a release's public folder, from its pseoe_all as written (read
    back as text: the workbook holds what the file publishes). A release writes it in its
    second process (second_process.py)."""
    public = Path(public)
    source = table_path(public, Product.PSEOE.file_name)
    header = pd.read_csv(source, dtype=str, keep_default_na=False, nrows=0)
    blocks = pd.read_csv(source, dtype=str, keep_default_na=False, chunksize=WORKBOOK_BLOCK_ROWS)
    production = release_production(release_id)
    path = public / ALL_FOLDER / WORKBOOK_NAME
    with blocks:
        write_labelled_workbook(chain([header], blocks), path, Product.PSEOE,
                                production[1] if production else NO_PRODUCTION_TIME)
    return path
