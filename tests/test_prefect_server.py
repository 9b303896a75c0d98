"""`pseo-das server start|stop|status` (pseo_das/kept.py): a real Prefect server
kept running between commands, a release reporting to it over localhost, and stale
records (a process gone, a pid now another program's) recognised as such."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from conftest import SEED_A
from pseo_das import prefect_server as kept
from pseo_das.prefect_server import ServerRecord, ServerState

SCRIPT = Path(sys.executable).with_name("pseo-das")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(kept.HOME_ENV, str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """Not the session's Prefect server: these tests start (or fake) their own."""
    yield


def write_record(home: Path, pid: int, port: int = 9) -> None:
    (home / kept.RECORD).write_text(json.dumps({
        "pid": pid, "port": port, "api_url": f"http://127.0.0.1:{port}/api",
        "prefect_home": str(home / "prefect"), "started": "2026-11-26T00:00:00Z"}))


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_no_record_is_stopped(home):
    found = kept.status()
    assert found.state is ServerState.STOPPED and found.record is None
    assert kept.running_api_url() is None
    assert "no Prefect server kept by pseo-das" in found.describe()


def test_a_record_of_a_process_gone_is_stale_and_stop_removes_it(home):
    write_record(home, dead_pid())
    found = kept.status()
    assert found.state is ServerState.STALE and "stale" in found.describe()
    assert kept.running_api_url() is None   # a release starts its own
    assert kept.stop().state is ServerState.STALE
    assert not (home / kept.RECORD).exists()


def test_a_pid_reused_by_another_program_is_stale_and_left_alone(home):
    write_record(home, os.getpid())   # this pytest process: alive, not a Prefect server
    assert kept.status().state is ServerState.STALE
    kept.stop()             # must not signal this process
    assert kept.status().state is ServerState.STOPPED


def test_a_damaged_record_is_reported_not_guessed_at(home):
    (home / kept.RECORD).write_text("{not json")
    with pytest.raises(kept.ServerError, match="not a server record"):
        kept.status()
    assert kept.running_api_url() is None


def pseo_das(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def flow_runs(api_url: str) -> list[dict]:
    request = urllib.request.Request(f"{api_url}/flow_runs/filter", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_start_a_release_against_it_then_stop(home, tmp_path):
    """One start (over a stale record), one release that reports to the kept server
    instead of starting its own, status, stop."""
    from test_ingest import write_releasable
    data = write_releasable(tmp_path / "data")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    write_record(home, dead_pid())

    started = pseo_das("server", "start", env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    record = kept.status().record
    assert kept.status().state is ServerState.RUNNING
    again = pseo_das("server", "start", env=env)   # a running one is left as it is
    assert again.returncode == 0 and ServerRecord(**json.loads(
        (home / kept.RECORD).read_text())) == record
    try:
        release = pseo_das("release", "--data", str(data), "--out", str(tmp_path / "out"),
                           "--seed", SEED_A, "--release-id", "kept-server",
                           "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
                           "--store", str(tmp_path / "store"), "--init-store", env=env)
        assert release.returncode == 0, release.stdout[-3000:] + release.stderr[-3000:]
        assert f"127.0.0.1:{record.port}" in release.stdout + release.stderr
        runs = [run for run in flow_runs(record.api_url) if run["name"] and
                run["parameters"].get("release_id") == "kept-server"]
        assert [run["state_type"] for run in runs] == ["COMPLETED"]
        status = pseo_das("server", "status", env=env)
        assert status.returncode == 0 and status.stdout.startswith("running: pid")
    finally:
        stopped = pseo_das("server", "stop", env=env)
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped: running")
    with pytest.raises(ProcessLookupError):
        os.kill(record.pid, 0)
    status = pseo_das("server", "status", env=env)
    assert status.returncode == 3 and "no Prefect server kept" in status.stdout


HEARTBEAT_PROBE = ("from pseo_das.prefect_runtime import prefect_api\n"
                   "from prefect.settings import get_current_settings\n"
                   "with prefect_api():\n"
                   "    print(get_current_settings().flows.heartbeat_frequency)\n")


@pytest.mark.parametrize("configured, expected", [(None, "None"), ("60", "60")])
def test_flow_heartbeats_only_when_a_settings_source_asks_for_them(configured, expected):
    """The command's flow runs send no heartbeats (whose thread held the end of every flow
    up to a second) unless PREFECT_FLOWS_HEARTBEAT_FREQUENCY (or a profile) sets them."""
    env = {k: v for k, v in os.environ.items() if "HEARTBEAT" not in k}
    env["PREFECT_API_URL"] = "http://127.0.0.1:9/api"    # named: no server is started
    if configured:
        env["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] = configured
    shown = subprocess.run([sys.executable, "-c", HEARTBEAT_PROBE], env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    assert shown[-1] == expected
