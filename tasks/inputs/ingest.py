"""Read and validate the confidential inputs. Privacy cost: none (no noise, no output).

A violation raises InputValidationError naming the file, column, number of bad rows
and a few example rows; the flow stops before any noise is drawn.

An input `name` (graduates, outcomes) of a data folder is one of:
  * `name.parquet`: one Parquet file, read a record batch at a time;
  * `name.parquet/` or `name/`: a partitioned Parquet dataset, a folder of `*.parquet`
    part files (any depth), read file after file in the order of their relative paths;
  * `name.csv`: one CSV file, read whole (the CSV reader names ragged rows and encodings
    precisely; national-scale inputs belong in Parquet).
A chunk is a DataFrame of the input's columns, converted as the input contract says
(convert_columns), indexed by its rows' numbers counted over the whole input (0 = first
data row of the first file); `InputFiles.where(row)` names the file of a row.
"""
from __future__ import annotations

import bisect
import csv
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np
import pandas as pd
import pandera.pandas as pa
import pyarrow
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from pandera.errors import SchemaErrors

from pseo_das.errors import PseoDasError
from pseo_das.schemas.written_hashes import read_sha256
from pseo_das.tasks import file_task, progress
from pseo_das.schemas.inputs import (CODE_COLUMNS, GRADUATE_COLUMNS, OUTCOME_COLUMNS,
                            TABLE_CHECK_COLUMNS, CipVintages, graduates_schema,
                            outcomes_schema)

MAX_EXAMPLES = 5
DOLLAR_COLUMNS = {"earnings"}


class InputValidationError(PseoDasError, ValueError):
    """The confidential inputs break the input contract; nothing was released."""


# Why a person_id twice in graduates is refused with outcomes (the outcomes layout gives
# one earnings record per person and years after, so it cannot say whose degree it follows).
SEVERAL_DEGREES_HINT = (
    "  several degree rows for one person: the outcomes layout holds one earnings record per "
    "person and years after, so it takes one degree per person; give the jobs layout instead "
    "of outcomes (jobs.parquet or jobs.csv: person_id, year, earnings, emp_state, industry; "
    "one row per person, calendar year and job), whose earnings are derived for each degree")


class InputLayout(StrEnum):
    """How a data folder gives the earnings (docs/operate/inputs.md)."""
    OUTCOMES = "outcomes"   # graduates one row per person; outcomes per person and years after
    JOBS = "jobs"           # graduates one row per degree; jobs per person, year and job


def input_layout(data_dir: Path) -> InputLayout:
    """The layout of `data_dir`: jobs when it holds a jobs input, else outcomes (whose reader
    names what is missing); refused when it holds both."""
    data_dir = Path(data_dir)

    def holds(name: str) -> bool:
        return any(p.is_file() for p in (data_dir / f"{name}.parquet", data_dir / f"{name}.csv")) \
            or (data_dir / name).is_dir() or (data_dir / f"{name}.parquet").is_dir()
    if holds("jobs") and holds("outcomes"):
        raise InputValidationError(
            f"{data_dir}: both outcomes and jobs inputs are there; which one gives the "
            "earnings is ambiguous: keep one (jobs: several degrees per person allowed)")
    return InputLayout.JOBS if holds("jobs") else InputLayout.OUTCOMES


@dataclass
class ValidatedInputs:
    graduates: pd.DataFrame       # sorted by person_id
    outcomes: pd.DataFrame
    graduate_row: np.ndarray      # for each outcome row, its graduate's row in `graduates`
    fingerprints: dict[str, str]  # file name -> SHA-256
    checks: list[dict]            # the input checks that ran, for the audit report




CHUNK_ROWS = 1_000_000  # rows per chunk of the streaming readers (bounded memory)


@dataclass(frozen=True)
class InputFiles:
    """One confidential input: a file, or the part files of a partitioned dataset."""
    name: str                     # "graduates" or "outcomes"
    path: Path                    # the file or folder given
    files: tuple[Path, ...]       # the files, in reading order
    first_rows: tuple[int, ...]   # the input row number of each file's first row
    rows: int                     # -1 for a CSV file (counted as it is read)

    @property
    def is_dataset(self) -> bool:
        return self.path.is_dir()

    @property
    def is_csv(self) -> bool:
        return self.path.suffix == ".csv"

    def fingerprints(self, data_dir: Path) -> dict[str, str]:
        """SHA-256 of each file, by its path relative to the data folder."""
        return {file.relative_to(data_dir).as_posix(): read_sha256(file) for file in self.files}

    def where(self, row: int) -> str:
        """'row 12' for a single file; 'row 12 (part-3.parquet row 2)' for a dataset."""
        if not self.is_dataset:
            return f"row {row}"
        k = bisect.bisect_right(self.first_rows, row) - 1
        return f"row {row} ({self.files[k].relative_to(self.path).as_posix()} row {row - self.first_rows[k]})"

    def check_columns(self, columns: tuple[str, ...]) -> None:
        """Refuse part files without all of `columns` (CSV: checked as it is read)."""
        if self.is_csv:
            return
        for file in self.files:
            missing = [c for c in columns if c not in _open_parquet(file).schema_arrow.names]
            if missing:
                raise InputValidationError(f"{file}: missing column(s) {', '.join(missing)}; "
                                           f"expected {', '.join(columns)}")

    def has_column(self, column: str) -> bool:
        """Whether the input has the optional `column` (in every part file; refused when
        only some part files have it)."""
        if self.is_csv:
            try:
                return column in pd.read_csv(self.path, nrows=0).columns
            except (ValueError, OSError, UnicodeDecodeError):
                return False   # the reader names what is wrong with the file
        having = [column in _open_parquet(file).schema_arrow.names for file in self.files]
        if any(having) and not all(having):
            missing = [f.name for f, has in zip(self.files, having) if not has]
            raise InputValidationError(f"{self.path}: column {column} is in some part files "
                                       f"only (not in {', '.join(missing[:3])}); give it in "
                                       "every part file or in none")
        return all(having)

    def chunks(self, columns: tuple[str, ...], chunk_rows: int = CHUNK_ROWS
               ) -> Iterator[pd.DataFrame]:
        """The input's rows, `chunk_rows` at a time at most, converted (see module doc)."""
        if self.is_csv:
            table = read_csv_input(self.path, columns)
            for start in range(0, len(table), chunk_rows):
                yield table.iloc[start:start + chunk_rows]
            return
        for file, first in zip(self.files, self.first_rows):
            parquet = _open_parquet(file)
            start = first
            try:
                for table in _tables(parquet, list(columns), chunk_rows):
                    df = table.to_pandas()
                    df.index = pd.RangeIndex(start, start + len(df))
                    start += len(df)
                    yield convert_columns(file, df, columns)
            except (OSError, pyarrow.ArrowException) as exc:
                raise InputValidationError(f"{file}: cannot read: {exc}") from exc


def _tables(parquet: pq.ParquetFile, columns: list[str], rows: int) -> Iterator[pyarrow.Table]:
    """The file's rows as tables of `rows` rows (the last one shorter), whatever the size
    of its row groups. Row groups are read whole (`read_row_group`): pyarrow's
    `iter_batches` keeps memory alive while earlier batches are held (measured here: 6 MB
    more per 250,000-row group read, for good), which grew a national read without bound."""
    pending: list[pyarrow.Table] = []
    n = 0
    for group in range(parquet.metadata.num_row_groups):
        pending.append(parquet.read_row_group(group, columns=columns))
        n += pending[-1].num_rows
        if n < rows:
            continue
        whole = pyarrow.concat_tables(pending)
        start = 0
        while n - start >= rows:
            yield whole.slice(start, rows)
            start += rows
        pending = [whole.slice(start)] if start < n else []
        n -= start
    if n:
        yield pyarrow.concat_tables(pending)


def _open_parquet(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except (ValueError, OSError, pyarrow.ArrowException) as exc:
        why = str(exc).removeprefix(f"Could not open Parquet input source '{path}': ")
        raise InputValidationError(f"{path}: cannot read: not a readable Parquet file "
                                   f"(truncated, corrupted or not Parquet): {why}") from exc


def find_input_files(data_dir: Path, name: str) -> InputFiles:
    """The input `name` of `data_dir` (see module doc), refused with a clear message when
    it is missing, ambiguous, empty or unreadable."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputValidationError(f"{data_dir}: data folder not found")
    found = [data_dir / f"{name}{suffix}" for suffix in (".parquet", ".csv", "")
             if (data_dir / f"{name}{suffix}").exists()]
    found = [p for p in found if p.suffix in (".parquet", ".csv") or p.is_dir()]
    if len(found) > 1:
        raise InputValidationError(
            f"{data_dir}: both {' and '.join(p.name for p in found)} are there; which one is the "
            "release's input is ambiguous: keep one")
    if not found:
        raise InputValidationError(f"{data_dir}: no {name}.parquet, {name}.csv or {name}/ "
                                   "(a folder of Parquet files) found")
    path = found[0]
    if path.is_dir():
        files = tuple(sorted(path.rglob("*.parquet"), key=lambda p: p.relative_to(path).as_posix()))
        if not files:
            raise InputValidationError(f"{path}: a folder without *.parquet files; a partitioned "
                                       "input is a folder of Parquet part files")
    else:
        files = (path,)
    if path.suffix == ".csv":
        return InputFiles(name, path, files, (0,), -1)
    first_rows, rows = [], 0
    for file in files:
        first_rows.append(rows)
        rows += _open_parquet(file).metadata.num_rows
    if rows == 0:
        raise InputValidationError(f"{path}: no rows; there is nothing to release")
    return InputFiles(name, path, files, tuple(first_rows), rows)


def find_inputs(data_dir: Path) -> tuple[InputFiles, InputFiles]:
    """The graduates and outcomes inputs of `data_dir`, each opened and its columns
    checked; the problems of both are reported together."""
    found, problems = [], []
    for name, columns in (("graduates", GRADUATE_COLUMNS), ("outcomes", OUTCOME_COLUMNS)):
        try:
            found.append(find_input_files(data_dir, name))
            found[-1].check_columns(columns)
        except InputValidationError as exc:
            problems.append(str(exc))
    if problems:
        raise InputValidationError("\n".join(dict.fromkeys(problems)))
    return found[0], found[1]


def read_csv_input(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """Read a CSV input whole, with its code columns as sorted categoricals. Dollars are
    read as text, then as numbers (_csv_dollars): whole dollars with empty cells (no job)
    are valid, and a value that is not a number is named with its row."""
    df = read_csv(path, dtype={c: "string" for c in columns
                               if c in CODE_COLUMNS or c in DOLLAR_COLUMNS})
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputValidationError(
            f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}")
    if df.empty:
        raise InputValidationError(f"{path}: no rows (only a header line); there is nothing "
                                   "to release")
    for col in DOLLAR_COLUMNS.intersection(columns):
        df[col] = _csv_dollars(path, col, df[col])
    return convert_columns(path, df[list(columns)], columns)


def _csv_dollars(path: Path, column: str, text: pd.Series) -> pd.Series:
    """A CSV column of dollars (text) as float64; empty cells stay missing."""
    values = pd.to_numeric(text, errors="coerce").astype("float64")
    bad = np.flatnonzero((text.notna() & values.isna()).to_numpy())
    if len(bad):
        examples = ", ".join(f"row {i}: {text.iloc[i]!r}" for i in bad[:MAX_EXAMPLES])
        raise InputValidationError(f"{path}: input rejected; nothing was released.\n  column "
                                   f"{column}: {len(bad)} value(s) that are not numbers (dollars; "
                                   f"empty for no earnings); e.g. {examples}")
    return values


def convert_columns(path: Path, df: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """The input contract's types: code columns as sorted categoricals of text, dollars as
    float64, whole numbers as int64; a column of the wrong kind is refused, naming it."""
    codes = [c for c in columns if c in CODE_COLUMNS]
    for col in codes:
        df[col] = _as_sorted_codes(path, col, df[col])
    for col in df.columns:
        if col in DOLLAR_COLUMNS:
            df[col] = _as_dollars(path, col, df[col])
        elif col not in codes and pd.api.types.is_integer_dtype(df[col]) and not df[col].hasnans:
            df[col] = df[col].astype("int64")
    return df


def _as_dollars(path: Path, column: str, values: pd.Series) -> pd.Series:
    """Dollar amounts as float64: whole dollars (int, Int64 with missing values) and
    float32 are common and valid; booleans and text are not."""
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        if values.isna().all():
            return values.astype("float64")
        raise InputValidationError(f"{path}: column {column} has type {values.dtype}; "
                                   "expected numbers (dollars; empty for no earnings)")
    return values.astype("float64")


def read_csv(path: Path, columns: tuple[str, ...] | None = None, **options) -> pd.DataFrame:
    """pandas.read_csv with the strict pyarrow parser: a row with more or fewer fields than
    the header (a ragged or truncated file) is an error, not missing values. `columns`:
    read only those of them that the file has (the caller names the missing ones).
    An unreadable file raises InputValidationError saying why (csv_problem)."""
    if options.get("header", "infer") is not None:   # header=None: the caller reads it
        _refuse_duplicated_header(path)
    try:
        if columns is not None:
            header = pd.read_csv(path, nrows=0, encoding=options.get("encoding")).columns
            wanted = set(columns)
            options["usecols"] = [c for c in header if c in wanted]
            if not options["usecols"]:
                return pd.DataFrame()
        return pd.read_csv(path, engine="pyarrow", **options)
    except (ValueError, OSError, pyarrow.ArrowException) as exc:
        raise InputValidationError(f"{path}: cannot read: {csv_problem(path, exc)}") from exc


def _refuse_duplicated_header(path: Path) -> None:
    """A header naming a column twice would be read as two columns (the second renamed):
    refused, naming the column."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return  # read_csv reports what is wrong with the file
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise InputValidationError(f"{path}: cannot read: the header names column(s) "
                                   f"{', '.join(twice)} more than once")


def csv_problem(path: Path, exc: Exception) -> str:
    """What is wrong with a CSV file that could not be read, in the user's terms: empty,
    not UTF-8 (which line), rows with the wrong number of fields (which rows), else the
    parser's own message. Runs on the error path only."""
    if not path.is_file():
        return "file not found"
    if path.stat().st_size == 0:
        return "the file is empty (0 bytes); expected a header line naming the columns"
    if isinstance(exc, pd.errors.EmptyDataError):
        return "no header line naming the columns"
    return _encoding_problem(path) or _ragged_rows(path) or str(exc).strip()


def _encoding_problem(path: Path) -> str | None:
    with open(path, "rb") as fh:
        if fh.read(2) in (b"\xff\xfe", b"\xfe\xff"):
            return "the file is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8"
        fh.seek(0)
        for number, line in enumerate(fh, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as bad:
                return (f"not UTF-8 text: byte 0x{line[bad.start]:02x} on line {number} "
                        "(Latin-1 or Windows-1252?); save the file as UTF-8")
    return None


def _ragged_rows(path: Path) -> str | None:
    """The rows whose number of fields differs from the header's, counted and shown."""
    ragged: list[pacsv.InvalidRow] = []

    def keep(row: pacsv.InvalidRow) -> str:
        ragged.append(row)
        return "skip"

    try:  # one thread, so that pyarrow numbers the rows
        first = str(pd.read_csv(path, nrows=0).columns[0])
        pacsv.read_csv(path, read_options=pacsv.ReadOptions(use_threads=False),
                       parse_options=pacsv.ParseOptions(invalid_row_handler=keep),
                       convert_options=pacsv.ConvertOptions(
                           include_columns=[first], column_types={first: pyarrow.string()}))
    except (ValueError, OSError, pyarrow.ArrowException):
        pass
    if not ragged:
        return None
    examples = ", ".join(f"row {row.number - 2} has {row.actual_columns} fields: {row.text[:60]!r}"
                         for row in ragged[:MAX_EXAMPLES])
    return (f"{len(ragged)} row(s) with a number of fields other than the header's "
            f"{ragged[0].expected_columns} (truncated or ragged file); e.g. {examples}")


def _as_sorted_codes(path: Path, column: str, values: pd.Series) -> pd.Series:
    if isinstance(values.dtype, pd.CategoricalDtype):
        cats = values.cat.categories
        if not (pd.api.types.is_string_dtype(cats) or pd.api.types.is_object_dtype(cats)):
            raise _not_text(path, column, cats.dtype)
        return values.cat.reorder_categories(sorted(cats))
    if not pd.api.types.is_string_dtype(values) and not values.isna().all():
        raise _not_text(path, column, values.dtype)
    codes = values.astype("category")
    return codes.cat.reorder_categories(sorted(codes.cat.categories))


def _not_text(path: Path, column: str, dtype) -> InputValidationError:
    return InputValidationError(
        f"{path}: column {column} has type {dtype}; codes must be text "
        "(for example institution '00366900', with its leading zeros)")


def validate(path: Path, df: pd.DataFrame, schema: pa.DataFrameSchema) -> pd.DataFrame:
    try:
        return schema.validate(df, lazy=True, inplace=True)
    except SchemaErrors as err:
        raise InputValidationError(describe_failures(path, err.failure_cases)) from None


def describe_failures(path: Path, failures: pd.DataFrame,
                      counts: dict[tuple[str, str], int] | None = None,
                      where: Callable[[int], str] | None = None,
                      extra: tuple[str, ...] = ()) -> str:
    """One line per broken rule: column(s), check, number of bad rows, examples. `counts`
    gives the number of bad rows per (schema context, check) when `failures` holds only
    the first ones (a streamed input); `where` names a row ('row 12' by default); `extra`
    lines are added as they are."""
    where = where or (lambda row: f"row {row}")
    lines = [f"{path}: input rejected; nothing was released."]
    failures = failures.assign(column=failures["column"].fillna("(table)"),
                               check=failures["check"].astype(str))
    for (context, check), group in failures.groupby(["schema_context", "check"], sort=False):
        columns = TABLE_CHECK_COLUMNS.get(check) or ", ".join(dict.fromkeys(group["column"].astype(str)))
        rows = group.drop_duplicates("index")
        has_rows = rows["index"].notna().any()
        if context == "DataFrameSchema" or not has_rows:
            examples = ", ".join(where(int(i)) for i in rows["index"].dropna().head(MAX_EXAMPLES))
            if not has_rows:
                examples = "; ".join(map(str, group["failure_case"].head(MAX_EXAMPLES)))
        else:
            examples = ", ".join(f"{where(int(i))}: {v!r}" for i, v in
                                 zip(rows["index"].head(MAX_EXAMPLES),
                                     rows["failure_case"].head(MAX_EXAMPLES)))
        n_rows = (counts or {}).get((context, check), len(rows))
        count = f"{n_rows} bad row(s)" if has_rows else "column-level failure"
        lines.append(f"  column {columns}: check {check} failed, {count}; e.g. {examples}")
    lines += list(extra)
    if any(line.startswith("  column person_id: check unique failed") for line in lines):
        lines.append(SEVERAL_DEGREES_HINT)
    return "\n".join(lines)


def link_outcomes(grad_path: Path, out_path: Path, graduates: pd.DataFrame,
                  outcomes: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Sort graduates by person_id and find each outcome's graduate; reject unknown persons."""
    ids = graduates["person_id"].to_numpy()
    if len(ids) > 1 and not (ids[1:] > ids[:-1]).all():
        graduates = graduates.sort_values("person_id", kind="stable", ignore_index=True)
        ids = graduates["person_id"].to_numpy()
    wanted = outcomes["person_id"].to_numpy()
    row = np.searchsorted(ids, wanted)
    row_clipped = np.minimum(row, len(ids) - 1) if len(ids) else row
    known = (row < len(ids)) & (ids[row_clipped] == wanted) if len(ids) else np.zeros(len(wanted), bool)
    if not known.all():
        bad = np.flatnonzero(~known)
        examples = ", ".join(f"row {i}: {wanted[i]}" for i in bad[:MAX_EXAMPLES])
        raise InputValidationError(
            f"{out_path}: input rejected; nothing was released.\n  column person_id: "
            f"{len(bad)} outcome row(s) for a person not in {grad_path.name}; e.g. {examples}")
    return graduates, row


def read_whole(source: InputFiles, columns: tuple[str, ...]) -> pd.DataFrame:
    """All rows of an input in one DataFrame (for inputs that fit in memory)."""
    if source.is_csv:
        return read_csv_input(source.path, columns)
    chunks = list(source.chunks(columns, chunk_rows=max(source.rows, 1)))
    if len(chunks) == 1:
        return chunks[0]
    whole = pd.concat([c.astype({k: object for k in columns if k in CODE_COLUMNS})
                       for c in chunks])
    return convert_columns(source.path, whole, columns)


def read_inputs(data_dir: Path, first_year: int, last_year: int,
                cip_vintages: CipVintages | None = None) -> ValidatedInputs:
    """Read, validate and link graduates and outcomes, whole, in memory (the accuracy
    studies; a release streams them: tasks/inputs/true_counts.py). Privacy cost: none."""
    sources = find_inputs(data_dir)
    grad_path, out_path = (s.path for s in sources)
    problems, tables = [], []
    graduates_rules = graduates_schema(first_year, last_year, cip_vintages)
    for source, columns, schema in ((sources[0], GRADUATE_COLUMNS, graduates_rules),
                                    (sources[1], OUTCOME_COLUMNS, outcomes_schema())):
        try:  # check both files, so that one run reports every problem
            tables.append(validate(source.path, read_whole(source, columns), schema))
        except InputValidationError as exc:
            problems.append(str(exc))
    if problems:
        raise InputValidationError("\n".join(problems))
    graduates, outcomes = tables
    graduates, row = link_outcomes(grad_path, out_path, graduates, outcomes)
    prints = {k: v for s in sources for k, v in s.fingerprints(Path(data_dir)).items()}
    checks = [
        {"name": f"{grad_path.name} passes the graduates schema", "result": f"passed ({len(graduates):,} rows)"},
        {"name": f"{out_path.name} passes the outcomes schema", "result": f"passed ({len(outcomes):,} rows)"},
        {"name": "every outcome belongs to a known graduate", "result": "passed"},
    ]
    return ValidatedInputs(graduates, outcomes, row, prints, checks)


@file_task("validate inputs")
def validate_inputs(data_dir: Path, first_year: int, last_year: int,
                    cip_vintages: CipVintages | None = None) -> ValidatedInputs:
    started = time.perf_counter()
    progress(f"validating inputs in {data_dir}")
    inputs = read_inputs(data_dir, first_year, last_year, cip_vintages)
    progress(f"inputs valid: {len(inputs.graduates):,} graduates, {len(inputs.outcomes):,} "
             f"outcome rows ({time.perf_counter() - started:.1f} s)")
    return inputs
