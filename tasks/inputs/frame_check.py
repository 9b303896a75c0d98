"""The cell frame checked against the public IPEDS completions, before any noise (issue 32,
item 5). Privacy cost: none; it decides which cells are measured, from public data.

The release is differentially private only if its frame (which institution x degree level
x program x cohort cells exist) is public: a cell is measured and published whether or not
it has graduates with earnings, but that it *exists* is taken as known. The frame comes
from the confidential graduates file; what makes it public is IPEDS, where institutions
publish their awards by program and year. Here the two are compared, cell by cell:

* A cell is *shown by IPEDS* when the completions (first majors, as
  tasks/inputs/ipeds_counts.py reads them) hold an award of its institution and degree
  level, under a code of its field, in a graduation year of its cohort window that is coded
  in the cell's CIP vintage (the codes compared are the ones the file reported: CIP-2010
  before `cip.switch_year`, CIP-2020 from it, as the graduates are coded). Field: at CIP
  level 4 the 4-digit code; at level 2 any program of the family (a 2-digit cell is shown
  when one of its 4-digit programs is); at level A (all fields, one vintage) any program.
  Each measured frame is checked at its own level (the earnings' 4-digit cells, the flows'
  2-digit ones, the cell statistics' all-fields ones); the derived rows (coarser levels,
  states, all cohorts) are sums of the measured cells that remain.
* `cells.frame_not_in_ipeds` says what happens to the other cells. "withhold":
  they leave the frame before the release plan, so they are not measured (no epsilon, no
  noise) and no row of pseoe, pseoh or pseof has them, not even a suppressed one (a row
  with status 5 would show that the cell exists). Their graduates are in no measured cell
  of that level; in a coarser measured level they count when the coarser cell is shown (a
  2-digit flows cell holds its family's graduates even from a 4-digit program IPEDS does
  not show). "flag": they are measured and published as before the check; the IPEDS count
  status of their rows is 3 (not available), and their existence is outside the privacy
  guarantee.
* The counts go to the input checks of the release (the internal DRB report): how many
  cells of each measured frame and years-after IPEDS does not show. They are figures of
  the confidential frame, so the public release notes state the choice, and the numbers
  only with "flag" (whose rows are published anyway).
* Coverage: when the IPEDS files hold an award of fewer than half of the frame's
  institutions, the files are most likely not the release's (the packaged demo files with
  another synthetic data set, a state's files missing): the release warns, in its progress
  output and its input checks, naming the institutions missing (the first MISSING_NAMED).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pseo_das.config import CellsConfig, FrameNotInIpeds, ReleaseConfig
from pseo_das.errors import PseoDasError
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.codes.text_codes import Factorized, combined_keys
from pseo_das.tasks.inputs.cell_moments import CellMoments
from pseo_das.tasks.inputs.cells import (CIP_2010, CIP_2020, MEASURED_CELL_KEYS, CellFrame,
                                         cip_code)
from pseo_das.tasks.inputs.ipeds_counts import IpedsAwards
from pseo_das.tasks.inputs.true_counts import LevelCounts, TrueCounts

COVERAGE_WARNING_SHARE = 0.5   # warn below this share of the frame's institutions
MISSING_NAMED = 12             # institutions named in the warning
CHECK_NAME = "cell frame against the IPEDS completions"
COVERAGE_NAME = "IPEDS completions cover the frame's institutions"
MOMENTS_FRAME = "cell statistics"   # the cell statistics' own frame (all fields)


def shown_cells(cells: pd.DataFrame, cip_level: str, awards: pd.DataFrame,
                cells_cfg: CellsConfig, switch_year: int) -> np.ndarray:
    """Which rows of `cells` (MEASURED_CELL_COLUMNS, codes at `cip_level`) IPEDS shows
    (module docstring); `awards`: tasks/inputs/ipeds_counts.py AWARD_COLUMNS. Each award is
    the key of the cell it shows, on integers (text_codes.py), each distinct text looked up
    once: on the 100m national input (2.8 million awards), at CIP level 4, +690 MB and
    5.6 s for a text frame and index of the awards, +173 MB and 1.3 s this way."""
    if len(cells) == 0:
        return np.zeros(0, bool)
    # each key column's distinct values, in the order of the cells' codes (a cell's key is
    # its codes; an award's, its values' positions among these)
    of_cells = {c: Factorized.of(cells[c]) for c in MEASURED_CELL_KEYS}
    among = {c: pd.Index(f.values if c == "grad_cohort" else f.values.astype(str))
             for c, f in of_cells.items()}
    degree = Factorized.of(awards["degree_level"])
    window = np.append(degree.mapped(cells_cfg.cohort_years).values.to_numpy(np.int64),
                       1)[degree.codes]
    year = awards["grad_year"].to_numpy(np.int64)
    first = cells_cfg.first_cohort_year
    cohort = first + ((year - first) // np.maximum(window, 1)) * window
    vintage = among["cip_vintage"].get_indexer([CIP_2010, CIP_2020])
    award = {
        "institution": Factorized.of(awards["institution"]).positions(
            among["institution"]),
        "degree_level": degree.positions(among["degree_level"]),
        "cip_vintage": np.full(len(year), vintage[1]) if cip_level == "A"   # one vintage
        else vintage[(year >= switch_year).astype(np.int64)],
        "cipcode": Factorized.of(awards["reported_cipcode"]).mapped(
            lambda code: cip_code(code, cip_level)).positions(among["cipcode"]),
        "grad_cohort": among["grad_cohort"].get_indexer(cohort)}
    sizes = [len(among[c]) for c in MEASURED_CELL_KEYS]
    shown = combined_keys([award[c] for c in MEASURED_CELL_KEYS], sizes)
    keys = combined_keys([of_cells[c].codes for c in MEASURED_CELL_KEYS], sizes)
    return np.isin(keys, shown[shown >= 0])


class FrameWithheldEntirely(PseoDasError, ValueError):
    """"withhold" would withhold every cell of the frame: the release would publish nothing."""


@dataclass(frozen=True)
class Coverage:
    """The frame's institutions and those of them with an IPEDS award in the files."""
    institutions: int
    covered: int
    missing: tuple[str, ...]     # sorted

    @property
    def low(self) -> bool:
        return self.covered < COVERAGE_WARNING_SHARE * self.institutions

    def text(self) -> str:
        shown = ", ".join(self.missing[:MISSING_NAMED])
        more = len(self.missing) - MISSING_NAMED
        named = f"{shown}{f' and {more:,} more' if more > 0 else ''}"
        figures = (f"the IPEDS files hold awards of {self.covered:,} of the "
                   f"{self.institutions:,} institutions of the frame")
        if not self.low:
            return f"passed: {figures}" + (f" (missing: {named})" if self.missing else "")
        return (f"WARNING: {figures}, under half: are they the release's files (the packaged "
                f"demo files describe the default synthetic data only)? Missing: {named}")


def coverage(institutions: set[str], awards: pd.DataFrame) -> Coverage:
    missing = tuple(sorted(institutions - set(awards["institution"].astype(str))))
    return Coverage(len(institutions), len(institutions) - len(missing), missing)


@dataclass(frozen=True)
class FrameCheck:
    """What the check found: per measured frame (CIP level, or the cell statistics') and
    years-after, (cells IPEDS does not show, cells), and the institutions' coverage."""
    choice: FrameNotInIpeds
    not_shown: dict[str, dict[str, tuple[int, int]]]   # frame -> years after -> figures
    coverage: Coverage

    def result(self) -> str:
        what = ("withheld (not measured, not published)" if self.choice == FrameNotInIpeds.WITHHOLD
                else "measured and published, IPEDS counts flagged 3")
        figures = "; ".join(
            f"{frame_name(frame)}: " + ", ".join(f"{n:,} of {total:,} at {k} year(s)"
                                                 for k, (n, total) in by_k.items())
            for frame, by_k in self.not_shown.items())
        return (f"passed: cells the IPEDS completions do not show, {what} "
                f"(cells.frame_not_in_ipeds = \"{self.choice.value}\"): {figures}")

    def checks(self) -> list[dict]:
        """The input checks (name, result) and the figures the documents show."""
        return [{"name": CHECK_NAME, "result": self.result(), "frame_check": {
                     "choice": self.choice.value,
                     "not_shown": [{"frame": frame_name(frame), "years_after": k, "cells": n,
                                    "of": total} for frame, by_k in self.not_shown.items()
                                   for k, (n, total) in by_k.items()],
                     "coverage_warning": self.coverage.text() if self.coverage.low else None}},
                {"name": COVERAGE_NAME, "result": self.coverage.text()}]


def frame_name(frame: str) -> str:
    return {"4": "4-digit CIP cells", "2": "2-digit CIP cells", "A": "all-fields cells",
            MOMENTS_FRAME: "the cell statistics' cells"}[frame]


def frame_check_of(checks: list[dict]) -> dict | None:
    """The frame check's figures among a release's checks (None: a release of a version
    before the check)."""
    return next((c["frame_check"] for c in checks if "frame_check" in c), None)


def _not_shown_figures(frame: CellFrame, shown: np.ndarray, cells_cfg: CellsConfig
                       ) -> dict[str, tuple[int, int]]:
    return {str(k): (int((observable & ~shown).sum()), int(observable.sum()))
            for k in cells_cfg.years_after
            for observable in [frame.observable(k, cells_cfg.last_earnings_year)]}


def _restrict(counts: LevelCounts, keep: np.ndarray) -> None:
    """Leave in `counts` the cells kept (canonical order kept), one array at a time, so that
    a national frame's counts are not held twice (0.6 GB at 100m); x_v over every cell
    stays (at least as large)."""
    position = np.cumsum(keep) - 1
    for k, at in counts.employed_at_employer.items():
        kept = at[keep[at["cell"].to_numpy()]]
        counts.employed_at_employer[k] = kept.assign(cell=position[kept["cell"].to_numpy()])
    counts.frame = replace(counts.frame, cells=counts.frame.cells[keep].reset_index(drop=True),
                           graduate_cell=None)
    counts.graduates = counts.graduates[keep]
    arrays: list[dict] = [counts.histograms, counts.employed, counts.largest_at_one_employer]
    for by_years_after in arrays:
        for k in by_years_after:
            by_years_after[k] = by_years_after[k][keep]


def _moments_restricted(moments: CellMoments, keep: np.ndarray) -> CellMoments:
    return replace(moments,
                   frame=replace(moments.frame, cells=moments.frame.cells[keep]
                                 .reset_index(drop=True), graduate_cell=None),
                   statistics={s: replace(m, n=m.n[keep], total=m.total[keep],
                                          lowest=m.lowest[keep], highest=m.highest[keep])
                               for s, m in moments.statistics.items()})


def checked_frame(counts: TrueCounts, awards: pd.DataFrame, cfg: ReleaseConfig
                  ) -> tuple[TrueCounts, FrameCheck]:
    """The counts with the cells IPEDS does not show withheld ("withhold") or kept
    ("flag"), and what the check found; the counts' checks carry it. The cells withheld
    leave `counts` itself (its levels' arrays are replaced by those of the cells kept: a
    national release does not hold its counts twice)."""
    frames: Mapping[str, CellFrame] = counts.frames | (
        {MOMENTS_FRAME: counts.moments.frame} if counts.moments else {})
    shown = {name: shown_cells(frame.cells, frame.cip_level, awards, cfg.cells,
                               cfg.cip.switch_year) for name, frame in frames.items()}
    institutions = {str(i) for frame in frames.values()
                    for i in frame.cells["institution"].unique()}
    check = FrameCheck(FrameNotInIpeds(cfg.cells.frame_not_in_ipeds),
                       {name: _not_shown_figures(frame, shown[name], cfg.cells)
                        for name, frame in frames.items()},
                       coverage(institutions, awards))
    counts = replace(counts, checks=counts.checks + check.checks())
    if cfg.cells.frame_not_in_ipeds == FrameNotInIpeds.WITHHOLD:
        if any(len(shown[level]) for level in counts.levels) and \
                not any(shown[level].any() for level in counts.levels):
            raise FrameWithheldEntirely(
                "the frame check would withhold every cell (cells.frame_not_in_ipeds = "
                f"\"withhold\"): the IPEDS completions show none of them; {check.coverage.text()}"
                ". Give the release the IPEDS files of its institutions (ipeds/ in the data "
                "folder or in --reference DIR; `pseo-das synth` writes them for synthetic data), "
                "or set cells.frame_not_in_ipeds = \"flag\" to publish the cells with their "
                "IPEDS counts flagged.")
        for level, level_counts in counts.levels.items():
            _restrict(level_counts, shown[level])
        if counts.moments is not None:
            counts = replace(counts, moments=_moments_restricted(counts.moments,
                                                                 shown[MOMENTS_FRAME]))
    return counts, check


@release_task("check the cell frame against IPEDS")
def check_frame_against_ipeds(counts: TrueCounts, ipeds: IpedsAwards, cfg: ReleaseConfig
                              ) -> TrueCounts:
    """`checked_frame`, with its findings in the progress output. Privacy cost: none (before
    any noise; public IPEDS data decide)."""
    counts, check = checked_frame(counts, ipeds.awards, cfg)
    progress(check.result().removeprefix("passed: "))
    if check.coverage.low:
        progress(check.coverage.text())
    return counts
