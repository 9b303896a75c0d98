from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

SEED_A = "a1" * 32
SEED_B = "b2" * 32


@pytest.fixture(scope="session", autouse=True)
def prefect_server():
    """One temporary Prefect server (and database) for the whole test session."""
    from prefect.testing.utilities import prefect_test_harness
    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def synthetic_dir(tmp_path_factory) -> Path:
    """A small synthetic confidential data set shared by the tests (read-only)."""
    from pseo_das.synth import write_synthetic
    out = tmp_path_factory.mktemp("synthetic")
    write_synthetic(out, graduates=30_000, seed=7, progress=lambda _: None)
    return out


@pytest.fixture
def tracking_uri(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'audit' / 'mlflow.db'}"
