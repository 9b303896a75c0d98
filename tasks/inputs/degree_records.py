"""The agency's layout (degree records and job-level earnings) turned into the counting
pass's records, with the contribution bound applied. Privacy cost: none (no noise, no
output); the records are confidential and go only to the counting pass.

A data folder in the jobs layout holds
  * `graduates`: one row per degree awarded (person_id, institution, inst_state,
    degree_level, cipcode, grad_year); a person may hold several; an exact duplicate row
    is refused;
  * `jobs`: one row per person, calendar year and job (person_id, year, earnings in
    nominal dollars of that year at that employer, emp_state, industry, optional
    employer_id).

The bound (privacy.max_degrees_per_person = k): each person counts with at most k degree
records, chosen from that person's own records only (DEGREE_ORDER): the earliest
graduation year first; among degrees of one year the lowest degree_level code, then the
smallest institution code, then the smallest cipcode (codes compared as text). Every other
degree record of the person is dropped from every tabulation, so a person is in at most k
cells of any tabulation and the measurements are noised for sensitivity k. The earliest
first, because a person's kept records must not change when they earn another degree: a
later degree sorts after the ones already kept, so over all releases a person is counted
with the same at most k records, in at most k of the lifetime budget's atoms
(institution x degree level x graduation year), and the store can bound what one person
pays over their lifetime (tasks/privacy/lifetime_budget.py, `person_worst_case`). With
"the most recent first" a person's kept record would move to each new degree's atom.

Each kept degree becomes one record of the counting pass (a graduates row numbered by
`record`), and for each years-after t whose earnings year grad_year + t is at most the last
earnings year, one outcome row: the total earnings of the person's jobs in that year
(nominal: the counting pass deflates them to the bins' dollars and applies the floor, as for
any outcome row) and the state, industry and employer_id of the person's main job that
year, the one with the largest earnings; ties are broken by the smallest (emp_state,
industry, employer_id) codes, missing codes last (a rule that does not look at other
persons). A person without a job that year gets no outcome row: not employed and outside
the earnings universe, like a total under the floor.

Both inputs are read whole in memory (about 100 bytes per job row); the records are written
as Parquet, sorted, to a temporary folder that either engine then reads like any folder in
the outcomes layout.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.schemas.inputs import (EMPLOYER_COLUMN, GRADUATE_COLUMNS, JOB_COLUMNS,
                                     OUTCOME_COLUMNS, CipVintages, graduates_schema,
                                     jobs_schema)
from pseo_das.tasks.inputs.ingest import (MAX_EXAMPLES, InputFiles, InputValidationError,
                                          ValidatedInputs, find_input_files, read_inputs,
                                          read_whole, validate)

# The order in which a person's degrees are kept (column, descending), most preferred first.
DEGREE_ORDER = (("grad_year", False), ("degree_level", False), ("institution", False),
                ("cipcode", False))
# The main job of a person's year: the largest earnings, then the smallest codes.
JOB_TIE_BREAK = ("emp_state", "industry", EMPLOYER_COLUMN)
RECORD = "record"   # the counting pass's person_id column holds the record number
ALL_DEGREES = np.iinfo(np.int64).max   # a bound that keeps every degree record


@dataclass(frozen=True)
class BoundedDegrees:
    """What the bound kept and dropped (confidential figures: internal documents only)."""
    max_degrees_per_person: int
    persons: int
    degree_rows: int
    dropped: int
    job_rows: int


def _sort_codes(values: pd.Series) -> np.ndarray:
    """Sortable integers of a column: category codes (categories sorted as text), missing
    values after every code; other columns as they are."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy().astype(np.int64)
        return np.where(codes < 0, len(values.cat.categories), codes)
    return values.to_numpy()


def degree_rank(graduates: pd.DataFrame) -> np.ndarray:
    """Each degree row's rank among its person's degrees by DEGREE_ORDER (0 = kept first).
    Depends only on the rows of the same person_id."""
    keys = [_sort_codes(graduates[c]) * (-1 if descending else 1) for c, descending in DEGREE_ORDER]
    person = graduates["person_id"].to_numpy()
    order = np.lexsort(keys[::-1] + [person])   # person first, then DEGREE_ORDER
    sorted_person = person[order]
    starts = np.r_[True, sorted_person[1:] != sorted_person[:-1]]
    first = np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order)) - first
    return rank


def bounded_degrees(graduates: pd.DataFrame, k: int) -> tuple[pd.DataFrame, int]:
    """The degree rows kept by the bound (at most k per person, DEGREE_ORDER), sorted by
    person_id then rank, numbered by `record` 0, 1, ...; and the number dropped."""
    rank = degree_rank(graduates)
    kept = graduates.assign(_rank=rank)[rank < k]
    kept = kept.sort_values(["person_id", "_rank"], kind="stable").drop(columns="_rank")
    kept = kept.reset_index(drop=True)
    kept.insert(0, RECORD, np.arange(len(kept), dtype=np.int64))
    return kept, len(graduates) - len(kept)


def annual_earnings(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per person and year with a job: the total earnings over the jobs and the
    emp_state, industry (and employer_id, when given) of the main job (module doc)."""
    ties = [c for c in JOB_TIE_BREAK if c in jobs.columns]
    person, year = jobs["person_id"].to_numpy(), jobs["year"].to_numpy()
    earnings = jobs["earnings"].to_numpy(dtype=np.float64)
    keys = [person, year, -earnings] + [_sort_codes(jobs[c]) for c in ties]
    order = np.lexsort(keys[::-1])
    p, y = person[order], year[order]
    starts = np.flatnonzero(np.r_[True, (p[1:] != p[:-1]) | (y[1:] != y[:-1])])
    main = order[starts]
    out = jobs.iloc[main][["person_id", "year"] + ties].reset_index(drop=True)
    out["earnings"] = np.add.reduceat(earnings[order], starts) if len(order) else earnings[:0]
    return out


def degree_outcomes(degrees: pd.DataFrame, annual: pd.DataFrame, years_after: tuple[int, ...],
                    last_earnings_year: int) -> pd.DataFrame:
    """The outcome rows of the kept degrees (RECORD, grad_year, person_id): per years-after
    t, the person's annual earnings of year grad_year + t when it is at most the last
    earnings year and the person had a job then (OUTCOME_COLUMNS, person_id = record)."""
    parts = []
    for t in years_after:
        mine = degrees[degrees["grad_year"] + t <= last_earnings_year]
        parts.append(pd.DataFrame({"record": mine[RECORD].to_numpy(), "years_after": t,
                                   "person_id": mine["person_id"].to_numpy(),
                                   "year": mine["grad_year"].to_numpy() + t}))
    wanted = pd.concat(parts, ignore_index=True)
    found = wanted.merge(annual, on=["person_id", "year"], how="inner", sort=False)
    found = found.sort_values([RECORD, "years_after"], kind="stable", ignore_index=True)
    extra = [EMPLOYER_COLUMN] if EMPLOYER_COLUMN in annual.columns else []
    return found[[RECORD] + list(OUTCOME_COLUMNS[1:]) + extra].rename(
        columns={RECORD: "person_id"})


def _unknown_persons(jobs_source: InputFiles, graduates_name: str, jobs: pd.DataFrame,
                     graduates: pd.DataFrame) -> str | None:
    known = np.isin(jobs["person_id"].to_numpy(), graduates["person_id"].to_numpy())
    if known.all():
        return None
    bad = np.flatnonzero(~known)
    examples = ", ".join(f"{jobs_source.where(int(jobs.index[i]))}: {jobs['person_id'].iat[i]}"
                         for i in bad[:MAX_EXAMPLES])
    return (f"{jobs_source.path}: input rejected; nothing was released.\n  column person_id: "
            f"{len(bad)} job row(s) for a person not in {graduates_name}; e.g. {examples}")


def degree_records(data_dir: Path, first_year: int, last_earnings_year: int,
                   years_after: tuple[int, ...], k: int, with_employers: bool,
                   cip_vintages: CipVintages | None = None
                   ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str], BoundedDegrees]:
    """Read and validate the jobs layout of `data_dir` (InputValidationError naming file,
    column and rows; both inputs checked before refusing) and bound each person to k
    degrees. Returns the kept degrees (RECORD, then the graduates' columns with the agency's
    person_id), their outcome rows (person_id = RECORD), the SHA-256 of the input files and
    what the bound kept."""
    data_dir = Path(data_dir)
    sources, problems, tables = [], [], []
    for name, columns, schema in (
            ("graduates", GRADUATE_COLUMNS,
             graduates_schema(first_year, last_earnings_year, cip_vintages, True)),
            ("jobs", JOB_COLUMNS, jobs_schema())):
        try:
            source = find_input_files(data_dir, name)
            sources.append(source)
            wanted = columns + ((EMPLOYER_COLUMN,) if name == "jobs" and with_employers else ())
            source.check_columns(wanted)
            tables.append(validate(source.path, read_whole(source, wanted), schema))
        except InputValidationError as exc:
            problems.append(str(exc))
    if not problems:
        unknown = _unknown_persons(sources[1], sources[0].path.name, tables[1], tables[0])
        problems += [unknown] if unknown else []
    if problems:
        raise InputValidationError("\n".join(problems))
    graduates, jobs = tables
    degrees, dropped = bounded_degrees(graduates, k)
    outcomes = degree_outcomes(degrees, annual_earnings(jobs), years_after, last_earnings_year)
    prints = {k: v for s in sources for k, v in s.fingerprints(data_dir).items()}
    return degrees, outcomes, prints, BoundedDegrees(
        k, int(graduates["person_id"].nunique()), len(graduates), dropped, len(jobs))


def _write_records(degrees: pd.DataFrame, outcomes: pd.DataFrame, out_dir: Path) -> None:
    """The counting pass's graduates.parquet (person_id = RECORD) and outcomes.parquet."""
    out_dir.mkdir(parents=True, exist_ok=True)
    degrees.drop(columns="person_id").rename(columns={RECORD: "person_id"})[
        list(GRADUATE_COLUMNS)].to_parquet(out_dir / "graduates.parquet", index=False)
    outcomes.to_parquet(out_dir / "outcomes.parquet", index=False)


def write_degree_records(data_dir: Path, out_dir: Path, first_year: int, last_earnings_year: int,
                         years_after: tuple[int, ...], k: int, with_employers: bool,
                         cip_vintages: CipVintages | None = None
                         ) -> tuple[dict[str, str], BoundedDegrees]:
    """`degree_records`, written as the counting pass's graduates.parquet and
    outcomes.parquet to `out_dir`. Returns the SHA-256 of the input files and what the
    bound kept."""
    degrees, outcomes, prints, bounded = degree_records(
        data_dir, first_year, last_earnings_year, years_after, k, with_employers, cip_vintages)
    _write_records(degrees, outcomes, Path(out_dir))
    return prints, bounded


def read_degree_records(data_dir: Path, first_year: int, last_earnings_year: int,
                        years_after: tuple[int, ...]) -> tuple[ValidatedInputs, np.ndarray]:
    """The jobs layout of `data_dir` read whole, in the outcomes layout's form, with every
    degree record kept (no bound): one graduate row per degree record, its person_id the
    record number, and the agency's person_id of each record (indexed by record number).
    For the readers that keep all of a person's records together without a bound: the
    verification server (all of a person's records in one group) and `synthesize` (which
    copies values, no noise). The fingerprints are the agency's files'."""
    degrees, outcomes, prints, _ = degree_records(
        data_dir, first_year, last_earnings_year, years_after, ALL_DEGREES, False)
    with tempfile.TemporaryDirectory(prefix="pseo-das-degrees-") as tmp:
        _write_records(degrees, outcomes, Path(tmp))
        inputs = read_inputs(Path(tmp), first_year, last_earnings_year)
    return replace(inputs, fingerprints=prints), degrees["person_id"].to_numpy(np.int64)


def bound_checks(graduates_name: str, jobs_name: str, bounded: BoundedDegrees) -> list[dict]:
    """The jobs layout's input checks, for the internal documents (exact figures, as the
    other input checks: no public file states them)."""
    k = bounded.max_degrees_per_person
    return [
        {"name": f"{graduates_name} passes the graduates schema (one row per degree)",
         "result": f"passed ({bounded.degree_rows:,} rows, {bounded.persons:,} persons)"},
        {"name": f"{jobs_name} passes the jobs schema",
         "result": f"passed ({bounded.job_rows:,} rows)"},
        {"name": "every job belongs to a known graduate", "result": "passed"},
        {"name": f"contributions bounded to {k} degree record(s) per person (the earliest)",
         "result": f"{bounded.dropped:,} degree record(s) dropped (confidential figure: not "
                   "published; the bound itself is)"},
    ]
