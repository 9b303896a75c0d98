"""A privacy store that cannot be quietly rewound, and releases that cannot run over each
other. Each case tampers with a real store the way an adversary with file access would,
then runs the commands a user runs (`store verify`, `release`, `audit`) through the CLI:
each must refuse or fail loudly, and nothing is published."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import mlflow
import pytest

from conftest import run_release, store_beside
from pseo_das.cli import main
from pseo_das.tasks.privacy.store import (GENESIS, PrivacyStore, StorePolicyError, chain_sha256,
                                          exclusive_lock, init_store, row_content, store_lock)
from pseo_das.tasks.privacy.store_integrity import verify_store
from test_ingest import write_releasable

pytestmark = pytest.mark.slow  # system tests: real releases, real MLflow store

SEED = "5e" * 32


def cli(*args: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main([str(a) for a in args])
    return stop.value.code


@pytest.fixture(scope="module")
def published_once(tmp_path_factory):
    """Release R1 of a tiny data set, published once for the module in a folder `work` (its
    data, MLflow store, privacy store and release), and a copy of that folder as made.
    MLflow keeps no connection to a SQLite file between its sessions here (NullPool): a
    pooled one would still point to the MLflow store a test replaced."""
    root = tmp_path_factory.mktemp("published")
    work = root / "work"
    work.mkdir()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MLFLOW_SQLALCHEMYSTORE_POOLCLASS", "NullPool")
        data = write_releasable(work / "data")
        assert run_release(data, work / "R1", SEED, f"sqlite:///{work / 'audit' / 'mlflow.db'}",
                           "R1") == 0
        yield work, Path(shutil.copytree(work, root / "as-made"))


@pytest.fixture
def published(published_once):
    """R1 as published, for a test to tamper with: the module's copy put back in `work`, at
    the paths the MLflow store and the privacy store recorded (the store's path, R1's
    folder, the artifacts'). Returns (data, tracking URI, store, R1)."""
    work, made = published_once
    shutil.rmtree(work)
    shutil.copytree(made, work)
    uri = f"sqlite:///{work / 'audit' / 'mlflow.db'}"
    return work / "data", uri, store_beside(uri), work / "R1"


def _db(store: Path) -> sqlite3.Connection:
    return sqlite3.connect(store / "store.sqlite", isolation_level=None)


def _refused_everywhere(published, capsys, *expected: str) -> None:
    """`store verify`, a new release and the audit of R1 all fail, naming the problem."""
    data, uri, store, r1 = published
    capsys.readouterr()
    assert cli("store", "verify", store, "--tracking-uri", uri) == 1
    err = capsys.readouterr().err
    for fragment in expected:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    assert run_release(data, r1.parent / "R2", None, uri, "R2", store=store) == 2
    err = capsys.readouterr().err
    assert "pseo-das release: FAILED, nothing was published." in err
    assert any(fragment in err for fragment in expected), err
    assert not (r1.parent / "R2").exists()
    assert cli("audit", r1, "--no-replay", "--report", r1.parent / "audit-report") == 1
    out = capsys.readouterr().out
    assert "[FAILED]  privacy store" in out, out


def test_an_intact_store_verifies_and_its_heads_are_recorded(published, capsys):
    data, uri, store, r1 = published
    capsys.readouterr()
    assert cli("store", "verify", store, "--tracking-uri", uri) == 0
    out = capsys.readouterr().out
    assert "intact" in out and "1 MLflow run(s)" in out and "all agree" in out
    manifest = json.loads((r1 / "internal" / "manifest.json").read_text())
    run = mlflow.MlflowClient(uri).get_run(manifest["mlflow_run_id"])
    assert json.loads(run.data.params["store_chain.written"]) == manifest["store_chain"]["written"]
    with PrivacyStore.open(store) as opened:
        assert opened.head().seq > manifest["store_chain"]["written"]["seq"]  # + publication
        assert run.data.params["store_id"] == opened.store_id


def test_a_negative_spend_is_refused_and_a_forced_one_is_caught(published, capsys):
    db = _db(published[2])
    insert = ("INSERT INTO measurements VALUES ('forged', 1, 't', ?, '{}', '-100', 1, ?, NULL, "
              "'now')")
    with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
        db.execute(insert, ("a" * 64, "b" * 64))
    db.execute("PRAGMA ignore_check_constraints = ON")  # an adversary can switch checks off
    db.execute(insert, ("a" * 64, "b" * 64))
    db.close()
    _refused_everywhere(published, capsys, "measurements: row not in the chain",
                        "measurements.epsilon = '-100': not a positive exact epsilon")


def test_rows_deleted_after_dropping_the_triggers_are_caught(published, capsys):
    db = _db(published[2])
    db.execute("DROP TRIGGER measurement_populations_no_delete")
    db.execute("DELETE FROM measurement_populations WHERE rowid % 2 = 0")  # halve the spends
    db.close()
    _refused_everywhere(published, capsys,
                        "trigger measurement_populations_no_delete was dropped",
                        "not the population list its chain entry covers")


def test_a_rewritten_row_is_caught_even_with_the_trigger_put_back(published, capsys):
    db = _db(published[2])
    trigger, = db.execute("SELECT sql FROM sqlite_master WHERE name = "
                          "'measurements_no_update'").fetchone()
    db.execute("DROP TRIGGER measurements_no_update")
    db.execute("UPDATE measurements SET epsilon = '0.001'")
    db.execute(trigger)
    db.close()
    _refused_everywhere(published, capsys, "measurements: row of the chain is missing",
                        "measurements: row not in the chain")


def test_a_deleted_store_created_again_is_caught(published, capsys):
    data, uri, store, r1 = published
    shutil.rmtree(store)
    capsys.readouterr()
    assert run_release(data, r1.parent / "R2", None, uri, "R2") == 2  # with --init-store
    err = capsys.readouterr().err
    assert "used the privacy store with id" in err and "it was replaced" in err
    assert not (r1.parent / "R2").exists()
    _refused_everywhere(published, capsys, "it was replaced")


def test_a_store_rewound_to_a_backup_is_caught(published, capsys, tmp_path):
    data, uri, store, r1 = published
    backup = tmp_path / "backup"
    shutil.copytree(store, backup)
    assert run_release(data, tmp_path / "R2", None, uri, "R2", store=store) == 0
    shutil.rmtree(store)
    shutil.copytree(backup, store)                     # R2's spending forgotten
    capsys.readouterr()
    assert run_release(data, tmp_path / "R3", None, uri, "R3", store=store) == 2
    err = capsys.readouterr().err
    assert "recorded chain head" in err and "the store was rewound or replaced" in err
    assert cli("store", "verify", store, "--tracking-uri", uri) == 1


def test_a_copied_store_that_diverges_is_refused_until_the_agency_adopts_one(published, capsys,
                                                                             tmp_path):
    """Two copies of one store (one id) cannot each spend a budget: once the original has
    released again, the copy disagrees with that run and is refused by `release` and `store
    verify` (runs are found by the store's id, not its path). `store adopt` on the copy
    (recorded in its chain, with who and why) disowns the original's later run; the
    original is refused from then on. A store moved without diverging releases on."""
    data, uri, store, r1 = published
    copy = Path(shutil.copytree(store, tmp_path / "copy"))
    assert run_release(data, tmp_path / "R2", None, uri, "R2", store=store) == 0
    capsys.readouterr()
    assert run_release(data, tmp_path / "R3", None, uri, "R3", store=copy) == 2
    err = capsys.readouterr().err
    assert "used a store with this store's id" in err and f"at {store}" in err
    assert "the two have diverged" in err and "pseo-das store adopt" in err
    assert not (tmp_path / "R3").exists()
    assert cli("store", "verify", copy, "--tracking-uri", uri) == 1
    assert cli("store", "adopt", copy, "--tracking-uri", uri) == 2        # who and why needed
    capsys.readouterr()
    assert cli("store", "adopt", copy, "--tracking-uri", uri, "--by", "the DRB",
               "--reason", "the copy is the agency's store") == 0
    assert "1 run(s) of its diverged copy disowned" in capsys.readouterr().out
    with PrivacyStore.open(copy) as opened:
        (adoption,) = opened.table("SELECT value FROM store_info WHERE key LIKE 'adoption.%'")["value"]
    assert json.loads(adoption)["by"] == "the DRB"
    assert cli("store", "verify", copy, "--tracking-uri", uri) == 0
    capsys.readouterr()
    assert cli("store", "verify", store, "--tracking-uri", uri) == 1      # the other is refused
    assert f"of this store was disowned: the agency adopted the copy at {copy}" in \
        capsys.readouterr().err
    moved = Path(shutil.move(copy, tmp_path / "moved"))                   # a move: same history
    assert run_release(data, tmp_path / "R3", None, uri, "R3", store=moved) == 0


def test_a_history_rewritten_with_a_fresh_chain_is_caught_by_the_recorded_heads(published,
                                                                                capsys):
    data, uri, store, r1 = published
    db = _db(store)
    triggers = [sql for (sql,) in db.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger'")]
    for name in [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]:
        db.execute(f"DROP TRIGGER {name}")
    db.execute("UPDATE measurements SET epsilon = '0.001'")
    entries = db.execute("SELECT seq, entry, content FROM chain ORDER BY seq").fetchall()
    db.execute("DELETE FROM chain")
    previous = GENESIS
    for seq, entry, content in entries:                # a chain recomputed from scratch
        row = json.loads(content)
        if entry == "measurements":
            cursor = db.execute("SELECT * FROM measurements WHERE measurement_id = ?",
                                (row["measurement_id"],))
            content = row_content([d[0] for d in cursor.description], cursor.fetchone())
        sha = chain_sha256(seq, previous, entry, content)
        db.execute("INSERT INTO chain VALUES (?, ?, ?, ?, ?)", (seq, entry, content, previous, sha))
        previous = sha
    for sql in triggers:
        db.execute(sql)
    db.close()
    assert verify_store(store).ok                      # self-consistent: only witnesses can tell
    _refused_everywhere(published, capsys, "the store was rewritten or replaced")


def test_policy_is_changed_only_by_a_recorded_command(tmp_path, capsys):
    store = tmp_path / "store"
    assert cli("store", "init", store, "--lifetime-cap", "12") == 0
    assert cli("store", "set-policy", store, "--lifetime-cap", "40") == 2
    assert "--by WHO and --reason WHY" in capsys.readouterr().err
    assert cli("store", "set-policy", store, "--max-tabulation-epsilon", "1e300", "--by", "x",
               "--reason", "y") == 2
    assert "above 10" in capsys.readouterr().err
    assert cli("store", "set-policy", store, "--lifetime-cap", "-1", "--by", "x",
               "--reason", "y") == 2
    assert "must be positive" in capsys.readouterr().err
    assert cli("store", "set-policy", store, "--lifetime-cap", "40", "--by", "the DRB",
               "--reason", "decision 2027-01") == 0
    assert "lifetime cap 12 -> 40" in capsys.readouterr().out
    with PrivacyStore.open(store) as opened:
        policy = opened.policy()
        assert (policy.policy, policy.set_by, policy.reason) == (2, "the DRB", "decision 2027-01")
        with pytest.raises(StorePolicyError, match="who set it and why"):
            opened.set_policy(" ", "no one", lifetime_cap=1)
    assert verify_store(store).ok


def test_two_releases_at_once_are_serialized_by_locks(published, capsys, tmp_path):
    data, uri, store, r1 = published
    capsys.readouterr()
    with store_lock(store):                            # another release holds the store
        assert run_release(data, tmp_path / "R2", None, uri, "R2", store=store) == 2
    err = capsys.readouterr().err
    assert f"the privacy store {store} is in use by pseo-das (pid" in err
    with exclusive_lock(tmp_path / ".R2.lock", "another release"):   # ... or the folder
        assert run_release(data, tmp_path / "R2", None, uri, "R2", store=store) == 2
    assert f"the release folder {tmp_path / 'R2'} is in use" in capsys.readouterr().err
    assert run_release(data, tmp_path / "R2", None, uri, "R2", store=store) == 0
    assert not (tmp_path / ".R2.lock").exists()


def test_a_run_left_running_by_a_kill_is_closed_by_the_next_release(published, tmp_path):
    data, uri, store, r1 = published
    client = mlflow.MlflowClient(uri)
    run_id = json.loads((r1 / "internal" / "manifest.json").read_text())["mlflow_run_id"]
    client.update_run(run_id, status="RUNNING")        # killed after publication
    client.delete_tag(run_id, "published_to")
    assert run_release(data, tmp_path / "R2", None, uri, "R2", store=store) == 0
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["published_to"] == str(r1)
    assert "repaired_by" in run.data.tags


def test_an_audit_closes_a_run_left_running_and_reports_a_deleted_one(published, capsys):
    data, uri, store, r1 = published
    client = mlflow.MlflowClient(uri)
    run_id = json.loads((r1 / "internal" / "manifest.json").read_text())["mlflow_run_id"]
    client.update_run(run_id, status="RUNNING")
    assert cli("audit", r1, "--no-replay", "--report", r1.parent / "report-1") == 0
    assert client.get_run(run_id).info.status == "FINISHED"
    assert "closed FINISHED" in (r1.parent / "report-1" / "audit_report.md").read_text()
    client.delete_run(run_id)
    capsys.readouterr()
    assert cli("audit", r1, "--no-replay", "--report", r1.parent / "report-2") == 1
    assert "was deleted from the MLflow tracking store" in capsys.readouterr().out


def test_the_seed_can_come_from_a_file_or_the_environment(published, tmp_path, monkeypatch,
                                                        capsys):
    data, uri, store, r1 = published
    seed_file = tmp_path / "seed.txt"
    seed_file.write_text("7a" * 32 + "\n")
    assert run_release(data, tmp_path / "R2", None, uri, "R2", ("--seed-file", str(seed_file)),
                       store=store) == 0
    monkeypatch.setenv("PSEO_DAS_SEED", "7b" * 32)
    assert run_release(data, tmp_path / "R3", None, uri, "R3", store=store) == 0
    assert run_release(data, tmp_path / "R4", "7c" * 32, uri, "R4", store=store) == 2
    assert "the seed is given twice ($PSEO_DAS_SEED and --seed)" in capsys.readouterr().err
    with PrivacyStore.open(store) as opened:
        assert opened.attempts("R2")[0].seed.hex() == "7a" * 32
        assert opened.attempts("R3")[0].seed.hex() == "7b" * 32
        assert opened.attempts("R4") == []


def test_an_unexpected_error_is_one_message_unless_debug(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli("synth", "--out", blocker / "data", "--graduates", "10") == 2
    err = capsys.readouterr().err
    assert "pseo-das synth: FAILED" in err and "Traceback" not in err
    with pytest.raises(NotADirectoryError):
        main(["synth", "--out", str(blocker / "data"), "--graduates", "10", "--debug"])


def test_a_store_of_an_earlier_version_or_a_second_init_is_refused(tmp_path):
    store = init_store(tmp_path / "store")
    with pytest.raises(Exception, match="already holds a privacy store"):
        init_store(store)
    db = _db(store)
    db.execute("DROP TRIGGER store_info_no_update")
    db.execute("UPDATE store_info SET value = 'pseo-das privacy store v1' WHERE key = 'format'")
    db.close()
    with pytest.raises(Exception, match="store format 'pseo-das privacy store v1'"):
        PrivacyStore.open(store)


def test_an_audit_of_a_store_it_cannot_read_fails_the_store_check_without_a_traceback(
        published, capsys):
    data, uri, store, r1 = published
    db = _db(store)
    db.execute("DROP TRIGGER store_info_no_update")
    db.execute("UPDATE store_info SET value = 'pseo-das privacy store v1' WHERE key = 'format'")
    db.close()
    capsys.readouterr()
    assert cli("audit", r1, "--no-replay", "--report", r1.parent / "report") == 1
    out = capsys.readouterr().out
    assert "[FAILED]  privacy store: the release's privacy store cannot be checked" in out
    assert "Traceback" not in out
