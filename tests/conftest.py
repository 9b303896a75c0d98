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


def run_release(data: Path, out: Path, seed: str, tracking_uri: str, release_id="2026Q4-test",
                extra: tuple[str, ...] = ()) -> int:
    """`pseo-das release ...` in this process; returns its exit status."""
    from pseo_das.cli import main
    with pytest.raises(SystemExit) as stop:
        main(["release", "--data", str(data), "--out", str(out), "--seed", seed,
              "--release-id", release_id, "--tracking-uri", tracking_uri, *extra])
    return stop.value.code


@pytest.fixture(scope="session")
def releases(synthetic_dir, tmp_path_factory):
    """Three releases of the shared data set: release 2026Q4-test with seed A twice (the
    second a rerun: same noise, nothing spent) and 2026Q4-other with seed B;
    (root, tracking URI)."""
    root = tmp_path_factory.mktemp("releases")
    uri = f"sqlite:///{root / 'audit' / 'mlflow.db'}"
    codes = {name: run_release(synthetic_dir, root / name, seed, uri, release_id)
             for name, seed, release_id in [("a", SEED_A, "2026Q4-test"),
                                            ("a_again", SEED_A, "2026Q4-test"),
                                            ("b", SEED_B, "2026Q4-other")]}
    assert codes == {"a": 0, "a_again": 0, "b": 0}
    return root, uri
