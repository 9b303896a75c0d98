"""The validated reference inputs kept by content (tasks/inputs/reference_cache.py): a hit
gives the frames a fresh read gives, one byte changed in any file reads and validates again,
a bad file is never kept."""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from pseo_das.config import load_config
from pseo_das.tasks.cip_recast.recast_inputs import load_recast, load_recast_inputs
from pseo_das.tasks.inputs import reference_cache
from pseo_das.tasks.inputs.ingest import InputValidationError
from pseo_das.tasks.inputs.ipeds_counts import load_ipeds_awards
from pseo_das.tasks.inputs.reference_inputs import (COVERAGE_FILE, default_reference_dir,
                                                    load_reference, load_reference_inputs)


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """These tests never run a Prefect flow or task: skip the session's Prefect server."""
    yield


@pytest.fixture
def reference(tmp_path, monkeypatch) -> Path:
    """A copy of the packaged reference folder, and an empty cache of this test's own."""
    monkeypatch.setenv(reference_cache.CACHE_ENV, str(tmp_path / "cache"))
    copy = tmp_path / "reference"
    shutil.copytree(default_reference_dir(), copy)
    return copy


def counted_load(directory: Path, calls: list[int]):
    def load():
        calls.append(1)
        return load_reference_inputs(directory)
    return load


def cached_reference(directory: Path, calls: list[int]):
    return reference_cache.cached("flows-reference", [directory], {}, counted_load(directory, calls))


def assert_same_reference(got, expected) -> None:
    for name in ("j2j", "qcew", "coverage"):
        pd.testing.assert_frame_equal(getattr(got, name), getattr(expected, name), check_exact=True)
    assert got.fingerprints == expected.fingerprints


def test_a_hit_gives_the_frames_of_a_fresh_read(reference):
    calls: list[int] = []
    first = cached_reference(reference, calls)
    second = cached_reference(reference, calls)
    assert calls == [1]   # the second read came from the cache
    assert_same_reference(second, load_reference_inputs(reference))
    assert_same_reference(first, second)
    assert len(list(reference_cache.cache_dir().glob("flows-reference-*.pickle"))) == 1


def test_one_byte_changed_reads_and_validates_again(reference):
    calls: list[int] = []
    before = cached_reference(reference, calls)
    coverage = reference / COVERAGE_FILE
    text = coverage.read_bytes()
    position = text.index(b"2022")          # the first state's last year: 2022 -> 2021
    coverage.write_bytes(text[:position + 3] + b"1" + text[position + 4:])
    after = cached_reference(reference, calls)
    assert calls == [1, 1]
    assert_same_reference(after, load_reference_inputs(reference))
    assert after.coverage["last_year"].iloc[0] == 2021 != before.coverage["last_year"].iloc[0]
    assert after.fingerprints[COVERAGE_FILE] != before.fingerprints[COVERAGE_FILE]


def test_a_changed_file_in_a_folder_reads_again(reference):
    """The recast reads a folder of IPEDS files: a byte changed in one of them counts."""
    first = load_recast(reference, 2020)
    ipeds = sorted((reference / "ipeds").glob("C*_A.csv"))[0]
    ipeds.write_bytes(ipeds.read_bytes() + b"\n")   # one byte more, the same rows
    second = load_recast(reference, 2020)
    assert len(list(reference_cache.cache_dir().glob("cip-recast-*.pickle"))) == 2
    fresh = load_recast_inputs(reference, 2020)
    pd.testing.assert_frame_equal(second.completions, fresh.completions, check_exact=True)
    assert second.fingerprints == fresh.fingerprints != first.fingerprints


def test_the_code_and_the_arguments_are_part_of_the_key(reference):
    key = reference_cache.entry_key("x", [reference], {"switch_year": 2020})
    assert key != reference_cache.entry_key("x", [reference], {"switch_year": 2021})
    assert key != reference_cache.entry_key("y", [reference], {"switch_year": 2020})
    reference_cache.code_digest.cache_clear()
    assert key == reference_cache.entry_key("x", [reference], {"switch_year": 2020})


def test_a_bad_file_is_refused_every_time_and_never_kept(reference):
    coverage = reference / COVERAGE_FILE
    coverage.write_text(coverage.read_text().replace("01,2001,2022", "01,2001,20x2", 1))
    for _ in range(2):
        with pytest.raises(InputValidationError, match=COVERAGE_FILE):
            load_reference(reference)
    assert not list(reference_cache.cache_dir().glob("*.pickle"))


def test_a_damaged_entry_is_read_again(reference):
    calls: list[int] = []
    cached_reference(reference, calls)
    (entry,) = reference_cache.cache_dir().glob("flows-reference-*.pickle")
    entry.write_bytes(entry.read_bytes()[:100])
    assert_same_reference(cached_reference(reference, calls), load_reference_inputs(reference))
    assert calls == [1, 1]


def test_a_data_folders_ipeds_and_the_packaged_ones_never_share_an_entry(reference, tmp_path):
    """The IPEDS files may be the data folder's (tasks/inputs/ipeds_location.py): the key
    covers the folder actually read, so the packaged demo files' entry is never given for
    them (nor theirs for the packaged), for the recast and the IPEDS counts alike."""
    data = tmp_path / "data"
    shutil.copytree(reference / "ipeds", data / "ipeds")
    changed = sorted((data / "ipeds").glob("C*_A.csv"))[0]
    changed.write_bytes(changed.read_bytes() + b"\n")   # one byte more, the same rows
    cells = load_config(None).cells
    for _ in range(2):   # the second round comes from the cache
        packaged, own = load_recast(None, 2020), load_recast(None, 2020, data)
        assert own.fingerprints == load_recast_inputs(None, 2020, data).fingerprints
        assert packaged.fingerprints == load_recast_inputs(None, 2020).fingerprints
        assert own.fingerprints != packaged.fingerprints
        assert "IPEDS" in packaged.packaged and "IPEDS" not in own.packaged  # no SYNTHETIC mark
        counts_packaged = load_ipeds_awards(None, cells, 2020)
        counts_own = load_ipeds_awards(None, cells, 2020, data)
        assert counts_own.fingerprints != counts_packaged.fingerprints
        assert counts_packaged.packaged and not counts_own.packaged
    assert len(list(reference_cache.cache_dir().glob("cip-recast-*.pickle"))) == 2
    assert len(list(reference_cache.cache_dir().glob("ipeds-counts-*.pickle"))) == 2
