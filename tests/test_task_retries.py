"""Tasks that only read or write files are retried by Prefect on a transient I/O error, and
a retry is safe: writing the same measurement again adds nothing. Real flow runs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from prefect import flow

from pseo_das.tasks import FILE_TASK_RETRIES
from pseo_das.tasks.privacy.ledger import LedgerEntry, NoisyMeasurement
from pseo_das.tasks.measurements.release_plan import plan_release
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.store import PrivacyStore, StoreError, init_store
from pseo_das.tasks.measurements.stored_tables import keep_measurements
from test_privacy_store import CFG, frames  # noqa: F401  (fixture)


def measurement(measurement_id: str) -> NoisyMeasurement:
    cells = pd.DataFrame({"institution": ["00000100"], "inst_state": ["08"],
                          "degree_level": ["05"], "cipcode": ["1107"], "grad_cohort": [2001],
                          "grad_cohort_years": [3]})
    entry = LedgerEntry("t", "test", 1, 3, "", "", "")
    return NoisyMeasurement(measurement_id, cells, np.array([[3, -1, 0]]), entry)


@flow
def keep(store_path, measured):
    return keep_measurements(store_path, measured)


@pytest.fixture
def planned(tmp_path, frames):  # noqa: F811
    store_path = init_store(tmp_path / "store")
    with PrivacyStore.open(store_path) as store:
        plan = plan_release(store, "R1", ReleaseSeed.from_hex("ab" * 32), "inputs", "config", CFG, frames)
    return store_path, plan.pending[0].measurement_id


def test_a_transient_io_error_is_retried_and_the_retry_stores_once(planned, monkeypatch):
    store_path, measurement_id = planned
    original, calls = PrivacyStore.store_measurement, []

    def flaky(self, *args):
        calls.append(1)
        if len(calls) == 1:  # the object is written, then the disk hiccups
            self.put_object(b"partial", "parquet")
            raise OSError("input/output error")
        return original(self, *args)

    monkeypatch.setattr(PrivacyStore, "store_measurement", flaky)
    stored = keep(store_path, [measurement(measurement_id)])
    assert len(calls) == 2 and FILE_TASK_RETRIES >= 1
    with PrivacyStore.open(store_path) as store:
        rows = store.table("SELECT * FROM measurement_objects")
        assert len(rows) == 1 and rows["object_sha256"].iloc[0] == stored[measurement_id]
        cells, values = store.measured_values(measurement_id)
    np.testing.assert_array_equal(values, [[3, -1, 0]])
    # running it again (what a retry after success does) adds nothing
    assert keep(store_path, [measurement(measurement_id)]) == stored
    with PrivacyStore.open(store_path) as store:
        assert len(store.table("SELECT * FROM measurement_objects")) == 1


def test_a_definitive_error_is_not_retried(planned, monkeypatch):
    store_path, measurement_id = planned
    calls = []

    def refuse(self, *args):
        calls.append(1)
        raise StoreError("inconsistent store")

    monkeypatch.setattr(PrivacyStore, "store_measurement", refuse)
    with pytest.raises(StoreError):
        keep(store_path, [measurement(measurement_id)])
    assert len(calls) == 1


def test_a_full_disk_is_not_retried_and_is_reported_as_a_full_disk(planned, monkeypatch,
                                                                  capsys):
    import errno

    from pseo_das.cli import _unexpected
    store_path, measurement_id = planned
    calls = []

    def full(self, *args):
        calls.append(1)
        raise OSError(errno.ENOSPC, "No space left on device", str(self.path / "objects"))

    monkeypatch.setattr(PrivacyStore, "store_measurement", full)
    with pytest.raises(OSError) as raised:
        keep(store_path, [measurement(measurement_id)])
    assert len(calls) == 1
    assert _unexpected("release", raised.value) == 2
    err = capsys.readouterr().err
    assert f"the disk is full writing {store_path / 'objects'} (No space left on device)" in err
    assert "Traceback" not in err


def test_a_measurement_is_read_from_its_object_only_if_the_object_is_unchanged(planned):
    """The values are read in place from the object file (not its bytes held first), after
    its content is checked against its SHA-256: a changed or missing object is refused."""
    store_path, measurement_id = planned
    sha = keep(store_path, [measurement(measurement_id)])[measurement_id]
    path = store_path / "objects" / f"{sha}.parquet"
    with PrivacyStore.open(store_path) as store:
        np.testing.assert_array_equal(store.measured_values(measurement_id)[1], [[3, -1, 0]])
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 1
        path.chmod(0o600)
        path.write_bytes(bytes(data))
        with pytest.raises(StoreError, match="content does not match its SHA-256"):
            store.measured_values(measurement_id)
        path.unlink()
        with pytest.raises(StoreError, match="object missing from the privacy store"):
            store.measured_values(measurement_id)
