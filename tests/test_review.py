"""Review before publication: a release held for review is staged in the privacy store's
review folder, cleared (or not) by a decision recorded in the store's hash chain and the
MLflow run, and published by `pseo-das publish` exactly as staged, only once approved."""
from __future__ import annotations

import filecmp
import json
import sqlite3
from pathlib import Path

import mlflow
import pytest

from conftest import run_release, store_beside, public_table
from pseo_das.cli import main
from pseo_das.schemas.written_hashes import read_sha256
from pseo_das.tasks.publication.release_files import fingerprints
from test_ingest import write_releasable

SEED = "7c" * 32


def cli(*args: object) -> int:
    with pytest.raises(SystemExit) as stop:
        main([str(a) for a in args])
    return stop.value.code


def tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` (the manifest too) by relative path -> SHA-256."""
    return {str(p.relative_to(folder)): read_sha256(p)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny confidential data set, an MLflow store and a privacy store beside it."""
    root = tmp_path_factory.mktemp("review")
    data = write_releasable(root / "data")
    uri = f"sqlite:///{root / 'audit' / 'mlflow.db'}"
    return root, data, uri, store_beside(uri)


def hold(tiny, release_id: str, *extra: str) -> int:
    root, data, uri, store = tiny
    return run_release(data, root / release_id, SEED if release_id == "R1" else None, uri,
                       release_id, ("--hold-for-review", *extra),
                       store=store if store.exists() else None)


@pytest.mark.slow
def test_hold_approve_publish_publishes_exactly_the_staged_bytes(tiny, capsys):
    root, _, uri, store = tiny
    assert hold(tiny, "R1") == 0
    staged = store / "review" / "R1-1"
    assert not (root / "R1").exists()                       # nothing public
    assert public_table(staged, "pseoe_all.csv").is_file()
    drb = (staged / "internal" / "drb_report.md").read_text()
    assert "## Decision requested" in drb and "public/all/pseoe_all.csv.gz" in drb
    held = tree(staged)

    capsys.readouterr()
    assert cli("publish", "R1", "--out", root / "R1", "--store", store) == 2
    err = capsys.readouterr().err
    assert "pseo-das publish: FAILED, nothing was published." in err
    assert "held for review and not approved" in err
    assert not (root / "R1").exists()

    assert cli("review", "approve", "R1", "--by", "DRB chair", "--clearance", "CBDRB-27-042",
               "--store", store) == 0
    approved = tree(staged)
    assert {n for n in held if held[n] != approved[n]} == {
        "public/release_notes.md", "public/release_notes.html", "internal/manifest.json"}
    assert cli("review", "reject", "R1", "--by", "someone", "--reason", "late", "--store",
               store) == 2                                  # decided once
    assert "already approved" in capsys.readouterr().err

    table = public_table(staged, "pseoe_all.csv")
    cleared = table.read_bytes()
    table.write_bytes(cleared + b"\n")                      # changed after the approval
    assert cli("publish", "R1", "--out", root / "R1", "--store", store) == 2
    assert "files changed since the release was staged (public/all/pseoe_all.csv.gz)" in \
        capsys.readouterr().err
    table.write_bytes(cleared)
    assert cli("publish", "R1", "--out", root / "R1", "--store", store) == 0
    assert tree(root / "R1") == approved                    # byte for byte what was staged
    assert not staged.exists()
    notes = (root / "R1" / "public" / "release_notes.md").read_text()
    assert "clearance **CBDRB-27-042**, approved by DRB chair" in notes
    manifest = json.loads((root / "R1" / "internal" / "manifest.json").read_text())
    assert manifest["review"]["clearance"] == "CBDRB-27-042"
    assert manifest["files"] == fingerprints(root / "R1")

    run = mlflow.MlflowClient(tracking_uri=uri).get_run(manifest["mlflow_run_id"])
    assert run.data.tags["review.clearance"] == "CBDRB-27-042"
    assert run.data.tags["review.status"] == "published"
    assert cli("store", "verify", store, "--tracking-uri", uri) == 0
    capsys.readouterr()
    assert cli("audit", root / "R1", "--no-replay", "--report", root / "audit-R1") == 0
    assert "Disclosure review: cleared by DRB chair on " in capsys.readouterr().out
    assert ", clearance CBDRB-27-042." in (root / "audit-R1" / "audit_report.md").read_text()
    assert cli("publish", "R1", "--out", root / "R1-twice", "--store", store) == 2
    assert "already published" in capsys.readouterr().err

    # republish re-derives the reviewed release, clearance included, byte for byte
    assert cli("republish", "--store", store, "--release", "R1", "--out", root / "R1-again") == 0
    assert not filecmp.dircmp(root / "R1", root / "R1-again").diff_files
    assert tree(root / "R1-again") == tree(root / "R1")


@pytest.mark.slow
def test_a_rejected_release_is_never_published_and_its_decision_cannot_be_forged(tiny,
                                                                                  capsys):
    root, _, uri, store = tiny
    if not store.exists():
        assert hold(tiny, "R1") == 0
    assert hold(tiny, "R2") == 0
    drb = (store / "review" / "R2-2" / "internal" / "drb_report.md").read_text()
    cleared = (root / "R1" / "internal" / "manifest.json").exists()   # the test above ran
    assert ("Changes since the last cleared release, R1 (clearance\nCBDRB-27-042)" if cleared
            else "Changes since the last cleared release: not computed") in drb
    assert cli("review", "reject", "R2", "--by", "DRB chair", "--reason",
               "cells too small in state 08", "--store", store) == 0
    capsys.readouterr()
    assert cli("publish", "R2", "--out", root / "R2", "--store", store) == 2
    assert "was rejected by DRB chair" in capsys.readouterr().err
    assert hold(tiny, "R2") == 2                            # same plan again: refused
    assert "--supersede" in capsys.readouterr().err
    assert hold(tiny, "R2", "--supersede") == 0             # the corrected release
    summary = json.loads((store / "review" / "R2-3" / "internal" / "release_summary.json")
                         .read_text())
    assert summary["new_epsilon"] == "0"                    # the rejected draws are reused

    # the rejection turned into an approval by rewriting its store row: caught by the chain
    db = sqlite3.connect(store / "store.sqlite", isolation_level=None)
    trigger, = db.execute("SELECT sql FROM sqlite_master WHERE name = "
                          "'store_info_no_update'").fetchone()
    db.execute("DROP TRIGGER store_info_no_update")
    (key, value), = db.execute("SELECT key, value FROM store_info WHERE key = 'review.R2.2'")
    forged = {**json.loads(value), "decision": "approved", "clearance": "FORGED-1"}
    db.execute("UPDATE store_info SET value = ? WHERE key = ?", (json.dumps(forged), key))
    db.execute(trigger)
    db.close()
    assert cli("store", "verify", store, "--tracking-uri", uri) == 1
    assert "store_info" in capsys.readouterr().err
    assert cli("publish", "R2", "--out", root / "R2", "--store", store) == 2
    assert not (root / "R2").exists()


def test_require_review_refuses_a_release_without_hold_before_anything_is_spent(tmp_path,
                                                                                 capsys):
    config = tmp_path / "review.toml"
    config.write_text("[release]\nrequire_review = true\n")
    uri = f"sqlite:///{tmp_path / 'audit' / 'mlflow.db'}"
    assert run_release(tmp_path / "no-data", tmp_path / "R", None, uri, "R",
                       ("--config", str(config))) == 2
    err = capsys.readouterr().err
    assert "release.require_review = true" in err and "--hold-for-review" in err
    assert not (tmp_path / "R").exists()
    assert not (tmp_path / "audit").exists()            # no MLflow store, no privacy store
