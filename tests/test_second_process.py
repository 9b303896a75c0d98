"""The release's second process (tasks/publication/second_process.py): the work runs in a
process of its own and writes the same workbook bytes as in the release's own; its failure
reaches the release with the process's message, and a release that fails stops it."""
from __future__ import annotations

import time

import pandas as pd
import pytest

from pseo_das.tasks.publication.labelled_workbook import WORKBOOK_NAME, write_release_workbook
from pseo_das.tasks.publication.release_files import write_code_table
from pseo_das.tasks.publication.second_process import Here, SecondProcessFailed, second_process

ROW = {"agg_level_pseo": "40", "inst_level": "I", "institution": "00134500",
       "degree_level": "05", "cip_level": "2", "cipcode": "52", "grad_cohort": "0000",
       "grad_cohort_years": "3", "geo_level": "N", "geography": "00", "ind_level": "A",
       "industry": "00", "y1_p50_earnings": "51000", "y1_grads_earn": ""}


def test_the_workbook_written_apart_is_the_same_bytes(tmp_path):
    folders = [tmp_path / "here" / "all", tmp_path / "apart" / "all"]
    for folder in folders:
        folder.mkdir(parents=True)
        write_code_table(pd.DataFrame([ROW]), folder / "pseoe_all.csv.gz")
    write_release_workbook(folders[0].parent, "R2026Q3")
    with second_process() as apart:
        apart(write_release_workbook, folders[1].parent, "R2026Q3").result()
    assert (folders[1] / WORKBOOK_NAME).read_bytes() == (folders[0] / WORKBOOK_NAME).read_bytes()


def test_a_failure_apart_reaches_the_release_with_its_message(tmp_path):
    with pytest.raises(SecondProcessFailed, match="FileNotFoundError: pseoe_all.csv"):
        with second_process() as apart:
            apart(write_release_workbook, tmp_path, "R2026Q3").result()
    assert not list(tmp_path.iterdir())          # nothing written


def test_a_failure_at_the_end_of_the_block_is_raised(tmp_path):
    with pytest.raises(SecondProcessFailed, match="write_release_workbook"):
        with second_process() as apart:
            apart(write_release_workbook, tmp_path, "R2026Q3")


def test_a_release_that_fails_stops_the_work_apart(tmp_path):
    with pytest.raises(KeyError), second_process() as apart:
        call = apart(time.sleep, 60)
        raise KeyError("the release failed")
    assert call._process.returncode is not None and call._process.returncode != 0


def test_a_small_call_made_here_writes_the_same_bytes_when_asked_and_once(tmp_path):
    folders = [tmp_path / "here" / "all", tmp_path / "apart" / "all"]
    for folder in folders:
        folder.mkdir(parents=True)
        write_code_table(pd.DataFrame([ROW]), folder / "pseoe_all.csv.gz")
    call = Here(write_release_workbook, folders[0].parent, "R2026Q3")
    assert not (folders[0] / WORKBOOK_NAME).exists()            # not before it is asked for
    call.result()
    written = (folders[0] / WORKBOOK_NAME).stat().st_mtime_ns
    call.result()                                               # made once
    assert (folders[0] / WORKBOOK_NAME).stat().st_mtime_ns == written
    with second_process() as apart:
        apart(write_release_workbook, folders[1].parent, "R2026Q3").result()
    assert (folders[1] / WORKBOOK_NAME).read_bytes() == (folders[0] / WORKBOOK_NAME).read_bytes()
    stopped = Here(write_release_workbook, tmp_path / "nowhere", "R2026Q3")
    stopped.stop()
    stopped.result()                                            # a stopped call is not made
