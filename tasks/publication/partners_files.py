"""The partners files of a release's public folder, `pseo_[st]_partners.txt` in each state's
folder and `pseo_all_partners.txt` in `all/` (the state files one after the other, in
postal-code order: "The ALL directory consolidates the individual state files").

The schema (Metadata, "PSEO Data Partners and Coverage (pseo_[ST]_partners.txt)"): "This
file contains information on PSEO coverage of graduates, as well as the partner
organization(s) providing data ... on several lines of a text file":

* State numeric FIPS code and state name (`08 Colorado`);
* Share of statewide graduates covered by PSEO (`72% of statewide graduates covered (2015
  estimate)`): "derived from IPEDS data, using program graduates from 2015 for degree
  levels within scope of PSEO. It calculates the number of graduates from institutions that
  are available to PSEO as a fraction of graduates from all institutions within IPEDS for
  the reference state.";
* Name(s) of data provider(s) (multiple lines, as required): `[publication]
  data_providers` of the configuration, by state FIPS code, else DEFAULT_PROVIDER.

The share is computed from the IPEDS completions the release's IPEDS counts were computed
from (its publication record): the awards of COVERAGE_YEAR (or, when that year has no
completions file, of the latest earlier year that has one, and that year is named), of the
state's institutions in the release over those of every institution of the state in the
files (the state of an OPEID outside the release: label_institution.csv). Without IPEDS
completions for the state the line says the share is not available. Privacy cost: none
(public IPEDS data and the public list of the release's institutions)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import pandas as pd

from pseo_das.schemas.codes import STATE_POSTAL
from pseo_das.schemas.distribution import ALL_FOLDER
from pseo_das.schemas.institutions import institution_labels
from pseo_das.schemas.pseo_layout import SCHEMA_DIR

COVERAGE_YEAR = 2015
DEFAULT_PROVIDER = "pseo-das release (name the data providers in [publication] data_providers)"


def partners_file_name(geohi: str) -> str:
    """`pseo_co_partners.txt`, `pseo_all_partners.txt`."""
    return f"pseo_{geohi}_partners.txt"


def state_names() -> dict[str, str]:
    """State FIPS code -> name, from label_fipsnum.csv."""
    table = pd.read_csv(SCHEMA_DIR / "label_fipsnum.csv", dtype=str, keep_default_na=False)
    return dict(zip(table["geography"], table["label"]))


def coverage_awards(awards: pd.DataFrame | None) -> pd.DataFrame | None:
    """The IPEDS awards `statewide_coverage` reads, summed by institution and year: the
    same coverage from a row per institution and year (a national release's awards are
    2.8 million rows, 190 MB, held to the end of the release otherwise)."""
    if awards is None:
        return None
    return awards.groupby(["institution", "grad_year"], as_index=False, observed=True,
                          sort=True)["awards"].sum()


def statewide_coverage(awards: pd.DataFrame | None, institution_state: Mapping[str, str],
                       year: int = COVERAGE_YEAR) -> dict[str, tuple[Fraction, int]]:
    """State FIPS code -> (share of its IPEDS graduates at the release's institutions, the
    year of the completions used), for the states with awards in `year` or an earlier year
    (module docstring). `awards`: tasks/inputs/ipeds_counts.py AWARD_COLUMNS (None: none)."""
    if awards is None or awards.empty:
        return {}
    listed = institution_labels().set_index("institution")["statefips"]
    frame = awards[awards["grad_year"] <= year]
    institution = frame["institution"].astype(str)
    state = institution.map(dict(institution_state)).fillna(institution.map(listed))
    frame = frame.assign(state=state, covered=institution.isin(set(institution_state)))
    out = {}
    for fips, rows in frame[frame["state"].isin(list(STATE_POSTAL))].groupby("state"):
        latest = int(rows["grad_year"].max())
        rows = rows[rows["grad_year"] == latest]
        total = int(rows["awards"].sum())
        if total > 0:
            out[str(fips)] = (Fraction(int(rows.loc[rows["covered"], "awards"].sum()), total), latest)
    return out


def percent(share: Fraction) -> str:
    """A share as a whole percent, halves rounded up (72%)."""
    return f"{int(share * 100 + Fraction(1, 2))}%"


def partners_text(fips: str, coverage: tuple[Fraction, int] | None, providers: list[str],
                  names: Mapping[str, str] | None = None) -> str:
    """One state's pseo_[st]_partners.txt (module docstring)."""
    name = (names or state_names())[fips]
    share = (f"{percent(coverage[0])} of statewide graduates covered ({coverage[1]} estimate)"
             if coverage else "share of statewide graduates covered not available (no IPEDS "
                              "completions for the state)")
    return "\n".join([f"{fips} {name}", share, *(providers or [DEFAULT_PROVIDER])]) + "\n"


def partners_files(states: list[str], coverage: Mapping[str, tuple[Fraction, int]],
                   providers: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """{path relative to the public folder: text}: each state's partners file in its folder,
    and all/pseo_all_partners.txt, the states' files in postal-code order."""
    names = state_names()
    ordered = sorted(states, key=lambda fips: STATE_POSTAL[fips])
    texts = {fips: partners_text(fips, coverage.get(fips), list(providers.get(fips, [])), names)
             for fips in ordered}
    files = {f"{STATE_POSTAL[fips].lower()}/{partners_file_name(STATE_POSTAL[fips].lower())}": text
             for fips, text in texts.items()}
    files[f"{ALL_FOLDER}/{partners_file_name(ALL_FOLDER)}"] = "".join(texts.values())
    return files
