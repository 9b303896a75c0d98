"""The release's second process (tasks/publication/second_process.py): the work runs in
another process and gives the same workbook bytes as in the release's own; its errors come
back to the release."""
from __future__ import annotations

import os

import pandas as pd
import pytest

from pseo_das.tasks.publication.labelled_workbook import WORKBOOK_NAME, write_release_workbook
from pseo_das.tasks.publication.release_files import write_code_table
from pseo_das.tasks.publication.second_process import second_process

ROW = {"agg_level_pseo": "40", "inst_level": "I", "institution": "00134500",
       "degree_level": "05", "cip_level": "2", "cipcode": "52", "grad_cohort": "0000",
       "grad_cohort_years": "3", "geo_level": "N", "geography": "00", "ind_level": "A",
       "industry": "00", "y1_p50_earnings": "51000", "y1_grads_earn": ""}


def test_the_work_runs_in_another_process_and_writes_the_same_workbook(tmp_path):
    folders = [tmp_path / "here" / "all", tmp_path / "apart" / "all"]
    for folder in folders:
        folder.mkdir(parents=True)
        write_code_table(pd.DataFrame([ROW]), folder / "pseoe_all.csv.gz")
    write_release_workbook(folders[0].parent, "R2026Q3")
    with second_process() as apart:
        assert apart(os.getpid).result() != os.getpid()
        written = apart(write_release_workbook, folders[1].parent, "R2026Q3").result()
    assert written == folders[1] / WORKBOOK_NAME
    assert written.read_bytes() == (folders[0] / WORKBOOK_NAME).read_bytes()


def test_an_error_in_the_second_process_reaches_the_release(tmp_path):
    with second_process() as apart, pytest.raises(FileNotFoundError, match="pseoe_all.csv"):
        apart(write_release_workbook, tmp_path, "R2026Q3").result()
    assert not list(tmp_path.iterdir())   # nothing written
