"""IPEDS completions and the institutional directory, for the shares of the CIP recast
(technical appendix B, step 1). Privacy cost: none (public data).

Completions (C{YYYY}_A): awards by institution (UNITID), 6-digit CIP, first or second
major and award level. The files as IPEDS ships them: 2- and 4-digit CIPCODE rows are
subtotals and CIPCODE 99 rows totals, all dropped; the imputation columns (X*) and the
other count columns are ignored; a 6-digit CIPCODE without its leading zero (1.0101) and
an AWLEVEL with one (05) are read as 01.0101 and 5. Only first majors are counted (a graduate is in PSEO
once, under one program). The directory (HD{YYYY})
gives each UNITID's OPEID, the institution code of PSEO. The real HD files are often
Latin-1 (accented institution names): a file that is not UTF-8 is read as Latin-1, and
the loader says so.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from pandera.errors import SchemaErrors

from pseo_das.schemas.ipeds import (AWLEVEL_DEGREE, COMPLETIONS_COLUMNS, DIRECTORY_COLUMNS,
                                    SUBTOTAL_CIPCODE, completions_schema, directory_schema)
from pseo_das.tasks import progress
from pseo_das.tasks.inputs.ingest import InputValidationError, describe_failures

YEAR_IN_NAME = re.compile(r"(?:C|HD)([0-9]{4})", re.IGNORECASE)


def _read_text(path: Path, columns: tuple[str, ...], encoding: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding=encoding,
                            usecols=lambda c: c.strip().upper() in columns)
    except UnicodeDecodeError:
        raise
    except (OSError, ValueError) as exc:
        raise InputValidationError(f"{path}: cannot read: {exc}") from exc
    frame.columns = [c.strip().upper() for c in frame.columns]
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputValidationError(f"{path}: missing column(s) {', '.join(missing)}; expected "
                                   f"{', '.join(columns)}")
    return frame[list(columns)].apply(lambda s: s.str.strip())


def _validated(path: Path, frame: pd.DataFrame, schema) -> pd.DataFrame:
    try:
        return schema.validate(frame, lazy=True)
    except SchemaErrors as err:
        raise InputValidationError(describe_failures(path, err.failure_cases)) from None


def year_of(path: Path) -> int:
    found = YEAR_IN_NAME.search(Path(path).name)
    if not found:
        raise InputValidationError(f"{path}: the year is not in the file name (expected "
                                   "C{YYYY}_A.csv or HD{YYYY}.csv, as IPEDS names them)")
    return int(found.group(1))


def read_completions(path: Path, codes: frozenset[str] | None = None,
                     vintage: str = "") -> pd.DataFrame:
    """First-major awards: UNITID, cipcode (6-digit, the file's CIP vintage), degree_level,
    grad_year (the file's year), awards. With `codes`, every CIPCODE (totals aside) must be
    one of them, the 6-digit codes of the file's CIP vintage (named `vintage`)."""
    path = Path(path)
    if not path.is_file():
        raise InputValidationError(f"{path}: IPEDS completions file not found")
    raw = _read_text(path, COMPLETIONS_COLUMNS, "utf-8")
    raw = raw[~raw["CIPCODE"].str.fullmatch(SUBTOTAL_CIPCODE[1:-1])]   # as IPEDS writes them
    raw = raw.assign(CIPCODE=raw["CIPCODE"].str.replace(r"^([0-9])\.", r"0\1.", regex=True),
                     AWLEVEL=raw["AWLEVEL"].str.replace(r"^0([0-9])$", r"\1", regex=True))
    rows = _validated(path, raw, completions_schema(codes, vintage))
    kept = rows[(rows["MAJORNUM"] == "1") & rows["AWLEVEL"].isin(list(AWLEVEL_DEGREE))]
    return pd.DataFrame({"unitid": kept["UNITID"], "cipcode": kept["CIPCODE"],
                         "degree_level": kept["AWLEVEL"].map(AWLEVEL_DEGREE),
                         "grad_year": year_of(path),
                         "awards": kept["CTOTALT"].astype("int64")}).reset_index(drop=True)


def read_directory(path: Path) -> pd.DataFrame:
    """UNITID -> OPEID (8 digits; institutions without one are dropped) and state."""
    path = Path(path)
    if not path.is_file():
        raise InputValidationError(f"{path}: IPEDS directory file not found")
    try:
        raw = _read_text(path, DIRECTORY_COLUMNS, "utf-8")
    except UnicodeDecodeError:
        raw = _read_text(path, DIRECTORY_COLUMNS, "latin-1")
        progress(f"{path}: not UTF-8; read as Latin-1 (the encoding of the IPEDS directory "
                 "downloads)")
    rows = _validated(path, raw, directory_schema())
    rows = rows[rows["OPEID"].str.len() == 8]
    return pd.DataFrame({"unitid": rows["UNITID"], "institution": rows["OPEID"],
                         "state": rows["STABBR"]}).drop_duplicates("unitid").reset_index(drop=True)
