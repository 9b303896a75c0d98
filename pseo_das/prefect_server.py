"""Boot Prefect's temporary local server while the release code is still importing.

With no API URL configured, Prefect starts a temporary server (uvicorn serving
``prefect.server.api.server:create_app``) when the first flow runs, and the release
waits about 6 s for it. Started here first, the same server boots in its own process
while this one imports the release code, and the flow reaches it through
PREFECT_API_URL like any server. A configured server (PREFECT_API_URL in the environment
or the active Prefect profile) is used as it is.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STARTUP_TIMEOUT_S = 90.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def prefect_api() -> Iterator[Callable[[], None]]:
    """Use the configured Prefect server, or start booting a temporary one now.

    Yields `wait_until_ready`, to call just before the first flow runs.
    """
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    if PREFECT_API_URL.value():
        yield lambda: None
        return
    port = _free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, **get_current_settings().to_environment_variables(exclude_unset=True),
           "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
    errors = tempfile.TemporaryFile()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "prefect.server.api.server:create_app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"],
        env=env, stdout=subprocess.DEVNULL, stderr=errors)
    try:
        with temporary_settings({PREFECT_API_URL: api_url}):
            yield lambda: _wait_until_healthy(server, api_url, errors)
    finally:
        errors.close()
        _drain_prefect_workers()
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _drain_prefect_workers() -> None:
    """Send the logs and events still queued before the server goes (as Prefect's own
    test harness does); otherwise Prefect retries against a closed port at exit."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=10)


def _wait_until_healthy(server: subprocess.Popen, api_url: str, errors) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not _healthy(api_url):
        if server.poll() is not None:
            errors.seek(0)
            raise RuntimeError(f"the temporary Prefect server exited ({server.returncode}): "
                               f"{errors.read().decode(errors='replace')[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the temporary Prefect server did not answer at {api_url} "
                               f"within {STARTUP_TIMEOUT_S:g} s")
        time.sleep(0.1)
