"""The institutions of the LEHD Public Use Schema V4.14.0, `label_institution.csv` (shipped
unchanged in `pseo_das/reference/lehd-schema-v4.14.0/`): the U.S. Department of Education
(Federal Student Aid) list of institutions by 8-digit OPEID, with name, city, state postal
code and state FIPS code. Public data."""
from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd

import pseo_das

INSTITUTIONS_FILE = (Path(pseo_das.__file__).parent / "reference" / "lehd-schema-v4.14.0"
                     / "label_institution.csv")
INSTITUTION_LEVEL = "I"          # label_inst_level: rows of individual institutions
LABEL_COLUMNS = ("institution", "label", "city", "institution_state", "statefips")


@cache
def institution_labels() -> pd.DataFrame:
    """The inst_level I rows of label_institution.csv as text (institution, label, city,
    institution_state, statefips; empty where the file is), in file order. Read it once;
    do not modify the frame returned."""
    table = pd.read_csv(INSTITUTIONS_FILE, dtype=str, keep_default_na=False,
                        encoding="utf-8-sig")
    rows = table[table["inst_level"] == INSTITUTION_LEVEL]
    return rows[list(LABEL_COLUMNS)].reset_index(drop=True)
