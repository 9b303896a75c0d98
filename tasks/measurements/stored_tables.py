"""Keeping noisy measurements and publication records in the privacy store, and reading a
release's noisy tables back from it: the only input of post-processing. Privacy cost: none.
These tasks only read or write files, and writing the same content again is a no-op, so
they are retried on failure.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.process_memory import release_unused_memory
from pseo_das.tasks import file_task, progress
from pseo_das.tasks.earnings.noisy_histograms import PRODUCT as EARNINGS_PRODUCT
from pseo_das.tasks.earnings.noisy_histograms import NoisyHistograms
from pseo_das.tasks.inputs.row_files import RowSink, rows_in_order
from pseo_das.tasks.employment_flows.noisy_flows import PRODUCT as FLOWS_PRODUCT
from pseo_das.tasks.employment_flows.noisy_flows import TOTAL_PRODUCT as FLOWS_TOTAL_PRODUCT
from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows
from pseo_das.tasks.inputs.cells import CELL_COLUMNS, CELL_KEYS, in_populations
from pseo_das.tasks.inputs.reference_inputs import ReferenceInputs
from pseo_das.tasks.codes.ipeds_counts import IpedsCounts
from pseo_das.tasks.cip_recast.recast_inputs import RecastInputs
from pseo_das.tasks.cip_recast.recast import (DIRECT, RecastContext, RecastTable, as_coded,
                                             to_cip_2020)
from pseo_das.tasks.privacy.employer_side import employer_composition
from pseo_das.tasks.privacy.geometric import geometric_composition, geometric_variance
from pseo_das.tasks.privacy.ledger import LedgerEntry, NoisyMeasurement, measured_entry
from pseo_das.tasks.privacy.post_processing import post_processing_seed
from pseo_das.tasks.privacy.streams import stream_sha256
from pseo_das.tasks.measurements.questions import read_statements
from pseo_das.tasks.measurements.release_inputs import ReleaseInputs
from pseo_das.tasks.measurements.publication_record import (PublicationRecord,
                                                            StoredIpedsAwards,
                                                            StoredRecastInputs, StoredReference)
from pseo_das.tasks.privacy.question import Question
from pseo_das.tasks.privacy.store import PrivacyStore

@file_task("keep measurements in the privacy store")   # one run per measurement
def keep_measurement(store_path: Path, measured: NoisyMeasurement) -> str:
    """Store one new measurement's noisy values (content-addressed); returns the object's
    SHA-256. Storing it again (a retry) is a no-op. Privacy cost: none."""
    with PrivacyStore.open(store_path) as store:
        return store.store_measurement(measured.measurement_id, measured.cells, measured.values)


def keep_measurements(store_path: Path, measured: Iterable[NoisyMeasurement]) -> dict[str, str]:
    """Store every new measurement as it comes (`measured` may be drawn lazily:
    `products.measure_pending`), each by its own task, retried alone on a transient I/O
    error; returns measurement id -> object SHA-256. Not a task itself: the measurements
    drawn inside a task would stay in memory until it ended (Prefect keeps the results
    of the task runs nested in one with it). Privacy cost: none."""
    stored = {}
    for m in measured:
        stored[m.measurement_id] = keep_measurement(store_path, m)
        del m
        release_unused_memory()
    if stored:
        progress(f"kept {len(stored)} new measurement(s) in the privacy store {store_path}")
    return stored


def _categorical_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells (in canonical order) with sorted categorical codes (as the cell frame has)."""
    out = cells.reset_index(drop=True)
    for column in ("institution", "inst_state", "degree_level", "cipcode"):
        out[column] = pd.Categorical(out[column], categories=sorted(out[column].unique()))
    return out.assign(noise_terms=1)


def _values_type(question: Question) -> type | None:
    """How a tabulation's values are held: flows (counts of graduates) as int32, which
    halves the largest arrays; the rest as read (None)."""
    return np.int32 if question.product == FLOWS_PRODUCT else None


def _question_table(store: PrivacyStore, question: Question, rows: pd.DataFrame,
                    recast: dict[str, RecastContext | None] | None, spill: bool = False
                    ) -> tuple[pd.DataFrame, np.ndarray, tuple[str, ...], list[LedgerEntry],
                               dict | None]:
    """The release's cells of one tabulation, read from the measurements its plan names,
    in CIP-2020 codes (each measurement recast as a whole, so that its split is the same
    in every release that reuses it; `recast`: the context of each CIP level), or as
    measured when `recast` is None. Returns the cells, values, sources, ledger entries
    (measured, recast) and the recast's summary. `spill`: the values in a file
    (`row_files`), built block by block (the recast's too)."""
    parts, sources, streams, recasts = [], [], [], []
    step_id = f"cip-recast.{question.tabulation_id}"
    for measurement_id, members in rows.groupby("measurement_id", sort=True):
        stored = store.measurement(measurement_id)
        source = stored.values_sha256()
        dtype = _values_type(question)
        cells, values = store.measured_values(   # decoded into a file, block by block
            measurement_id, dtype,
            RowSink(question.columns, dtype, spill=True) if spill and dtype else None)
        if recast is None:
            cells, values = as_coded(cells, values)
        else:
            cells, values, done = to_cip_2020(
                cells, values, recast.get(question.cip_level), post_processing_seed((source,)),
                step_id, question.product, question.tabulation_id, _values_type(question),
                spill=spill)
            recasts += [done] if done is not None else []
        mine = in_populations(cells, members)
        parts.append((cells.loc[mine, CELL_COLUMNS], values,
                      None if mine.all() else np.flatnonzero(mine)))
        del values   # a national flows table is large: hold one copy at a time
        sources.append(source)
        seed = store.attempt(stored.attempt).seed.bits
        streams.append(stream_sha256(seed, measurement_id))
    if not parts:  # no population of the release reaches this years-after yet
        parts.append((pd.DataFrame({c: pd.Series(dtype=np.int64 if c in ("grad_cohort",
                                                                          "grad_cohort_years")
                                                  else object) for c in CELL_COLUMNS}),
                      np.zeros((0, question.columns), dtype=np.int64), None))
    cells = pd.concat([c for c, _, _ in parts], ignore_index=True)
    order = cells.sort_values(CELL_KEYS, kind="stable").index.to_numpy()
    values = rows_in_order([(v, r) for _, v, r in parts], order, question.columns,
                           _values_type(question) or np.result_type(*(v.dtype for _, v, _ in parts)),
                           spill)
    del parts
    (statement,) = read_statements(store, question, sorted(set(rows["measurement_id"])))
    entries = [measured_entry(statement, len(cells), question.columns,
                              geometric_composition(int(statement.sensitivity or 1))
                              if statement.employer is None else
                              employer_composition(statement.employer.notion, len(cells)),
                              ";".join(streams))]
    summary = None
    if recasts:
        first = recasts[0].entry
        entries.append(replace(first, n_cells=sum(r.entry.n_cells for r in recasts),
                               noise_stream=";".join(r.entry.noise_stream for r in recasts)))
        summary = recast_summary(question, recasts)
    return _categorical_cells(cells.iloc[order]), values, tuple(sources), entries, summary


def recast_summary(question: Question, recasts: list[RecastTable]) -> dict:
    """How a tabulation's CIP-2010 cells were recast: cells by route and by the level the
    IPEDS shares came from, and the variance the random split adds (per value of the cells
    split, next to the variance of the noise each measured value carries)."""
    routes = pd.concat([r.how for r in recasts]).groupby(level=0).sum()
    levels = pd.concat([r.share_levels for r in recasts]).groupby(level=0).sum()
    split = int(routes.sum() - routes.get(DIRECT, 0)) * question.columns   # values split
    added = sum(r.added_variance for r in recasts)
    return {"tabulation_id": question.tabulation_id, "product": question.product,
            "cells_recast": int(routes.sum()),
            "routes": {str(k): int(v) for k, v in routes.items()},
            "share_levels": {str(k): int(v) for k, v in levels.items()},
            "added_variance": round(added, 3),
            "added_variance_per_split_value": round(added / split, 4) if split else 0.0,
            # the employer-protecting mechanisms' variance depends on confidential x_v: nan
            "noise_variance_per_value": (round(geometric_variance(float(question.epsilon),
                                                                     question.sensitivity), 4)
                                         if question.protection() is None else float("nan"))}


# A release's measured tables as read back: institution histograms, flows (with their
# measured origin counts), their ledger entries and the CIP recast's summaries.
StoredTables = tuple[list[NoisyHistograms], list[NoisyFlows], list[LedgerEntry], list[dict]]


@file_task("read the release's measurements from the store")
def stored_tables(store_path: Path, plan: pd.DataFrame,
                  recast: dict[str, RecastContext | None] | None, questions: list[Question],
                  spill: bool = False) -> StoredTables:
    """The measured noisy tables of a release's `questions` (its plan's measurements, its
    populations only) in CIP-2020 codes (`recast`: the context of each
    CIP level; None publishes the codes as measured, as releases of earlier versions did),
    their ledger entries and the recast summaries, in ledger order. Reads no microdata.
    Privacy cost: none (the spends were recorded when the measurements were taken; the
    recast is post-processing). `spill`: each flows table's noisy values go to a file as
    soon as it is read (`inputs.row_files`), so that one is held at a time."""
    histograms, flows, entries, summaries = [], [], [], []
    totals: dict[tuple[str, int], tuple[pd.DataFrame, np.ndarray, tuple[str, ...]]] = {}
    with PrivacyStore.open(store_path) as store:
        for question in questions:
            rows = plan[plan["tabulation_id"] == question.tabulation_id]
            kept_in_file = spill and question.product == FLOWS_PRODUCT
            cells, values, sources, found, summary = _question_table(store, question, rows,
                                                                     recast, kept_in_file)
            release_unused_memory()
            tab = question.tabulation_id
            if question.product == EARNINGS_PRODUCT:
                histograms.append(NoisyHistograms(tab, "I", question.cip_level,
                                                  question.years_after, cells, values, (tab,),
                                                  sources))
            elif question.product == FLOWS_TOTAL_PRODUCT:
                totals[question.cip_level, question.years_after] = (cells, values[:, 0], sources)
            else:
                flows.append(NoisyFlows(tab, question.cip_level, question.years_after, cells,
                                        values, (tab,), sources))
            del values
            entries += found
            summaries += [summary] if summary else []
            progress(f"read {tab} from the privacy store: {len(cells):,} cells"
                     + (" (CIP-2010 cells recast to CIP-2020)" if summary else ""))
    flows = [with_measured_total(table, totals.get((table.cip_level, table.years_after)))
             for table in flows]
    progress(f"read {len(histograms) + len(flows) + len(totals)} measured tables from the privacy store "
             f"({sum(e.n_cells for e in entries if e.epsilon > 0):,} cells)"
             + (f"; recast {sum(s['cells_recast'] for s in summaries):,} CIP-2010 cells to "
                "CIP-2020 (zero epsilon)" if summaries else ""))
    return histograms, flows, entries, summaries


def with_measured_total(table: NoisyFlows,
                        measured: tuple[pd.DataFrame, np.ndarray, tuple[str, ...]] | None
                        ) -> NoisyFlows:
    """`table` with the measured origin counts of its cells (None: the appendix's
    correction, no counts measured). Both tables cover the same populations and cells;
    the counts' stored measurements join the table's sources, so the correction's draws
    are keyed by everything it reads. Privacy cost: none."""
    if measured is None:
        return table
    cells, values, sources = measured
    keys = [table.cells[k].astype(str).to_numpy() for k in CELL_KEYS]
    position = pd.Series(np.arange(len(cells)), index=pd.MultiIndex.from_arrays(
        [cells[k].astype(str).to_numpy() for k in CELL_KEYS]))
    found = position.reindex(pd.MultiIndex.from_arrays(keys))
    if found.isna().any() or len(cells) != len(table.cells):
        raise ValueError(f"{table.tabulation_id}: the stored origin counts do not cover the "
                         f"same cells as the flows ({len(cells):,} counts, "
                         f"{len(table.cells):,} flows cells)")
    return replace(table, total=values[found.to_numpy(dtype=np.int64)],
                   sources=table.sources + tuple(sources))


@file_task("keep publication record")
def keep_publication_record(store_path: Path, fields: dict,
                            inputs: ReleaseInputs) -> PublicationRecord:
    """Everything post-processing needs besides the measurements (`fields`: configuration,
    identity, input checks, ..., `release_plan.record_fields`; and of `inputs` the public
    reference tables, the CIP recast's inputs and the IPEDS awards of the counts), kept in
    the store so that `republish` needs no microdata. Returns the record (`fields` and the
    tables' addresses)."""
    reference, recast, ipeds = inputs.reference, inputs.recast, inputs.ipeds
    with PrivacyStore.open(store_path) as store:
        tables = {name: store.put_frame(getattr(reference, name))
                  for name in ("j2j", "qcew", "coverage")}
        recast_tables = {name: store.put_frame(getattr(recast, name))
                         for name in ("crosswalk", "completions", "hard_coded")}
        ipeds_awards = store.put_frame(ipeds.awards)
    return PublicationRecord(
        **fields, reference=StoredReference(tables=tables, fingerprints=reference.fingerprints),
        recast=StoredRecastInputs(tables=recast_tables, fingerprints=recast.fingerprints,
                                  packaged=recast.packaged),
        ipeds=StoredIpedsAwards(awards=ipeds_awards, years=sorted(ipeds.years)))


def ipeds_awards_from_record(store: PrivacyStore, record: PublicationRecord) -> IpedsCounts | None:
    """The IPEDS awards and the years with a completions file a release used for its IPEDS
    counts; None for a release of an earlier version, which published none (flag 3)."""
    if record.ipeds is None:
        return None
    return IpedsCounts(store.get_frame(record.ipeds.awards), frozenset(record.ipeds.years))


def reference_from_record(store: PrivacyStore, record: PublicationRecord) -> ReferenceInputs:
    tables = {name: store.get_frame(sha) for name, sha in record.reference.tables.items()}
    return ReferenceInputs(tables["j2j"], tables["qcew"], tables["coverage"],
                           record.reference.fingerprints)


def recast_inputs_from_record(store: PrivacyStore,
                              record: PublicationRecord) -> RecastInputs | None:
    """The recast inputs a release used; None for a release of an earlier version, which
    published its codes as measured."""
    if record.recast is None:
        return None
    tables = {name: store.get_frame(sha) for name, sha in record.recast.tables.items()}
    return RecastInputs(tables["crosswalk"], tables["completions"], tables["hard_coded"],
                        record.recast.fingerprints, record.recast.packaged)


# The release reads the earnings and the flows apart: two steps of its log, the earnings
# path's own and the flows' (benchmarks/bench_release.py times them separately).
stored_earnings = stored_tables.with_options(
    name="read the earnings measurements from the store")
stored_flows = stored_tables.with_options(name="read the flows measurements from the store")
