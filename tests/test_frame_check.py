"""The cell frame checked against the public IPEDS completions before any noise
(tasks/inputs/frame_check.py): which cells IPEDS shows, the cells withheld from the counts
(`cells.frame_not_in_ipeds`), the IPEDS coverage warning, and a release's withheld rows."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pseo_das.config import FrameNotInIpeds, load_config
from pseo_das.tasks.inputs.cells import CellFrame, observable_populations
from pseo_das.tasks.inputs.frame_check import (COVERAGE_NAME, MISSING_NAMED, FrameWithheldEntirely,
                                               check_frame_against_ipeds, checked_frame,
                                               frame_check_of, shown_cells)
from pseo_das.tasks.inputs.ipeds_counts import IpedsAwards
from pseo_das.tasks.inputs.true_counts import LevelCounts, TrueCounts
from pseo_das.tasks.inputs.sparse_counts import SparseCounts
from pseo_das.tasks.measurements.products import FRAME_PARAMETER, earnings_questions

CFG = load_config(None)        # cohorts aligned to 2001: 3-year windows for 05, 5 otherwise
A, B = "00000100", "00000200"

# institution, degree level, CIP-2020 code, code as reported, graduation year
AWARDS = pd.DataFrame(
    [(A, "05", "11.0701", "11.0701", 2002), (A, "05", "43.0406", "43.0106", 2003),
     (A, "05", "11.0701", "11.0701", 2021), (A, "03", "52.0201", "52.0201", 2007)],
    columns=["institution", "degree_level", "cipcode", "reported_cipcode", "grad_year"]
).assign(awards=5)


def cells(rows: list[tuple]) -> pd.DataFrame:
    """MEASURED_CELL_COLUMNS from (institution, degree, vintage, code, cohort, years)."""
    frame = pd.DataFrame(rows, columns=["institution", "degree_level", "cip_vintage",
                                        "cipcode", "grad_cohort", "grad_cohort_years"])
    return frame.assign(inst_state="08")[["institution", "inst_state", "degree_level",
                                          "cipcode", "grad_cohort", "grad_cohort_years",
                                          "cip_vintage"]]


def shown(level: str, rows: list[tuple]) -> list[bool]:
    return shown_cells(cells([row[:-1] for row in rows]), level, AWARDS, CFG.cells,
                       CFG.cip.switch_year).tolist()


# (institution, degree, vintage, code, cohort, window years, shown by IPEDS?)
FOUR_DIGIT = [
    (A, "05", "2010", "1107", 2001, 3, True),    # an award in 2002
    (A, "05", "2010", "1107", 2004, 3, False),   # none in 2004-2006
    (A, "05", "2010", "4301", 2001, 3, True),    # as reported (CIP-2010), not as moved
    (A, "05", "2010", "4304", 2001, 3, False),
    (A, "05", "2020", "1107", 2019, 3, True),    # the 2021 award is coded in CIP-2020
    (A, "05", "2010", "1107", 2019, 3, False),   # ... not in the CIP-2010 of 2019's graduates
    (A, "03", "2010", "1107", 2001, 5, False),   # another degree level
    (A, "03", "2010", "5202", 2006, 5, True),
    (B, "05", "2010", "1107", 2001, 3, False),   # another institution
]
TWO_DIGIT = [(A, "05", "2010", "11", 2001, 3, True), (A, "05", "2010", "43", 2001, 3, True),
             (A, "05", "2010", "14", 2001, 3, False), (A, "05", "2010", "11", 2007, 3, False)]
ALL_FIELDS = [(A, "05", "2020", "00", 2001, 3, True), (A, "05", "2020", "00", 2019, 3, True),
              (A, "05", "2020", "00", 2010, 3, False), (A, "03", "2020", "00", 2006, 5, True),
              (B, "05", "2020", "00", 2001, 3, False)]


@pytest.mark.parametrize("level, rows", [("4", FOUR_DIGIT), ("2", TWO_DIGIT),
                                         ("A", ALL_FIELDS)])
def test_a_cell_is_shown_by_an_award_of_its_program_in_its_window_and_vintage(level, rows):
    assert shown(level, rows) == [row[-1] for row in rows]


def true_counts(rows: list[tuple]) -> TrueCounts:
    """Counts at CIP level 4 of the cells `rows`: cell i has i + 1 graduates, all in bin i
    (mod the bins) and destination 0, for every years-after."""
    n, bins = len(rows), CFG.earnings.n_bins
    histograms = np.zeros((n, bins), np.int64)
    histograms[np.arange(n), np.arange(n) % bins] = np.arange(1, n + 1)
    employed = SparseCounts.summed(n, 5, np.arange(n) * 5, np.arange(1, n + 1))   # destination 0
    level = LevelCounts(CellFrame("4", cells([row[:-1] for row in rows]), None),
                        np.arange(1, n + 1), {k: histograms for k in CFG.cells.years_after},
                        {k: employed for k in CFG.cells.years_after})
    return TrueCounts({"4": level}, {}, [{"name": "inputs", "result": "passed"}],
                      {"graduates": n, "outcomes": 0})


def with_choice(choice: FrameNotInIpeds):
    return CFG.model_copy(update={"cells": CFG.cells.model_copy(
        update={"frame_not_in_ipeds": choice.value})})


def test_withheld_cells_leave_the_counts_before_the_plan():
    counts, before = true_counts(FOUR_DIGIT), true_counts(FOUR_DIGIT).levels["4"]
    kept, check = checked_frame(counts, AWARDS, with_choice(FrameNotInIpeds.WITHHOLD))
    expected = [row[-1] for row in FOUR_DIGIT]
    # the cells withheld left the counts themselves (a national frame is not held twice)
    assert counts.levels["4"] is kept.levels["4"]
    level = kept.levels["4"]
    assert len(level.frame.cells) == sum(expected)
    pd.testing.assert_frame_equal(
        level.frame.cells, cells([r[:-1] for r in FOUR_DIGIT if r[-1]]).reset_index(drop=True))
    assert level.graduates.tolist() == [i + 1 for i, ok in enumerate(expected) if ok]
    for k in CFG.cells.years_after:
        assert (level.histograms[k] == before.histograms[k][expected]).all()
        assert (level.employed[k].toarray() == before.employed[k].toarray()[expected]).all()
    # the release plan finds its populations in the checked frame: B's is not planned
    populations = observable_populations(level.frame, 1, CFG.cells.last_earnings_year)
    assert B not in set(populations["institution"])
    # what was found: every cell is observable at 1 year (windows end by 2021); at 10 years
    # only windows ending by 2012
    assert check.not_shown["4"]["1"] == (expected.count(False), len(expected))
    assert check.not_shown["4"]["10"] == (4, 7)
    figures = frame_check_of(kept.checks)
    assert figures["choice"] == "withhold"
    assert {"frame": "4-digit CIP cells", "years_after": "1", "cells": 5, "of": 9} \
        in figures["not_shown"]
    assert kept.checks[0] == {"name": "inputs", "result": "passed"}


def test_withholding_every_cell_is_refused_with_the_way_out():
    """Files of other institutions (the packaged demo files for other data) would withhold
    the whole frame and publish nothing: refused before any noise, naming both ways out."""
    counts = true_counts([row for row in FOUR_DIGIT if not row[-1]])
    with pytest.raises(FrameWithheldEntirely, match='withhold every cell.*ipeds/ in the data '
                       'folder.*frame_not_in_ipeds = "flag"'):
        checked_frame(counts, AWARDS, with_choice(FrameNotInIpeds.WITHHOLD))
    kept, _ = checked_frame(counts, AWARDS, with_choice(FrameNotInIpeds.FLAG))
    assert kept.levels == counts.levels


def test_flag_keeps_every_cell_and_counts_those_ipeds_does_not_show():
    counts = true_counts(FOUR_DIGIT)
    kept, check = checked_frame(counts, AWARDS, with_choice(FrameNotInIpeds.FLAG))
    assert kept.levels == counts.levels
    assert check.not_shown["4"]["1"] == (5, 9)
    assert frame_check_of(kept.checks)["choice"] == "flag"


def test_withholding_is_part_of_the_question_flag_is_not(tmp_path):
    """A measurement taken on the whole frame does not answer a release that withholds."""
    withhold = earnings_questions(with_choice(FrameNotInIpeds.WITHHOLD))[0]
    flag = earnings_questions(with_choice(FrameNotInIpeds.FLAG))[0]
    assert FRAME_PARAMETER in withhold.parameters and FRAME_PARAMETER not in flag.parameters
    # the default configuration withholds, written out; a configuration without the key
    # (an earlier version's) reads as "flag", which dumps without it, as before the check
    assert CFG.cells.frame_not_in_ipeds == FrameNotInIpeds.WITHHOLD
    assert CFG.model_dump(mode="json")["cells"]["frame_not_in_ipeds"] == "withhold"
    legacy = CFG.cells.model_dump(mode="json")
    del legacy["frame_not_in_ipeds"]
    assert type(CFG.cells).model_validate(legacy).frame_not_in_ipeds == FrameNotInIpeds.FLAG
    assert "frame_not_in_ipeds" not in with_choice(FrameNotInIpeds.FLAG).model_dump(
        mode="json")["cells"]
    from pseo_das.tasks.audit.replay import configuration_toml
    for choice in FrameNotInIpeds:   # as the audit's replay writes the logged configuration
        dumped = with_choice(choice).model_dump(mode="json")
        (tmp_path / "config.toml").write_text(configuration_toml(dumped))
        assert load_config(tmp_path / "config.toml").cells.frame_not_in_ipeds == choice


def coverage_counts(institutions: list[str]) -> TrueCounts:
    return true_counts([(i, "05", "2010", "1107", 2001, 3, False) for i in institutions])


def test_the_coverage_warning_names_the_institutions_ipeds_misses(capsys):
    """Under half of the frame's institutions in the IPEDS files: a warning in the progress
    output and the input checks, naming the missing institutions (the first MISSING_NAMED)."""
    frame = [A] + [f"{n:08d}" for n in range(300, 300 + MISSING_NAMED + 5)]
    awards = IpedsAwards(AWARDS, frozenset({2002}), (2002,), {}, True)
    counts = check_frame_against_ipeds.fn(coverage_counts(frame), awards, CFG)
    printed = capsys.readouterr().err
    coverage = next(c["result"] for c in counts.checks if c["name"] == COVERAGE_NAME)
    missing = sorted(frame[1:])
    assert coverage.startswith(f"WARNING: the IPEDS files hold awards of 1 of the {len(frame)} "
                               "institutions of the frame, under half")
    assert ", ".join(missing[:MISSING_NAMED]) + " and 5 more" in coverage
    assert missing[MISSING_NAMED] not in coverage
    assert coverage in printed
    assert frame_check_of(counts.checks)["coverage_warning"] == coverage


@pytest.mark.parametrize("frame, warned", [([A, B], False), ([A, B, "00000300"], True),
                                           ([A], False)])
def test_the_coverage_warning_is_for_under_half(frame, warned):
    _, check = checked_frame(coverage_counts(frame), AWARDS, CFG)
    assert check.coverage.low is warned
    assert check.checks()[1]["result"].startswith("WARNING" if warned else "passed")


def test_the_documents_state_the_choice_and_the_number():
    """The DRB report (internal) gives the numbers and the coverage warning; the public
    release notes give the choice, and the numbers only for "flag" (rows published)."""
    from pseo_das.reports.render import _env
    _, check = checked_frame(coverage_counts([A, B, "00000300"]), AWARDS,
                             with_choice(FrameNotInIpeds.WITHHOLD))
    figures = frame_check_of(check.checks())

    def render(internal: bool, figures: dict) -> str:
        return _env.from_string('{% include "frame_check.md.j2" %}').render(
            frame_check=figures, internal=internal)
    drb, notes = render(True, figures), render(False, figures)
    assert "| 4-digit CIP cells | 1 | 2 | 3 |" in drb and "**withheld**" in drb
    assert "00000200, 00000300" in drb and "IPEDS coverage" in drb
    assert "**withheld**" in notes and "| 4-digit CIP cells |" not in notes
    assert "00000200" not in notes
    flagged = render(False, dict(figures, choice="flag"))
    assert "**measured and published**" in flagged and "| 4-digit CIP cells | 1 | 2 | 3 |" in flagged


def test_a_frame_without_cells_is_checked():
    empty = replace(true_counts(FOUR_DIGIT[:1]), levels={})
    kept, check = checked_frame(empty, AWARDS, CFG)
    assert kept.levels == {} and check.coverage.institutions == 0 and not check.coverage.low
