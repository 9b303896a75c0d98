"""The IPEDS completions and directories of a synthetic data set: `pseo-das synth` writes
them to ipeds/ in its output folder, so that the release's frame check
(tasks/inputs/frame_check.py), IPEDS counts and CIP recast read IPEDS files that describe the
data set's own institutions, whatever its seed, size or number of institutions (the
packaged demo files describe the default seed's universe only). SYNTHETIC, not NCES data.

* Awards: every degree of the graduates file is a first-major award of its institution,
  degree level, program and graduation year, under the code the file carries (CIP-2010
  before the data set's CIP switch year, CIP-2020 from it, as IPEDS reports them); so the
  IPEDS files show every cell of the data set's frame. Nothing is left out (the packaged
  demo files leave the 43.01 series out to show the recast's hard-coded transitions).
* Layout: that of the packaged demo files (pseo_das/ipeds_layout.py: second
  majors, CIPCODE 99 totals, men and women, AWLEVEL 20 / 21 from 2020-21; a directory
  HD{YYYY}.csv with a made-up UNITID per OPEID and the real name and city of the OPEID,
  HD2011 in Latin-1), one pair of files per graduation year of the data set.

A release finds them in the data folder when its reference folder has no ipeds/
(tasks/inputs/ipeds_location.py).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow.dataset as ds

from pseo_das.ipeds_layout import IPEDS_DIR, completions_of, unitid, write_ipeds_files
from pseo_das.schemas.codes import STATE_POSTAL
from pseo_das.schemas.institutions import institution_labels
from pseo_das.tasks.inputs.ipeds_location import SYNTHETIC_MARK

AWARD_KEYS = ["institution", "inst_state", "degree_level", "cipcode", "grad_year"]


def graduate_awards(data_dir: Path) -> pd.DataFrame:
    """The degrees of `data_dir`'s graduates (graduates.parquet or graduates/ of part files)
    counted by AWARD_KEYS (column `awards`), sorted."""
    single = Path(data_dir) / "graduates.parquet"
    source = single if single.exists() else Path(data_dir) / "graduates"
    rows = ds.dataset(source, format="parquet").to_table(columns=AWARD_KEYS).to_pandas()
    rows = rows.astype({c: str for c in AWARD_KEYS[:-1]}).astype({"grad_year": int})
    return rows.groupby(AWARD_KEYS, sort=True).size().rename("awards").reset_index()


def directory_rows(awards: pd.DataFrame) -> list[tuple]:
    """One HD row (ipeds_demo.DIRECTORY_HEADER) per institution of `awards`."""
    labels = institution_labels().drop_duplicates("institution").set_index("institution")
    places = awards.drop_duplicates("institution")
    return [(unitid(opeid), labels.at[opeid, "label"], labels.at[opeid, "city"],
             STATE_POSTAL[state], str(int(state)), opeid)
            for opeid, state in zip(places["institution"], places["inst_state"])]


def write_synthetic_ipeds(data_dir: Path) -> list[Path]:
    """Write `data_dir`/ipeds/ for the graduates of `data_dir` (module docstring); return the
    paths written."""
    awards = graduate_awards(data_dir)
    folder = Path(data_dir) / IPEDS_DIR
    if folder.is_dir():   # an earlier data set's files: none of its years may remain
        shutil.rmtree(folder)
    completions = {
        int(year): completions_of(zip(of_year["institution"].map(unitid), of_year["cipcode"],
                                      of_year["degree_level"], of_year["awards"].astype(int)),
                                  int(year))
        for year, of_year in awards.groupby("grad_year", sort=True)}
    written = write_ipeds_files(folder, completions, directory_rows(awards))
    (folder / SYNTHETIC_MARK).write_text(
        "SYNTHETIC IPEDS completions and directories written by `pseo-das synth` for the "
        "graduates of this folder (pseo_das/synth_ipeds.py): not NCES data.\n")
    return written + [folder / SYNTHETIC_MARK]
