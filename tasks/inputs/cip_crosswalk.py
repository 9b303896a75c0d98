"""The NCES CIP-2010 to CIP-2020 crosswalk (technical appendix B, step 1): read and
validated as published, then the 6-digit map and the possible 2- and 4-digit transitions
it implies. Privacy cost: none (public data).

At 6 digits every CIP-2010 code has one CIP-2020 destination (unchanged, moved, or for a
deleted code the one its 2020 title says to report under); a deleted code without such a
note has none (`None`). A 2- or 4-digit CIP-2010 code can nevertheless have several
destinations, when its 6-digit codes moved to different families: those transitions are
what the recast's shares (IPEDS) decide between.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pandera.errors import SchemaErrors

from pseo_das.schemas.cip import (CROSSWALK_CHECK_COLUMNS, CROSSWALK_COLUMNS, DELETED, NEW,
                                  crosswalk_schema)
from pseo_das.schemas.written_hashes import read_sha256
from pseo_das.tasks.inputs.ingest import InputValidationError, describe_failures, read_csv

CROSSWALK_FILE = "Crosswalk2010to2020.csv"
REPORT_UNDER = re.compile(r"report under ([0-9]{2}\.[0-9]{4})")
FORMULA = re.compile(r'^="(.*)"$')       # the NCES download writes cells as ="01.0101"
TEXT_CHANGE_NAMES = {"Text change": "TextChange"}   # the header of copies in circulation


def default_crosswalk_path() -> Path:
    """The crosswalk shipped with the package (real NCES data, see its README)."""
    import pseo_das
    return Path(pseo_das.__file__).parent / "reference" / "nces" / CROSSWALK_FILE


@dataclass(frozen=True)
class CipCrosswalk:
    rows: pd.DataFrame                  # the file as validated (text, formulas unwrapped)
    six_digit: dict[str, str | None]    # every 6-digit CIP-2010 code -> its CIP-2020 code
    sha256: str

    def transitions(self, digits: int) -> pd.DataFrame:
        """The possible (cip2010, cip2020) pairs at 2 or 4 digits ('11', '11.07'), implied
        by the 6-digit map; codes without a destination are left out."""
        return possible_transitions(pd.DataFrame(
            [(old, new) for old, new in self.six_digit.items() if new],
            columns=["cip2010", "cip2020"]), digits)

    @property
    def codes_2020(self) -> frozenset[str]:
        """Every 6-digit CIP-2020 code (unchanged, moved or new; not the deleted ones)."""
        six = self.rows[(self.rows["CIPCode2020"].str.len() == 7) & (self.rows["Action"] != DELETED)]
        return frozenset(six["CIPCode2020"])


def possible_transitions(six_digit: pd.DataFrame, digits: int) -> pd.DataFrame:
    """The (cip2010, cip2020) pairs at 2 or 4 digits ('11', '11.07') implied by a 6-digit
    map (columns cip2010, cip2020), sorted."""
    width = {2: 2, 4: 5}[digits]
    pairs = {(old[:width], new[:width]) for old, new in
             zip(six_digit["cip2010"], six_digit["cip2020"])}
    return pd.DataFrame(sorted(pairs), columns=["cip2010", "cip2020"])


def _unwrap(values: pd.Series) -> pd.Series:
    return values.str.replace(FORMULA, r"\1", regex=True)


def _check_header(path: Path) -> None:
    """The layouts in circulation: the crosswalk's six columns first, in order, the fourth
    named TextChange or 'Text change'; any further columns (copies add empty ones and
    repeat CIPCode2010, CIPCode2020) are ignored. Anything else is refused."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            lines = csv.reader(fh)
            header, first_row = next(lines, []), next(lines, None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return   # read_csv says what is wrong with the file
    if header and first_row is None:
        raise InputValidationError(f"{path}: no rows (only a header line)")
    found = [TEXT_CHANGE_NAMES.get(name.strip(), name.strip()) for name in header[:6]]
    if found != list(CROSSWALK_COLUMNS):
        raise InputValidationError(
            f"{path}: not the NCES crosswalk layout: its first columns are "
            f"{', '.join(header[:6]) or '(none)'}; expected {', '.join(CROSSWALK_COLUMNS)} "
            "(TextChange may be written 'Text change'; further columns are ignored)")


def read_crosswalk(path: Path | None = None) -> CipCrosswalk:
    """The crosswalk at `path` (default: the packaged copy), validated; bad rows are named
    by file, column and row (InputValidationError)."""
    path = Path(path) if path is not None else default_crosswalk_path()
    if not path.is_file():
        raise InputValidationError(f"{path}: crosswalk file not found")
    _check_header(path)
    raw = read_csv(path, None, header=None, skiprows=1, dtype=str, keep_default_na=False,
                   encoding="utf-8-sig")
    rows = raw.iloc[:, :len(CROSSWALK_COLUMNS)].set_axis(list(CROSSWALK_COLUMNS), axis=1)
    rows = rows.apply(_unwrap)
    try:
        rows = crosswalk_schema().validate(rows, lazy=True)
    except SchemaErrors as err:
        failures = err.failure_cases.copy()
        named = failures["check"].astype(str).map(CROSSWALK_CHECK_COLUMNS)
        failures["column"] = failures["column"].astype(object).where(named.isna(), named)
        raise InputValidationError(describe_failures(path, failures)) from None
    six = rows[(rows["CIPCode2010"].str.len() == 7) & (rows["Action"] != NEW)]
    destination: dict[str, str | None] = {}
    for old, action, new, title in six[["CIPCode2010", "Action", "CIPCode2020",
                                        "CIPTitle2020"]].itertuples(index=False):
        if action == DELETED:
            note = REPORT_UNDER.search(title)
            destination[old] = note.group(1) if note else None
        else:
            destination[old] = new
    return CipCrosswalk(rows, destination, read_sha256(path))

