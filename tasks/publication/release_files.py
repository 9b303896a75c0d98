"""Writing a release: a staging folder next to the destination, a manifest of SHA-256
fingerprints, then one atomic rename. A failed run leaves no partial release."""
from __future__ import annotations

import glob
import json
import os
import shutil
import uuid
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from pseo_das.errors import PseoDasError
from pseo_das.schemas.distribution import ALL_FOLDER, open_output
from pseo_das.schemas.pseo_layout import TableCheck, text_table
from pseo_das.tasks import progress
from pseo_das.schemas.written_hashes import HashingFile, file_sha256
from pseo_das.tasks.publication.earlier_copies import link_earlier_copies
from pseo_das.tasks.privacy.store import exclusive_lock

MANIFEST = "internal/manifest.json"


class DestinationExistsError(PseoDasError, FileExistsError):
    """The release folder already exists: releases are never overwritten."""

    quotes_records = False


class DestinationUnusable(PseoDasError, ValueError):
    """The release folder cannot be created there (not a folder, not writable, no room)."""

    quotes_records = False


def check_destination(out_dir: Path) -> None:
    if out_dir.exists():
        raise DestinationExistsError(
            f"{out_dir} already exists; releases are never overwritten, choose a new --out")


MIN_FREE_BYTES = 256 * 2 ** 20   # a release of the default synthetic data takes a few MB
GLOB_CHARACTERS = "*?["


def check_destination_usable(out_dir: Path) -> None:
    """Before anything is recorded: the release folder's name is plain (no glob
    characters), it does not exist, its parent is (or can be created as) a writable folder,
    with room for a release."""
    if any(c in str(out_dir) for c in GLOB_CHARACTERS):
        raise DestinationUnusable(f"{out_dir}: a release folder's path may not contain "
                                  f"{', '.join(GLOB_CHARACTERS)} (glob characters); choose a "
                                  "plain --out")
    parent = out_dir.parent
    existing = parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise DestinationUnusable(f"{out_dir}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DestinationUnusable(f"{out_dir}: cannot write in {existing} (permission denied)")
    free = shutil.disk_usage(existing).free
    if free < MIN_FREE_BYTES:
        raise DestinationUnusable(f"{out_dir}: only {free / 2 ** 20:,.0f} MB free on the disk "
                                     f"of {existing}; a release needs room (at least "
                                     f"{MIN_FREE_BYTES // 2 ** 20} MB)")


@contextmanager
def destination_lock(out_dir: Path):
    """One release at a time writes to `out_dir` (a lock file beside it, removed after)."""
    lock = out_dir.parent / f".{out_dir.name}.lock"
    with exclusive_lock(lock, f"the release folder {out_dir}"):
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)


def published_release(out_dir: Path, release_id: str) -> dict | None:
    """The manifest of release `release_id` if it is already complete in `out_dir` (every
    file present and matching its SHA-256); None if `out_dir` does not exist. Anything
    else in the way raises DestinationExistsError: releases are never overwritten."""
    if not out_dir.exists():
        return None
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        manifest = None
    if manifest is None or manifest.get("release_id") != release_id:
        check_destination(out_dir)
    on_disk = fingerprints(out_dir)
    if on_disk != manifest["files"]:
        differ = sorted(set(on_disk.items()) ^ set(manifest["files"].items()))
        raise DestinationExistsError(
            f"{out_dir} holds release {release_id} but its files do not match its manifest "
            f"({', '.join(sorted({name for name, _ in differ}))}); it is left as it is")
    return manifest


def discard_stale_staging(out_dir: Path) -> None:
    """Remove staging folders left by killed runs of this destination."""
    for stale in out_dir.parent.glob(f".{glob.escape(out_dir.name)}.staging-*"):
        shutil.rmtree(stale, ignore_errors=True)


def new_staging(out_dir: Path, discard_stale: bool = True) -> Path:
    """A new staging folder beside `out_dir` (with its destination lock held); those of
    killed runs of the destination are removed first unless `discard_stale` is False."""
    check_destination(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    if discard_stale:
        discard_stale_staging(out_dir)
    staging = out_dir.parent / f".{out_dir.name}.staging-{uuid.uuid4().hex[:8]}"
    (staging / "public" / ALL_FOLDER).mkdir(parents=True)
    (staging / "internal").mkdir()
    return staging


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    frame.to_csv(path, index=False, lineterminator="\n")


def csv_text(table: pa.Table) -> pa.Buffer:
    """The table's rows as CodeTableWriter writes them: plain CSV lines, no header (coded
    columns decoded first: Arrow's writer is quicker with plain text)."""
    table = pa.table([column.cast(column.type.value_type) if pa.types.is_dictionary(column.type)
                      else column for column in table.columns], names=table.column_names)
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(table, sink, pa_csv.WriteOptions(include_header=False, quoting_style="none"))
    return sink.getvalue()


def row_offsets(text, rows: int) -> np.ndarray:
    """Where each of the `rows` lines of CSV text (`csv_text`: codes and numbers, no
    newline inside a line) starts, and where the last one ends: rows + 1 byte offsets.
    ValueError if the text does not hold `rows` lines, each ending in a newline."""
    ends = np.flatnonzero(np.frombuffer(text, np.uint8) == ord("\n")) + 1
    if len(ends) != rows or (rows and ends[-1] != len(text)) or (not rows and len(text)):
        raise ValueError(f"CSV text of {len(text):,} bytes holds {len(ends):,} complete "
                         f"lines, not the {rows:,} rows it was written from")
    return np.concatenate(([0], ends))


def rows_text(text, offsets: np.ndarray, keep: np.ndarray) -> bytes:
    """The lines of `text` where `keep` (one bool per line; `offsets`: `row_offsets`, or
    every k-th of them with one bool per k lines) is true, in order: the text the kept
    rows alone would be written as. Consecutive kept lines are copied as one piece."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], keep.astype(np.int8), [0]))))
    view = memoryview(text)
    return b"".join(view[offsets[a]:offsets[b]] for a, b in zip(edges[::2], edges[1::2]))


class CodeTableWriter:
    """Fast plain CSV for the public tables, written in pieces: nothing quoted, empty for
    missing; the bytes do not depend on how the rows are split; gzipped (deterministic
    bytes, schemas/distribution.py) when `path` ends in .gz. Only for tables whose text
    columns are codes that passed the output schemas (digits and letters, never a comma or
    a quote). `check`: the official layout check (schemas/pseo_layout.TableCheck) the
    rows go through as they are written."""

    def __init__(self, path: Path, columns: list[str], check: TableCheck | None = None):
        self.columns = list(columns)
        self.rows = 0
        self.check = check
        self._out = open_output(path)
        self._out.write((",".join(self.columns) + "\n").encode())

    def write(self, rows: pd.DataFrame | pa.Table) -> pa.Buffer:
        """Write the rows; returns their CSV text as written (one line per row, each
        ending in a newline), which `write_text` can write again in part (`rows_text`)."""
        table = rows if isinstance(rows, pa.Table) else pa.Table.from_pandas(rows, preserve_index=False)
        if table.column_names != self.columns:
            raise ValueError(f"columns {table.column_names} differ from {self.columns}")
        if self.check is not None:   # checked and written as text: each column cast once
            table = text_table(table)
            self.check.add_text(table)
        text = csv_text(table)
        self.write_text(text, table.num_rows)
        return text

    def write_text(self, text, rows: int) -> None:
        """Rows already formatted as this file's CSV lines (`write`'s text, or rows of it:
        `rows_text`), `rows` of them; not checked."""
        self._out.write(text)
        self.rows += rows

    def close(self) -> None:
        self._out.close()

    def __enter__(self) -> "CodeTableWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


PARQUET_ROW_GROUP_ROWS = 1 << 20
# Fixed writer options: the bytes depend on the rows and the pyarrow version only (Parquet
# records no time; its `created_by` names the writer's version).
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 3, "use_dictionary": True,
                   "write_statistics": True, "version": "2.6", "data_page_version": "1.0",
                   "store_schema": True}


class ParquetTableWriter:
    """Parquet written in pieces, in deterministic bytes (PARQUET_OPTIONS; row groups of
    PARQUET_ROW_GROUP_ROWS rows however the rows arrive). Each piece is cast to `schema`.
    Text is dictionary-coded by Parquet; a dictionary-coded field of `schema` is written
    from its codes (no decoding: the pieces' dictionaries are unified row group by row
    group, so its bytes also depend on how the rows are split into pieces), and the file
    then records no Arrow schema: readers get its text as plain text, as for a text field.
    Such a table (internal flows_state, read whole) has no statistics for its coded fields:
    the minimum and maximum of their text took a third of the writer's CPU."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.schema = schema
        self.rows = 0
        self._pending: list[pa.Table] = []
        self._file = HashingFile(path)
        coded = any(pa.types.is_dictionary(field.type) for field in schema)
        options = {**PARQUET_OPTIONS, "store_schema": not coded}
        if coded:
            options["write_statistics"] = [field.name for field in schema
                                           if not pa.types.is_dictionary(field.type)]
        self._writer = pq.ParquetWriter(self._file, schema, **options)

    def write(self, rows: pa.Table) -> None:
        self._pending.append(rows.cast(self.schema))
        self.rows += rows.num_rows
        if sum(t.num_rows for t in self._pending) >= PARQUET_ROW_GROUP_ROWS:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        pending = pa.concat_tables(self._pending)
        whole = pending.num_rows if final else \
            pending.num_rows - pending.num_rows % PARQUET_ROW_GROUP_ROWS
        if whole:
            self._writer.write_table(pending.slice(0, whole).unify_dictionaries(),
                                     row_group_size=PARQUET_ROW_GROUP_ROWS)
        self._pending = [pending.slice(whole)] if whole < pending.num_rows else []

    def close(self) -> None:
        if self._pending:
            self._flush(final=True)
        self._writer.close()
        self._file.close()

    def __enter__(self) -> "ParquetTableWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_code_table(rows: pd.DataFrame | pa.Table | Iterable[pd.DataFrame | pa.Table],
                     path: Path, columns: list[str] | None = None,
                     check: TableCheck | None = None) -> int:
    """A table, or its blocks one after the other, as one plain CSV file (CodeTableWriter;
    `columns`: those of the blocks, by default those of the table); returns the rows."""
    blocks: Iterable[pd.DataFrame | pa.Table] = rows
    if isinstance(rows, pd.DataFrame):
        blocks, columns = [rows], columns or list(rows.columns)
    elif isinstance(rows, pa.Table):
        blocks, columns = [rows], columns or rows.column_names
    elif columns is None:
        raise TypeError("write_code_table: blocks of a table need their `columns`")
    with CodeTableWriter(path, columns, check) as writer:
        for block in blocks:
            writer.write(block)
        return writer.rows


def fingerprints(root: Path, folder: str | None = None,
                 known: dict[str, str] | None = None) -> dict[str, str]:
    """SHA-256 of every file under root (or root/folder), by relative path, sorted; those
    of `known` (files hashed earlier and not written since) are taken from it, those this
    process wrote from the hashes of their bytes as written (written_hashes.py)."""
    base = root / folder if folder else root
    known = known or {}
    names = [str(p.relative_to(root)) for p in sorted(base.rglob("*")) if p.is_file()]
    return {name: known[name] if name in known else file_sha256(root / name)
            for name in names if name != MANIFEST}


def manifest_text(release_id: str, mlflow_run_id: str, tracking_uri: str, store_chain: dict,
                  files: dict[str, str], review: dict | None = None) -> str:
    """internal/manifest.json: the SHA-256 of every file, where the release's audit run is,
    the privacy store's chain heads the release read and wrote, and (`review`) the
    disclosure review board's clearance of a reviewed release."""
    return json.dumps(
        {"release_id": release_id, "mlflow_run_id": mlflow_run_id, "tracking_uri": tracking_uri,
         "store_chain": store_chain, **({"review": review} if review else {}),
         "algorithm": "sha256", "files": files}, indent=2) + "\n"


def write_manifest(staging: Path, release_id: str, mlflow_run_id: str,
                   tracking_uri: str, store_chain: dict,
                   known: dict[str, str] | None = None) -> dict[str, str]:
    """The manifest (`manifest_text`) of every file in `staging` (`known`: those hashed
    earlier and not written since)."""
    files = fingerprints(staging, known=known)
    (staging / MANIFEST).write_text(manifest_text(release_id, mlflow_run_id, tracking_uri,
                                                  store_chain, files))
    return files


def publish(staging: Path, out_dir: Path) -> Path:
    """Atomically move the staged release to its destination, its files identical to an
    earlier release's beside it hard-linked to them first (earlier_copies.py)."""
    check_destination(out_dir)
    linked = link_earlier_copies(staging, out_dir)
    if linked.files or linked.not_linked:
        progress(f"{out_dir.name}: {linked.summary()}")
    os.rename(staging, out_dir)
    return out_dir


def discard(staging: Path | None) -> None:
    if staging is not None and staging.exists():
        shutil.rmtree(staging)
