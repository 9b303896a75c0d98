"""`pseo-das synth` writes the IPEDS files of its own graduates (pseo_das/synth_ipeds.py), a
release finds them in the data folder (tasks/inputs/ipeds_location.py), and the frame check
then shows every cell of a data set of any seed; the jobs layout's derived records
(tasks/inputs/degree_records.py `read_degree_records`) for the verification server and
`synthesize`."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pseo_das.config import load_config
from pseo_das.synth import write_synthetic
from pseo_das.synth_ipeds import graduate_awards
from pseo_das.tasks.inputs.ipeds_counts import load_ipeds_awards
from pseo_das.tasks.inputs.ipeds_location import IPEDS_FOLDER, SYNTHETIC_MARK, locate_ipeds
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir

CFG = load_config(None)


@pytest.fixture(scope="module")
def seed_11(tmp_path_factory) -> Path:
    """A small data set of another universe than the packaged IPEDS files describe."""
    out = tmp_path_factory.mktemp("seed11")
    write_synthetic(out, graduates=6_000, seed=11, progress=lambda _: None)
    return out


def test_synth_writes_the_ipeds_files_of_its_graduates(seed_11):
    """Every degree is a first-major award of its institution, level, code and year; the
    reader of the release reads them back (CIPCODE 99 totals and second majors dropped,
    UNITID -> OPEID by the directory of the year, CIP-2010 years moved to CIP-2020)."""
    folder = seed_11 / IPEDS_FOLDER
    assert (folder / SYNTHETIC_MARK).is_file()
    assert sorted(p.name for p in folder.glob("C*_A.csv")) == \
        [f"C{y}_A.csv" for y in range(2001, 2021)]
    read = load_ipeds_awards(None, CFG.cells, CFG.cip.switch_year, seed_11).awards
    written = graduate_awards(seed_11)
    key = ["institution", "degree_level", "reported_cipcode", "grad_year"]
    expected = written.rename(columns={"cipcode": "reported_cipcode"})[key + ["awards"]]
    got = read.groupby(key, as_index=False)["awards"].sum()
    pd.testing.assert_frame_equal(got.sort_values(key, ignore_index=True),
                                  expected.sort_values(key, ignore_index=True),
                                  check_dtype=False)


def test_the_ipeds_files_are_looked_for_in_reference_then_data_then_package(seed_11, tmp_path):
    packaged = default_reference_dir() / IPEDS_FOLDER
    assert locate_ipeds(None, None).folder == packaged and locate_ipeds(None, None).demo
    data = locate_ipeds(default_reference_dir(), seed_11)
    assert (data.folder, data.demo, data.source) == (seed_11 / IPEDS_FOLDER, True, "data folder")
    (tmp_path / IPEDS_FOLDER).mkdir()
    given = locate_ipeds(tmp_path, seed_11)     # a reference folder with ipeds/ wins
    assert (given.folder, given.demo) == (tmp_path / IPEDS_FOLDER, False)
    assert locate_ipeds(tmp_path / "none", tmp_path / "none").folder == packaged
    (seed_11 / IPEDS_FOLDER / SYNTHETIC_MARK).rename(tmp_path / "mark")
    try:                                          # an agency's own files in its data folder
        assert not locate_ipeds(None, seed_11).demo
    finally:
        (tmp_path / "mark").rename(seed_11 / IPEDS_FOLDER / SYNTHETIC_MARK)


def test_the_frame_check_shows_every_cell_of_a_synthetic_data_set(seed_11):
    """With its own IPEDS files a data set of seed 11 passes the frame check: no cell is
    withheld (with the packaged files, most would be)."""
    from pseo_das.tasks.inputs.cpi import find_cpi, read_cpi
    from pseo_das.tasks.inputs.frame_check import checked_frame
    from pseo_das.tasks.inputs.true_counts import read_counts
    counts = read_counts(seed_11, CFG, None, read_cpi(find_cpi(default_reference_dir())))
    own = load_ipeds_awards(None, CFG.cells, CFG.cip.switch_year, seed_11).awards
    cells = {k: len(c.frame.cells) for k, c in counts.levels.items()}
    kept, check = checked_frame(counts, own, CFG)
    assert {n for by_k in check.not_shown.values() for n, _ in by_k.values()} == {0}
    assert not check.coverage.low and check.coverage.missing == ()
    assert {k: len(c.frame.cells) for k, c in kept.levels.items()} == cells
    packaged = load_ipeds_awards(None, CFG.cells, CFG.cip.switch_year).awards
    _, other = checked_frame(counts, packaged, CFG)
    n, total = other.not_shown["4"]["1"]
    assert n > total / 2


@pytest.fixture(scope="module")
def jobs_layout(tmp_path_factory) -> Path:
    """A hand-made jobs layout: person 1 holds a bachelor's (2010) and a master's (2012),
    with two jobs in 2013; person 2 one degree and no job in 2011."""
    root = tmp_path_factory.mktemp("jobs")
    pd.DataFrame({"person_id": [1, 1, 2], "institution": ["00135100"] * 3,
                  "inst_state": ["08"] * 3, "degree_level": ["05", "07", "05"],
                  "cipcode": ["11.0701", "11.0701", "52.0201"],
                  "grad_year": [2010, 2012, 2010]}).to_parquet(root / "graduates.parquet",
                                                               index=False)
    pd.DataFrame({"person_id": [1, 1, 1, 2], "year": [2011, 2013, 2013, 2015],
                  "earnings": [30_000.0, 50_000.0, 20_000.0, 40_000.0],
                  "emp_state": ["08", "49", "08", "08"],
                  "industry": ["51", "52", "44-45", "62"]}).to_parquet(root / "jobs.parquet",
                                                                  index=False)
    return root


def test_the_verification_records_of_the_jobs_layout(jobs_layout):
    """One record per degree and years after with a job; the agency's person_id kept, so
    that a person's records of both degrees fall in one group."""
    from pseo_das.tasks.verification.records import load_records
    records = load_records(jobs_layout, 2001, 2022)
    got = sorted(zip(records.person_id.tolist(), records.columns["degree_level"].tolist(),
                     records.columns["years_after"].tolist(), records.earnings.tolist(),
                     records.columns["emp_state"].tolist()))
    assert got == [(1, "05", 1, 30_000.0, "08"), (1, "07", 1, 70_000.0, "49"),
                   (2, "05", 5, 40_000.0, "08")]
    assert records.data_version == load_records(jobs_layout, 2001, 2022).data_version


def test_synthesize_reads_the_jobs_layout(tmp_path):
    """`synthesize` on a jobs-layout folder: one synthetic graduate per degree record, in
    the outcomes layout, which the release's input validation accepts."""
    from pseo_das.synth_jobs import write_jobs_layout
    from pseo_das.tasks.inputs.ingest import read_inputs
    from pseo_das.tasks.synthesis.synthesizer import synthesize
    write_synthetic(tmp_path / "data", graduates=3_000, seed=12, progress=lambda _: None)
    jobs = write_jobs_layout(tmp_path / "data", 12, 2022, 2020)
    assert jobs["graduates"] > jobs["persons"]      # some persons hold two degrees
    result = synthesize(tmp_path / "data", tmp_path / "out", bytes(32), CFG)
    assert result.graduates == jobs["graduates"]
    check = read_inputs(tmp_path / "out", 2001, 2022)
    assert len(check.graduates) == jobs["graduates"]
    assert np.unique(check.graduates["person_id"]).size == jobs["graduates"]
