"""The publication record is a versioned model: records of every earlier shape are migrated
on read, one version at a time, and a record of a later version is refused with a message.
The shapes of versions 1 to 5 are made from the record of the committed store of 54c8b3e
(version 5) by leaving out the keys each later version added."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pseo_das.tasks.measurements import publication_record as records
from pseo_das.tasks.measurements.publication_record import (RECORD_VERSION, PublicationRecord,
                                                       PublicationRecordError,
                                                       read_publication_record, stored_version)
from pseo_das.tasks.privacy.store import PrivacyStore

from test_legacy_store import FIXTURE, RELEASE_ID

ADDED_BY = {2: ("recast_tables", "recast_fingerprints", "recast_packaged"), 3: ("dollars",),
            4: ("demo_inputs",), 5: ("ipeds_awards", "ipeds_years")}


@pytest.fixture(scope="module")
def version_5() -> dict:
    """The record of release 2026Q4-legacy as 54c8b3e stored it."""
    with PrivacyStore.open(FIXTURE / "store") as store:
        return store.stored_publication_record(RELEASE_ID)[1]


def shape_of_version(record: dict, version: int) -> dict:
    """`record` (version 5) without the keys versions after `version` added."""
    later = {key for added in range(version + 1, 6) for key in ADDED_BY[added]}
    return {key: value for key, value in record.items() if key not in later}


def test_the_committed_record_is_of_version_5_and_each_shape_is_known_by_its_keys(version_5):
    assert set(version_5) == {"identity", "attempt", "config", "input_fingerprints",
                              "input_checks", "new_spending", "superseded", "store_policy",
                              "store_chain", "reference_tables", "reference_fingerprints",
                              *(key for added in ADDED_BY.values() for key in added)}
    for version in range(1, 6):
        assert stored_version(shape_of_version(version_5, version), "r") == version
    assert stored_version({"record_version": 6}, "r") == 6


def test_version_1_to_2_a_release_without_recast_inputs(version_5):
    shape = shape_of_version(version_5, 1)
    migrated = records.v1_to_v2_no_recast_inputs(shape)
    assert migrated == {**shape, "recast_tables": None, "recast_fingerprints": None,
                        "recast_packaged": None}
    assert stored_version(migrated, "r") == 2


def test_version_2_to_3_a_release_without_dollar_conversion(version_5):
    shape = shape_of_version(version_5, 2)
    migrated = records.v2_to_v3_no_dollar_conversion(shape)
    assert migrated == {**shape, "dollars": None} and stored_version(migrated, "r") == 3


def test_version_3_to_4_no_demo_inputs_recorded(version_5):
    shape = shape_of_version(version_5, 3)
    migrated = records.v3_to_v4_no_demo_inputs_recorded(shape)
    assert migrated == {**shape, "demo_inputs": []} and stored_version(migrated, "r") == 4


def test_version_4_to_5_a_release_without_ipeds_counts(version_5):
    shape = shape_of_version(version_5, 4)
    migrated = records.v4_to_v5_no_ipeds_counts(shape)
    assert migrated == {**shape, "ipeds_awards": None, "ipeds_years": None}
    assert stored_version(migrated, "r") == 5


def test_version_5_to_6_groups_the_tables_and_keeps_cell_statistics_measured_outside(version_5):
    migrated = records.v5_to_v6_tables_grouped(version_5)
    assert migrated["record_version"] == 6 and migrated["cell_statistics"] is None
    assert migrated["reference"] == {"tables": version_5["reference_tables"],
                                     "fingerprints": version_5["reference_fingerprints"]}
    assert migrated["recast"] == {"tables": version_5["recast_tables"],
                                  "fingerprints": version_5["recast_fingerprints"],
                                  "packaged": version_5["recast_packaged"]}
    assert migrated["ipeds"] == {"awards": version_5["ipeds_awards"],
                                 "years": version_5["ipeds_years"]}
    unchanged = set(version_5) - {key for added in ADDED_BY.values() for key in added} \
        - {"reference_tables", "reference_fingerprints"}
    assert {key: migrated[key] for key in unchanged} == \
        {key: version_5[key] for key in unchanged}
    kept = {"variant": "mos", "table": "ab" * 32}   # a release of 8c06e9f with pseom_all.csv
    assert records.v5_to_v6_tables_grouped({**version_5, "cell_statistics": kept}
                                           )["cell_statistics"] == kept
    none = records.v5_to_v6_tables_grouped(records.v4_to_v5_no_ipeds_counts(
        records.v1_to_v2_no_recast_inputs(shape_of_version(version_5, 1)) | {
            "dollars": None, "demo_inputs": []}))
    assert none["recast"] is None and none["ipeds"] is None


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_a_record_of_each_earlier_version_reads_as_the_typed_record(version_5, version):
    record = PublicationRecord.from_stored(shape_of_version(version_5, version), "r")
    current = PublicationRecord.from_stored(version_5, "r")
    assert record.record_version == RECORD_VERSION
    assert (record.recast is None, record.dollars is None, record.demo_inputs == (),
            record.ipeds is None) == (version < 2, version < 3, version < 4, version < 5)
    later = {"recast", "dollars", "demo_inputs", "ipeds"}
    assert record.model_dump(exclude=later) == current.model_dump(exclude=later)
    assert current.model_dump(include=later) == {
        "recast": {"tables": version_5["recast_tables"],
                   "fingerprints": version_5["recast_fingerprints"],
                   "packaged": tuple(version_5["recast_packaged"])},
        "dollars": version_5["dollars"], "demo_inputs": tuple(version_5["demo_inputs"]),
        "ipeds": {"awards": version_5["ipeds_awards"], "years": tuple(version_5["ipeds_years"])}}


def test_a_record_reads_back_as_it_was_kept(version_5):
    """A record of this version is stored with its version and reads back equal; its
    configuration is stored as the release's configuration dumps (config.json)."""
    record = PublicationRecord.from_stored(version_5, "r")
    stored = json.loads(json.dumps(record.stored()))
    assert stored["record_version"] == RECORD_VERSION and stored["config"] == version_5["config"]
    assert PublicationRecord.from_stored(stored, "r") == record


def test_a_record_of_a_later_version_is_refused_with_the_reason(version_5):
    later = {**records.v5_to_v6_tables_grouped(version_5), "record_version": 7}
    with pytest.raises(PublicationRecordError, match=r"the record of R has record version 7; "
                                                     r"this version of pseo-das reads versions "
                                                     r"1 to 6"):
        PublicationRecord.from_stored(later, "the record of R")
    with pytest.raises(PublicationRecordError, match="record version '6'"):
        PublicationRecord.from_stored({**later, "record_version": "6"}, "the record of R")


def test_a_malformed_record_is_refused_naming_what_is_wrong(version_5):
    broken = {key: value for key, value in version_5.items() if key != "store_chain"}
    with pytest.raises(PublicationRecordError, match=r"the record of R is not a valid "
                                                     r"publication record of version 5 "
                                                     r"\(store_chain: Field required\)"):
        PublicationRecord.from_stored(broken, "the record of R")


def test_republish_refuses_a_record_of_a_later_version_without_a_traceback(version_5, tmp_path,
                                                                          capsys):
    """A copy of the committed store with a publication whose record is of a later version:
    `republish` stops with the reason (exit 2) before writing anything."""
    from pseo_das.cli import main
    store_path = Path(shutil.copytree(FIXTURE / "store", tmp_path / "store"))
    with PrivacyStore.open(store_path) as store:
        attempt, record = read_publication_record(store, RELEASE_ID)
        store.add_publication(attempt.attempt, store.put_json(
            {**record.stored(), "record_version": RECORD_VERSION + 1}), tmp_path / "later")
    with pytest.raises(SystemExit) as stop:
        main(["republish", "--store", str(store_path), "--release", RELEASE_ID,
              "--out", str(tmp_path / "again")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert f"has record version {RECORD_VERSION + 1}; this version of pseo-das reads" in err
    assert not (tmp_path / "again").exists()
