"""Read and validate the public reference inputs of the employment flows (technical
appendix A.3.2-A.3.3). Privacy cost: none (public data; no confidential input, no noise).

A directory holds three files, each in the layout its publisher uses, so the real public
files can be dropped in unchanged (after concatenating the per-state downloads):

* ``j2j_state_flows.csv``: LEHD Job-to-Job Flows, origin-destination (``j2jod``) layout.
  Kept: the state-to-state rows at the all-industry, all-ownership, all-worker level
  (``schemas.reference.J2J_AGGREGATE``: periodicity Q, seasonadj U, geo_level and
  geo_level_orig S, ind_level/ind_level_orig A with industry 00, ownercode/_orig A00, sex
  0, agegrp A00, race/ethnicity A0, education E0, firmage/firmsize/_orig 0); every other
  row is ignored. ``agg_level`` is not used: the explicit identifiers say the same and do
  not depend on the release's aggregation index. Hires = EE (job-to-job flows with
  continuous employment) + AQHire (job-to-job flows with a brief nonemployment spell),
  empty (suppressed) values counting 0, summed over every quarter in the file: one row
  per (origin_state, destination_state). The appendix uses 2011-2015, when all states
  are in J2J; choose the file's quarters accordingly. Identical rows repeated by
  overlapping state files are counted once; conflicting repeats are rejected.
* ``qcew_state_sector.csv``: BLS QCEW annual averages (open-data / downloadable CSV
  layout). Kept: agglvl_code 54 (state, NAICS sector, by ownership), size_code 0, qtr A,
  own_code 1, 2, 3 and 5 (federal, state, local government, private). BLS publishes the
  all-ownership total (own_code 0) only for all industries, so a sector's employment is
  the sum over these ownerships; this gives public administration (92, government only)
  and education (61, mostly public) their full employment. Rows disclosed as "N"
  (suppressed) are left out, not read as 0; sector 99 (unclassified) and Puerto Rico /
  Virgin Islands are dropped. Each ownership's annual_avg_emplvl is averaged over the
  years in which it is disclosed, then summed: one row per (state, sector).
* ``state_coverage.csv``: ``state`` (2-digit FIPS), ``first_year``, ``last_year``: the
  years whose earnings records the state provides (inclusive). A state not listed is
  never covered. There is no public standard layout for this.

The demo files packaged in ``pseo_das/reference/`` (``default_reference_dir()``) are
SYNTHETIC: plausible numbers in the real layouts, made by ``pseo_das.reference_demo``.
They are not LEHD or BLS data; replace them with the real files for a real release.

A violation raises InputValidationError naming the file, the column, the number of bad
rows and a few example rows (rows numbered from 0 in file order); every file is checked
before the error is raised.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaErrors

from pseo_das.schemas.codes import NAICS_SECTORS, STATE_FIPS
from pseo_das.schemas.reference import (COVERAGE_COLUMNS, J2J_AGGREGATE, J2J_COLUMNS, J2J_HIRES, J2J_KEY,
                               QCEW_ALL_SIZES, QCEW_ANNUAL, QCEW_COLUMNS, QCEW_KEY,
                               QCEW_OWNERSHIPS, QCEW_STATE_SECTOR_LEVEL, QCEW_TERRITORIES,
                               QCEW_UNCLASSIFIED, TABLE_CHECK_COLUMNS, coverage_layout_schema,
                               coverage_schema, j2j_layout_schema, j2j_schema,
                               qcew_layout_schema, qcew_schema)
from pseo_das.tasks import file_task, progress
from pseo_das.tasks.inputs.ingest import InputValidationError, describe_failures, read_csv, sha256_file

J2J_FILE = "j2j_state_flows.csv"
QCEW_FILE = "qcew_state_sector.csv"
COVERAGE_FILE = "state_coverage.csv"
REFERENCE_FILES = (J2J_FILE, QCEW_FILE, COVERAGE_FILE)

_STATES = np.array(STATE_FIPS)
_SECTORS = np.array(NAICS_SECTORS)


@dataclass(frozen=True, eq=False)
class ReferenceInputs:
    j2j: pd.DataFrame       # origin_state, destination_state (str FIPS), hires (float64 >= 0)
    qcew: pd.DataFrame      # state (str FIPS), industry (NAICS sector), employment (float64 >= 0)
    coverage: pd.DataFrame  # state, first_year, last_year (int64)
    fingerprints: dict[str, str]  # file name -> SHA-256 of the file

    def j2j_matrix(self) -> np.ndarray:
        """(51, 51) J2J hires, rows origin, columns destination, in STATE_FIPS order; 0
        for a pair the file does not have."""
        matrix = np.zeros((len(_STATES), len(_STATES)))
        origin = np.searchsorted(_STATES, self.j2j["origin_state"].to_numpy(dtype=object))
        destination = np.searchsorted(_STATES, self.j2j["destination_state"].to_numpy(dtype=object))
        matrix[origin, destination] = self.j2j["hires"].to_numpy()
        return matrix

    def employment_matrix(self) -> np.ndarray:
        """(51, 20) QCEW employment, STATE_FIPS x NAICS_SECTORS order; 0 where absent."""
        matrix = np.zeros((len(_STATES), len(_SECTORS)))
        state = np.searchsorted(_STATES, self.qcew["state"].to_numpy(dtype=object))
        sector = pd.Index(_SECTORS).get_indexer(self.qcew["industry"].to_numpy(dtype=object))
        matrix[state, sector] = self.qcew["employment"].to_numpy()
        return matrix

    def covered(self, years: np.ndarray) -> np.ndarray:
        """(len(years), 51) bool: the state has earnings records in that calendar year."""
        years = np.asarray(years, dtype=np.int64).reshape(-1, 1)
        result = np.zeros((len(years), len(_STATES)), dtype=bool)
        state = np.searchsorted(_STATES, self.coverage["state"].to_numpy(dtype=object))
        first = self.coverage["first_year"].to_numpy()
        last = self.coverage["last_year"].to_numpy()
        result[:, state] = (years >= first) & (years <= last)
        return result


DEMO_FLOWS_FILES = ("J2J", "QCEW", "state coverage")   # the packaged ones are SYNTHETIC


def demo_flows_inputs(directory: Path) -> list[str]:
    """The flows' reference files that are the packaged SYNTHETIC demo files."""
    same = Path(directory).resolve() == default_reference_dir().resolve()
    return list(DEMO_FLOWS_FILES) if same else []


def default_reference_dir() -> Path:
    """The packaged SYNTHETIC demo reference files (pseo_das/reference/)."""
    import pseo_das
    return Path(pseo_das.__file__).parent / "reference"


def load_reference_inputs(directory: Path) -> ReferenceInputs:
    """Read and validate the three reference files of `directory`. Privacy cost: none."""
    directory = Path(directory)
    readers = {J2J_FILE: read_j2j, QCEW_FILE: read_qcew, COVERAGE_FILE: read_coverage}
    tables, problems = {}, []
    for name, reader in readers.items():
        try:  # check every file, so that one run reports every problem
            tables[name] = reader(directory / name)
        except InputValidationError as exc:
            problems.append(str(exc))
    if problems:
        raise InputValidationError("\n".join(problems))
    prints = {name: sha256_file(directory / name) for name in REFERENCE_FILES}
    return ReferenceInputs(tables[J2J_FILE], tables[QCEW_FILE], tables[COVERAGE_FILE], prints)


@file_task("load reference inputs")
def load_reference(directory: Path) -> ReferenceInputs:
    started = time.perf_counter()
    progress(f"loading reference inputs from {directory}")
    reference = load_reference_inputs(directory)
    progress(f"reference inputs valid: {len(reference.j2j):,} J2J state pairs, "
             f"{len(reference.qcew):,} QCEW state x sector cells, {len(reference.coverage)} "
             f"covered states ({time.perf_counter() - started:.1f} s)")
    return reference


# --- reading -------------------------------------------------------------------------------

def read_text_csv(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """The named columns of a CSV, every value as text (empty fields are missing)."""
    path = Path(path)
    if not path.is_file():
        raise InputValidationError(f"{path}: reference file not found")
    df = read_csv(path, columns, dtype=str, keep_default_na=False, na_values=[""])
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputValidationError(
            f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}")
    return df[list(columns)]


def validate(path: Path, df: pd.DataFrame, schema: pa.DataFrameSchema,
             check_columns: dict[str, str] = TABLE_CHECK_COLUMNS) -> pd.DataFrame:
    """`df` validated by `schema`; bad rows named by file, column(s) and row
    (`check_columns`: the columns each whole-table check reads)."""
    try:
        return schema.validate(df, lazy=True)
    except SchemaErrors as err:
        failures = err.failure_cases.copy()
        named = failures["check"].astype(str).map(check_columns)
        failures["column"] = failures["column"].astype(object).where(named.isna(), named)
        raise InputValidationError(describe_failures(path, failures)) from None


def _rejected(path: Path, why: str) -> InputValidationError:
    return InputValidationError(f"{path}: input rejected; nothing was released.\n  {why}")


def _matches(df: pd.DataFrame, column: str, values) -> np.ndarray:
    return df[column].isin(list(values)).to_numpy(dtype=bool)


def _numbers(values: pd.Series) -> pd.Series:
    return pd.to_numeric(values, errors="coerce").astype("float64")


def read_j2j(path: Path) -> pd.DataFrame:
    """J2J hires by (origin_state, destination_state), summed over the file's quarters."""
    raw = read_text_csv(path, J2J_COLUMNS)
    keep = np.logical_and.reduce([_matches(raw, c, [v]) for c, v in J2J_AGGREGATE.items()])
    rows = raw.loc[keep, list(J2J_KEY + J2J_HIRES)].drop_duplicates()
    if rows.empty:
        slice_ = ", ".join(f"{c}={v}" for c, v in J2J_AGGREGATE.items())
        raise _rejected(path, f"column geo_level, geo_level_orig: no state-to-state rows at the "
                              f"aggregate level ({slice_})")
    rows = validate(path, rows, j2j_layout_schema())
    hires = sum(_numbers(rows[c]).fillna(0.0) for c in J2J_HIRES)
    pairs = pd.DataFrame({"origin_state": rows["geography_orig"],
                          "destination_state": rows["geography"], "hires": hires})
    pairs = pairs.groupby(["origin_state", "destination_state"], as_index=False, sort=True)["hires"].sum()
    return validate(path, pairs, j2j_schema())


def read_qcew(path: Path) -> pd.DataFrame:
    """QCEW employment by (state, NAICS sector): per ownership the mean over the disclosed
    years, summed over federal, state, local government and private ownership."""
    raw = read_text_csv(path, QCEW_COLUMNS)
    keep = (_matches(raw, "agglvl_code", [QCEW_STATE_SECTOR_LEVEL])
            & _matches(raw, "size_code", [QCEW_ALL_SIZES]) & _matches(raw, "qtr", [QCEW_ANNUAL])
            & _matches(raw, "own_code", QCEW_OWNERSHIPS)
            & ~_matches(raw, "area_fips", QCEW_TERRITORIES))
    rows = raw.loc[keep, list(QCEW_KEY) + ["disclosure_code", "annual_avg_emplvl"]].drop_duplicates()
    if rows.empty:
        raise _rejected(path, f"column agglvl_code: no state NAICS-sector rows (agglvl_code "
                              f"{QCEW_STATE_SECTOR_LEVEL}, size_code {QCEW_ALL_SIZES}, qtr "
                              f"{QCEW_ANNUAL}, own_code {'/'.join(QCEW_OWNERSHIPS)})")
    rows = validate(path, rows, qcew_layout_schema())
    employment = _numbers(rows["annual_avg_emplvl"])
    usable = ((rows["disclosure_code"] != "N").to_numpy(dtype=bool) & employment.notna().to_numpy()
              & (rows["industry_code"] != QCEW_UNCLASSIFIED).to_numpy(dtype=bool))
    cells = pd.DataFrame({"state": rows["area_fips"].str[:2], "industry": rows["industry_code"],
                          "own_code": rows["own_code"], "employment": employment})[usable]
    by_owner = cells.groupby(["state", "industry", "own_code"], as_index=False)["employment"].mean()
    sectors = by_owner.groupby(["state", "industry"], as_index=False, sort=True)["employment"].sum()
    return validate(path, sectors, qcew_schema())


def read_coverage(path: Path) -> pd.DataFrame:
    """Which states' earnings records cover which years (first_year..last_year)."""
    raw = read_text_csv(path, COVERAGE_COLUMNS)
    if raw.empty:
        raise _rejected(path, "column state: no state listed (a state not listed is never covered)")
    raw = validate(path, raw, coverage_layout_schema())
    coverage = pd.DataFrame({"state": raw["state"],
                             "first_year": raw["first_year"].astype("int64"),
                             "last_year": raw["last_year"].astype("int64")})
    coverage = validate(path, coverage, coverage_schema())
    return coverage.sort_values("state", ignore_index=True)
