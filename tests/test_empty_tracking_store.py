"""A new SQLite tracking store is a copy of this MLflow version's empty store, made once by
MLflow itself and kept in the cache folder (tasks/audit/mlflow_run.empty_store): the copy
is a store MLflow uses as its own, private to its owner, and a kept file that is damaged or
a cache folder that cannot be written never stops a store from being created."""
from __future__ import annotations

import sqlite3
import stat
from contextlib import closing
from pathlib import Path

from mlflow.tracking import MlflowClient
from mlflow.version import VERSION as MLFLOW_VERSION

from pseo_das.tasks.audit.mlflow_run import SQLITE_HEADER, AuditRun, initialise_sqlite_store


def kept(cache: Path) -> Path:
    return cache / "mlflow" / f"empty-store-{MLFLOW_VERSION}.db"


def a_store_mlflow_uses(uri: str) -> None:
    """A run logged and read back through MLflow's own client."""
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("check")
    run = client.create_run(experiment)
    client.log_param(run.info.run_id, "release_id", "R1")
    client.set_terminated(run.info.run_id)
    assert client.get_run(run.info.run_id).data.params == {"release_id": "R1"}
    assert [e.name for e in client.search_experiments()] == ["check", "Default"]


def test_new_stores_are_copies_of_the_empty_store_kept_once(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("PSEO_DAS_CACHE_DIR", str(cache))
    first, second = tmp_path / "a" / "mlflow.db", tmp_path / "b" / "mlflow.db"
    here = Path.cwd()
    initialise_sqlite_store(f"sqlite:///{first}")
    empty = kept(cache).read_bytes()
    assert empty.startswith(SQLITE_HEADER)
    assert stat.S_IMODE(kept(cache).stat().st_mode) == 0o600
    made = kept(cache).stat().st_mtime_ns
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    initialise_sqlite_store(f"sqlite:///{second}")
    assert kept(cache).stat().st_mtime_ns == made          # not made again
    assert tables(second) == tables(first)                 # a copy: the same schema and rows
    assert stat.S_IMODE(second.stat().st_mode) == 0o600
    # ... but for its Default experiment, as MLflow makes it in this process's folder
    assert default_location(second) == str(elsewhere / "mlruns" / "0")
    assert default_location(first) == str(here / "mlruns" / "0")
    a_store_mlflow_uses(f"sqlite:///{second}")


def tables(path: Path) -> dict[str, list]:
    """Every table's schema and rows, the Default experiment's location and times aside."""
    with closing(sqlite3.connect(path)) as db:
        names = [n for (n,) in db.execute("SELECT name FROM sqlite_master ORDER BY name")]
        out = {"schema": db.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()}
        for name in names:
            if db.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0] == "table":
                out[name] = sorted(map(repr, db.execute(f'SELECT * FROM "{name}"').fetchall()))
        out["experiments"] = db.execute(
            "SELECT experiment_id, name, lifecycle_stage FROM experiments").fetchall()
    return out


def default_location(path: Path) -> str:
    with closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT artifact_location FROM experiments "
                          "WHERE experiment_id = 0").fetchone()[0]


def test_a_release_run_is_logged_in_a_copied_store(tmp_path, monkeypatch):
    monkeypatch.setenv("PSEO_DAS_CACHE_DIR", str(tmp_path / "cache"))
    initialise_sqlite_store(f"sqlite:///{tmp_path / 'warm' / 'mlflow.db'}")   # keeps the empty store
    uri = f"sqlite:///{tmp_path / 'audit' / 'mlflow.db'}"
    run = AuditRun(uri, "R1")
    run.client.set_terminated(run.run_id)
    logged = MlflowClient(tracking_uri=uri).get_run(run.run_id)
    assert (logged.info.status, logged.data.tags["release_id"]) == ("FINISHED", "R1")


def test_a_damaged_kept_store_is_made_again(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("PSEO_DAS_CACHE_DIR", str(cache))
    kept(cache).parent.mkdir(parents=True)
    kept(cache).write_bytes(b"half a store")
    store = tmp_path / "audit" / "mlflow.db"
    initialise_sqlite_store(f"sqlite:///{store}")
    assert kept(cache).read_bytes().startswith(SQLITE_HEADER)
    a_store_mlflow_uses(f"sqlite:///{store}")


def test_a_cache_folder_that_cannot_be_written_builds_the_store_in_place(tmp_path, monkeypatch):
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("a file where the cache folder should be")
    monkeypatch.setenv("PSEO_DAS_CACHE_DIR", str(not_a_folder))
    store = tmp_path / "audit" / "mlflow.db"
    initialise_sqlite_store(f"sqlite:///{store}")
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    a_store_mlflow_uses(f"sqlite:///{store}")
