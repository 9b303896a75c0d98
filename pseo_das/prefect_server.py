"""`pseo-das server start|stop|status`: a Prefect server that outlives the commands.

A release that finds no server starts its own (`pseo_das.prefect_runtime`) and pays for
its start-up every time (4 CPU-seconds on 2 cores). `pseo-das server start` runs the same
documented command, `prefect server start`, as a detached background process with its own
PREFECT_HOME (its own SQLite database) and port, records where it runs in
`<home>/server.json` and returns once the server answers; every later command finds it
there (`running_api_url`) and reports to it.

The home is $PSEO_DAS_SERVER_HOME, else $XDG_STATE_HOME/pseo-das/prefect-server (default
~/.local/state/pseo-das/prefect-server). A record whose process is gone, or whose pid now
belongs to another program, is stale: `status` says so, `start` replaces it, `stop` removes
it. Nothing here imports Prefect: the check costs a file read and one local HTTP request.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

from pseo_das.errors import PseoDasError

HOME_ENV = "PSEO_DAS_SERVER_HOME"
RECORD = "server.json"
LOG = "server.log"
STARTUP_TIMEOUT_S = 120.0   # migrating a new database can take 15-25 s on 2 cores
STOP_TIMEOUT_S = 20.0


class ServerError(PseoDasError):
    """The kept server cannot be started or stopped as asked."""

    quotes_records = False


class ServerState(Enum):
    RUNNING = "running"        # its process lives and its API answers
    NOT_ANSWERING = "not answering"   # its process lives, its API does not (yet)
    STALE = "stale"            # a record whose process is gone (or is another program)
    STOPPED = "stopped"        # no record


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    port: int
    api_url: str
    prefect_home: str
    started: str               # UTC, ISO 8601


@dataclass(frozen=True)
class ServerStatus:
    state: ServerState
    home: Path
    record: ServerRecord | None = None

    def describe(self) -> str:
        if self.record is None:
            return f"no Prefect server kept by pseo-das (home {self.home})"
        where = (f"pid {self.record.pid}, {self.record.api_url}, PREFECT_HOME "
                 f"{self.record.prefect_home}, started {self.record.started}")
        if self.state is ServerState.RUNNING:
            return f"running: {where}"
        if self.state is ServerState.NOT_ANSWERING:
            return f"not answering (its process lives): {where}; log {self.home / LOG}"
        return f"stale record (its process is gone): {where}"


def server_home() -> Path:
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "pseo-das" / "prefect-server"


def status(home: Path | None = None) -> ServerStatus:
    home = home or server_home()
    record = _read_record(home)
    if record is None:
        return ServerStatus(ServerState.STOPPED, home)
    if not _is_prefect_server(record.pid):
        return ServerStatus(ServerState.STALE, home, record)
    state = ServerState.RUNNING if healthy(record.api_url) else ServerState.NOT_ANSWERING
    return ServerStatus(state, home, record)


def running_api_url(home: Path | None = None) -> str | None:
    """The API of the kept server if it runs and answers, else None (a damaged record
    too: `pseo-das server status` reports it)."""
    try:
        found = status(home)
    except ServerError:
        return None
    running = found.state is ServerState.RUNNING
    return found.record.api_url if running and found.record is not None else None


def use_kept_server() -> str | None:
    """Point this process (and its children) at the kept server, unless PREFECT_API_URL
    names one already; call before Prefect is imported. Returns the URL used, if any."""
    kept = None if os.environ.get("PREFECT_API_URL") else running_api_url()
    if kept is not None:
        os.environ["PREFECT_API_URL"] = kept
    return kept


def start(port: int | None = None, home: Path | None = None) -> ServerStatus:
    """Start the kept server (a stale record is replaced) and wait until it answers; a
    running one is left as it is."""
    home = home or server_home()
    found = status(home)
    if found.state is ServerState.RUNNING:
        return found
    if found.state is ServerState.NOT_ANSWERING:
        raise ServerError(f"{found.describe()}: stop it first (pseo-das server stop)")
    _remove_record(home)
    port = port or free_port()
    if not port_free(port):
        raise ServerError(f"port {port} of 127.0.0.1 is in use: give another --port")
    prefect_home = home / "prefect"
    prefect_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"PREFECT_HOME": str(prefect_home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    with open(home / LOG, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(port), "--no-ui", "--analytics-off", "--log-level", "WARNING"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)   # not stopped with the terminal that started it
    record = ServerRecord(process.pid, port, f"http://127.0.0.1:{port}/api", str(prefect_home),
                          time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    _write_record(home, record)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not healthy(record.api_url):
        if process.poll() is not None or time.monotonic() > deadline:
            _terminate(process.pid)
            _remove_record(home)
            tail = (home / LOG).read_text(errors="replace")[-2000:]
            raise ServerError(f"the Prefect server did not start at {record.api_url}; the end "
                              f"of its log {home / LOG}:\n{tail}")
        time.sleep(0.1)
    return ServerStatus(ServerState.RUNNING, home, record)


def stop(home: Path | None = None) -> ServerStatus:
    """Stop the kept server (SIGTERM to its process group, SIGKILL after a grace period)
    and remove its record; returns what was found."""
    home = home or server_home()
    found = status(home)
    if found.record is not None and found.state in (ServerState.RUNNING,
                                                    ServerState.NOT_ANSWERING):
        _terminate(found.record.pid)
    _remove_record(home)
    return found


# --- helpers ---------------------------------------------------------------------------------

def healthy(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _is_prefect_server(pid: int) -> bool:
    """The process lives and is a `prefect server start` (a pid reused by another program
    is not ours)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's process: not the one we started
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():   # not Linux: the pid is all there is to go by
        return True
    words = cmdline.read_bytes().decode(errors="replace").split("\0")
    return "prefect" in words and "server" in words and "start" in words


def _terminate(pid: int) -> None:
    """SIGTERM to the server's process group (it started one), then SIGKILL if it is
    still there after STOP_TIMEOUT_S."""
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:   # a child of this process (the start that failed) is reaped here
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _read_record(home: Path) -> ServerRecord | None:
    try:
        return ServerRecord(**json.loads((home / RECORD).read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:   # a damaged record: reported, never guessed at
        raise ServerError(f"{home / RECORD} is not a server record ({exc}); remove it") from None


def _write_record(home: Path, record: ServerRecord) -> None:
    temporary = home / f".{RECORD}.tmp"
    temporary.write_text(json.dumps(asdict(record), indent=2) + "\n")
    temporary.replace(home / RECORD)


def _remove_record(home: Path) -> None:
    (home / RECORD).unlink(missing_ok=True)
