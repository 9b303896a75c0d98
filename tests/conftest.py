from __future__ import annotations

import csv
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def _session_seed_key() -> str:
    """The agency's seed key of the test session (releases seal their seeds with it)."""
    from pseo_das.tasks.privacy.seed_custody import create_key_file
    return str(create_key_file(Path(tempfile.mkdtemp(prefix="pseo-das-key-")) / "seed.key"))


os.environ.setdefault("PSEO_DAS_SEED_KEY", _session_seed_key())
# A Prefect server the developer keeps running (`pseo-das server start`) is not the tests'
# (they start their own), and the validated reference files of the session are its own.
# Each pytest-xdist worker (PYTEST_XDIST_WORKER, `make test`) has a home and a cache of its
# own: the workers inherit the controller's environment, so its folders are not taken.
# The seed key is shared: it is only read.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
os.environ["PSEO_DAS_SERVER_HOME"] = tempfile.mkdtemp(prefix="pseo-das-server-")
if WORKER:
    os.environ["PSEO_DAS_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"pseo-das-cache-{WORKER}-")
else:
    os.environ.setdefault("PSEO_DAS_CACHE_DIR", tempfile.mkdtemp(prefix="pseo-das-cache-"))

SEED_A = "a1" * 32
SEED_B = "b2" * 32


# Fixtures that run real releases: every test using one is a system test (`make test-fast`
# leaves it out) whether or not it says so.
RELEASE_FIXTURES = {"releases"}


# Module fixtures that cost nothing to make again (a no-op, a path): they do not bind a
# module's tests to one worker.
CHEAP_FIXTURES = {"prefect_server", "audit_store"}


@pytest.hookimpl(wrapper=True)      # around pytest-xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = xdist_group(item)
        if group == "releases":
            item.add_marker(pytest.mark.slow)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    yield
    if getattr(config.option, "loadgroup", False):       # an xdist worker, --dist loadgroup
        for item in items:
            keep_group(item)
        items[:] = longest_first(items)


def pytest_configure(config):
    """pytest-xdist hands out the work in the order of `longest_first`, not by its own count
    of tests per group (a module of 26 quick tests is not longer than one wheel build)."""
    if getattr(config.option, "dist", None) == "loadgroup":   # the controller, and workers
        config.option.loadscopereorder = False


def longest_first(items: list) -> list:
    """The tests in the order their work goes to the workers, longest first, so that no
    worker is left with a long group at the end while the other is idle: the groups of
    system tests (the most system tests first: `releases` leads), then the system tests of
    no group, then groups of unit tests (the most tests first), then the unit tests one by
    one. The order within a group and among equals is the collection's."""
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(_group_of(item) or item.nodeid, []).append(item)

    def rank(tests: list) -> tuple[int, int]:
        slow = sum(1 for test in tests if test.get_closest_marker("slow"))
        grouped = _group_of(tests[0]) is not None
        if slow:
            return (0, -slow) if grouped else (1, 0)
        return (2, -len(tests)) if grouped else (3, 0)
    return [item for tests in sorted(groups.values(), key=rank) for item in tests]


def _group_of(item) -> str | None:
    marks = [mark.args[0] for mark in item.iter_markers("xdist_group") if mark.args]
    return marks[0] if marks else None


def keep_group(item) -> None:
    """pytest-xdist (3.8) sends a test's group to its scheduler as a suffix of the test's node
    id, `...::test_x@releases`, which it writes where pytest 9.2 no longer reads it: the
    groups were silently ignored (pytest-xdist issue 1386). Written here where pytest 9.2
    reads it, as the fix proposed there does; a pytest where neither takes stops the run."""
    groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                     for mark in item.iter_markers("xdist_group")})
    suffix = "@" + "_".join(groups)
    if not groups or item.nodeid.endswith(suffix):
        return
    from _pytest.nodeid import NodeId
    item._id = NodeId.parse(item.nodeid + suffix)
    if not item.nodeid.endswith(suffix):
        raise pytest.UsageError(f"{item.nodeid}: cannot give it its pytest-xdist group "
                                f"{suffix[1:]}; run with WORKERS=0 (one process)")


def xdist_group(item) -> str | None:
    """The pytest-xdist group of a test (`--dist loadgroup`: a group runs on one worker, so
    its shared fixtures are made once): "releases" for the users of the session's releases,
    the module for a test using a module-scoped fixture of its own (the releases and data
    sets a module makes once), else none (any worker, test by test)."""
    names = set(getattr(item, "fixturenames", ()))
    if RELEASE_FIXTURES & names:
        return "releases"
    info = getattr(item, "_fixtureinfo", None)
    shared = [name for name, defs in (info.name2fixturedefs.items() if info else ())
              if name not in CHEAP_FIXTURES and defs[-1].scope != "function"
              and ".py" in defs[-1].baseid]          # defined in a test module, not here
    return item.module.__name__ if shared and hasattr(item, "module") else None


@pytest.fixture(scope="session", autouse=True)
def prefect_server():
    """One temporary Prefect server (and database) for the whole test session, named in the
    environment too (PREFECT_API_URL): the releases run in this process and the CLI
    processes the tests start report to it instead of each booting a server of its own
    (4.2-5.1 CPU s each, docs/develop/tests.md). A test of the CLI's own server takes
    PREFECT_API_URL out of the environment it gives its process."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness
    before = os.environ.get("PREFECT_API_URL")
    with prefect_test_harness(server_startup_timeout=120):
        os.environ["PREFECT_API_URL"] = PREFECT_API_URL.value()
        try:
            yield
        finally:
            if before is None:
                del os.environ["PREFECT_API_URL"]
            else:
                os.environ["PREFECT_API_URL"] = before


@pytest.fixture(scope="session")
def synthetic_dir(tmp_path_factory) -> Path:
    """A small synthetic confidential data set shared by the tests (read-only)."""
    from pseo_das.synth import write_synthetic
    out = tmp_path_factory.mktemp("synthetic")
    write_synthetic(out, graduates=30_000, seed=7, progress=lambda _: None)
    return out


# Five of the 40 institutions of the session's data set (seed 7), 2,673 of its 30,000
# graduates, in four states: every degree level but 04, a bachelor's cohort of 2019-2021,
# CIP-2010 codes that CIP-2020 moved. A release of them publishes about a sixth of the
# rows (pseof: origin cells x 1,021 destinations) and takes about a third of the time.
SMALL_INSTITUTIONS = ("00226700", "00371500", "00375900", "00613200", "04229500")


@pytest.fixture(scope="session")
def small_synthetic_dir(synthetic_dir, tmp_path_factory) -> Path:
    """The session's data set cut to SMALL_INSTITUTIONS (read-only): for system tests whose
    claim does not depend on the data's size."""
    return small_data_set(synthetic_dir, tmp_path_factory.mktemp("small-synthetic"))


def small_data_set(data: Path, out: Path, institutions=SMALL_INSTITUTIONS) -> Path:
    """The graduates of `institutions` in the synthetic data set `data` (seed 7), their
    outcomes (every column) and the IPEDS files of those graduates, written to `out`."""
    import pandas as pd

    from pseo_das.synth_ipeds import write_synthetic_ipeds
    graduates = pd.read_parquet(data / "graduates.parquet")
    outcomes = pd.read_parquet(data / "outcomes.parquet")
    kept = graduates[graduates["institution"].isin(institutions)]
    assert set(kept["institution"]) == set(institutions)
    out.mkdir(parents=True, exist_ok=True)
    kept.to_parquet(out / "graduates.parquet", index=False)
    outcomes[outcomes["person_id"].isin(kept["person_id"])] \
        .to_parquet(out / "outcomes.parquet", index=False)
    write_synthetic_ipeds(out)
    return out


@pytest.fixture
def tracking_uri(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'audit' / 'mlflow.db'}"


def public_table(release: Path, name: str, folder: str | None = None) -> Path:
    """A public file of a release by its CSV name (`pseoe_all.csv`, `pseof_co.csv`,
    `version_pseo.txt` with `folder`), as published: in all/ or its state's folder,
    gzipped (`.csv.gz`) or not (schemas/distribution.py). pandas reads either."""
    from pseo_das.schemas.distribution import table_path
    return table_path(Path(release) / "public", name, folder)


def csv_fields(path: Path):
    """A CSV file's fields as written (gzipped or not), every column Arrow text, empty
    fields "" (as `dtype=str, keep_default_na=False` reads them), read by Arrow's CSV reader:
    no Python object per value."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    from pseo_das.schemas.distribution import open_table
    with open_table(path) as text:
        names = next(csv.reader(text))
    return pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
        column_types=dict.fromkeys(names, pa.string())))


def store_beside(tracking_uri: str) -> Path:
    """The tests' privacy store: a folder `store` beside the MLflow SQLite store."""
    return Path(tracking_uri.removeprefix("sqlite:///")).parent / "store"


# The labelled workbook (all/pseoe_all.xlsx) and the Parquet copies with their
# datapackage.json (all/parquet/) are pseo-das's extras: about 8 of the 30 CPU seconds of a
# release of the session's data set, 2-4 of 10 on the small one. Releases whose tests read
# neither are made without them (`without_extras`).
WITHOUT_EXTRAS = "[publication]\nxlsx = false\nparquet = false\n"


def without_extras(path: Path, settings: str = "") -> tuple[str, str]:
    """The release options `--config path`, `path` written with `settings` and no workbook
    or Parquet copies (WITHOUT_EXTRAS)."""
    path.write_text(WITHOUT_EXTRAS + settings)
    return ("--config", str(path))


def run_release(data: Path, out: Path, seed: str | None, tracking_uri: str,
                release_id="2026Q4-test", extra: tuple[str, ...] = (),
                store: Path | None = None) -> int:
    """`pseo-das release ...` in this process (the store beside the MLflow store unless
    given, created if missing); returns its exit status."""
    from pseo_das.cli import main
    store_args = ["--store", str(store)] if store else \
        ["--store", str(store_beside(tracking_uri)), "--init-store"]
    seed_args = ["--seed", seed] if seed else []
    with pytest.raises(SystemExit) as stop:
        main(["release", "--data", str(data), "--out", str(out), *seed_args,
              "--release-id", release_id, "--tracking-uri", tracking_uri, *store_args, *extra])
    return stop.value.code


@pytest.fixture(scope="session")
def releases(synthetic_dir, tmp_path_factory):
    """Releases of the shared data set, one MLflow store: in the privacy store beside it,
    2026Q4-test with seed A twice (the second a rerun: same noise, nothing spent), then
    2026Q4-next (a new release id: every measurement reused); in a privacy store of its
    own, 2026Q4-other with seed B (new noise). The last two without the workbook and the
    Parquet copies: their tests compare data files and documents only. Returns (root,
    tracking URI)."""
    root = tmp_path_factory.mktemp("releases")
    uri = f"sqlite:///{root / 'audit' / 'mlflow.db'}"
    lean = without_extras(root / "without-extras.toml")
    codes = {name: run_release(synthetic_dir, root / name, seed, uri, release_id, extra, store)
             for name, seed, release_id, extra, store in [
                 ("a", SEED_A, "2026Q4-test", (), None),
                 ("a_again", SEED_A, "2026Q4-test", (), None),
                 ("a_next", None, "2026Q4-next", lean, store_beside(uri)),
                 ("b", SEED_B, "2026Q4-other", lean, _new_store(root / "store-b"))]}
    assert codes == {"a": 0, "a_again": 0, "a_next": 0, "b": 0}
    return root, uri


def _new_store(path: Path) -> Path:
    from pseo_das.tasks.privacy.store import init_store
    return init_store(path)


@contextmanager
def verification_server(data: Path, root: Path, analysts: dict[str, str], *options: str):
    """`pseo-das verify-server` serving `data` as its own process on a free port of
    127.0.0.1, with a new store, ledger (global budget 8) and the analysts given (name:
    budget). Yields base URL, store, tokens, process, tracking URI and log; stops it (SIGINT)."""
    import signal
    import socket
    import subprocess
    import sys
    import time

    import httpx

    from pseo_das.tasks.privacy.store import init_store
    from pseo_das.tasks.verification.ledger import VerificationLedger, init_ledger
    store = init_store(root / "store")
    init_ledger(store, 8, "test")
    with VerificationLedger.open(store) as ledger:
        tokens = {name: ledger.add_analyst(name, budget, "test")
                  for name, budget in analysts.items()}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri, base = f"sqlite:///{root / 'audit' / 'mlflow.db'}", f"http://127.0.0.1:{port}"
    with open(root / "server.log", "w") as log:
        process = subprocess.Popen([str(Path(sys.executable).with_name("pseo-das")),
                                    "verify-server", "--data", str(data), "--store", str(store),
                                    "--host", "127.0.0.1", "--port", str(port), "--tracking-uri",
                                    uri, *options], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{base}/openapi.json", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, (root / "server.log").read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.5)
        yield {"base": base, "store": store, "tokens": tokens, "process": process, "uri": uri,
               "log": root / "server.log", "port": port}
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(60)
