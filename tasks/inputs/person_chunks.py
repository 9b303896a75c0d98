"""Graduates with their outcomes, read in chunks of whole persons and validated: how a
release reads the confidential inputs in bounded memory. Privacy cost: none (no noise,
no output).

When both inputs are sorted by person_id (as the synthetic generator and most extracts
write them), one merge pass reads them side by side: a chunk is up to CHUNK_ROWS
graduates and the outcome rows of their person_id range. When they are not, the first
out-of-order row stops that pass and a disk-backed pass starts over: both inputs are
hash-partitioned by person_id into temporary Parquet files (in TMPDIR), each partition
holding all rows of its persons, then each partition is read, sorted and linked. Memory
is bounded by the chunk (or partition) size either way, never by the number of records.

Every row is validated by the pandera schemas of a whole-file read. The checks that need
the whole file hold across chunks: a person's graduate row and outcome rows are always in
one chunk, so person_id is unique in graduates, (person_id, years_after) is unique in
outcomes and every outcome's person is a graduate when each chunk passes (sorted inputs:
together with the order of consecutive chunks); one inst_state per institution is kept
per institution over the whole input. Failures are gathered over the whole of both
inputs (a count per rule, the first rows as examples) and raised together, so a bad row
in the last chunk is refused like one in the first, before any count leaves the
aggregation.
"""
from __future__ import annotations

import math
import tempfile
from concurrent.futures import ThreadPoolExecutor
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pandera.pandas as pa
import pyarrow
import pyarrow.parquet as pq
from pandera.errors import SchemaErrors

from pseo_das.errors import PseoDasError
from pseo_das.schemas.inputs import CODE_COLUMNS, GRADUATE_COLUMNS, OUTCOME_COLUMNS
from pseo_das.tasks.inputs.ingest import (CHUNK_ROWS, MAX_EXAMPLES, InputFiles,
                                          InputValidationError, convert_columns,
                                          describe_failures)

ROW = "_row"  # a partition file's column with each row's number in its input


class NotSorted(PseoDasError):
    """An input is not sorted by person_id: the merge pass cannot go on."""


@dataclass
class PersonChunk:
    """Some graduates and all their outcome rows, validated and linked."""
    graduates: pd.DataFrame       # sorted by person_id; index = row number in the input
    outcomes: pd.DataFrame        # index = row number in the input
    graduate_row: np.ndarray      # each outcome's position in `graduates`


class FailureLog:
    """The validation failures of one input, gathered over its chunks: a count per rule
    and the first rows of each as examples."""

    def __init__(self, source: InputFiles):
        self.source = source
        self.counts: Counter = Counter()                 # (context, check) -> bad rows
        self.examples: dict[tuple, list[pd.DataFrame]] = {}
        self.own: dict[tuple[str, str], tuple[int, list[str]]] = {}

    @property
    def failed(self) -> bool:
        return bool(self.counts or self.own)

    def add(self, failure_cases: pd.DataFrame) -> None:
        cases = failure_cases.assign(check=failure_cases["check"].astype(str))
        for key, group in cases.groupby(["schema_context", "check"], sort=False):
            self.counts[key] += group["index"].nunique(dropna=True)
            self._keep(key, group)

    def _keep(self, key: tuple, group: pd.DataFrame) -> None:
        kept = self.examples.setdefault(key, [])
        room = MAX_EXAMPLES - sum(g["index"].nunique(dropna=True) for g in kept)
        if room > 0 or not kept:
            first = group["index"].drop_duplicates().dropna().head(max(room, 0))
            kept.append(group[group["index"].isin(first) | group["index"].isna()])

    def merge(self, other: "FailureLog") -> None:
        """Add the failures another reader of the same input gathered (Dask workers)."""
        self.counts.update(other.counts)
        for key, groups in other.examples.items():
            for group in groups:
                self._keep(key, group)
        for (column, rule), (n, examples) in other.own.items():
            count, mine = self.own.get((column, rule), (0, []))
            self.own[(column, rule)] = (count + n, (mine + examples)[:MAX_EXAMPLES])

    def add_rows(self, column: str, rule: str, rows: np.ndarray,
                 values: np.ndarray | None = None) -> None:
        """Bad rows of a rule checked here rather than by pandera; `rule` says what is
        wrong with {n} rows."""
        count, examples = self.own.get((column, rule), (0, []))
        for i in range(min(len(rows), MAX_EXAMPLES - len(examples))):
            value = None if values is None else getattr(values[i], "item", lambda: values[i])()
            examples.append(self.source.where(int(rows[i])) + ("" if values is None else f": {value!r}"))
        self.own[(column, rule)] = (count + len(rows), examples)

    def message(self) -> str | None:
        if not self.failed:
            return None
        extra = tuple(f"  column {column}: {rule.format(n=n)}; e.g. {', '.join(examples)}"
                      for (column, rule), (n, examples) in self.own.items())
        kept = [g for groups in self.examples.values() for g in groups]
        cases = pd.concat(kept) if kept else pd.DataFrame(
            columns=["schema_context", "check", "column", "index", "failure_case"])
        return describe_failures(self.source.path, cases, dict(self.counts),
                                 self.source.where, extra)


class Validator:
    """Validates chunks of both inputs against their schemas, gathering the failures."""

    def __init__(self, graduates: InputFiles, outcomes: InputFiles,
                 graduates_schema: pa.DataFrameSchema, outcomes_schema: pa.DataFrameSchema):
        self.sources = (graduates, outcomes)
        self.schemas = {graduates.name: graduates_schema, outcomes.name: outcomes_schema}
        self.reset()

    def reset(self) -> None:
        """Forget every failure (a pass that starts over)."""
        self.graduates, self.outcomes = (FailureLog(s) for s in self.sources)
        self.inst_state: dict[str, tuple[str, int]] = {}  # institution -> (state, first row)

    @property
    def failed(self) -> bool:
        return self.graduates.failed or self.outcomes.failed

    def check(self, log: FailureLog, chunk: pd.DataFrame) -> pd.DataFrame:
        try:
            return self.schemas[log.source.name].validate(chunk, lazy=True, inplace=True)
        except SchemaErrors as err:
            log.add(err.failure_cases)
            return chunk

    def check_graduates(self, chunk: pd.DataFrame) -> pd.DataFrame:
        chunk = self.check(self.graduates, chunk)
        pairs = chunk[["institution", "inst_state"]].assign(row=chunk.index).drop_duplicates(
            ["institution", "inst_state"])
        for institution, state, row in pairs.itertuples(index=False):
            first = self.inst_state.setdefault(str(institution), (str(state), row))
            if first[0] != str(state) and first[1] not in chunk.index:
                self.graduates.add_rows("institution, inst_state",
                                        "check one_inst_state_per_institution failed, {n} bad "
                                        "row(s) (in different chunks)", np.array([first[1], row]))
        return chunk

    def raise_if_failed(self) -> None:
        problems = [m for m in (self.graduates.message(), self.outcomes.message()) if m]
        if problems:
            raise InputValidationError("\n".join(problems))


def person_chunks(graduates: InputFiles, outcomes: InputFiles, validator: Validator,
                  chunk_rows: int = CHUNK_ROWS,
                  note: Callable[[str], None] = lambda _: None,
                  outcome_columns: tuple[str, ...] = OUTCOME_COLUMNS) -> Iterator[PersonChunk]:
    """The validated, linked chunks of both inputs (module doc). Raises
    InputValidationError after the last chunk when any row failed; the caller keeps
    nothing it counted before then. `note` gets a line when the inputs are found unsorted.
    `outcome_columns`: the outcomes columns read (optional ones only when needed)."""
    try:
        yield from _merged(graduates, outcomes, validator, chunk_rows, outcome_columns)
    except NotSorted as why:
        note(f"{why}: reading both inputs again through person_id partitions on disk")
        validator.reset()
        yield from _partitioned(graduates, outcomes, validator, chunk_rows, outcome_columns)
    validator.raise_if_failed()


def _merged(graduates: InputFiles, outcomes: InputFiles, validator: Validator,
            chunk_rows: int, outcome_columns: tuple[str, ...] = OUTCOME_COLUMNS
            ) -> Iterator[PersonChunk]:
    """The merge pass over inputs sorted by person_id (NotSorted at the first row out of order)."""
    pending = prefetched(_sorted_chunks(outcomes, outcome_columns, chunk_rows))
    buffer: list[pd.DataFrame] = []
    last_graduate = None
    for chunk in prefetched(_sorted_chunks(graduates, GRADUATE_COLUMNS, chunk_rows)):
        ids = chunk["person_id"].to_numpy()
        if last_graduate is not None and ids[0] == last_graduate[0]:
            validator.graduates.add_rows("person_id", "check unique failed, {n} bad row(s) (in "
                                         "different chunks)",
                                         np.array([last_graduate[1], chunk.index[0]]))
        last_graduate = (ids[-1], chunk.index[-1])
        while not buffer or buffer[-1]["person_id"].iat[-1] <= ids[-1]:
            more = next(pending, None)
            if more is None:
                break
            buffer.append(more)
        mine, buffer = _split(outcomes, buffer, ids[-1])
        yield linked_chunk(validator, validator.check_graduates(chunk), mine)
    rest = buffer + list(pending)
    if rest:
        yield linked_chunk(validator, None, concat_chunks(outcomes, rest))


def prefetched(chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The same chunks, the next one read by a background thread while the caller works
    on the current one (Parquet decoding releases the GIL)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pseo-das-read") as reader:
        ahead = reader.submit(next, chunks, None)
        while (chunk := ahead.result()) is not None:
            ahead = reader.submit(next, chunks, None)
            yield chunk


def _sorted_chunks(source: InputFiles, columns: tuple[str, ...],
                   chunk_rows: int) -> Iterator[pd.DataFrame]:
    """The chunks of an input, checked to be sorted by person_id (non-decreasing: equal
    ids are left to the uniqueness checks)."""
    last = None
    for chunk in source.chunks(columns, chunk_rows):
        ids = chunk["person_id"].to_numpy()
        if not np.issubdtype(ids.dtype, np.integer):
            raise NotSorted(f"{source.path}: person_id is not a whole number")
        steps = np.diff(ids)
        bad = np.flatnonzero(steps < 0)
        if len(bad) or (last is not None and ids[0] < last):
            at = chunk.index[bad[0] + 1] if len(bad) else chunk.index[0]
            raise NotSorted(f"{source.path} is not sorted by person_id ({source.where(int(at))})")
        last = ids[-1]
        yield chunk


def _split(source: InputFiles, buffer: list[pd.DataFrame],
           last_id: int) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """The buffered outcome rows with person_id <= last_id, and the rest."""
    if not buffer:
        return pd.DataFrame(), []
    whole = concat_chunks(source, buffer)
    cut = int(np.searchsorted(whole["person_id"].to_numpy(), last_id, side="right"))
    return whole.iloc[:cut], ([whole.iloc[cut:]] if cut < len(whole) else [])


def concat_chunks(source: InputFiles, chunks: list[pd.DataFrame]) -> pd.DataFrame:
    """Consecutive chunks of an input as one, its code columns categoricals again."""
    if len(chunks) == 1:
        return chunks[0]
    codes = [c for c in chunks[0].columns if c in CODE_COLUMNS]
    if all(isinstance(chunk[c].dtype, pd.CategoricalDtype) for chunk in chunks for c in codes):
        common = {c: sorted(set().union(*(chunk[c].cat.categories for chunk in chunks)))
                  for c in codes}
        chunks = [chunk.assign(**{c: chunk[c].cat.set_categories(common[c]) for c in codes})
                  for chunk in chunks]
    return convert_columns(source.path, pd.concat(chunks), tuple(chunks[0].columns))


def linked_chunk(validator: Validator, graduates: pd.DataFrame | None,
            outcomes: pd.DataFrame) -> PersonChunk:
    """Validate `outcomes` and link each row to its graduate; unknown persons are failures."""
    if len(outcomes):
        outcomes = validator.check(validator.outcomes, outcomes)
    wanted = outcomes["person_id"].to_numpy() if len(outcomes) else np.zeros(0, np.int64)
    ids = (graduates["person_id"].to_numpy() if graduates is not None
           else np.zeros(0, np.int64))
    row = _positions(ids, wanted)
    known = (row < len(ids)) & (ids[np.minimum(row, max(len(ids) - 1, 0))] == wanted) \
        if len(ids) else np.zeros(len(wanted), bool)
    if not known.all():
        bad = np.flatnonzero(~known)
        validator.outcomes.add_rows(
            "person_id", "{n} outcome row(s) for a person not in "
            f"{validator.graduates.source.path.name}", outcomes.index.to_numpy()[bad], wanted[bad])
    if graduates is None:
        graduates = pd.DataFrame({c: [] for c in GRADUATE_COLUMNS})
    return PersonChunk(graduates, outcomes, np.minimum(row, max(len(ids) - 1, 0)))


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """np.searchsorted(ids, wanted), searching each run of equal values of `wanted` once
    (a person's outcome rows are consecutive: about half the searches)."""
    if len(wanted) < 2:
        return np.searchsorted(ids, wanted)
    starts = np.flatnonzero(np.r_[True, wanted[1:] != wanted[:-1]])
    return np.repeat(np.searchsorted(ids, wanted[starts]), np.diff(np.r_[starts, len(wanted)]))


def _partitioned(graduates: InputFiles, outcomes: InputFiles, validator: Validator,
                 chunk_rows: int, outcome_columns: tuple[str, ...] = OUTCOME_COLUMNS
                 ) -> Iterator[PersonChunk]:
    """The disk-backed pass: hash partitions by person_id, each sorted in memory."""
    rows = graduates.rows if graduates.rows > 0 else chunk_rows
    n_parts = max(1, math.ceil(rows / chunk_rows))
    with tempfile.TemporaryDirectory(prefix="pseo-das-partitions-") as tmp:
        parts = {source.name: _write_partitions(source, columns, n_parts, Path(tmp), chunk_rows)
                 for source, columns in ((graduates, GRADUATE_COLUMNS), (outcomes, outcome_columns))}
        for k in range(n_parts):
            grads = _read_partition(parts[graduates.name][k], graduates, GRADUATE_COLUMNS)
            outs = _read_partition(parts[outcomes.name][k], outcomes, outcome_columns)
            grads = grads.sort_values("person_id", kind="stable") if len(grads) else None
            if grads is not None:
                grads = validator.check_graduates(grads)
            yield linked_chunk(validator, grads, outs)


def _write_partitions(source: InputFiles, columns: tuple[str, ...], n_parts: int,
                      folder: Path, chunk_rows: int) -> list[Path]:
    paths = [folder / f"{source.name}-{k}.parquet" for k in range(n_parts)]
    writers: dict[int, pq.ParquetWriter] = {}
    try:
        for chunk in source.chunks(columns, chunk_rows):
            ids = chunk["person_id"].to_numpy()
            if not np.issubdtype(ids.dtype, np.integer):  # pandera names the column
                part = np.zeros(len(chunk), np.int64)
            else:
                part = (ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
                        >> np.uint64(32)) % np.uint64(n_parts)
            text = {c: chunk[c].astype(object).where(chunk[c].notna(), None)
                    for c in columns if c in CODE_COLUMNS}
            table = pyarrow.Table.from_pandas(chunk.assign(**text, **{ROW: chunk.index.to_numpy()}),
                                              preserve_index=False)
            for k in np.unique(part):
                piece = table.take(pyarrow.array(np.flatnonzero(part == k)))
                k = int(k)
                if k not in writers:
                    writers[k] = pq.ParquetWriter(paths[k], piece.schema)
                writers[k].write_table(piece.cast(writers[k].schema))
    except pyarrow.ArrowException as exc:
        raise InputValidationError(f"{source.path}: the part files disagree on the type of a "
                                   f"column: {exc}") from exc
    finally:
        for writer in writers.values():
            writer.close()
    return paths


def _read_partition(path: Path, source: InputFiles, columns: tuple[str, ...]) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in columns})
    df = pq.read_table(path).to_pandas()
    df.index = pd.Index(df.pop(ROW).to_numpy(), name=None)
    return convert_columns(source.path, df.sort_index(), columns)
