"""Keeping noisy measurements and publication records in the privacy store, and reading a
release's noisy tables back from it: the only input of post-processing. Privacy cost: none.
These tasks only read or write files, and writing the same content again is a no-op, so
they are retried on failure.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.tasks import file_task, progress
from pseo_das.tasks.earnings.noisy_histograms import PRODUCT as EARNINGS_PRODUCT
from pseo_das.tasks.earnings.noisy_histograms import NoisyHistograms
from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows
from pseo_das.tasks.inputs.cells import CELL_COLUMNS, CELL_KEYS, in_populations
from pseo_das.tasks.inputs.reference_inputs import ReferenceInputs
from pseo_das.tasks.privacy.mechanism import GEOMETRIC, LedgerEntry, NoisyMeasurement, stream_key
from pseo_das.tasks.privacy.release_plan import Question, release_questions
from pseo_das.tasks.privacy.store import PrivacyStore

COMPOSITION = ("parallel across the cells of this tabulation (each graduate in at most one "
               "cell and bin); sequential with every other tabulation")


@file_task("keep measurements in the privacy store")
def keep_measurements(store_path: Path, measured: list[NoisyMeasurement]) -> dict[str, str]:
    """Store every new measurement's noisy values (content-addressed); returns measurement
    id -> object SHA-256. Storing one again (a retry) is a no-op. Privacy cost: none."""
    with PrivacyStore.open(store_path) as store:
        stored = {m.measurement_id: store.store_measurement(m.measurement_id, m.cells, m.values)
                  for m in measured}
    if stored:
        progress(f"kept {len(stored)} new measurement(s) in the privacy store {store_path}")
    return stored


def _categorical_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells in canonical order with sorted categorical codes (as the cell frame has)."""
    cells = cells.sort_values(CELL_KEYS, kind="stable")
    out = cells.reset_index(drop=True)
    for column in ("institution", "inst_state", "degree_level", "cipcode"):
        out[column] = pd.Categorical(out[column], categories=sorted(out[column].unique()))
    return out.assign(noise_terms=1)


def _question_table(store: PrivacyStore, question: Question, rows: pd.DataFrame
                    ) -> tuple[pd.DataFrame, np.ndarray, tuple[str, ...], LedgerEntry]:
    """The release's cells of one tabulation, read from the measurements its plan names."""
    parts, sources, streams = [], [], []
    for measurement_id, members in rows.groupby("measurement_id", sort=True):
        stored = store.measurement(measurement_id)
        cells, values = store.measured_values(measurement_id)
        mine = in_populations(cells, members)
        parts.append((cells[mine], values[mine]))
        sources.append(stored.object_sha256)
        seed = bytes.fromhex(store.attempt(stored.attempt).seed_hex)
        streams.append(hashlib.sha256(stream_key(seed, measurement_id)).hexdigest())
    if not parts:  # no population of the release reaches this years-after yet
        parts.append((pd.DataFrame({c: pd.Series(dtype=np.int64 if c in ("grad_cohort",
                                                                          "grad_cohort_years")
                                                  else object) for c in CELL_COLUMNS}),
                      np.zeros((0, question.columns), dtype=np.int64)))
    cells = pd.concat([c for c, _ in parts], ignore_index=True)
    values = np.concatenate([v for _, v in parts])
    order = cells.sort_values(CELL_KEYS, kind="stable").index.to_numpy()
    values = values[order]
    entry = LedgerEntry(question.tabulation_id, question.product, GEOMETRIC,
                        question.epsilon, 1, len(cells), question.columns, COMPOSITION, "",
                        ";".join(streams))
    return _categorical_cells(cells), values, tuple(sources), entry


@file_task("read the release's measurements from the store")
def stored_tables(store_path: Path, plan: pd.DataFrame, cfg: ReleaseConfig
                  ) -> tuple[list[NoisyHistograms], list[NoisyFlows], list[LedgerEntry]]:
    """The measured noisy tables of a release (its plan's measurements, its populations
    only) and their ledger entries. Reads no microdata. Privacy cost: none (the spends
    were recorded when the measurements were taken)."""
    histograms, flows, entries = [], [], []
    with PrivacyStore.open(store_path) as store:
        for question in release_questions(cfg):
            rows = plan[plan["tabulation_id"] == question.tabulation_id]
            cells, values, sources, entry = _question_table(store, question, rows)
            tab = question.tabulation_id
            if question.product == EARNINGS_PRODUCT:
                histograms.append(NoisyHistograms(tab, "I", question.cip_level,
                                                  question.years_after, cells, values, (tab,),
                                                  sources))
            else:
                flows.append(NoisyFlows(tab, question.cip_level, question.years_after, cells,
                                        values, (tab,), sources))
            entries.append(entry)
    progress(f"read {len(entries)} measured tables from the privacy store "
             f"({sum(e.n_cells for e in entries):,} cells)")
    return histograms, flows, entries


@file_task("keep publication record")
def keep_publication_record(store_path: Path, record: dict,
                            reference: ReferenceInputs) -> dict:
    """Everything post-processing needs besides the measurements (configuration, identity,
    input checks, the public reference tables), kept in the store so that `republish`
    needs no microdata. Returns the record with the reference tables' addresses."""
    with PrivacyStore.open(store_path) as store:
        tables = {name: store.put_frame(getattr(reference, name))
                  for name in ("j2j", "qcew", "coverage")}
    return {**record, "reference_tables": tables,
            "reference_fingerprints": dict(reference.fingerprints)}


def reference_from_record(store: PrivacyStore, record: dict) -> ReferenceInputs:
    tables = {name: store.get_frame(sha) for name, sha in record["reference_tables"].items()}
    return ReferenceInputs(tables["j2j"], tables["qcew"], tables["coverage"],
                           record["reference_fingerprints"])
