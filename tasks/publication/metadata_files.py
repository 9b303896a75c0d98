"""The metadata files of a release's public folder, as the LEHD Public Use Schema V4.14.0
describes them (lehd_public_use_schema.asciidoc, section Metadata; lehd_csv_naming.asciidoc),
and the split of the official files by institution state. Privacy cost: none (the
institutions and cohort years of a release are public, and the split only regroups
published rows).

* `institutions_table`: `pseo_all_institutions.csv`, "the list of institutions that are
  included in the PSEO release ... an extract from label_institution.csv", with the columns
  of variables_pseo_institutions.csv.
* `version_lines`: `version_pseo.txt`, one PSEOE and one PSEOF line in the schema's compact
  notation (`PSEOE CO 08 2001-2015 V4.5.0 2019Q1 pseopu_co_20190617_0839`).
* `state_files`: `pseoe_[st].csv` / `pseof_[st].csv` ("PSEO Earnings data broken by
  institution state"): each state's rows of the `_all` file.
* `official_folder_files`: all of them by their place in the public folder (`all/` and the
  state folders, schemas/distribution.py), with the partners files (partners_files.py).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

import pandas as pd

from pseo_das.schemas.codes import STATE_POSTAL
from pseo_das.schemas.institutions import institution_labels
from pseo_das.schemas.pseo_layout import ALL_COHORTS, SCHEMA_DIR, SCHEMA_VERSION, Product
from pseo_das.tasks.publication.partners_files import partners_files, statewide_coverage

INSTITUTIONS_FILE_NAME = "pseo_all_institutions.csv"
VERSION_FILE_NAME = "version_pseo.txt"
ALL_STATES = "all"        # lehd_csv_naming, geohi: "Collection of all available states"
ALL_STATES_CODE = "00"    # the schema's custom code for a scope wider than one state
STEM_PREFIX = "pseopu"    # the data file stem of the schema's example: pseopu_co_20190617_0839
RELEASE_QUARTER = re.compile(r"R?([0-9]{4})Q([1-4])")
OPEID = re.compile(r"[0-9]{8}")
COHORT = re.compile(r"[0-9]{4}")


def institution_columns() -> tuple[str, ...]:
    """The columns of pseo_[ST]_institutions.csv, in order (variables_pseo_institutions.csv)."""
    variables = pd.read_csv(SCHEMA_DIR / "variables_pseo_institutions.csv", dtype=str,
                            encoding="utf-8-sig")
    return tuple(variables["variable"].str.strip().str.lstrip("\ufeff"))


def institutions_table(institutions: pd.DataFrame) -> pd.DataFrame:
    """pseo_all_institutions.csv: one row per institution of the release, sorted by OPEID,
    with the columns of variables_pseo_institutions.csv (institution, label,
    institution_state, statefips), all text.

    `institutions` has `institution` (8-digit OPEID) and `statefips` (2-digit FIPS code of
    the institution's state, one of the 50 states and DC) of the institutions in the release;
    a row may repeat. `label` and `institution_state` (postal code) are those of
    label_institution.csv where the OPEID is there; where it is not (or the file has no
    state for it), `label` is empty and `institution_state` is the postal code of
    `statefips`. `statefips` is the release's, and so is the postal code: where
    label_institution.csv puts the OPEID in another state, the release's state is what its
    rows are tabulated under, and the label is left empty rather than name an institution
    of another state (this is found after the measurements are taken, so it must not stop
    the release). Raises ValueError, naming the OPEIDs, for a malformed code or an
    institution given two states.
    """
    missing = {"institution", "statefips"} - set(institutions.columns)
    if missing:
        raise ValueError(f"institutions: missing column(s) {', '.join(sorted(missing))}")
    given = institutions[["institution", "statefips"]].astype(str).drop_duplicates()
    _refuse(given["institution"], ~given["institution"].str.fullmatch(OPEID.pattern),
            "institution is not an 8-digit OPEID")
    _refuse(given["institution"], ~given["statefips"].isin(list(STATE_POSTAL)),
            "statefips is not the FIPS code of one of the 50 states or DC")
    _refuse(given["institution"], given["institution"].duplicated(keep=False),
            "institution given more than one statefips")
    labels = institution_labels().set_index("institution")
    # by the index's hash table (as the maps below): isin against 57,629 labels took 0.3 s
    known = pd.Series(labels.index.get_indexer(given["institution"]) >= 0, index=given.index)
    postal = given["statefips"].map(STATE_POSTAL)
    listed = given["institution"].map(labels["institution_state"]).fillna("")
    agrees = known & ((listed == "") | (listed == postal))
    table = pd.DataFrame({
        "institution": given["institution"],
        "label": given["institution"].map(labels["label"]).where(agrees, ""),
        "institution_state": postal,
        "statefips": given["statefips"]})
    return table[list(institution_columns())].sort_values("institution").reset_index(drop=True)


def _refuse(institution: pd.Series, bad: pd.Series, rule: str) -> None:
    if bad.any():
        shown = ", ".join(repr(v) for v in institution[bad].drop_duplicates().head(5))
        raise ValueError(f"institutions: {rule}: {int(bad.sum())} row(s), e.g. {shown}")


def release_quarter(release: str | None, produced: datetime) -> str:
    """The release field of a version line, YYYYQn: `release` when it is YYYYQn (or the
    schema's RYYYYQn), else, when `release` is None, the calendar quarter of `produced`
    ("A release is defined by the calendar year quarter when data production occurs",
    lehd_csv_naming). Raises ValueError for any other `release` (e.g. a pseo-das release id
    such as 20261122T101500Z: pass None, or the quarter it belongs to)."""
    if release is None:
        return f"{produced.year}Q{(produced.month - 1) // 3 + 1}"
    found = RELEASE_QUARTER.fullmatch(release)
    if not found:
        raise ValueError(f"release quarter {release!r}: not YYYYQn (e.g. 2026Q3, or R2026Q3 "
                         "as lehd_csv_naming writes releases); give the quarter of the release, "
                         "or none to take the quarter of the production time")
    return f"{found.group(1)}Q{found.group(2)}"


def cohort_range(frame: pd.DataFrame) -> tuple[str, str]:
    """First and last grad_cohort (start year of the cohort window) of an official file's
    rows, all-cohort rows (0000) left out. Raises ValueError when there is none or a value
    is not a 4-digit year."""
    cohorts = frame["grad_cohort"].astype(str)
    bad = ~cohorts.str.fullmatch(COHORT.pattern)
    if bad.any():
        raise ValueError(f"grad_cohort: {int(bad.sum())} row(s) not a 4-digit year, e.g. row "
                         f"{int(bad.to_numpy().nonzero()[0][0])}: {cohorts[bad].iloc[0]!r}")
    years = cohorts[cohorts != ALL_COHORTS]
    if years.empty:
        raise ValueError("grad_cohort: no cohort other than 0000 (all cohorts) in the file")
    return years.min(), years.max()


def version_lines(files: Mapping[Product | str, pd.DataFrame], produced: datetime,
                  release: str | None = None, state: str | None = None) -> str:
    """The content of version_pseo.txt: one line per product given, PSEOE first, e.g.

        PSEOE ALL 00 2001-2018 V4.14.0 2026Q3 pseopu_all_20261122_1015
        PSEOF ALL 00 2001-2018 V4.14.0 2026Q3 pseopu_all_20261122_1015

    Fields, as in the schema's example `PSEOE CO 08 2001-2015 V4.5.0 2019Q1
    pseopu_co_20190617_0839`: the product; the geography and its code; the range of
    grad_cohort (first and last cohort start year in that product's file, 0000 left out);
    the schema version (SCHEMA_VERSION); the release quarter YYYYQn (`release_quarter`:
    `release`, or the calendar quarter of `produced`); the file stem
    pseopu_<geohi>_<YYYYMMDD>_<HHMM> of `produced` in UTC (a naive `produced` is refused).

    `state` None is the multi-state release, the `all` folder: the schema gives a geography
    and a FIPS code only for one state (the example) and names the collection of all states
    `all` in file and directory names (lehd_csv_naming, geohi), so the geography is `ALL`
    (the geohi upper-cased, as a state's postal code is, and as J2J's metropolitan
    collection writes `METRO`) and the code `00`, the schema's code for a scope above the
    states (label_fipsnum: national); the stem is pseopu_all_... A 2-digit state FIPS code
    gives that state's line (`PSEOE CO 08 ... pseopu_co_...`), for the file of a state
    folder. (The schema's J2J metro file lists one line per area of the collection; one line
    per state, `PSEOE ALL 08 ...`, would be the other faithful reading for `all`: a change of
    this function only.)
    """
    if produced.tzinfo is None:
        raise ValueError("produced: a naive time; give a timezone-aware time (the file stem "
                         "is written in UTC)")
    produced = produced.astimezone(timezone.utc)
    quarter = release_quarter(release, produced)
    if state is None:
        geography, code, geohi = ALL_STATES.upper(), ALL_STATES_CODE, ALL_STATES
    elif state in STATE_POSTAL:
        geography, code, geohi = STATE_POSTAL[state], state, STATE_POSTAL[state].lower()
    else:
        raise ValueError(f"state {state!r}: not the FIPS code of one of the 50 states or DC")
    stem = f"{STEM_PREFIX}_{geohi}_{produced:%Y%m%d_%H%M}"
    products = {Product(p): frame for p, frame in files.items()}
    if not products:
        raise ValueError("files: no product given")
    lines = []
    for product in Product:
        if product in products:
            first, last = cohort_range(products[product])
            lines.append(f"{product.name} {geography} {code} {first}-{last} {SCHEMA_VERSION} "
                         f"{quarter} {stem}")
    return "\n".join(lines) + "\n"


def row_states(frame: pd.DataFrame, institution_state: Mapping[str, str]) -> pd.Series:
    """The institution state (FIPS code) of each row of an official file: the state-level
    rows' own code (inst_level S, `institution` = the state's FIPS code), the state that
    `institution_state` gives an institution's OPEID (inst_level I). Raises ValueError,
    naming the rows, for another inst_level, an OPEID `institution_state` lacks, or a code
    that is not one of the 50 states or DC."""
    level, code = frame["inst_level"].astype(str), frame["institution"].astype(str)
    bad = ~level.isin(["I", "S"])
    _refuse_rows(bad, frame, "inst_level is neither I (institution) nor S (state)")
    state = code.where(level == "S", code.map(dict(institution_state)))
    _refuse_rows(state.isna(), frame, "institution (OPEID) has no state in institution_state")
    _refuse_rows(~state.isin(list(STATE_POSTAL)), frame,
                 "state is not the FIPS code of one of the 50 states or DC")
    return state


def state_file_name(product: Product | str, fips: str) -> str:
    """`pseoe_co.csv`: lehd_csv_naming's name of a state's file (lower-case postal code)."""
    return f"{Product(product).value}_{STATE_POSTAL[fips].lower()}.csv"


def state_files(frame: pd.DataFrame, institution_state: Mapping[str, str],
                product: Product | str) -> dict[str, pd.DataFrame]:
    """Split an official file (pseoe_all / pseof_all layout) by institution state:
    {file name: rows}, one file per state with rows, named per lehd_csv_naming
    (`pseoe_[st].csv`, the state's lower-case postal code), in postal-code order.

    A state's file holds its state-level rows and the rows of its institutions
    (`row_states`), with the same columns, in the order of `frame`; every row of `frame` is
    in exactly one file. Raises ValueError as `row_states` does.
    """
    state = row_states(frame, institution_state)
    return {state_file_name(product, fips): frame[(state == fips).to_numpy()].reset_index(drop=True)
            for fips in sorted(set(state), key=STATE_POSTAL.get)}


def _refuse_rows(bad: pd.Series, frame: pd.DataFrame, rule: str) -> None:
    if bad.any():
        rows = bad.to_numpy().nonzero()[0]
        shown = "; ".join(f"row {r}: {frame['inst_level'].iloc[r]!s} {frame['institution'].iloc[r]!s}"
                          for r in rows[:5])
        raise ValueError(f"inst_level, institution: {rule}: {len(rows)} row(s), e.g. {shown}")


TIMESTAMP_RELEASE_ID = re.compile(r"([0-9]{8}T[0-9]{6})Z")  # as `make release` names releases
QUARTER_RELEASE_ID = re.compile(r"(R?[0-9]{4}Q[1-4])(?:[-_.].*)?")  # 2026Q4, R2026Q4, 2026Q4-test


def release_production(release_id: str) -> tuple[str, datetime] | None:
    """(release quarter, production time) that a pseo-das release id names, so that
    version_pseo.txt is a function of the release and a rerun or replay writes it again byte
    for byte: a UTC timestamp id (20261123T053219Z) names its time and quarter; an id that
    starts with a quarter (2026Q4, R2026Q4, 2026Q4-test) names the quarter, and the file
    stem carries the quarter's first day, 00:00 UTC (the id names no time). None for any
    other id: it names no quarter, so the release writes no version_pseo.txt."""
    if found := TIMESTAMP_RELEASE_ID.fullmatch(release_id):
        produced = datetime.strptime(found.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
        return release_quarter(None, produced), produced
    if found := QUARTER_RELEASE_ID.fullmatch(release_id):
        quarter = release_quarter(found.group(1), datetime.now(timezone.utc))
        year, number = int(quarter[:4]), int(quarter[-1])
        return quarter, datetime(year, 3 * number - 2, 1, tzinfo=timezone.utc)
    return None


ALL_INSTITUTIONS = f"{ALL_STATES}/{INSTITUTIONS_FILE_NAME}"
ALL_VERSION = f"{ALL_STATES}/{VERSION_FILE_NAME}"


def official_folder_files(pseoe: pd.DataFrame, pseof_cohorts: Mapping[str, pd.DataFrame],
                          institution_state: Mapping[str, str], release_id: str,
                          ipeds_awards: pd.DataFrame | None = None,
                          data_providers: Mapping[str, Sequence[str]] | None = None
                          ) -> dict[str, pd.DataFrame | str]:
    """The metadata and per-state files of a release's public folder, by path relative to
    it (schemas/distribution.py): `all/pseo_all_institutions.csv`, `all/pseo_all_partners.txt`
    and `all/version_pseo.txt` (every state's lines, as the real `all/` file carries them:
    "The ALL directory consolidates the individual state files"), and one folder per state
    as the schema's state folders are (`co/pseoe_co.csv`, `co/pseo_co_institutions.csv`,
    `co/pseo_co_partners.txt`, `co/version_pseo.txt`; `co/pseof_co.csv` is written beside
    them in chunks, `tasks.publication.flows_files`). The data tables are named by their
    CSV names (the writer gives them their published names). `pseof_cohorts`: the
    grad_cohort values of pseof_all (key ALL_STATES) and of each state's pseof file (key:
    its FIPS code), as frames with that column. No version_pseo.txt when the release id
    names no quarter (`release_production`). `ipeds_awards`, `data_providers`: the partners
    files' coverage and providers (`partners_files`)."""
    institutions = institutions_table(pd.DataFrame(
        {"institution": list(institution_state), "statefips": list(institution_state.values())}))
    files: dict[str, pd.DataFrame | str] = {ALL_INSTITUTIONS: institutions}
    production = release_production(release_id)
    pseoe_by_state = state_files(pseoe, institution_state, Product.PSEOE)
    states = [fips for fips in STATE_POSTAL
              if state_file_name(Product.PSEOE, fips) in pseoe_by_state]
    files.update(partners_files(states, statewide_coverage(ipeds_awards, institution_state),
                                dict(data_providers or {})))
    if production is not None:
        files[ALL_VERSION] = ""                     # the states' lines, added below
    for fips, postal in sorted(STATE_POSTAL.items(), key=lambda item: item[1]):
        st = postal.lower()
        mine = pseoe_by_state.get(state_file_name(Product.PSEOE, fips))
        if mine is None:
            continue
        files[f"{st}/{state_file_name(Product.PSEOE, fips)}"] = mine
        files[f"{st}/pseo_{st}_institutions.csv"] = \
            institutions[institutions["statefips"] == fips].reset_index(drop=True)
        if production is not None:
            of_state = {Product.PSEOE: mine}
            if fips in pseof_cohorts:
                of_state[Product.PSEOF] = pseof_cohorts[fips]
            files[f"{st}/{VERSION_FILE_NAME}"] = version_lines(
                of_state, production[1], production[0], state=fips)
            files[ALL_VERSION] += files[f"{st}/{VERSION_FILE_NAME}"]
    return files
