"""The IPEDS completions (C{YYYY}_A.csv) and directory (HD{YYYY}.csv) files as pseo-das
writes SYNTHETIC ones: the packaged demo files (pseo_das/ipeds_demo.py) and those of a
synthetic data set (pseo_das/synth_ipeds.py), in the real IPEDS layouts.

* Completions: each program's first-major awards (MAJORNUM 1) at the IPEDS award level
  (AWLEVEL) of its PSEO degree level (the inverse of `schemas.ipeds.AWLEVEL_DEGREE`, 01 -> 1
  before 2020-21; from 2020-21, 01 -> 20 for one award in 4, rounded down, and 21 for the
  rest). Bachelor's programs with 20 or more awards also have second majors (MAJORNUM 2, 1
  in 20, under the same code), and every UNITID x MAJORNUM x AWLEVEL has its CIPCODE 99
  total row, as IPEDS writes them. Men and women split the awards by a fixed share per CIP
  family. Rows sorted as IPEDS sorts them (UNITID, CIPCODE, MAJORNUM, AWLEVEL); CIPCODE
  quoted (it keeps its leading zero).
* Directory: one UNITID (6 digits, from a hash of the OPEID; made up) per institution with
  its OPEID, name, city and state; HD{LATIN1_YEAR}.csv in Latin-1, as the real downloads
  are, the others in UTF-8.
"""
from __future__ import annotations

import hashlib
import io
from collections import Counter
from pathlib import Path

from pseo_das.schemas.ipeds import AWLEVEL_DEGREE

AWLEVEL_2020_YEAR = 2020   # the award levels of 2020-21 and later (20 and 21 replace 1)
LATIN1_YEAR = 2011
IPEDS_DIR = "ipeds"
SECOND_MAJOR_MIN, SECOND_MAJOR_PER = 20, 20    # bachelor's: 1 second major per 20 awards

COMPLETIONS_HEADER = ("UNITID", "CIPCODE", "MAJORNUM", "AWLEVEL", "XCTOTALT", "CTOTALT",
                      "XCTOTALM", "CTOTALM", "XCTOTALW", "CTOTALW")
DIRECTORY_HEADER = ("UNITID", "INSTNM", "CITY", "STABBR", "FIPS", "OPEID")
TOTAL_CIPCODE = "99"

# PSEO degree level -> IPEDS award level before 2020-21 (20 and 21 replace 1 from then).
DEGREE_AWLEVEL = {degree: awlevel for awlevel, degree in AWLEVEL_DEGREE.items()
                  if awlevel not in ("20", "21")}
# From 2020-21, certificates under one year are split into under 12 weeks (20: one award in
# UNDER_12_WEEKS_PER, rounded down) and 12 weeks to one year (21: the rest).
SHORT_CERTIFICATE, UNDER_12_WEEKS, ONE_YEAR_AT_MOST, UNDER_12_WEEKS_PER = "01", 20, 21, 4
MEN_SHARE = {"01": 0.55, "11": 0.80, "13": 0.25, "14": 0.80, "15": 0.85, "42": 0.22,
             "43": 0.60, "46": 0.95, "47": 0.95, "48": 0.90, "49": 0.90, "51": 0.15}
DEFAULT_MEN_SHARE = 0.45


def unitid(opeid: str) -> str:
    """A made-up 6-digit UNITID for a synthetic OPEID."""
    return str(100_000 + int(hashlib.sha256(opeid.encode()).hexdigest(), 16) % 900_000)


def completions_of(programs, year: int) -> list[tuple]:
    """The rows of C{year}_A of first-major awards `programs` ((UNITID, CIPCODE as reported,
    PSEO degree level, awards) each): with the second majors, the CIPCODE 99 totals and the
    men / women split of the module docstring, sorted as IPEDS sorts them (UNITID, CIPCODE,
    MAJORNUM, AWLEVEL)."""
    counts: dict[tuple[str, str, int, int], int] = {}
    for uid, code, degree, awards in programs:
        for awlevel, n in _award_levels(degree, awards, year >= AWLEVEL_2020_YEAR):
            keys = [((uid, code, 1, awlevel), n)]
            if awlevel == 5 and n >= SECOND_MAJOR_MIN:
                keys.append(((uid, code, 2, awlevel), n // SECOND_MAJOR_PER))
            for key, m in keys:
                counts[key] = counts.get(key, 0) + m
                total_key = (key[0], TOTAL_CIPCODE, key[2], key[3])
                counts[total_key] = counts.get(total_key, 0) + m
    # A program's men by its field's share; a total's men and women are the sums over its
    # programs.
    men_of: dict[tuple[str, str, int, int], int] = {}
    men_total: Counter[tuple[str, int, int]] = Counter()
    for key, total in counts.items():
        uid, cip, majornum, awlevel = key
        if cip != TOTAL_CIPCODE:
            men_of[key] = round(total * MEN_SHARE.get(cip[:2], DEFAULT_MEN_SHARE))
            men_total[uid, majornum, awlevel] += men_of[key]
    out = []
    for key, total in sorted(counts.items()):
        uid, cip, majornum, awlevel = key
        men = men_of[key] if cip != TOTAL_CIPCODE else men_total[uid, majornum, awlevel]
        women = total - men
        out.append((uid, cip, majornum, awlevel, _flag(total), total, _flag(men), men,
                    _flag(women), women))
    return out


def _award_levels(degree: str, awards: int, vintage_2020: bool) -> list[tuple[int, int]]:
    """(AWLEVEL, awards) of a program's awards: one level, or from 2020-21 two for the
    certificates under one year (no row for a level without awards)."""
    if vintage_2020 and degree == SHORT_CERTIFICATE:
        short = awards // UNDER_12_WEEKS_PER
        return [(level, n) for level, n in ((UNDER_12_WEEKS, short),
                                            (ONE_YEAR_AT_MOST, awards - short)) if n]
    return [(int(DEGREE_AWLEVEL[degree]), awards)]


def _flag(value: int) -> str:
    """IPEDS imputation flag: R reported, Z implied zero."""
    return "R" if value else "Z"


def _csv_text(header: tuple[str, ...], rows, quote: tuple[int, ...] = ()) -> str:
    """CSV text with LF line ends; the columns at positions `quote` are quoted (IPEDS
    quotes CIPCODE, which keeps its leading zero)."""
    buffer = io.StringIO()
    buffer.write(",".join(header) + "\n")
    for row in rows:
        cells = ['"' + str(v).replace('"', '""') + '"' if i in quote else str(v)
                 for i, v in enumerate(row)]
        buffer.write(",".join(cells) + "\n")
    return buffer.getvalue()


def write_ipeds_files(folder: Path, completions: dict[int, list[tuple]],
                      directory: list[tuple]) -> list[Path]:
    """Write C{YYYY}_A.csv (rows of `completions_of`) and HD{YYYY}.csv (DIRECTORY_HEADER
    rows) of every year of `completions` to `folder`, as IPEDS writes them (CIPCODE, names
    and cities quoted; HD of LATIN1_YEAR in Latin-1, the others in UTF-8)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for year, rows in completions.items():
        path = folder / f"C{year}_A.csv"
        path.write_bytes(_csv_text(COMPLETIONS_HEADER, rows, quote=(1,)).encode("utf-8"))
        written.append(path)
        path = folder / f"HD{year}.csv"
        encoding = "latin-1" if year == LATIN1_YEAR else "utf-8"
        path.write_bytes(_csv_text(DIRECTORY_HEADER, directory, quote=(1, 2)).encode(
            encoding, errors="replace"))   # a name outside Latin-1 (none in the demo files)
        written.append(path)
    return written
