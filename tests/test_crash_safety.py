"""Crash safety with a real process: `pseo-das release` is killed (SIGKILL) at several
points; the destination is then either absent or a complete release, and rerunning the
same release id finishes with the bytes of an uninterrupted run and spends nothing twice."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SEED_A, run_release
from pseo_das.tasks.publication.release_files import fingerprints

pytestmark = pytest.mark.slow  # system tests: real releases (make test-fast leaves them out)

RELEASE_ID = "2026Q4-test"
SCRIPT = Path(sys.executable).with_name("pseo-das")


def release_command(data: Path, out: Path, store: Path) -> list[str]:
    return [str(SCRIPT), "release", "--data", str(data), "--out", str(out), "--seed", SEED_A,
            "--release-id", RELEASE_ID, "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}",
            "--store", str(store / "store"), "--init-store"]


def run_until(command: list[str], marker: str, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> bool:
    """Run `command`, SIGKILL it as soon as a log line contains `marker`; True if killed.
    `env`: its environment (default: this process's, without PREFECT_API_URL)."""
    env = env or {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, cwd=cwd, start_new_session=True)
    for line in process.stdout:
        if marker in line:
            os.killpg(process.pid, signal.SIGKILL)  # the release and its Prefect server
            process.wait()
            return True
    process.wait()
    return False


def store_rows(store: Path) -> tuple[list, list, list]:
    """What the privacy store has charged: release plans, measurements, their populations."""
    db = sqlite3.connect(store / "store" / "store.sqlite")
    try:
        return (db.execute("SELECT * FROM releases").fetchall(),
                db.execute("SELECT * FROM measurements ORDER BY rowid").fetchall(),
                db.execute("SELECT * FROM measurement_populations ORDER BY rowid").fetchall())
    finally:
        db.close()


def session_server_env() -> dict[str, str]:
    """This process's environment, which names the session's Prefect server
    (conftest.prefect_server): the killed and the resumed releases report to it instead of
    each booting a server of its own, and the kill (of the release's process group) leaves
    it running. (A release killed with the server it started: the test of no server left
    behind.)"""
    assert os.environ.get("PREFECT_API_URL")
    return dict(os.environ)


def assert_absent_or_complete(out: Path) -> None:
    if out.exists():
        manifest = json.loads((out / "internal" / "manifest.json").read_text())
        assert manifest["files"] == fingerprints(out)


@pytest.fixture(scope="module")
def releasable(tmp_path_factory) -> Path:
    """The tests' tiny releasable data set (test_ingest.write_releasable): killing and
    resuming does not depend on the data's size."""
    from test_ingest import write_releasable
    return write_releasable(tmp_path_factory.mktemp("crash") / "data")


@pytest.fixture(scope="module")
def uninterrupted(releasable, tmp_path_factory) -> Path:
    """The release the killed ones resume to, made once without a kill: the same data,
    seed, release id and configuration."""
    root = tmp_path_factory.mktemp("uninterrupted")
    assert run_release(releasable, root / "release", SEED_A,
                       f"sqlite:///{root / 'audit' / 'mlflow.db'}", RELEASE_ID) == 0
    return root / "release"


@pytest.mark.parametrize("marker", [
    "measured flows",                 # noise drawn, not yet kept in the store
    "kept",                           # measurements stored, nothing published
    "files to staging",               # the release is complete in staging, not yet published
    "record audit run",               # around the atomic rename into place
])
def test_killed_release_resumes_to_the_same_bytes_without_spending_twice(
        marker, uninterrupted, releasable, tmp_path):
    out, store = tmp_path / "release", tmp_path / "audit"
    env = session_server_env()
    assert run_until(release_command(releasable, out, store), marker, env), \
        "never reached " + marker
    assert_absent_or_complete(out)
    spent_before = store_rows(store)
    assert all(spent_before)  # the plan and its spend were recorded before any noise

    rerun = subprocess.run(release_command(releasable, out, store), capture_output=True,
                           text=True, env=env, timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert store_rows(store) == spent_before  # nothing spent twice
    assert_absent_or_complete(out)
    for name in ("all/pseoe_all.csv.gz", "all/pseoh_all.csv.gz", "all/pseof_all.csv.gz",
                 "release_notes.md"):
        assert (out / "public" / name).read_bytes() == (uninterrupted / "public" / name).read_bytes()
    assert not list(tmp_path.glob(".release.staging-*"))


def test_a_killed_release_leaves_no_prefect_server_behind(tmp_path):
    """SIGKILL runs no exit hook: the local Prefect server the CLI started is stopped by the
    kernel (parent-death signal) instead of living on."""
    import psutil
    from test_ingest import valid_graduates, valid_outcomes, write
    data = tmp_path / "data"
    data.mkdir()
    write(data, valid_graduates(), valid_outcomes())
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    process = subprocess.Popen(release_command(data, tmp_path / "out", tmp_path),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env)
    for line in process.stdout:
        if "Beginning flow run" in line:   # the server is up: the flow reports to it
            break
    servers = [child for child in psutil.Process(process.pid).children()
               if "server" in child.cmdline() and "prefect" in " ".join(child.cmdline())]
    assert len(servers) == 1
    process.kill()                          # SIGKILL the release only, not its group
    process.wait()
    gone, alive = psutil.wait_procs(servers, timeout=20)
    assert not alive, "the Prefect server outlived the killed release"
