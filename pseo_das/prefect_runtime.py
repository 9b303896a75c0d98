"""The Prefect API that the CLI's flows report to.

A configured server (PREFECT_API_URL in the environment, the active Prefect profile or any
other Prefect settings source) is used as it is, and so is the server `pseo-das server
start` keeps running (pseo_das/prefect_server.py). Otherwise the CLI runs
`prefect server start`, Prefect's documented command for a local server on the default
database (~/.prefect/prefect.db), as a child process on a free local port. It starts before
Prefect is even imported, so it boots on the other core while the CLI imports the release
code. The flows reach it through PREFECT_API_URL like any other server.

The child is stopped by an `atexit` hook. Prefect sends its queued logs and events when
threads shut down, and Python does that before it runs `atexit` hooks, so nothing is lost
and nothing is retried against a closed port. Prefect stops its own temporary server the
same way. A CLI killed outright (SIGKILL, the out-of-memory killer) runs no hook: on Linux
the child is then sent SIGTERM by the kernel (PR_SET_PDEATHSIG), so no server is left
behind.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STARTUP_TIMEOUT_S = 120.0  # migrating a new database can take 15-25 s on 2 cores


@contextmanager
def prefect_api() -> Iterator[Callable[[], None]]:
    """Use the configured Prefect server, or start a local one now.

    Yields `wait_until_ready`, to call just before the first flow runs.
    """
    # Start the server before importing Prefect (1.5-3 s). Stop it again if Prefect's
    # settings (a profile, prefect.toml, .env) turn out to name a server.
    from pseo_das.prefect_server import use_kept_server
    use_kept_server()   # before Prefect reads its settings
    server = None if os.environ.get("PREFECT_API_URL") else _LocalServer()
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if server is None or PREFECT_API_URL.value():
        if server is not None:
            server.stop()
        with temporary_settings(heartbeats_unless_configured()):
            yield lambda: None
        return
    with temporary_settings({PREFECT_API_URL: server.api_url} | heartbeats_unless_configured()):
        yield server.wait_until_ready


def heartbeats_unless_configured() -> dict:
    """Prefect's settings for the command's flow runs: no flow-run heartbeats unless a
    Prefect settings source (PREFECT_FLOWS_HEARTBEAT_FREQUENCY, a profile, prefect.toml)
    asks for them. Heartbeats let a server automation mark a run whose process died as
    crashed; Prefect sends them by default, from a thread that sleeps in 1-second steps and
    is joined when the flow ends, which held every release up to a second at its end. A
    site that watches its runs that way sets the frequency and gets them."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings
    if "heartbeat_frequency" in get_current_settings().flows.model_fields_set:
        return {}
    return {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}


class _LocalServer:
    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.api_url = f"http://127.0.0.1:{port}/api"
        self.output = tempfile.TemporaryFile()  # read only if the server fails to start
        self.process = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(port), "--no-ui", "--analytics-off", "--log-level", "WARNING"],
            stdin=subprocess.DEVNULL, stdout=self.output, stderr=subprocess.STDOUT,
            preexec_fn=_terminate_with_parent if sys.platform == "linux" else None)
        atexit.register(self.stop)

    def wait_until_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self._healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.output.seek(0)
                log = self.output.read().decode(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"the local Prefect server did not start at {self.api_url}:"
                                   f"\n{log}")
            time.sleep(0.1)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.output.close()


PR_SET_PDEATHSIG = 1   # linux/prctl.h


def _terminate_with_parent() -> None:
    """In the child, before exec: ask the kernel for SIGTERM when the CLI dies. The CLI
    starts the server from its main thread before any other thread exists."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
