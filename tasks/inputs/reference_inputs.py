"""Read and validate the public reference inputs of the employment flows (technical
appendix A.3.2-A.3.3). Privacy cost: none (public data; no confidential input, no noise).

A directory holds three files, each in the layout its publisher uses, so the real public
files can be dropped in unchanged. J2J and QCEW may instead be given as the publishers'
downloads, a folder of files concatenated by the reader (rows numbered over the folder's
files, in the order of their relative paths; errors name the file):

* ``j2jod/``: the per-state LEHD files as distributed, ``j2jod_*.csv.gz`` (or unpacked,
  ``j2jod_*.csv``; the ``*_avail`` metadata files are skipped);
* ``qcew/``: the QCEW annual CSVs by area or by industry (``*.csv``, any depth: e.g. the
  unpacked ``2015.annual.by_area/``). A QCEW file that is not UTF-8 is read as Latin-1:
  the county files' titles are Windows-1252, and only code and number columns are read.

A folder and its single file together are refused (which one to read is ambiguous).

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
from collections.abc import Callable
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
from pseo_das.tasks import progress
from pseo_das.schemas.written_hashes import read_sha256
from pseo_das.tasks.inputs.ingest import InputFiles, InputValidationError, describe_failures, read_csv
from pseo_das.tasks.inputs.reference_cache import cached

J2J_FILE = "j2j_state_flows.csv"
QCEW_FILE = "qcew_state_sector.csv"
COVERAGE_FILE = "state_coverage.csv"
REFERENCE_FILES = (J2J_FILE, QCEW_FILE, COVERAGE_FILE)
J2J_FOLDER, QCEW_FOLDER = "j2jod", "qcew"     # the downloads as distributed, instead of the file
J2J_PARTS, QCEW_PARTS = ("j2jod_*.csv.gz", "j2jod_*.csv"), ("*.csv",)
QCEW_FALLBACK_ENCODING = "latin-1"   # county files' titles are Windows-1252 (codes are ASCII)

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


def is_reference_input(name: str) -> bool:
    """Whether an input fingerprint's name (relative to the reference folder) is one of
    the flows' reference files."""
    return name in REFERENCE_FILES or name.startswith((f"{J2J_FOLDER}/", f"{QCEW_FOLDER}/"))


def reference_source(directory: Path, file_name: str) -> Path:
    """The file, or the folder of downloads that replaces it (J2J, QCEW)."""
    folder = {J2J_FILE: J2J_FOLDER, QCEW_FILE: QCEW_FOLDER}.get(file_name)
    file, parts = directory / file_name, directory / folder if folder else None
    if parts is None or not parts.exists():
        return file
    if file.exists():
        raise InputValidationError(f"{directory}: both {file_name} and {folder}/ are there; which "
                                   "one is the release's input is ambiguous: keep one")
    return parts


def source_files(source: Path) -> tuple[Path, ...]:
    """The files of a reference source: itself, or a folder's downloads (sorted)."""
    if not source.is_dir():
        return (source,)
    patterns = J2J_PARTS if source.name == J2J_FOLDER else QCEW_PARTS
    files = {p for pattern in patterns for p in source.rglob(pattern)
             if not p.name.split(".")[0].endswith("_avail")}
    if not files:
        raise InputValidationError(f"{source}: a folder without {' or '.join(patterns)} files")
    return tuple(sorted(files, key=lambda p: p.relative_to(source).as_posix()))


def load_reference_inputs(directory: Path) -> ReferenceInputs:
    """Read and validate the three reference files of `directory`. Privacy cost: none."""
    directory = Path(directory)
    readers = {J2J_FILE: read_j2j, QCEW_FILE: read_qcew, COVERAGE_FILE: read_coverage}
    tables, problems, prints = {}, [], {}
    for name, reader in readers.items():
        try:  # check every file, so that one run reports every problem
            source = reference_source(directory, name)
            tables[name] = reader(source)
            prints.update({file.relative_to(directory).as_posix(): read_sha256(file)
                           for file in source_files(source)})
        except InputValidationError as exc:
            problems.append(str(exc))
    if problems:
        raise InputValidationError("\n".join(problems))
    return ReferenceInputs(tables[J2J_FILE], tables[QCEW_FILE], tables[COVERAGE_FILE], prints)


def load_reference(directory: Path) -> ReferenceInputs:
    """`load_reference_inputs`, from the cache when no file changed (reference_cache.py)."""
    started = time.perf_counter()
    progress(f"loading reference inputs from {directory}")
    directory = Path(directory)
    sources = [directory / name for name in REFERENCE_FILES + (J2J_FOLDER, QCEW_FOLDER)
               if (directory / name).exists()]
    reference = cached("flows-reference", sources, {"directory": str(directory.resolve())},
                       lambda: load_reference_inputs(directory))
    progress(f"reference inputs valid: {len(reference.j2j):,} J2J state pairs, "
             f"{len(reference.qcew):,} QCEW state x sector cells, {len(reference.coverage)} "
             f"covered states ({time.perf_counter() - started:.1f} s)")
    return reference


# --- reading -------------------------------------------------------------------------------

def read_text_csv(path: Path, columns: tuple[str, ...], encoding: str = "utf-8") -> pd.DataFrame:
    """The named columns of a CSV, every value as text (empty fields are missing)."""
    path = Path(path)
    if not path.is_file():
        raise InputValidationError(f"{path}: reference file not found")
    df = read_csv(path, columns, dtype=str, keep_default_na=False, na_values=[""],
                  encoding=encoding)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputValidationError(
            f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}")
    return df[list(columns)]


@dataclass(frozen=True)
class SourceRows:
    rows: pd.DataFrame                          # every file's rows, numbered over the files
    where: Callable[[int], str] | None = None   # names a row's file, for a folder


def _encoding(path: Path, fallback: str | None) -> str:
    """UTF-8, or `fallback` for a file that is not UTF-8."""
    if fallback is None or not path.is_file():
        return "utf-8"
    try:
        path.read_bytes().decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        return fallback


def read_source(source: Path, columns: tuple[str, ...], fallback: str | None = None) -> SourceRows:
    """A reference file, or a folder's files concatenated (their rows numbered in order);
    `fallback`: the encoding of a file that is not UTF-8 (else refused)."""
    if not source.is_dir():
        return SourceRows(read_text_csv(source, columns, _encoding(source, fallback)))
    files = source_files(source)
    frames = [read_text_csv(file, columns, _encoding(file, fallback)) for file in files]
    first_rows = tuple(np.cumsum([0] + [len(f) for f in frames[:-1]]).tolist())
    parts = InputFiles(source.name, source, files, first_rows, sum(map(len, frames)))
    return SourceRows(pd.concat(frames, ignore_index=True), parts.where)


def validate(path: Path, df: pd.DataFrame, schema: pa.DataFrameSchema,
             check_columns: dict[str, str] = TABLE_CHECK_COLUMNS,
             where: Callable[[int], str] | None = None) -> pd.DataFrame:
    """`df` validated by `schema`; bad rows named by file, column(s) and row
    (`check_columns`: the columns each whole-table check reads; `where`: names a row)."""
    try:
        return schema.validate(df, lazy=True)
    except SchemaErrors as err:
        failures = err.failure_cases.copy()
        named = failures["check"].astype(str).map(check_columns)
        failures["column"] = failures["column"].astype(object).where(named.isna(), named)
        raise InputValidationError(describe_failures(path, failures, where=where)) from None


def _rejected(path: Path, why: str) -> InputValidationError:
    return InputValidationError(f"{path}: input rejected; nothing was released.\n  {why}")


def _matches(df: pd.DataFrame, column: str, values) -> np.ndarray:
    return df[column].isin(list(values)).to_numpy(dtype=bool)


def _numbers(values: pd.Series) -> pd.Series:
    return pd.to_numeric(values, errors="coerce").astype("float64")


def read_j2j(path: Path) -> pd.DataFrame:
    """J2J hires by (origin_state, destination_state), summed over the file's quarters."""
    source = read_source(Path(path), J2J_COLUMNS)
    raw = source.rows
    keep = np.logical_and.reduce([_matches(raw, c, [v]) for c, v in J2J_AGGREGATE.items()])
    rows = raw.loc[keep, list(J2J_KEY + J2J_HIRES)].drop_duplicates()
    if rows.empty:
        slice_ = ", ".join(f"{c}={v}" for c, v in J2J_AGGREGATE.items())
        raise _rejected(path, f"column geo_level, geo_level_orig: no state-to-state rows at the "
                              f"aggregate level ({slice_})")
    rows = validate(path, rows, j2j_layout_schema(), where=source.where)
    hires = sum(_numbers(rows[c]).fillna(0.0) for c in J2J_HIRES)
    pairs = pd.DataFrame({"origin_state": rows["geography_orig"],
                          "destination_state": rows["geography"], "hires": hires})
    pairs = pairs.groupby(["origin_state", "destination_state"], as_index=False, sort=True)["hires"].sum()
    return validate(path, pairs, j2j_schema())


def read_qcew(path: Path) -> pd.DataFrame:
    """QCEW employment by (state, NAICS sector): per ownership the mean over the disclosed
    years, summed over federal, state, local government and private ownership."""
    source = read_source(Path(path), QCEW_COLUMNS, QCEW_FALLBACK_ENCODING)
    raw = source.rows
    keep = (_matches(raw, "agglvl_code", [QCEW_STATE_SECTOR_LEVEL])
            & _matches(raw, "size_code", [QCEW_ALL_SIZES]) & _matches(raw, "qtr", [QCEW_ANNUAL])
            & _matches(raw, "own_code", QCEW_OWNERSHIPS)
            & ~_matches(raw, "area_fips", QCEW_TERRITORIES))
    rows = raw.loc[keep, list(QCEW_KEY) + ["disclosure_code", "annual_avg_emplvl"]].drop_duplicates()
    if rows.empty:
        raise _rejected(path, f"column agglvl_code: no state NAICS-sector rows (agglvl_code "
                              f"{QCEW_STATE_SECTOR_LEVEL}, size_code {QCEW_ALL_SIZES}, qtr "
                              f"{QCEW_ANNUAL}, own_code {'/'.join(QCEW_OWNERSHIPS)})")
    rows = validate(path, rows, qcew_layout_schema(), where=source.where)
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
