"""The analysis records of the verification server: one row per graduate and years after
graduation (the outcomes file), with the graduate's attributes, held as arrays. Read once
when the server starts. Privacy cost: none (nothing leaves the server but noisy counts).

A data folder in the jobs layout (tasks/inputs/degree_records.py: graduates one row per
degree, jobs per person, year and job) gives one record per degree and years after, every
degree kept (no bound): the earnings, state and industry are those the release derives
for the degree. The records keep the agency's person_id, so that all of a person's
records, of every degree, fall in one group (groups.py) and a query's sensitivity stays 1.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.schemas.codes import YEARS_AFTER
from pseo_das.tasks.inputs.degree_records import read_degree_records
from pseo_das.tasks.inputs.ingest import InputLayout, input_layout, read_inputs
from pseo_das.tasks.verification.query import Variable

TEXT_VARIABLES = (Variable.DEGREE_LEVEL, Variable.INSTITUTION, Variable.INST_STATE, Variable.CIP2,
                  Variable.CIP4, Variable.EMP_STATE, Variable.INDUSTRY)


@dataclass(frozen=True)
class AnalysisRecords:
    """Columns as arrays: text variables as object arrays of codes ('' when missing),
    grad_year and years_after as int64, earnings as float64 (NaN: no job)."""
    person_id: np.ndarray
    columns: dict[str, np.ndarray]
    earnings: np.ndarray
    data_version: str           # SHA-256 of the input files' fingerprints

    def __len__(self) -> int:
        return len(self.person_id)


def data_version(fingerprints: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(fingerprints, sort_keys=True).encode()).hexdigest()


def records_from_frames(graduates: pd.DataFrame, outcomes: pd.DataFrame,
                        version: str, persons: np.ndarray | None = None) -> AnalysisRecords:
    """Join each outcome record to its graduate (every outcome's person_id is a graduate's);
    `persons`: the person of each graduate row's person_id (a degree record number), for
    the jobs layout."""
    grads = graduates.set_index("person_id")
    joined = outcomes.join(grads, on="person_id", how="inner")
    cip = joined["cipcode"].astype(str)

    def text(series: pd.Series) -> np.ndarray:
        return series.astype(object).where(series.notna(), "").astype(str).to_numpy(dtype=object)

    columns = {
        Variable.DEGREE_LEVEL.value: text(joined["degree_level"]),
        Variable.INSTITUTION.value: text(joined["institution"]),
        Variable.INST_STATE.value: text(joined["inst_state"]),
        Variable.CIP2.value: text(cip.str[:2]),
        Variable.CIP4.value: text(cip.str[:5]),
        Variable.EMP_STATE.value: text(joined["emp_state"]),
        Variable.INDUSTRY.value: text(joined["industry"]),
        Variable.GRAD_YEAR.value: joined["grad_year"].to_numpy(dtype=np.int64),
        Variable.YEARS_AFTER.value: joined["years_after"].to_numpy(dtype=np.int64),
    }
    person = joined["person_id"].to_numpy(dtype=np.int64)
    return AnalysisRecords(person if persons is None else persons[person], columns,
                           joined["earnings"].to_numpy(dtype=np.float64), version)


def load_records(data_dir: Path, first_year: int, last_year: int) -> AnalysisRecords:
    """Read and validate graduates and outcomes, or graduates and jobs
    (InputValidationError names bad rows)."""
    if input_layout(Path(data_dir)) is InputLayout.JOBS:
        inputs, persons = read_degree_records(Path(data_dir), first_year, last_year, YEARS_AFTER)
    else:
        inputs, persons = read_inputs(Path(data_dir), first_year, last_year), None
    return records_from_frames(inputs.graduates, inputs.outcomes,
                               data_version(inputs.fingerprints), persons)
