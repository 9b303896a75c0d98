"""The Dask engine: the same true counts as the in-process engine, computed by the workers
of a Dask cluster. Privacy cost: none (no noise is drawn here or on any worker).

The release process plans the work from the Parquet footers only: the graduates' row
groups, in order, are cut into tasks of about `chunk_rows` graduates, each owning a
person_id range (ranges tile the whole line, so every outcome row belongs to exactly one
task); a task reads its graduates' row groups and the outcome row groups whose person_id
statistics meet its range, keeps the outcome rows of its range, validates both with the
pandera schemas of a release, links and counts them (true_counts.count_chunk). Workers
return cell-level counts and validation failures only; the release process adds them up
(true_counts.CountsAccumulator: integer sums, so any order of completion gives the same
counts), checks the rules that span tasks, and draws the noise itself, later, on the
cell-level tables.

It needs both inputs as Parquet sorted by person_id, with row-group statistics (as
pyarrow and Spark write them): the footers must show increasing person_id ranges. Other
inputs are refused with the reason; the in-process engine reads them (it partitions them
on disk). Workers read the files at the paths the release process sees: a shared file
system, with pseo-das installed in the workers' environment.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from pseo_das.config import ReleaseConfig
from pseo_das.schemas.inputs import (EMPLOYER_COLUMN, GRADUATE_COLUMNS, OUTCOME_COLUMNS,
                                     CipVintages, graduates_schema, outcomes_schema)
from pseo_das.tasks import progress
from pseo_das.tasks.inputs.cpi import ConsumerPrices
from pseo_das.tasks.inputs.ingest import (CHUNK_ROWS, InputFiles, InputValidationError,
                                          convert_columns, find_inputs)
from pseo_das.tasks.inputs.person_chunks import FailureLog, Validator, concat_chunks, linked_chunk
from pseo_das.tasks.inputs.true_counts import (ChunkCounts, CountingRules, CountsAccumulator,
                                               TrueCounts, check_employer_column,
                                               count_chunk, input_checks)

LOWEST, HIGHEST = np.iinfo(np.int64).min, np.iinfo(np.int64).max


@dataclass(frozen=True)
class RowGroup:
    file: Path
    index: int
    first_row: int        # input row number of its first row
    low: int              # person_id statistics
    high: int


@dataclass(frozen=True)
class RangeTask:
    """The graduates of some row groups and every outcome row of person_id low..high."""
    low: int
    high: int
    graduates: tuple[RowGroup, ...]
    outcomes: tuple[RowGroup, ...]


@dataclass
class RangeResult:
    counts: ChunkCounts | None            # None when a row failed validation
    graduates: FailureLog
    outcomes: FailureLog
    inst_state: dict[str, tuple[str, int]]
    rows: dict[str, int]


def row_groups(source: InputFiles) -> list[RowGroup]:
    """The row groups of a Parquet input with their person_id statistics; refused when
    they are missing or show rows out of person_id order."""
    if source.is_csv:
        raise InputValidationError(f"{source.path}: the Dask engine reads Parquet inputs; "
                                   "use --engine local for CSV")
    groups = []
    for file, first in zip(source.files, source.first_rows):
        metadata = pq.ParquetFile(file).metadata
        column = metadata.schema.to_arrow_schema().get_field_index("person_id")
        for k in range(metadata.num_row_groups):
            group = metadata.row_group(k)
            stats = group.column(column).statistics
            if group.num_rows == 0:
                continue
            if stats is None or not stats.has_min_max:
                raise InputValidationError(
                    f"{file}: row group {k} has no person_id statistics; the Dask engine plans "
                    "its work from them: rewrite the file with statistics, or use --engine local")
            groups.append(RowGroup(file, k, first, int(stats.min), int(stats.max)))
            first += group.num_rows
    for before, after in zip(groups, groups[1:]):
        if after.low < before.high:
            raise InputValidationError(
                f"{source.path} is not sorted by person_id (row group statistics: "
                f"{before.file.name} group {before.index} ends at {before.high}, "
                f"{after.file.name} group {after.index} starts at {after.low}); the Dask engine "
                "needs inputs sorted by person_id: sort them, or use --engine local")
    return groups


def plan_tasks(graduates: InputFiles, outcomes: InputFiles, chunk_rows: int) -> list[RangeTask]:
    """Tasks of about `chunk_rows` graduates whose person_id ranges tile the int64 line."""
    grad_groups, out_groups = row_groups(graduates), row_groups(outcomes)
    sizes = {(g.file, g.index): pq.ParquetFile(g.file).metadata.row_group(g.index).num_rows
             for g in grad_groups}
    batches, current, n = [], [], 0
    for group in grad_groups:
        current.append(group)
        n += sizes[(group.file, group.index)]
        if n >= chunk_rows:
            batches.append(current)
            current, n = [], 0
    if current:
        batches.append(current)
    tasks = []
    for k, batch in enumerate(batches):
        low = LOWEST if k == 0 else batch[0].low
        high = HIGHEST if k == len(batches) - 1 else batches[k + 1][0].low - 1
        mine = tuple(g for g in out_groups if g.high >= low and g.low <= high)
        tasks.append(RangeTask(low, high, tuple(batch), mine))
    if not tasks and out_groups:
        tasks.append(RangeTask(LOWEST, HIGHEST, (), tuple(out_groups)))
    return tasks


def _read_groups(source: InputFiles, groups: tuple[RowGroup, ...],
                 columns: tuple[str, ...]) -> pd.DataFrame:
    chunks = []
    for group in groups:
        df = pq.ParquetFile(group.file).read_row_group(group.index, columns=list(columns)).to_pandas()
        df.index = pd.RangeIndex(group.first_row, group.first_row + len(df))
        chunks.append(convert_columns(group.file, df, columns))
    if not chunks:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in columns})
    return concat_chunks(source, chunks)


def count_range(task: RangeTask, graduates: InputFiles, outcomes: InputFiles,
                rules: CountingRules, schemas: tuple) -> RangeResult:
    """A worker's job: read, validate, link and count one task's persons."""
    validator = Validator(graduates, outcomes, *schemas)
    grads = _read_groups(graduates, task.graduates, GRADUATE_COLUMNS)
    # employer_id too when employers are protected: x_v is then counted on the workers
    # (the graduates of each flow at each establishment, keyed by the employer's id, so
    # the tasks' counts add up to those of the local engine)
    outs = _read_groups(outcomes, task.outcomes, OUTCOME_COLUMNS
                        + ((EMPLOYER_COLUMN,) if rules.employers else ()))
    ids = outs["person_id"].to_numpy()
    outs = outs[(ids >= task.low) & (ids <= task.high)]
    if len(grads):
        _check_order(validator.graduates, grads)
        grads = validator.check_graduates(grads)
    if len(outs):
        _check_order(validator.outcomes, outs)
    chunk = linked_chunk(validator, grads if len(grads) else None, outs)
    counts = None if validator.failed else count_chunk(chunk, rules)
    return RangeResult(counts, validator.graduates, validator.outcomes, validator.inst_state,
                       {"graduates": len(grads), "outcomes": len(outs)})


def _check_order(log: FailureLog, rows: pd.DataFrame) -> None:
    ids = rows["person_id"].to_numpy()
    bad = np.flatnonzero(np.diff(ids) < 0) + 1
    if len(bad):
        log.add_rows("person_id", "{n} row(s) out of person_id order (the Dask engine needs "
                     "inputs sorted by person_id)", rows.index.to_numpy()[bad])


def dask_counts(data_dir: Path, cfg: ReleaseConfig, cip_vintages: CipVintages | None,
                cpi: ConsumerPrices, scheduler: str | None = None,
                chunk_rows: int = CHUNK_ROWS, workers: int = 2) -> TrueCounts:
    """The release's true counts computed on a Dask cluster: the one at `scheduler`
    (tcp://host:port), else a LocalCluster of `workers` processes. Same result as
    true_counts.read_counts, bad input included."""
    from dask.distributed import Client, LocalCluster, as_completed

    started = time.perf_counter()
    data_dir = Path(data_dir)
    graduates, outcomes = find_inputs(data_dir)
    tasks = plan_tasks(graduates, outcomes, chunk_rows)
    rules = CountingRules.of(cfg, cfg.cip.switch_year, cpi)
    if rules.employers:
        check_employer_column(outcomes, cfg)
    schemas = (graduates_schema(cfg.cells.first_cohort_year, cfg.cells.last_earnings_year,
                                cip_vintages), outcomes_schema())
    cluster = None if scheduler else LocalCluster(n_workers=workers, threads_per_worker=1,
                                                 processes=True, dashboard_address=None,
                                                 silence_logs=logging.WARNING)
    accumulator = CountsAccumulator(rules)
    results: dict[int, RangeResult] = {}
    failed = False
    try:
        with Client(scheduler or cluster) as client:
            where = scheduler or f"a local cluster of {workers} worker processes"
            progress(f"Dask engine: {len(tasks)} task(s) on {where}")
            futures = client.map(count_range, tasks, graduates=graduates, outcomes=outcomes,
                                 rules=rules, schemas=schemas, pure=False)
            index = {future.key: k for k, future in enumerate(futures)}
            for done, future in enumerate(as_completed(futures), start=1):
                result = future.result()
                future.release()
                failed = failed or result.counts is None
                if not failed:
                    accumulator.add(result.counts)
                result.counts = None
                results[index[future.key]] = result
                progress(f"Dask engine: {done} of {len(tasks)} task(s) counted "
                         f"({time.perf_counter() - started:.1f} s)")
    finally:
        if cluster is not None:
            cluster.close()
    validator = Validator(graduates, outcomes, *schemas)
    for k in sorted(results):  # failures in input order, whatever the order of completion
        _merge(validator, results[k])
    validator.raise_if_failed()
    rows = {name: sum(r.rows[name] for r in results.values()) for name in ("graduates", "outcomes")}
    fingerprints = {**graduates.fingerprints(data_dir), **outcomes.fingerprints(data_dir)}
    return TrueCounts(accumulator.result(), fingerprints, input_checks(graduates, outcomes, rows),
                      rows, accumulator.moments())


def _merge(validator: Validator, result: RangeResult) -> None:
    validator.graduates.merge(result.graduates)
    validator.outcomes.merge(result.outcomes)
    for institution, (state, row) in result.inst_state.items():
        first = validator.inst_state.setdefault(institution, (state, row))
        if first[0] != state:
            validator.graduates.add_rows("institution, inst_state",
                                         "check one_inst_state_per_institution failed, {n} bad "
                                         "row(s) (in different chunks)",
                                         np.array(sorted([first[1], row])))
