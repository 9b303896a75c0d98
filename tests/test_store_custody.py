"""Custody of a privacy store: `store verify` re-hashes every object the store holds (and
misses none a publication record names), and the files holding seeds or confidential values
are created readable by their owner only, with wider permissions reported."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pseo_das.cli import main
from pseo_das.tasks.audit.mlflow_run import initialise_sqlite_store
from pseo_das.tasks.measurements.publication_record import record_objects
from pseo_das.tasks.privacy.store import PrivacyStore, init_store
from pseo_das.tasks.privacy.store_integrity import verify_store
from pseo_das.tasks.verification.ledger import init_ledger, ledger_path
from test_legacy_store import legacy_store  # noqa: F401  (the fixture: a copy of a real store)


def cli(*args) -> int:
    with pytest.raises(SystemExit) as stop:
        main([str(a) for a in args])
    return stop.value.code


def _reference_table(store: Path) -> Path:
    """The stored J2J table of the store's one publication: named only by its record."""
    with PrivacyStore.open(store) as opened:
        (sha,) = opened.table("SELECT record_sha256 FROM publications")["record_sha256"]
        record = opened.get_json(sha)
    return store / "objects" / f"{record['reference_tables']['j2j']}.parquet"


def test_every_object_on_disk_and_every_object_a_record_names_is_checked(legacy_store):  # noqa: F811
    report = verify_store(legacy_store, check_objects=True, record_objects=record_objects)
    assert report.ok, report.message()
    assert report.objects_checked == len(list((legacy_store / "objects").iterdir())) == 18


def test_a_corrupted_reference_table_is_caught(legacy_store, tmp_path, capsys):  # noqa: F811
    table = _reference_table(legacy_store)
    os.chmod(table, 0o600)
    table.write_bytes(table.read_bytes()[:-1] + b"\0")
    assert cli("store", "verify", legacy_store, "--tracking-uri",
               f"sqlite:///{tmp_path / 'none.db'}") == 1
    assert f"{table}: content does not match its SHA-256" in capsys.readouterr().err
    table.unlink()
    report = verify_store(legacy_store, check_objects=True, record_objects=record_objects)
    assert f"{table}: object missing from the privacy store" in report.problems


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_store_ledger_and_run_log_are_created_for_their_owner_only(tmp_path):
    previous = os.umask(0o022)          # the usual umask: files 0644 unless made private
    try:
        store = init_store(tmp_path / "store")
        with PrivacyStore.open(store) as opened:
            sha = opened.put_json({"a": 1})
        init_ledger(store, "1", "the DRB")
        uri = f"sqlite:///{tmp_path / 'audit' / 'mlflow.db'}"
        initialise_sqlite_store(uri)
    finally:
        os.umask(previous)
    assert (_mode(store), _mode(store / "objects")) == (0o700, 0o700)
    for private in (store / "store.sqlite", store / "objects" / f"{sha}.json",
                    ledger_path(store), tmp_path / "audit" / "mlflow.db"):
        assert _mode(private) == 0o600, private
    assert _mode(tmp_path / "audit") == 0o700
    assert verify_store(store, check_objects=True).exposures == []


def test_store_verify_reports_files_others_can_read(legacy_store, tmp_path, capsys):  # noqa: F811
    os.chmod(legacy_store, 0o755)
    os.chmod(legacy_store / "store.sqlite", 0o644)
    for file in (legacy_store / "objects").iterdir():
        os.chmod(file, 0o644)
    assert cli("store", "verify", legacy_store, "--tracking-uri",
               f"sqlite:///{tmp_path / 'none.db'}") == 0      # intact, with warnings
    out = capsys.readouterr().out
    assert f"WARNING {legacy_store}: mode 0755, readable by other users" in out
    assert f"WARNING {legacy_store / 'store.sqlite'}: mode 0644" in out
    assert "WARNING 18 object file(s)" in out


def test_a_table_goes_to_the_store_as_the_bytes_of_it_would(tmp_path):
    """PrivacyStore.put_table writes a table straight to disk (a national measurement is
    not held as bytes too): the object `table_bytes` makes, named by its SHA-256, created
    0600 under the usual umask, no temporary file left, one object however often put."""
    import hashlib
    import pyarrow as pa
    from pseo_das.tasks.privacy.store import table_bytes
    table = pa.table({"cells": list(range(5000)), "code": [f"{i % 7:02d}" for i in range(5000)]})
    previous = os.umask(0o022)
    try:
        store = init_store(tmp_path / "store")
        with PrivacyStore.open(store) as opened:
            sha = opened.put_table(table)
            assert opened.put_table(table) == sha
    finally:
        os.umask(previous)
    data = table_bytes(table)
    stored = store / "objects" / f"{sha}.parquet"
    assert sha == hashlib.sha256(data).hexdigest() and stored.read_bytes() == data
    assert _mode(stored) == 0o600
    assert [p.name for p in (store / "objects").iterdir() if p.name.startswith(".")] == []
