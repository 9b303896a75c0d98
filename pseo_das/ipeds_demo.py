"""SYNTHETIC demo IPEDS files for the CIP recast, consistent with the synthetic universe,
and the hard-coded CIP transitions (see pseo_das/reference/ipeds/README.md).

The IPEDS files are NOT NCES data: they describe the made-up institutions and programs of
`pseo_das.synth` for the default seed (20240101), in the real IPEDS layouts.

* Completions, ``C{YYYY}_A.csv`` for every graduation year of the universe (2001-2020;
  the recast reads those before the CIP switch year, the IPEDS counts all of them): the
  first-major awards of a
  program (institution x degree level x CIP code) in a year are the synthetic
  graduates expected in it at the default size (200,000 graduates): the universe's cell
  probability x 200,000, rounded half to even; programs rounding to 0 are left out.
  Years before CIP_SWITCH_YEAR (2020) are in CIP-2010 codes, later years in the CIP-2020
  code of the program (the packaged NCES crosswalk's, as synth writes it). AWLEVEL is the
  IPEDS award level of the PSEO degree level (the inverse of `schemas.ipeds.AWLEVEL_DEGREE`,
  01 -> 1 before 2020-21; from 2020-21, 01 -> 20 for one award in 4, rounded down, and 21
  for the rest). Bachelor's programs with 20 or
  more awards also have second majors (MAJORNUM 2, 1 in 20, under the same code), and
  every UNITID x MAJORNUM x AWLEVEL has its CIPCODE 99 total row, as IPEDS writes them.
  Men and women split the awards by a fixed share per CIP family. The programs of the
  4-digit CIP-2010 series LEFT_OUT_SERIES (43.01, which splits into 43.01 and 43.04 in
  CIP-2020) are left out in every year, so the recast meets a code IPEDS does not show and
  uses the hard-coded transition, and their IPEDS counts are not available.
* Directory, ``HD{YYYY}.csv`` for the same years: one UNITID (6 digits, from a hash of the
  OPEID; made up) per synthetic institution with its 8-digit OPEID, which is a real one
  (`pseo_das.synth` gives each synthetic institution a real institution of its state from
  the LEHD schema's label_institution.csv), and that institution's real name and city, and
  the state. The real names chosen are plain ASCII (the accented names of the label file in
  these states are branch campuses, which synth does not take), so the first Texas community
  college keeps a made-up Spanish name with accents (ACCENTED_NAME). HD2011.csv is written in
  Latin-1, as the real downloads are; the others in UTF-8.
* ``cip_hard_coded_transitions.csv``: cip2010, cip2020, share, source. The medical
  residencies (60.04, 60.05) and all residencies (60, at 2 digits), which are not IPEDS
  awards, split over their CIP-2020 destinations in proportion to the number of 6-digit CIP-2010
  codes that move there (real crosswalk, each code weighing the same), and the synthetic
  43.01 by SYNTHETIC shares (0.85 stay, 0.15 to 43.04: about the share of the universe's
  43.01 graduates in 43.0106 and 43.0116). Shares are thousandths rounded by largest
  remainder, so that each code's shares sum to 1 exactly in decimal.

Deterministic: no random generator beyond the synthetic universe's own (a function of
the seed), so the files come out the same byte for byte on every run. Regenerate with
``python -m pseo_das.ipeds_demo [OUT_DIR]`` (default: pseo_das/reference/; the IPEDS
files go to OUT_DIR/ipeds/).
"""
from __future__ import annotations

import hashlib
import io
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np

from pseo_das.schemas.codes import STATE_POSTAL
from pseo_das.schemas.institutions import institution_labels
from pseo_das.schemas.ipeds import AWLEVEL_DEGREE
from pseo_das.synth import (CIP_CODES, CIP_SWITCH_YEAR, DEGREE_CODES, FIRST_COHORT,
                            LAST_COHORT, cip_vintages, make_universe)

SEED = 20240101
GRADUATES = 200_000
YEARS = tuple(range(FIRST_COHORT, LAST_COHORT + 1))   # every graduation year of the universe
LATIN1_YEAR = 2011
LEFT_OUT_SERIES = "43.01"
IPEDS_DIR = "ipeds"
HARD_CODED_FILE = "cip_hard_coded_transitions.csv"
SECOND_MAJOR_MIN, SECOND_MAJOR_PER = 20, 20    # bachelor's: 1 second major per 20 awards

COMPLETIONS_HEADER = ("UNITID", "CIPCODE", "MAJORNUM", "AWLEVEL", "XCTOTALT", "CTOTALT",
                      "XCTOTALM", "CTOTALM", "XCTOTALW", "CTOTALW")
DIRECTORY_HEADER = ("UNITID", "INSTNM", "CITY", "STABBR", "FIPS", "OPEID")
HARD_CODED_HEADER = ("cip2010", "cip2020", "share", "source")
TOTAL_CIPCODE = "99"

# PSEO degree level -> IPEDS award level before 2020-21 (20 and 21 replace 1 from then).
DEGREE_AWLEVEL = {degree: awlevel for awlevel, degree in AWLEVEL_DEGREE.items()
                  if awlevel not in ("20", "21")}
# From 2020-21 (the years written in CIP-2020 codes), certificates under one year are split
# into under 12 weeks (20: one award in UNDER_12_WEEKS_PER, rounded down) and 12 weeks to
# one year (21: the rest).
SHORT_CERTIFICATE, UNDER_12_WEEKS, ONE_YEAR_AT_MOST, UNDER_12_WEEKS_PER = "01", 20, 21, 4
# The real names of the institutions the synthetic ones take are plain ASCII: one keeps a
# made-up accented name, so that the Latin-1 directory file holds a byte that is not UTF-8.
ACCENTED_NAME = "Synthetic Colegio Técnico de Educación"  # the first Texas community college
MEN_SHARE = {"01": 0.55, "11": 0.80, "13": 0.25, "14": 0.80, "15": 0.85, "42": 0.22,
             "43": 0.60, "46": 0.95, "47": 0.95, "48": 0.90, "49": 0.90, "51": 0.15}
DEFAULT_MEN_SHARE = 0.45

RESIDENCY_SOURCE = "residency programs are not IPEDS awards"
DEMO_SOURCE = "SYNTHETIC demo"
RESIDENCY_CODES = ("60.04", "60.05", "60")
DEMO_TRANSITIONS = {LEFT_OUT_SERIES: {"43.01": 850, "43.04": 150}}   # thousandths


# ----------------------------------------------------------------------------------
# Institutions and awards of the synthetic universe
# ----------------------------------------------------------------------------------

def unitid(opeid: str) -> str:
    """A made-up 6-digit UNITID for a synthetic OPEID."""
    return str(100_000 + int(hashlib.sha256(opeid.encode()).hexdigest(), 16) % 900_000)


def institutions(seed: int = SEED) -> list[dict[str, str]]:
    """One directory row per synthetic institution, in the universe's order: the name and
    city of its real institution (label_institution.csv), except ACCENTED_NAME for the
    first Texas community college."""
    universe = make_universe(seed)
    labels = institution_labels().drop_duplicates("institution").set_index("institution")
    rows = []
    for opeid, kind, state in zip(universe.opeid, universe.inst_kind,
                                  universe.state_codes[universe.inst_state]):
        opeid, state = str(opeid), str(state)
        name = labels.at[opeid, "label"]
        if kind == "community" and state == "48" and not any(
                r["INSTNM"] == ACCENTED_NAME for r in rows):
            name = ACCENTED_NAME
        rows.append({"UNITID": unitid(opeid), "INSTNM": name, "CITY": labels.at[opeid, "city"],
                     "STABBR": STATE_POSTAL[state], "FIPS": str(int(state)), "OPEID": opeid})
    ids = [r["UNITID"] for r in rows]
    assert len(set(ids)) == len(ids), "UNITID collision: change unitid()"
    return rows


def expected_awards(year: int, seed: int = SEED, graduates: int = GRADUATES
                    ) -> list[tuple[str, str, str, int]]:
    """(OPEID, degree level, CIP-2010 code, awards) of every program with awards in
    `year`: its expected synthetic graduates, rounded half to even; zeros left out."""
    universe = make_universe(seed)
    probability = np.diff(universe.cell_cdf, prepend=0.0)
    here = np.flatnonzero(universe.cell_year == year)
    awards = np.rint(probability[here] * graduates).astype(np.int64)
    return [(str(universe.opeid[universe.cell_institution[c]]),
             str(DEGREE_CODES[universe.cell_degree[c]]), str(CIP_CODES[universe.cell_cip[c]]),
             int(a)) for c, a in zip(here, awards) if a > 0]


def completions_rows(year: int, seed: int = SEED, graduates: int = GRADUATES
                     ) -> list[tuple]:
    """The rows of C{year}_A: programs, second majors and CIPCODE 99 totals, sorted as
    IPEDS sorts them (UNITID, CIPCODE, MAJORNUM, AWLEVEL)."""
    ids = {r["OPEID"]: r["UNITID"] for r in institutions(seed)}
    labels, _, cip2020 = cip_vintages()
    code_2020 = dict(zip(CIP_CODES, labels[cip2020]))
    vintage_2020 = year >= CIP_SWITCH_YEAR
    counts: dict[tuple[str, str, int, int], int] = {}
    for opeid, degree, cip, awards in expected_awards(year, seed, graduates):
        if cip.startswith(LEFT_OUT_SERIES):
            continue
        code = str(code_2020[cip]) if vintage_2020 else cip
        for awlevel, n in _award_levels(degree, awards, vintage_2020):
            keys = [((ids[opeid], code, 1, awlevel), n)]
            if awlevel == 5 and n >= SECOND_MAJOR_MIN:
                keys.append(((ids[opeid], code, 2, awlevel), n // SECOND_MAJOR_PER))
            for key, m in keys:
                counts[key] = counts.get(key, 0) + m
                total = (key[0], TOTAL_CIPCODE, key[2], key[3])
                counts[total] = counts.get(total, 0) + m
    rows = []
    for (uid, cip, majornum, awlevel), total in sorted(counts.items()):
        men = (round(total * MEN_SHARE.get(cip[:2], DEFAULT_MEN_SHARE))
               if cip != TOTAL_CIPCODE else None)
        rows.append([uid, cip, majornum, awlevel, total, men])
    # A total's men and women are the sums over its programs.
    men_total = Counter()
    for uid, cip, majornum, awlevel, _, men in rows:
        if cip != TOTAL_CIPCODE:
            men_total[uid, majornum, awlevel] += men
    out = []
    for uid, cip, majornum, awlevel, total, men in rows:
        if cip == TOTAL_CIPCODE:
            men = men_total[uid, majornum, awlevel]
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


# ----------------------------------------------------------------------------------
# Hard-coded transitions
# ----------------------------------------------------------------------------------

def hard_coded_transitions() -> list[tuple[str, str, str, str]]:
    """(cip2010, cip2020, share, source) rows; shares as exact decimals summing to 1."""
    from pseo_das.tasks.inputs.cip_crosswalk import read_crosswalk  # imports Prefect
    six_digit = read_crosswalk().six_digit
    rows = []
    for code in RESIDENCY_CODES:
        width = len(code)
        moves = Counter(new[:width] for old, new in six_digit.items()
                        if new and old[:width] == code)
        rows += _rows(code, _thousandths(moves), RESIDENCY_SOURCE)
    for code, shares in DEMO_TRANSITIONS.items():
        rows += _rows(code, shares, DEMO_SOURCE)
    return rows


def _thousandths(weights: Counter) -> dict[str, int]:
    """Weights as thousandths summing to 1000 (largest remainder; ties by code)."""
    total = sum(weights.values())
    exact = {k: Decimal(1000 * w) / total for k, w in weights.items()}
    out = {k: int(v) for k, v in exact.items()}
    by_remainder = sorted(exact, key=lambda k: (-(exact[k] - out[k]), k))
    for k in by_remainder[:1000 - sum(out.values())]:
        out[k] += 1
    return out


def _rows(code: str, thousandths: dict[str, int], source: str) -> list[tuple]:
    assert sum(thousandths.values()) == 1000, code
    return [(code, new, str((Decimal(n) / 1000).normalize()), source)
            for new, n in sorted(thousandths.items()) if n > 0]


# ----------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------

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


def write_demo_ipeds(out_dir: Path | None = None, seed: int = SEED,
                     graduates: int = GRADUATES) -> list[Path]:
    """Write ipeds/C{YYYY}_A.csv, ipeds/HD{YYYY}.csv and cip_hard_coded_transitions.csv
    under `out_dir` (default: the package's reference folder); return the paths."""
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).with_name("reference")
    ipeds = out_dir / IPEDS_DIR
    ipeds.mkdir(parents=True, exist_ok=True)
    written = []
    directory = institutions(seed)
    for year in YEARS:
        path = ipeds / f"C{year}_A.csv"
        path.write_bytes(_csv_text(COMPLETIONS_HEADER, completions_rows(year, seed, graduates),
                                   quote=(1,)).encode("utf-8"))
        written.append(path)
        path = ipeds / f"HD{year}.csv"
        encoding = "latin-1" if year == LATIN1_YEAR else "utf-8"
        path.write_bytes(_csv_text(DIRECTORY_HEADER, [tuple(r.values()) for r in directory],
                                   quote=(1, 2)).encode(encoding))
        written.append(path)
    path = out_dir / HARD_CODED_FILE
    path.write_bytes(_csv_text(HARD_CODED_HEADER, hard_coded_transitions()).encode("utf-8"))
    written.append(path)
    return written


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else None
    for path in write_demo_ipeds(out):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
