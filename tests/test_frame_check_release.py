"""A release withholds the cells of its frame that the IPEDS completions do not show, and
only those; with `cells.frame_not_in_ipeds = "flag"` it publishes them (system test).

The data: the default synthetic universe (the packaged demo IPEDS files describe it, from
its expected graduates: some drawn cells have no award there), its graduates of 2020 only, so that every cell is coded in CIP-2020 and published under the code
it was measured in (no recast): the oracle below reads the graduates file and the IPEDS
awards, nothing of the release."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import SEED_A, public_table, run_release, without_extras

pytestmark = pytest.mark.slow

YEAR = 2020
KEYS = ["institution", "degree_level", "cipcode", "grad_cohort"]


@pytest.fixture(scope="module")
def frame_releases(tmp_path_factory):
    """The same data and seed released with "withhold" (the default) and with "flag", each
    in a store of its own; the data folder has no ipeds/ (the packaged demo files are read).
    Returns (root, graduates)."""
    from pseo_das.synth import write_synthetic
    root = tmp_path_factory.mktemp("frame")
    write_synthetic(root / "all", graduates=40_000, progress=lambda _: None)
    graduates = pd.read_parquet(root / "all" / "graduates.parquet")
    graduates = graduates[graduates["grad_year"] == YEAR]
    outcomes = pd.read_parquet(root / "all" / "outcomes.parquet")
    (root / "data").mkdir()
    graduates.to_parquet(root / "data" / "graduates.parquet", index=False)
    outcomes[outcomes["person_id"].isin(graduates["person_id"])].to_parquet(
        root / "data" / "outcomes.parquet", index=False)
    for name in ("withhold", "flag"):
        settings = f'[cells]\nframe_not_in_ipeds = "{name}"\n'
        extra = without_extras(root / f"{name}.toml", settings)
        uri = f"sqlite:///{root / name / 'audit' / 'mlflow.db'}"
        assert run_release(root / "data", root / name / "release", SEED_A, uri, "2026Q4-frame",
                           extra) == 0
    return root, graduates


def oracle(graduates: pd.DataFrame, digits: int) -> tuple[set, set]:
    """The frame's cells at 4 (digits 5: "11.07") or 2 digits (2: "11") by cohort, and those
    the IPEDS completions of YEAR show (an award of the institution, degree level and code)."""
    from pseo_das.config import load_config
    from pseo_das.tasks.inputs.ipeds_counts import load_ipeds_awards
    cfg = load_config(None)
    awards = load_ipeds_awards(None, cfg.cells, cfg.cip.switch_year).awards

    def cells(frame: pd.DataFrame, code: str, year: str) -> set:
        years = frame[year].astype(int)
        window = frame["degree_level"].astype(str).map(cfg.cells.cohort_years)
        first = cfg.cells.first_cohort_year
        cohort = first + (years - first) // window * window
        return set(zip(frame["institution"].astype(str), frame["degree_level"].astype(str),
                       frame[code].astype(str).str[:digits], cohort.astype(str)))
    frame = cells(graduates, "cipcode", "grad_year")
    shown = cells(awards[awards["grad_year"] == YEAR], "reported_cipcode", "grad_year")
    return frame, frame & shown


def published(release: Path, name: str, cip_level: str) -> set:
    rows = pd.read_csv(public_table(release, name), dtype=str, keep_default_na=False)
    rows = rows[(rows["inst_level"] == "I") & (rows["cip_level"] == cip_level)
                & (rows["grad_cohort"] != "0000")]
    return set(map(tuple, rows[KEYS].drop_duplicates().to_numpy()))


@pytest.mark.parametrize("name, cip_level, digits", [("pseoe_all.csv", "4", 5),
                                                      ("pseof_all.csv", "2", 2)])
def test_the_withheld_rows_are_exactly_the_cells_ipeds_does_not_show(frame_releases, name,
                                                                     cip_level, digits):
    root, graduates = frame_releases
    frame, shown = oracle(graduates, digits)
    assert frame - shown, "the data must have cells IPEDS does not show"
    assert published(root / "flag" / "release", name, cip_level) == frame
    assert published(root / "withhold" / "release", name, cip_level) == shown


def test_no_histogram_of_a_withheld_cell(frame_releases):
    root, graduates = frame_releases
    frame, shown = oracle(graduates, 5)
    histograms = published(root / "withhold" / "release", "pseoh_all.csv", "4")
    assert histograms and histograms <= shown
    assert histograms & (frame - shown) == set()


def test_the_documents_state_the_number_and_the_choice(frame_releases):
    root, graduates = frame_releases
    frame, shown = oracle(graduates, 5)
    line = f"| 4-digit CIP cells | 1 | {len(frame - shown):,} | {len(frame):,} |"
    withhold, flag = root / "withhold" / "release", root / "flag" / "release"
    drb = (withhold / "internal" / "drb_report.md").read_text()
    assert line in drb and '`cells.frame_not_in_ipeds = "withhold"`' in drb
    notes = (withhold / "public" / "release_notes.md").read_text()
    assert "were **withheld**" in notes and line not in notes
    assert "given only in the\ninternal DRB report" in notes
    flag_notes = (flag / "public" / "release_notes.md").read_text()
    assert "were **measured and published**" in flag_notes and line in flag_notes


def test_withheld_cells_are_not_measured(frame_releases):
    """Nothing is spent on a population whose every cell is withheld; a flag release
    measures more."""
    root, _ = frame_releases
    summary = {name: json.loads((root / name / "release" / "internal" /
                                 "release_summary.json").read_text())
               for name in ("withhold", "flag")}
    assert summary["withhold"]["new_measurements"] < summary["flag"]["new_measurements"]
