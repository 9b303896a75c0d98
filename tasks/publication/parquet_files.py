"""The national tables for modern data users, pseo-das's extension (not part of the Census
Bureau's distribution): `all/parquet/<table>.parquet`, each national table (pseoe_all,
pseof_all, pseoh_all, pseo_all_institutions) typed as its columns say
(schemas/table_package.py: integers, text codes, empty values as nulls), and
`all/datapackage.json`, the Frictionless Data Package describing every column, code list and
status flag of the tables as published in `all/`. Only the national tables: a state's files
are its rows of them (filter on `institution` / its state). Privacy cost: none (the
published tables, read back as written and converted).

The bytes are the same on every run (release_files.PARQUET_OPTIONS; the descriptor names no
time and no release), so a rerun's copies are identical and can be hard-linked."""
from __future__ import annotations

import json
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from itertools import chain
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pandas as pd

from pseo_das.schemas.distribution import ALL_FOLDER, TableFormat, published_table, table_path
from pseo_das.schemas.pseo_layout import text_column
from pseo_das.schemas.table_package import (TableField, arrow_schema, datapackage,
                                            public_table_fields)
from pseo_das.tasks.publication.release_files import CodeTableWriter, ParquetTableWriter

PARQUET_FOLDER = "parquet"
DATAPACKAGE_FILE = "datapackage.json"
READ_BLOCK_BYTES = 16 << 20


def parquet_name(csv_name: str) -> str:
    return csv_name.removesuffix(".csv") + ".parquet"


def write_parquet_copy(source: Path, path: Path, fields: tuple[TableField, ...]) -> int:
    """`source` (a published table, gzipped or not) as Parquet at `path`, typed by
    `fields`; returns its rows. Raises ValueError when its columns are not the fields'."""
    schema = arrow_schema(fields)
    reader = pa_csv.open_csv(
        source, read_options=pa_csv.ReadOptions(block_size=READ_BLOCK_BYTES, use_threads=False),
        convert_options=pa_csv.ConvertOptions(
            column_types={f.name: f.type.arrow for f in fields}, strings_can_be_null=False))
    if reader.schema.names != schema.names:
        raise ValueError(f"{source.name}: columns {reader.schema.names} are not {schema.names}")
    with ParquetTableWriter(path, schema) as writer:
        for batch in reader:
            writer.write(pa.Table.from_batches([batch]))
        return writer.rows


def as_read(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The rows of a table as `write_parquet_copy` reads them from the CSV file written
    from it: each column as the text the file holds (a null: the empty text) for a text
    field, as its integers (a null: empty) for an integer field."""
    columns = []
    for field in schema:
        column = table.column(field.name)
        if pa.types.is_string(field.type) or pa.types.is_string(column.type):
            column = text_column(column)                            # the file's text
            if not pa.types.is_string(field.type):                  # integers read from it
                column = pc.if_else(pc.equal(column, ""), pa.scalar(None, pa.string()), column)
        columns.append(column.cast(field.type))
    return pa.table(columns, schema=schema)


class ParquetCopyWriter:
    """The Parquet copy of a national table (`csv_name`) written from the Arrow tables its
    CSV file is written from, as they go by: the bytes of `write_parquet_copy` of the file,
    without reading it back. The copy is made in a thread of its own (Arrow converts and
    compresses without the GIL), at most PENDING_TABLES tables behind the writes."""

    PENDING_TABLES = 2

    def __init__(self, public: Path, csv_name: str):
        folder = public / ALL_FOLDER / PARQUET_FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / parquet_name(csv_name)
        self.name = str(self.path.relative_to(public))
        self.rows = 0
        self._thread = ThreadPoolExecutor(1)
        self._pending: list[Future] = []
        self._writer = self._thread.submit(self._open, csv_name)

    def _open(self, csv_name: str) -> ParquetTableWriter:
        return ParquetTableWriter(self.path, arrow_schema(public_table_fields()[csv_name]))

    def _write(self, table: pa.Table) -> None:
        writer = self._writer.result()
        writer.write(as_read(table, writer.schema))

    def write(self, table: pa.Table) -> None:
        while self._pending and (self._pending[0].done()
                                 or len(self._pending) >= self.PENDING_TABLES):
            self._pending.pop(0).result()          # raises what went wrong in the thread
        self._pending.append(self._thread.submit(self._write, table))
        self.rows += table.num_rows

    def close(self) -> None:
        try:
            for future in self._pending:
                future.result()
            writer = self._writer.result()
            writer.close()
            if writer.rows != self.rows:
                raise RuntimeError(f"{self.name}: {writer.rows:,} rows written of {self.rows:,}")
        finally:
            self._thread.shutdown()

    def __enter__(self) -> "ParquetCopyWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


COPY_BLOCK_ROWS = 1 << 18


def write_national_table(frame: pd.DataFrame | Iterable[pd.DataFrame], public: Path,
                         csv_name: str, table_format: TableFormat, check=None,
                         parquet: bool = False) -> dict[str, int]:
    """A national table (`frame`, or its blocks of rows one after the other, published as
    `csv_name` in `public`'s all/ folder in `table_format`) written by CodeTableWriter,
    through the layout `check` if given, and, with `parquet`, its Parquet copy from the
    same Arrow tables (`ParquetCopyWriter`); returns the copy's rows by its path relative
    to `public` (nothing without `parquet`), for `write_table_package`. The bytes do not
    depend on how the rows are split into blocks."""
    blocks = iter([frame] if isinstance(frame, pd.DataFrame) else frame)
    first = next(blocks)
    with ExitStack() as files:
        writer = files.enter_context(CodeTableWriter(
            published_table(public, csv_name, table_format), list(first.columns), check))
        copy = files.enter_context(ParquetCopyWriter(public, csv_name)) if parquet else None
        for rows in chain([first], blocks):
            table = pa.Table.from_pandas(rows, preserve_index=False)
            for start in range(0, max(table.num_rows, 1), COPY_BLOCK_ROWS):
                block = table.slice(start, COPY_BLOCK_ROWS)
                writer.write(block)
                if copy is not None:
                    copy.write(block)
    return {} if copy is None else {copy.name: copy.rows}


def write_table_package(public: Path, copied: dict[str, int] | None = None) -> dict[str, int]:
    """all/parquet/ and all/datapackage.json of a public folder whose national tables are
    written; returns each Parquet file's rows by its path relative to `public`. `copied`:
    the copies already written as their tables were (`ParquetCopyWriter`), their rows by
    path."""
    folder = public / ALL_FOLDER / PARQUET_FOLDER
    folder.mkdir(exist_ok=True)
    published, rows, copied = {}, {}, copied or {}
    for csv_name, fields in public_table_fields().items():
        source = table_path(public, csv_name, ALL_FOLDER)
        target = folder / parquet_name(csv_name)
        name = str(target.relative_to(public))
        rows[name] = copied[name] if name in copied else write_parquet_copy(source, target, fields)
        published[csv_name] = source.name
    (public / ALL_FOLDER / DATAPACKAGE_FILE).write_text(
        json.dumps(datapackage(published), indent=2, ensure_ascii=False) + "\n")
    return rows
