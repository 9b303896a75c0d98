"""The metadata files of a release's public folder and the per-state split of the official
files (tasks/publication/metadata_files.py)."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from pseo_das.schemas.codes import STATE_POSTAL
from pseo_das.schemas.institutions import institution_labels
from pseo_das.schemas.pseo_layout import SCHEMA_DIR, Product
from pseo_das.tasks.publication.metadata_files import (institutions_table, release_quarter,
                                                       state_files, version_lines)

# The schema's example (lehd_public_use_schema.asciidoc, section Metadata), and the format it
# shows: product, geography, code, cohort range, schema version, release quarter, file stem.
SCHEMA_EXAMPLE = ("PSEOE CO 08 2001-2015 V4.5.0 2019Q1 pseopu_co_20190617_0839\n"
                  "PSEOF CO 08 2001-2015 V4.5.0 2019Q1 pseopu_co_20190617_0839\n")
VERSION_LINE = re.compile(r"(PSEOE|PSEOF) ([A-Z]{2,}) (\d{2}) (\d{4})-(\d{4}) (V\d+\.\d+\.\d+) "
                          r"(\d{4}Q[1-4]) pseopu_([a-z]+)_(\d{8})_(\d{4})")
PRODUCED = datetime(2026, 11, 22, 10, 15, 30, tzinfo=timezone.utc)


def _official(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    """A small pseoe_all-like frame: (inst_level, institution, grad_cohort) per row."""
    return pd.DataFrame({"agg_level_pseo": ["42"] * len(rows),
                         "inst_level": [r[0] for r in rows],
                         "institution": [r[1] for r in rows],
                         "degree_level": ["05"] * len(rows),
                         "grad_cohort": [r[2] for r in rows],
                         "y1_grads_earn": [str(10 * i) for i in range(len(rows))]})


# --- pseo_all_institutions.csv ---------------------------------------------------------

def test_the_schema_example_matches_the_version_line_pattern():
    assert [VERSION_LINE.fullmatch(line) is not None
            for line in SCHEMA_EXAMPLE.splitlines()] == [True, True]


def test_institutions_table_is_an_extract_of_the_label_file():
    given = pd.DataFrame({"institution": ["00758200", "00360900", "99999900", "00758200"],
                          "statefips": ["08", "48", "26", "08"]})
    table = institutions_table(given)
    expected = pd.DataFrame({
        "institution": ["00360900", "00758200", "99999900"],
        "label": ["San Jacinto Community College District", "Aims Community College", ""],
        "institution_state": ["TX", "CO", "MI"],
        "statefips": ["48", "08", "26"]})
    pd.testing.assert_frame_equal(table, expected)


def test_institutions_table_has_the_columns_of_the_schema_file():
    variables = (SCHEMA_DIR / "variables_pseo_institutions.csv").read_text(encoding="utf-8")
    names = [line.split(",")[0].lstrip("\ufeff") for line in variables.splitlines()[1:]]
    table = institutions_table(pd.DataFrame({"institution": ["00758200"], "statefips": ["08"]}))
    assert list(table.columns) == names == ["institution", "label", "institution_state",
                                            "statefips"]


def test_an_opeid_the_label_file_lists_without_a_state_takes_the_state_of_its_fips():
    labels = institution_labels()
    stateless = labels.loc[labels["institution_state"] == "", "institution"].iloc[0]
    table = institutions_table(pd.DataFrame({"institution": [stateless], "statefips": ["51"]}))
    assert table.loc[0, "institution_state"] == "VA"
    assert table.loc[0, "label"] == labels.set_index("institution").at[stateless, "label"] != ""


@pytest.mark.parametrize("institution, statefips, message", [
    (["758200"], ["08"], "not an 8-digit OPEID: 1 row(s), e.g. '758200'"),
    (["00758200"], ["8"], "statefips is not the FIPS code of one of the 50 states or DC"),
    (["00758200", "00758200"], ["08", "48"], "more than one statefips: 2 row(s), e.g. '00758200'"),
])
def test_institutions_table_refuses_bad_rows(institution, statefips, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        institutions_table(pd.DataFrame({"institution": institution, "statefips": statefips}))


def test_an_institution_the_label_file_puts_in_another_state_keeps_the_release_state():
    labels = institution_labels().set_index("institution")
    assert labels.at["00758200", "institution_state"] != "TX"
    table = institutions_table(pd.DataFrame({"institution": ["00758200"], "statefips": ["48"]}))
    assert table.iloc[0].to_dict() == {"institution": "00758200", "label": "",
                                       "institution_state": "TX", "statefips": "48"}


def test_fips_to_postal_agrees_with_the_label_file():
    labels = institution_labels()
    stated = labels[(labels["institution_state"] != "")
                    & labels["statefips"].isin(list(STATE_POSTAL))]     # not the territories
    assert (stated["statefips"].map(STATE_POSTAL) == stated["institution_state"]).all()
    assert set(stated["statefips"]) == set(STATE_POSTAL)


# --- version_pseo.txt ------------------------------------------------------------------

def test_version_lines_of_the_all_folder():
    pseoe = _official([("I", "00758200", "2004"), ("S", "08", "2001"), ("I", "00360900", "0000"),
                       ("I", "00360900", "2016")])
    pseof = _official([("I", "00758200", "2013"), ("I", "00758200", "2001")])
    text = version_lines({Product.PSEOF: pseof, "pseoe": pseoe}, PRODUCED, "2026Q3")
    assert text == ("PSEOE ALL 00 2001-2016 V4.14.0 2026Q3 pseopu_all_20261122_1015\n"
                    "PSEOF ALL 00 2001-2013 V4.14.0 2026Q3 pseopu_all_20261122_1015\n")
    assert all(VERSION_LINE.fullmatch(line) for line in text.splitlines())


def test_version_lines_of_a_state_folder_follow_the_schema_example():
    frame = _official([("I", "00758200", "2001"), ("I", "00758200", "2015")])
    produced = datetime(2019, 6, 17, 8, 39, tzinfo=timezone.utc)
    text = version_lines({"pseoe": frame, "pseof": frame}, produced, "R2019Q1", state="08")
    assert text == SCHEMA_EXAMPLE.replace("V4.5.0", "V4.14.0")


def test_the_quarter_defaults_to_that_of_the_production_time_in_utc():
    frame = _official([("I", "00758200", "2001")])
    # 1 January 2027, 00:30 at UTC+2 is 31 December 2026, 22:30 UTC: 2026Q4.
    local = datetime(2027, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=2)))
    assert version_lines({"pseoe": frame}, local) == \
        "PSEOE ALL 00 2001-2001 V4.14.0 2026Q4 pseopu_all_20261231_2230\n"
    assert release_quarter(None, datetime(2026, 4, 1)) == "2026Q2"
    assert release_quarter("2026Q1", PRODUCED) == "2026Q1"


@pytest.mark.parametrize("release", ["20261122T101500Z", "2026Q5", "2026q3", "R2026-Q3", ""])
def test_a_release_that_is_not_a_quarter_is_refused(release):
    with pytest.raises(ValueError, match=re.escape(f"release quarter {release!r}: not YYYYQn")):
        version_lines({"pseoe": _official([("I", "00758200", "2001")])}, PRODUCED, release)


def test_version_lines_refusals():
    frame = _official([("I", "00758200", "2001")])
    with pytest.raises(ValueError, match="naive time"):
        version_lines({"pseoe": frame}, datetime(2026, 11, 22), "2026Q3")
    with pytest.raises(ValueError, match="state '72': not the FIPS code"):
        version_lines({"pseoe": frame}, PRODUCED, "2026Q3", state="72")
    with pytest.raises(ValueError, match="no cohort other than 0000"):
        version_lines({"pseoe": _official([("I", "00758200", "0000")])}, PRODUCED, "2026Q3")
    with pytest.raises(ValueError, match=r"1 row\(s\) not a 4-digit year, e.g. row 1: '201'"):
        version_lines({"pseoe": _official([("I", "00758200", "2001"), ("I", "00758200", "201")])},
                      PRODUCED, "2026Q3")
    with pytest.raises(ValueError, match="no product given"):
        version_lines({}, PRODUCED, "2026Q3")
    with pytest.raises(ValueError):
        version_lines({"pseoh": frame}, PRODUCED, "2026Q3")


# --- per-state files -------------------------------------------------------------------

STATES = {"00758200": "08", "00360900": "48", "00363400": "48"}


def test_state_files_split_by_institution_state():
    frame = _official([("I", "00360900", "2001"), ("S", "08", "2001"), ("I", "00758200", "2001"),
                       ("S", "48", "2001"), ("I", "00363400", "0000"), ("I", "00758200", "2004")])
    files = state_files(frame, STATES, Product.PSEOE)
    assert list(files) == ["pseoe_co.csv", "pseoe_tx.csv"]
    pd.testing.assert_frame_equal(files["pseoe_co.csv"], frame.iloc[[1, 2, 5]].reset_index(drop=True))
    pd.testing.assert_frame_equal(files["pseoe_tx.csv"], frame.iloc[[0, 3, 4]].reset_index(drop=True))
    assert list(state_files(frame, STATES, "pseof")) == ["pseof_co.csv", "pseof_tx.csv"]


def test_every_row_is_in_exactly_one_state_file():
    rows = [(level, code, cohort) for cohort in ("2001", "2004", "0000")
            for level, code in [("S", "08"), ("S", "48"), *(("I", o) for o in STATES)]]
    frame = _official(rows).assign(y1_grads_earn=[str(i) for i in range(len(rows))])
    files = state_files(frame, STATES, Product.PSEOE)
    together = pd.concat(files.values(), ignore_index=True)
    assert len(together) == len(frame)
    assert sorted(together["y1_grads_earn"], key=int) == list(frame["y1_grads_earn"])
    assert all(list(part.columns) == list(frame.columns) for part in files.values())


@pytest.mark.parametrize("rows, message", [
    ([("I", "00758200", "2001"), ("N", "00", "2001")],
     "inst_level is neither I (institution) nor S (state): 1 row(s), e.g. row 1: N 00"),
    ([("I", "99999900", "2001")],
     "institution (OPEID) has no state in institution_state: 1 row(s), e.g. row 0: I 99999900"),
    ([("S", "72", "2001")], "not the FIPS code of one of the 50 states or DC: 1 row(s), e.g. "
                            "row 0: S 72"),
])
def test_state_files_refuse_rows_without_a_state(rows, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        state_files(_official(rows), STATES, Product.PSEOE)


@pytest.mark.parametrize("release_id, quarter, produced", [
    ("20261123T053219Z", "2026Q4", datetime(2026, 11, 23, 5, 32, 19, tzinfo=timezone.utc)),
    ("2026Q4-test", "2026Q4", datetime(2026, 10, 1, tzinfo=timezone.utc)),
    ("R2027Q1", "2027Q1", datetime(2027, 1, 1, tzinfo=timezone.utc)),
    ("2027Q3", "2027Q3", datetime(2027, 7, 1, tzinfo=timezone.utc)),
])
def test_the_release_id_names_the_quarter_and_the_production_time(release_id, quarter, produced):
    from pseo_das.tasks.publication.metadata_files import release_production
    assert release_production(release_id) == (quarter, produced)


@pytest.mark.parametrize("release_id", ["R1", "a", "2026Q5", "20261123T0532Z", "Q4-2026"])
def test_a_release_id_without_quarter_or_time_names_none(release_id):
    from pseo_das.tasks.publication.metadata_files import release_production
    assert release_production(release_id) is None
