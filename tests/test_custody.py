"""Nothing confidential outside the protected stores (issue 33, items 2 and 3), tried with
real processes as an agency runs them, HOME and the Prefect home in a temporary folder:
a release killed after its measurements are kept (a crash), then resumed; an audit that
replays it with the custodian's key; a release refused for a malformed row. Then every
file they wrote (HOME with Prefect's database and result storage, the MLflow store and its
artifacts, the privacy store, the release, the audit report, temporary files) is searched
for a canary value planted in the microdata and for the release seed, and holds neither.

The canary is an earnings value of 7,305,194.86 dollars. No file can hold it by chance:
earnings are published only as whole-dollar percentiles interpolated in noisy histograms
whose top bin ends at 614,597 (2016) dollars, and no other count or figure has cents."""
from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from conftest import SEED_A
from pseo_das.errors import WITHHELD
from pseo_das.synth import write_synthetic
from test_crash_safety import SCRIPT, release_command, run_until
from test_ingest import valid_graduates, valid_outcomes, write

pytestmark = pytest.mark.slow  # system tests: real releases (make test-fast leaves them out)

CANARY = 7305194.86
CANARY_FORMS = [b"7305194", struct.pack("<d", CANARY), struct.pack(">d", CANARY)]
SEED_FORMS = [SEED_A.encode(), SEED_A.upper().encode(), bytes.fromhex(SEED_A)]
RAGGED_ROW = f"1,1,{CANARY},26,54,extra"


def planted(folder: Path) -> Path:
    """Small synthetic microdata (5 institutions: what is searched for does not depend on
    the size), one outcome's earnings the canary."""
    write_synthetic(folder, graduates=2_000, seed=33, progress=lambda _: None, institutions=5)
    outcomes = pd.read_parquet(folder / "outcomes.parquet")
    outcomes.loc[outcomes["earnings"].first_valid_index(), "earnings"] = CANARY
    outcomes.to_parquet(folder / "outcomes.parquet")
    return folder


def with_a_ragged_row(folder: Path) -> Path:
    """Small valid inputs as CSV, the outcomes ending with a row of one field too many
    that quotes the canary."""
    folder.mkdir()
    write(folder, valid_graduates(), valid_outcomes(), "csv")
    with open(folder / "outcomes.csv", "a") as outcomes:
        outcomes.write(RAGGED_ROW + "\n")
    return folder


@pytest.fixture(scope="module")
def custody(tmp_path_factory):
    """The runs, in a temporary HOME (and Prefect home, and TMPDIR): crash, resume, audit
    with replay, refused release. Returns (root, the data folders, the refusal)."""
    root = tmp_path_factory.mktemp("custody")
    data, ragged = planted(root / "data"), with_a_ragged_row(root / "ragged")
    (root / "home").mkdir()
    (root / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {
        "HOME": str(root / "home"), "PREFECT_HOME": str(root / "home" / ".prefect"),
        "TMPDIR": str(root / "tmp"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    out, audit = root / "release", root / "audit"
    command = release_command(data, out, audit)

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=root,
                              timeout=900)

    assert run_until(command, "kept", env=env, cwd=root), "never reached 'kept'"
    resumed = run(*command)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    audited = run(str(SCRIPT), "audit", str(out), "--data", str(data))
    assert audited.returncode == 0, audited.stdout[-3000:] + audited.stderr[-3000:]
    assert "PASS: all 5 checks passed." in audited.stdout
    refusal = release_command(ragged, root / "refused", audit)
    refusal[refusal.index("--release-id") + 1] = "2026Q4-ragged"
    refused = run(*refusal)
    printed = "".join(run.stdout + run.stderr for run in (resumed, audited, refused))
    assert SEED_A not in printed     # nor is the seed printed (it was given, never echoed)
    assert "Error logging to API" not in printed   # each run's own server outlived its flows
    return root, (data, ragged), refused


def files_holding(root: Path, forms: list[bytes], skip: tuple[Path, ...]) -> list[str]:
    files = [p for p in root.rglob("*")
             if p.is_file() and not any(p.is_relative_to(folder) for folder in skip)]
    assert len(files) > 50
    return [f"{p.relative_to(root)}: {form!r}" for p in files for form in forms
            if form in p.read_bytes()]


def test_the_canary_is_nowhere_but_in_the_microdata_and_on_the_operators_terminal(custody):
    root, data_folders, refused = custody
    assert refused.returncode == 2
    assert RAGGED_ROW in refused.stderr     # the operator sees the row
    assert (root / "home" / ".prefect" / "prefect.db").exists()
    assert list((root / "home" / ".prefect" / "storage").iterdir())  # the refused flow's error
    assert list((root / "audit_reports").iterdir())
    assert files_holding(root, CANARY_FORMS, data_folders) == []


def test_the_seed_is_nowhere_after_a_crash_a_resume_and_an_audit_with_replay(custody):
    root, _, _ = custody
    assert files_holding(root, SEED_FORMS, ()) == []


def test_prefect_and_mlflow_hold_the_refusals_type_and_no_message(custody):
    root, _, _ = custody
    client = mlflow.MlflowClient(f"sqlite:///{root / 'audit' / 'mlflow.db'}")
    (run,) = client.search_runs(client.get_experiment_by_name(
        "pseo-das quarterly release").experiment_id, "tags.release_id = '2026Q4-ragged'")
    assert run.data.tags["failure"] == f"InputValidationError: {WITHHELD}"
