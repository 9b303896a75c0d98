"""`pseo-das audit`, tried as an auditor would: a release verifies end to end (replay
included); a tampered public file, a tampered ledger or a changed input fails the audit
and says exactly why; a run id works as well as a folder; unusable arguments exit 2.

Uses the session's releases (conftest.py); tampering is done on copies of release "a"
(whose manifest still names the same MLflow run and store), so that only one replay runs.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from conftest import SEED_A, public_table
from pseo_das.cli import main
from pseo_das.config import load_config
from pseo_das.tasks.audit.replay import configuration_toml
from pseo_das.tasks.audit.verification import logged_configuration
from rendered_html import markdown_problems

pytestmark = pytest.mark.slow  # system tests: real releases (make test-fast leaves them out)


def run_audit(*argv: object) -> int:
    """`pseo-das audit ...` in this process; returns its exit status."""
    with pytest.raises(SystemExit) as stop:
        main(["audit", *map(str, argv)])
    return stop.value.code


def check_line(printed: str, name: str) -> str:
    """The verdict line of one check, e.g. '[PASSED]  outputs: 13 of 13 files ...'."""
    return next(line for line in printed.splitlines() if re.search(rf"^  \[[A-Z]+\] +{name}: ", line))


def findings_of(printed: str, name: str) -> str:
    """The finding lines printed under one check."""
    lines = printed.splitlines()
    start = lines.index(check_line(printed, name)) + 1
    out = []
    for line in lines[start:]:
        if not line.startswith("              - "):
            break
        out.append(line)
    return "\n".join(out)


def run_ids(uri: str) -> set[str]:
    client = MlflowClient(tracking_uri=uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    return {r.info.run_id for r in client.search_runs(experiments)}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def release_copy(releases, tmp_path) -> Path:
    """A copy of release "a" to tamper with (same manifest: same MLflow run and store)."""
    root, _ = releases
    return Path(shutil.copytree(root / "a", tmp_path / "a_copy"))


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """Default report folders (audit_reports/ under the current folder) land in tmp_path."""
    monkeypatch.chdir(tmp_path)


def test_release_verifies_end_to_end_with_replay(releases, tmp_path, capsys, monkeypatch):
    """The custodian's key opens the sealed seed for the replay (given as --seed-key)."""
    key = os.environ["PSEO_DAS_SEED_KEY"]
    monkeypatch.delenv("PSEO_DAS_SEED_KEY")          # restored after the test
    root, uri = releases
    release = root / "a"
    manifest = json.loads((release / "internal" / "manifest.json").read_text())
    runs_before = run_ids(uri)
    budget = root / "audit" / "store" / "store.sqlite"
    budget_before = sha256(budget)

    code = run_audit(release, "--report", tmp_path / "report", "--seed-key", key)
    printed = capsys.readouterr().out

    assert code == 0, printed
    for name in ("outputs", "ledger", "privacy store", "inputs", "replay"):
        assert check_line(printed, name).lstrip().startswith("[PASSED]"), printed
    assert "PASS: all 5 checks passed." in printed
    n_files = len(manifest["files"])
    assert f"{n_files} of {n_files} files match" in check_line(printed, "outputs")
    assert "total 7.5 = epsilon.total, within the cap 9" in check_line(printed, "ledger")
    # 48 inputs: graduates, outcomes, J2J, QCEW, state coverage, crosswalk, hard-coded
    # transitions, CPI, and the 20 IPEDS completions + 20 directories of 2001-2020 (the
    # packaged demo years: the recast reads those before the CIP switch year, the IPEDS
    # counts all of them)
    assert "48 of 48 input files match" in check_line(printed, "inputs")
    n_public = sum(1 for name in manifest["files"] if name.startswith("public/"))
    n_explorer = sum(1 for name in manifest["files"] if name.startswith("public/explorer/"))
    # all/: 8 files and 4 in all/parquet/; 5 in each of the 5 state folders; the release notes
    # (.md, .html)
    assert n_public - n_explorer == 39
    assert n_explorer > 5                # the explorer (tests/test_explorer.py): reproduced too
    assert f"{n_public} of {n_public} public files reproduced byte for byte" in \
        check_line(printed, "replay")
    # the replay went to temporary copies: no run added, the privacy store untouched
    assert run_ids(uri) == runs_before
    assert sha256(budget) == budget_before

    report = (tmp_path / "report" / "audit_report.md").read_text()
    html = (tmp_path / "report" / "audit_report.html").read_text()
    assert report.startswith("# Audit of PSEO release 2026Q4-test: PASS")
    for text in (manifest["mlflow_run_id"], uri, str(release.resolve()),
                 f"pseo-das audit {release.resolve()} --tracking-uri {uri}"):
        assert text in report and text in html
    assert report.count("| **passed** |") == 5
    assert markdown_problems(report, html) == []   # renders as written (issue 36, item 4)
    assert SEED_A not in report + html + printed  # the seed stays in the audit store


def test_tampered_public_file_fails_the_outputs_check_naming_the_file(release_copy, capsys):
    pseoe = public_table(release_copy, "pseoe_all.csv")
    lines = gzip.decompress(pseoe.read_bytes()).split(b"\n")
    lines[1] = lines[1][:-1] + (b"5" if lines[1][-1:] != b"5" else b"1")  # one status flag
    pseoe.write_bytes(gzip.compress(b"\n".join(lines), mtime=0))

    code = run_audit(release_copy, "--no-replay", "--report", release_copy.parent / "report")
    printed = capsys.readouterr().out

    assert code == 1, printed
    outputs = check_line(printed, "outputs")
    assert outputs.lstrip().startswith("[FAILED]")
    assert "public/all/pseoe_all.csv.gz" in findings_of(printed, "outputs")
    assert "the file was changed after the release" in findings_of(printed, "outputs")
    assert findings_of(printed, "outputs").count("\n") == 0  # that file and nothing else
    assert check_line(printed, "ledger").lstrip().startswith("[PASSED]")
    assert "FAIL: 1 of 5 checks failed (outputs)." in printed
    report = (release_copy.parent / "report" / "audit_report.md").read_text()
    assert "public/all/pseoe_all.csv.gz" in report and report.startswith("# Audit of PSEO release 2026Q4-test: FAIL")


def test_a_lifetime_budget_file_that_disagrees_with_the_store_fails_the_store_check(
        release_copy, capsys):
    lifetime = release_copy / "internal" / "lifetime_budget.csv"
    lines = lifetime.read_text().splitlines()
    lines[1] = lines[1].rsplit(",", 1)[0] + ",1"      # one population's lifetime epsilon
    lifetime.write_text("\n".join(lines) + "\n")

    code = run_audit(release_copy, "--no-replay")
    printed = capsys.readouterr().out

    assert code == 1, printed
    assert check_line(printed, "privacy store").lstrip().startswith("[FAILED]")
    assert ("internal/lifetime_budget.csv: differs from the lifetime epsilon (and delta) per population "
            "recomputed from the store") in findings_of(printed, "privacy store")
    assert "internal/lifetime_budget.csv" in findings_of(printed, "outputs")


def test_tampered_ledger_fails_the_ledger_check_naming_the_tabulation(release_copy, capsys):
    ledger = release_copy / "internal" / "ledger.csv"
    text = ledger.read_text()
    row = next(line for line in text.splitlines() if line.startswith("earnings.I.cip4.y1,"))
    assert ",two-sided geometric,1,1," in row                      # exact epsilon 1
    ledger.write_text(text.replace(row, row.replace(",two-sided geometric,1,",
                                                    ",two-sided geometric,0.5,", 1)))

    code = run_audit(release_copy, "--no-replay")
    printed = capsys.readouterr().out

    assert code == 1, printed
    assert check_line(printed, "ledger").lstrip().startswith("[FAILED]")
    findings = findings_of(printed, "ledger")
    assert ("tabulation earnings.I.cip4.y1: epsilon is '0.5' in the release's ledger.csv, "
            "'1' in the run's ledger") in findings
    assert ("tabulation earnings.I.cip4.y1 (earnings histograms, measured): epsilon 0.5 in the "
            "ledger, but the logged configuration sets privacy.epsilon_per_tabulation = 1") in findings
    assert "internal/ledger.csv" in findings_of(printed, "outputs")
    assert "FAIL: 2 of 5 checks failed (outputs, ledger)." in printed
    assert list(Path("audit_reports").glob("2026Q4-test-*/audit_report.html"))  # default folder


def test_changed_input_fails_the_inputs_check_naming_the_file(releases, synthetic_dir, tmp_path,
                                                              capsys):
    root, _ = releases
    data = Path(shutil.copytree(synthetic_dir, tmp_path / "data"))
    outcomes = pd.read_parquet(data / "outcomes.parquet")
    row = outcomes["earnings"].first_valid_index()
    outcomes.loc[row, "earnings"] += 1.0  # one graduate's earnings, one dollar more
    outcomes.to_parquet(data / "outcomes.parquet", index=False)

    code = run_audit(root / "a", "--data", data)
    printed = capsys.readouterr().out

    assert code == 1, printed
    inputs = check_line(printed, "inputs")
    assert inputs.lstrip().startswith("[FAILED]") and "47 of 48 input files match" in inputs
    findings = findings_of(printed, "inputs")
    assert f"outcomes.parquet in {data.resolve()}: SHA-256" in findings
    assert "graduates.parquet" not in findings
    assert check_line(printed, "replay").lstrip().startswith("[SKIPPED]")
    assert check_line(printed, "outputs").lstrip().startswith("[PASSED]")
    assert f"--data {data.resolve()}" in printed  # the reproduce command keeps --data


def test_a_run_id_works_as_well_as_a_folder(releases, capsys, monkeypatch):
    root, uri = releases
    run_id = json.loads((root / "b" / "internal" / "manifest.json").read_text())["mlflow_run_id"]

    code = run_audit(run_id, "--tracking-uri", uri, "--no-replay")
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"Audit of release 2026Q4-other: MLflow run {run_id} in {uri}" in printed
    assert f"release folder: {(root / 'b').resolve()}" in printed
    assert check_line(printed, "inputs").lstrip().startswith("[PASSED]")
    assert check_line(printed, "replay").lstrip().startswith("[WAIVED]")
    assert "PASS: 4 of 5 checks passed; replay waived with --no-replay" in printed

    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # the default store, as for `release`
    assert run_audit(run_id, "--no-replay") == 0


def test_an_auditor_without_the_seed_key_gets_every_check_but_the_replay(releases, capsys,
                                                                          monkeypatch):
    monkeypatch.delenv("PSEO_DAS_SEED_KEY")
    root, _ = releases
    assert run_audit(root / "a") == 1
    printed = capsys.readouterr().out
    for name in ("outputs", "ledger", "privacy store", "inputs"):
        assert check_line(printed, name).lstrip().startswith("[PASSED]"), printed
    assert check_line(printed, "replay").lstrip().startswith("[SKIPPED]")
    assert "a replay needs the custodian's seed key" in printed
    assert "INCOMPLETE" in printed and "the custodian's --seed-key for the replay" in printed
    # the verdict says what it rests on: its checks, the demo inputs, the review
    assert "Checks: outputs, ledger, privacy store, inputs, replay." in printed
    assert "Built on the packaged DEMO inputs (" in printed and "not fit for publication" in printed
    assert "Disclosure review: not held for review (published at once)." in printed


def test_inputs_not_available_make_the_audit_incomplete_unless_waived(releases, tmp_path,
                                                                      capsys):
    root, _ = releases
    empty = tmp_path / "no_data"
    empty.mkdir()

    assert run_audit(root / "a", "--data", empty) == 1
    printed = capsys.readouterr().out
    assert check_line(printed, "inputs").lstrip().startswith("[SKIPPED]")
    # the data folder's inputs, and its ipeds/ (pseo-das synth writes it; the release read it)
    inputs = check_line(printed, "inputs")
    assert all(name in inputs for name in ("C2001_A.csv", "graduates.parquet", "outcomes.parquet"))
    assert check_line(printed, "replay").lstrip().startswith("[SKIPPED]")
    assert "INCOMPLETE: no check failed, but 2 of 5 could not run (inputs, replay)" in printed

    assert run_audit(root / "a", "--data", empty, "--no-replay") == 0
    printed = capsys.readouterr().out
    assert check_line(printed, "inputs").lstrip().startswith("[WAIVED]")


def test_unusable_arguments_exit_2_with_a_clear_message(releases, tmp_path, capsys):
    root, uri = releases
    unknown = "0123456789abcdef0123456789abcdef"
    assert run_audit(unknown, "--tracking-uri", uri) == 2
    assert f"MLflow run {unknown} not found in {uri}" in capsys.readouterr().err

    not_a_release = tmp_path / "folder"
    not_a_release.mkdir()
    assert run_audit(not_a_release) == 2
    assert f"{not_a_release} is not a release folder: it has no internal/manifest.json" in \
        capsys.readouterr().err

    assert run_audit("no-such-thing") == 2
    assert "no-such-thing: no such release folder, and not an MLflow run id" in \
        capsys.readouterr().err

    missing_store = tmp_path / "elsewhere" / "mlflow.db"
    assert run_audit(unknown, "--tracking-uri", f"sqlite:///{missing_store}") == 2
    assert f"no MLflow store at {missing_store}" in capsys.readouterr().err
    assert not missing_store.exists()  # the audit does not create a store


def test_logged_configuration_round_trips_through_toml(tmp_path):
    cfg = load_config()
    params = {k: v if isinstance(v, str) else json.dumps(v) for k, v in cfg.flat().items()}
    path = tmp_path / "config.toml"
    path.write_text(configuration_toml(logged_configuration(params | {"release_id": "x"})))
    assert load_config(path) == cfg
