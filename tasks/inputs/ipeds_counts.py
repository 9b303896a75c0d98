"""The IPEDS completions behind the IPEDS counts of pseoe (`y1/y5/y10_ipeds_count`), read
from the reference folder (ipeds/C{YYYY}_A.csv with ipeds/HD{YYYY}.csv, the readers and
checks of tasks/inputs/ipeds.py) for every graduation year of the release, all in CIP-2020
codes. Privacy cost: none (public data).

* Years: every graduation year a cohort window of the release can hold, from
  `cells.first_cohort_year` to `cells.last_earnings_year` minus the smallest years-after
  (`graduation_years`). A year without a completions file is not an error: the counts that
  need it are flagged (tasks/codes/ipeds_counts.py); its directory HD{YYYY}.csv must
  be there when its completions file is.
* CIP vintage: a file of a year before `cip.switch_year` is in CIP-2010 codes (every CIPCODE
  must be one of the NCES crosswalk's 6-digit CIP-2010 codes) and each award moves to the
  CIP-2020 code of its CIP-2010 code. The NCES crosswalk gives every 6-digit CIP-2010 code
  one CIP-2020 code (its schema refuses a code listed twice), so no award is ever split;
  the two codes without one (60.0499, 60.0599, medical residencies, which are not IPEDS
  awards) are left out, and the loader says how many awards that drops. A file of the
  switch year or later is in CIP-2020 codes (every CIPCODE one of the crosswalk's CIP-2020
  codes). Each award keeps its code as reported (`reported_cipcode`), so that a count can
  say when a code was changed to fit PSEO's CIP-2020 categories.
* As the recast's reader: CIPCODE 99 totals dropped, first majors only, AWLEVEL mapped to
  PSEO degree levels (19 left out), UNITID -> OPEID by the directory of the same year
  (institutions without an OPEID dropped), Latin-1 directories read and announced.

The folder is the one tasks/inputs/ipeds_location.py finds (the reference folder's ipeds/,
else the data folder's, else the packaged SYNTHETIC demo files), and the loader says which.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.config import CellsConfig
from pseo_das.tasks import progress
from pseo_das.tasks.inputs.cip_crosswalk import (CROSSWALK_FILE, default_crosswalk_path,
                                                 read_crosswalk)
from pseo_das.schemas.written_hashes import read_sha256
from pseo_das.tasks.inputs.ingest import InputValidationError
from pseo_das.tasks.inputs.ipeds import read_completions, read_directory
from pseo_das.tasks.inputs.ipeds_location import IPEDS_FOLDER, locate_ipeds
from pseo_das.tasks.inputs.reference_cache import cached
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir

AWARD_COLUMNS = ["institution", "degree_level", "grad_year", "cipcode", "reported_cipcode",
                 "awards"]


@dataclass(frozen=True)
class IpedsAwards:
    awards: pd.DataFrame         # institution, degree_level, grad_year, cipcode (6-digit CIP-2020),
                                 # reported_cipcode (the file's code), awards (int64 > 0)
    years: frozenset[int]        # the graduation years with a completions file
    wanted: tuple[int, ...]      # the graduation years the release covers
    fingerprints: dict[str, str]  # ipeds/<file> -> SHA-256
    packaged: bool               # SYNTHETIC demo files were used (packaged, or synth's)


def graduation_years(cells: CellsConfig) -> tuple[int, ...]:
    """Every graduation year a cohort window with earnings can hold: from the first cohort
    year to the last earnings year minus the smallest years-after."""
    return tuple(range(cells.first_cohort_year,
                       cells.last_earnings_year - min(cells.years_after) + 1))


def read_year(folder: Path, year: int, switch_year: int, six_digit: dict[str, str | None],
              codes_2020: frozenset[str]) -> pd.DataFrame:
    """The first-major awards of one year's files (AWARD_COLUMNS), in CIP-2020 codes."""
    vintage_2010 = year < switch_year
    completions = read_completions(folder / f"C{year}_A.csv",
                                   codes=frozenset(six_digit) if vintage_2010 else codes_2020,
                                   vintage="CIP-2010" if vintage_2010 else "CIP-2020")
    directory = read_directory(folder / f"HD{year}.csv")
    merged = completions.merge(directory, on="unitid", how="inner")
    reported = merged["cipcode"]
    current = reported.map(six_digit) if vintage_2010 else reported
    kept = current.notna()
    if not kept.all():
        progress(f"{folder / f'C{year}_A.csv'}: {int(merged.loc[~kept, 'awards'].sum()):,} "
                 f"award(s) under CIP-2010 code(s) without a CIP-2020 code "
                 f"({', '.join(sorted(set(reported[~kept])))}) left out")
    return pd.DataFrame({"institution": merged["institution"], "degree_level": merged["degree_level"],
                         "grad_year": merged["grad_year"], "cipcode": current,
                         "reported_cipcode": reported, "awards": merged["awards"]})[kept]


def read_ipeds_awards(folder: Path, years: tuple[int, ...], switch_year: int,
                      crosswalk_path: Path | None = None
                      ) -> tuple[pd.DataFrame, frozenset[int], dict[str, str]]:
    """The awards of `years` found in `folder` (AWARD_COLUMNS, summed by institution, degree
    level, year and both codes; sorted), the years that have a completions file, and the
    SHA-256 of the files read. Every bad file is reported, not only the first."""
    crosswalk = read_crosswalk(crosswalk_path)
    present = [year for year in years if (folder / f"C{year}_A.csv").is_file()]
    parts, prints, problems = [], {}, []
    for year in present:
        try:
            parts.append(read_year(folder, year, switch_year, crosswalk.six_digit,
                                   crosswalk.codes_2020))
        except InputValidationError as exc:
            problems.append(str(exc))
            continue
        prints.update({f"{IPEDS_FOLDER}/{name}": read_sha256(folder / name)
                       for name in (f"C{year}_A.csv", f"HD{year}.csv")})
    if problems:
        raise InputValidationError("\n".join(problems))
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=AWARD_COLUMNS)
    summed = rows.groupby(AWARD_COLUMNS[:-1], as_index=False, sort=True)["awards"].sum()
    return (summed.astype({"grad_year": np.int64, "awards": np.int64}), frozenset(present),
            prints)


def load_ipeds_awards(reference_dir: Path | None, cells: CellsConfig,
                      switch_year: int, data_dir: Path | None = None) -> IpedsAwards:
    """Read the IPEDS completions of the release's graduation years (module docstring)."""
    given = Path(reference_dir) if reference_dir is not None else default_reference_dir()
    location = locate_ipeds(reference_dir, data_dir)
    if location.source != "reference folder" and given.resolve() != \
            default_reference_dir().resolve():
        progress(f"{given} has no {IPEDS_FOLDER}/: the IPEDS counts use the "
                 f"{'SYNTHETIC ' if location.demo else ''}files of the {location.source} "
                 f"{location.folder}")
    crosswalk_file = given / "nces" / CROSSWALK_FILE
    crosswalk = crosswalk_file if crosswalk_file.is_file() else None
    wanted = graduation_years(cells)
    folder = location.folder   # the cache key covers this folder's files and its path
    awards, years, prints = cached(   # read and validated again only if a file changed
        "ipeds-counts", [folder, crosswalk or default_crosswalk_path()],
        {"folder": str(folder.resolve()), "crosswalk": str(crosswalk), "years": wanted,
         "switch_year": switch_year},
        lambda: read_ipeds_awards(folder, wanted, switch_year, crosswalk))
    return IpedsAwards(awards, years, wanted, prints, location.demo)


def load_ipeds_counts_inputs(reference_dir: Path | None, cells: CellsConfig,
                             switch_year: int, data_dir: Path | None = None) -> IpedsAwards:
    started = time.perf_counter()
    inputs = load_ipeds_awards(reference_dir, cells, switch_year, data_dir)
    missing = sorted(set(inputs.wanted) - inputs.years)
    progress(f"IPEDS completions for the IPEDS counts: {len(inputs.years)} of "
             f"{len(inputs.wanted)} graduation years {inputs.wanted[0]}-{inputs.wanted[-1]} "
             f"({len(inputs.awards):,} rows)"
             + (f"; no file for {', '.join(map(str, missing))} (counts needing them are "
                "flagged)" if missing else "")
             + f" ({time.perf_counter() - started:.1f} s)")
    return inputs
