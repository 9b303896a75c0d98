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
  code of the program (the packaged NCES crosswalk's, as synth writes it). Award levels,
  second majors, CIPCODE 99 totals and men / women as pseo_das/ipeds_layout.py writes
  them (shared with the IPEDS files `pseo-das synth` writes, synth_ipeds.py). The programs of the
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

import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np

from pseo_das.ipeds_layout import (COMPLETIONS_HEADER, DIRECTORY_HEADER,  # noqa: F401
                                   IPEDS_DIR, LATIN1_YEAR, _csv_text, completions_of, unitid,
                                   write_ipeds_files)
from pseo_das.schemas.codes import STATE_POSTAL
from pseo_das.schemas.institutions import institution_labels
from pseo_das.synth import (CIP_CODES, CIP_SWITCH_YEAR, DEGREE_CODES, FIRST_COHORT,
                            LAST_COHORT, cip_vintages, make_universe)

SEED = 20240101
GRADUATES = 200_000
YEARS = tuple(range(FIRST_COHORT, LAST_COHORT + 1))   # every graduation year of the universe
LEFT_OUT_SERIES = "43.01"
HARD_CODED_FILE = "cip_hard_coded_transitions.csv"
HARD_CODED_HEADER = ("cip2010", "cip2020", "share", "source")
# The real names of the institutions the synthetic ones take are plain ASCII: one keeps a
# made-up accented name, so that the Latin-1 directory file holds a byte that is not UTF-8.
ACCENTED_NAME = "Synthetic Colegio Técnico de Educación"  # the first Texas community college
RESIDENCY_SOURCE = "residency programs are not IPEDS awards"
DEMO_SOURCE = "SYNTHETIC demo"
RESIDENCY_CODES = ("60.04", "60.05", "60")
DEMO_TRANSITIONS = {LEFT_OUT_SERIES: {"43.01": 850, "43.04": 150}}   # thousandths


# ----------------------------------------------------------------------------------
# Institutions and awards of the synthetic universe
# ----------------------------------------------------------------------------------

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
    return completions_of(((ids[opeid], str(code_2020[cip]) if vintage_2020 else cip, degree,
                            awards)
                           for opeid, degree, cip, awards in expected_awards(year, seed, graduates)
                           if not cip.startswith(LEFT_OUT_SERIES)), year)


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

def write_demo_ipeds(out_dir: Path | None = None, seed: int = SEED,
                     graduates: int = GRADUATES) -> list[Path]:
    """Write ipeds/C{YYYY}_A.csv, ipeds/HD{YYYY}.csv and cip_hard_coded_transitions.csv
    under `out_dir` (default: the package's reference folder); return the paths."""
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).with_name("reference")
    directory = [tuple(r.values()) for r in institutions(seed)]
    written = write_ipeds_files(out_dir / IPEDS_DIR, {
        year: completions_rows(year, seed, graduates) for year in YEARS}, directory)
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
