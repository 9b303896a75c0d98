"""The public inputs of the CIP recast (technical appendix B, step 1), read from the
reference folder: the NCES crosswalk (nces/Crosswalk2010to2020.csv), IPEDS completions and
directories of the years coded in CIP-2010 (ipeds/C{YYYY}_A.csv with ipeds/HD{YYYY}.csv),
and the hard-coded transitions for codes IPEDS does not report
(cip_hard_coded_transitions.csv). A file the folder lacks comes from the package (the
crosswalk is the real NCES file; the packaged IPEDS and hard-coded files are SYNTHETIC
demo files) and the loader says so; the IPEDS files come from the data folder before the
package when it has them (tasks/inputs/ipeds_location.py). Privacy cost: none (public data).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.schemas.cip import HARD_CODED_CHECK_COLUMNS, hard_coded_schema
from pseo_das.schemas.inputs import CipVintages
from pseo_das.tasks import progress
from pseo_das.tasks.inputs.cip_crosswalk import (CROSSWALK_FILE, possible_transitions,
                                                 read_crosswalk)
from pseo_das.schemas.written_hashes import read_sha256
from pseo_das.tasks.inputs.ingest import InputValidationError
from pseo_das.tasks.inputs.ipeds import read_completions, read_directory, year_of
from pseo_das.tasks.inputs.ipeds_location import IPEDS_FOLDER, locate_ipeds
from pseo_das.tasks.inputs.reference_cache import cached
from pseo_das.tasks.inputs.reference_inputs import (default_reference_dir, read_text_csv,
                                                    validate)

HARD_CODED_FILE = "cip_hard_coded_transitions.csv"
HARD_CODED_COLUMNS = ("cip2010", "cip2020", "share", "source")


def is_recast_input(name: str) -> bool:
    """Whether an input fingerprint's name (relative to the reference folder) is one of the
    recast's files."""
    return name == HARD_CODED_FILE or name.startswith(("nces/", f"{IPEDS_FOLDER}/"))


@dataclass(frozen=True)
class RecastInputs:
    crosswalk: pd.DataFrame      # cip2010, cip2020: every 6-digit CIP-2010 code with a destination
    completions: pd.DataFrame    # institution, degree_level, grad_year, cipcode (6-digit CIP-2010), awards
    hard_coded: pd.DataFrame     # cip2010, cip2020, share (2- and 4-digit dotted codes)
    fingerprints: dict[str, str]
    packaged: tuple[str, ...] = ()  # the SYNTHETIC demo inputs of the package that were used
    codes: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())  # 2010, 2020

    def transitions(self, digits: int) -> pd.DataFrame:
        return possible_transitions(self.crosswalk, digits)

    def vintages(self, switch_year: int) -> CipVintages:
        """The 6-digit codes of each vintage, for the graduates file's check."""
        return CipVintages(*self.codes, switch_year)


def read_hard_coded(path: Path, crosswalk: pd.DataFrame) -> pd.DataFrame:
    """The hard-coded transitions: 2- or 4-digit CIP-2010 code, CIP-2020 code of the same
    level that the crosswalk allows, share; the shares of a code sum to 1."""
    raw = read_text_csv(path, HARD_CODED_COLUMNS)
    allowed = pd.concat([possible_transitions(crosswalk, digits) for digits in (2, 4)])
    pairs = set(zip(allowed["cip2010"], allowed["cip2020"]))
    rows = validate(path, raw, hard_coded_schema(pairs), HARD_CODED_CHECK_COLUMNS)
    return rows.assign(share=rows["share"].astype(float))[["cip2010", "cip2020", "share"]] \
        .reset_index(drop=True)


def read_ipeds(folder: Path, before_year: int) -> tuple[pd.DataFrame, dict[str, str]]:
    """Completions of the years before `before_year` (coded in CIP-2010), by OPEID:
    institution, degree_level, grad_year, cipcode, awards; and the files' SHA-256."""
    paths = sorted(folder.glob("C*_A.csv"), key=year_of)
    used = [p for p in paths if year_of(p) < before_year]
    if not used:
        raise InputValidationError(f"{folder}: no IPEDS completions file C{{YYYY}}_A.csv of a "
                                   f"year before {before_year} (the years coded in CIP-2010)")
    parts, prints, problems = [], {}, []
    for path in used:
        directory_path = folder / f"HD{year_of(path)}.csv"
        try:
            completions = read_completions(path)
            directory = read_directory(directory_path)
        except InputValidationError as exc:
            problems.append(str(exc))
            continue
        merged = completions.merge(directory, on="unitid", how="left")
        parts.append(merged[merged["institution"].notna()])
        prints.update({f"{IPEDS_FOLDER}/{p.name}": read_sha256(p) for p in (path, directory_path)})
    if problems:
        raise InputValidationError("\n".join(problems))
    rows = pd.concat(parts, ignore_index=True)
    out = rows.groupby(["institution", "degree_level", "grad_year", "cipcode"], as_index=False,
                       sort=True)["awards"].sum()
    return out.astype({"grad_year": np.int64, "awards": np.int64}), prints


def recast_sources(reference_dir: Path | None,
                   data_dir: Path | None = None) -> tuple[dict[str, Path], tuple[str, ...]]:
    """Where each recast input is read from: the folder's file, else the package's (and
    the loader says so); the IPEDS folder as tasks/inputs/ipeds_location.py finds it
    (`data_dir`: the release's data folder). With the names of the SYNTHETIC demo inputs
    among them."""
    given = Path(reference_dir) if reference_dir is not None else default_reference_dir()
    packaged_dir = default_reference_dir()
    locations = {"crosswalk": Path("nces") / CROSSWALK_FILE, "IPEDS": Path(IPEDS_FOLDER),
                 "hard-coded transitions": Path(HARD_CODED_FILE)}
    ipeds = locate_ipeds(reference_dir, data_dir)
    found, packaged = {}, []
    for name, relative in locations.items():
        if name == "IPEDS" and ipeds.source != "packaged demo files":
            found[name] = ipeds.folder
        elif (given / relative).exists():
            found[name] = given / relative
        else:
            found[name] = packaged_dir / relative
            packaged.append(name)
    if given.resolve() != packaged_dir.resolve() and packaged:
        progress(f"{given} has no {', '.join(str(locations[n]) for n in packaged)}: using the "
                 "packaged file(s) (the crosswalk is the real NCES file; the IPEDS and "
                 "hard-coded transitions files are SYNTHETIC demo files)")
    demo = tuple(name for name in ("IPEDS", "hard-coded transitions")
                 if found[name].resolve().is_relative_to(packaged_dir.resolve())
                 or (name == "IPEDS" and ipeds.demo))
    return found, demo


def read_recast_inputs(found: dict[str, Path], demo: tuple[str, ...],
                       switch_year: int) -> RecastInputs:
    """Read and validate the recast's inputs at `found`, `demo` of them SYNTHETIC
    (`recast_sources`)."""
    crosswalk = read_crosswalk(found["crosswalk"])
    map_frame = pd.DataFrame(sorted((old, new) for old, new in crosswalk.six_digit.items() if new),
                             columns=["cip2010", "cip2020"])
    completions, prints = read_ipeds(found["IPEDS"], switch_year)
    hard_coded = read_hard_coded(found["hard-coded transitions"], map_frame)
    prints.update({f"nces/{CROSSWALK_FILE}": crosswalk.sha256,
                   HARD_CODED_FILE: read_sha256(found["hard-coded transitions"])})
    return RecastInputs(map_frame, completions, hard_coded, prints, demo,
                        (frozenset(crosswalk.six_digit), crosswalk.codes_2020))


def load_recast_inputs(reference_dir: Path | None, switch_year: int,
                       data_dir: Path | None = None) -> RecastInputs:
    """Read and validate the recast's inputs (see the module docstring)."""
    return read_recast_inputs(*recast_sources(reference_dir, data_dir), switch_year)


def load_recast(reference_dir: Path | None, switch_year: int,
                data_dir: Path | None = None) -> RecastInputs:
    """`load_recast_inputs`, from the cache when no file changed (reference_cache.py): the
    key covers the files actually read (the IPEDS folder as found) and which are demo."""
    started = time.perf_counter()
    found, demo = recast_sources(reference_dir, data_dir)
    inputs = cached("cip-recast", found.values(),
                    {"found": {k: str(v.resolve()) for k, v in found.items()},
                     "demo": demo, "switch_year": switch_year},
                    lambda: read_recast_inputs(found, demo, switch_year))
    years = sorted(set(inputs.completions["grad_year"]))
    progress(f"CIP recast inputs valid: crosswalk {len(inputs.crosswalk):,} CIP-2010 codes with "
             f"a CIP-2020 destination; IPEDS completions {years[0]}-{years[-1]} "
             f"({len(years)} year(s), {len(inputs.completions):,} rows); "
             f"{len(inputs.hard_coded)} hard-coded transitions "
             f"({time.perf_counter() - started:.1f} s)")
    return inputs

