"""Read and validate the confidential inputs. Privacy cost: none (no noise, no output).

A violation raises InputValidationError naming the file, column, number of bad rows
and a few example rows; the flow stops before any noise is drawn.
"""
from __future__ import annotations

import csv
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pandera.pandas as pa
import pyarrow
import pyarrow.csv as pacsv
from pandera.errors import SchemaErrors

from pseo_das.tasks import file_task, progress
from pseo_das.schemas.inputs import (CODE_COLUMNS, GRADUATE_COLUMNS, OUTCOME_COLUMNS,
                            TABLE_CHECK_COLUMNS, CipVintages, graduates_schema,
                            outcomes_schema)

MAX_EXAMPLES = 5
DOLLAR_COLUMNS = {"earnings"}


class InputValidationError(ValueError):
    """The confidential inputs break the input contract; nothing was released."""


@dataclass
class ValidatedInputs:
    graduates: pd.DataFrame       # sorted by person_id
    outcomes: pd.DataFrame
    graduate_row: np.ndarray      # for each outcome row, its graduate's row in `graduates`
    fingerprints: dict[str, str]  # file name -> SHA-256
    checks: list[dict]            # the input checks that ran, for the audit report


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def find_input(data_dir: Path, name: str) -> Path:
    """The one input file `name`.parquet or `name`.csv in `data_dir`."""
    if not Path(data_dir).is_dir():
        raise InputValidationError(f"{data_dir}: data folder not found")
    found = [Path(data_dir) / f"{name}{suffix}" for suffix in (".parquet", ".csv")
             if (Path(data_dir) / f"{name}{suffix}").exists()]
    if len(found) > 1:
        raise InputValidationError(f"{data_dir}: both {name}.parquet and {name}.csv are there; "
                                   "which one is the release's input is ambiguous: keep one")
    if not found:
        raise InputValidationError(f"{data_dir}: no {name}.parquet or {name}.csv found")
    if found[0].is_dir():
        raise InputValidationError(
            f"{found[0]}: a folder (a partitioned Parquet dataset?); pseo-das reads one file per "
            "input, so that its SHA-256 identifies it: write the dataset as one file, e.g. "
            "pyarrow.parquet.write_table(pyarrow.dataset.dataset(folder).to_table(), file)")
    return found[0]


def read_table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """Read a Parquet or CSV input with its code columns as sorted categoricals."""
    codes = [c for c in columns if c in CODE_COLUMNS]
    if path.suffix == ".csv":
        df = read_csv(path, dtype={c: "string" for c in codes})
    else:
        try:
            df = pd.read_parquet(path)
        except (ValueError, OSError, pyarrow.ArrowException) as exc:
            why = str(exc).removeprefix(f"Could not open Parquet input source '{path}': ")
            raise InputValidationError(f"{path}: cannot read: not a readable Parquet file "
                                       f"(truncated, corrupted or not Parquet): {why}") from exc
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputValidationError(
            f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}")
    if df.empty:
        header_only = " (only a header line)" if path.suffix == ".csv" else ""
        raise InputValidationError(f"{path}: no rows{header_only}; there is nothing to release")
    df = df[list(columns)]
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
    _refuse_duplicated_header(path)
    try:
        if columns is not None:
            header, wanted = pd.read_csv(path, nrows=0).columns, set(columns)
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


def describe_failures(path: Path, failures: pd.DataFrame) -> str:
    """One line per broken rule: column(s), check, number of bad rows, examples."""
    lines = [f"{path}: input rejected; nothing was released."]
    failures = failures.assign(column=failures["column"].fillna("(table)"),
                               check=failures["check"].astype(str))
    for (context, check), group in failures.groupby(["schema_context", "check"], sort=False):
        columns = TABLE_CHECK_COLUMNS.get(check) or ", ".join(dict.fromkeys(group["column"].astype(str)))
        rows = group.drop_duplicates("index")
        has_rows = rows["index"].notna().any()
        if context == "DataFrameSchema" or not has_rows:
            examples = ", ".join(f"row {int(i)}" for i in rows["index"].dropna().head(MAX_EXAMPLES))
            if not has_rows:
                examples = "; ".join(map(str, group["failure_case"].head(MAX_EXAMPLES)))
        else:
            examples = ", ".join(f"row {int(i)}: {v!r}" for i, v in
                                 zip(rows["index"].head(MAX_EXAMPLES),
                                     rows["failure_case"].head(MAX_EXAMPLES)))
        count = f"{len(rows)} bad row(s)" if has_rows else "column-level failure"
        lines.append(f"  column {columns}: check {check} failed, {count}; e.g. {examples}")
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


def read_inputs(data_dir: Path, first_year: int, last_year: int,
                cip_vintages: CipVintages | None = None) -> ValidatedInputs:
    """Read, validate and link graduates and outcomes. Privacy cost: none."""
    grad_path, out_path = find_input(data_dir, "graduates"), find_input(data_dir, "outcomes")
    problems, tables = [], []
    graduates_rules = graduates_schema(first_year, last_year, cip_vintages)
    for path, columns, schema in ((grad_path, GRADUATE_COLUMNS, graduates_rules),
                                  (out_path, OUTCOME_COLUMNS, outcomes_schema())):
        try:  # check both files, so that one run reports every problem
            tables.append(validate(path, read_table(path, columns), schema))
        except InputValidationError as exc:
            problems.append(str(exc))
    if problems:
        raise InputValidationError("\n".join(problems))
    graduates, outcomes = tables
    graduates, row = link_outcomes(grad_path, out_path, graduates, outcomes)
    prints = {p.name: sha256_file(p) for p in (grad_path, out_path)}
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
