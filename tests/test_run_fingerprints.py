"""The fingerprints of a release run (issue 36, item 5): one JSON artifact with its SHA-256
as a tag, read back as logged; a changed artifact refused; a run of an earlier version
(a tag per file) still read. A real MLflow store (SQLite, local artifacts)."""
from __future__ import annotations

import hashlib

import pytest
from mlflow.tracking import MlflowClient

from pseo_das.tasks.audit.mlflow_run import audit_experiment
from pseo_das.tasks.audit.run_fingerprints import (ARTIFACT, FingerprintsUnreadable,
                                                   RunFingerprints, has_fingerprints,
                                                   log_fingerprints, read_fingerprints)

LOGGED = RunFingerprints({"graduates.parquet": "a" * 64}, {"public/all/pseoe_all.csv": "b" * 64},
                         {"mlflow": "3.17.2"})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One MLflow store for the module (a new SQLite store takes seconds to set up)."""
    tmp_path = tmp_path_factory.mktemp("fingerprints")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = audit_experiment(client, "fingerprints test")
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"files": {}}\n')
    return uri, client, experiment, manifest


def test_the_fingerprints_are_one_artifact_read_back_as_logged(store):
    uri, client, experiment, manifest = store
    run_id = client.create_run(experiment).info.run_id
    log_fingerprints(client, run_id, LOGGED, manifest)
    run = client.get_run(run_id)
    assert read_fingerprints(uri, run) == LOGGED and has_fingerprints(run.data.tags)
    assert {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")} == {
        "fingerprints": hashlib.sha256(LOGGED.text().encode()).hexdigest(),
        "manifest_sha256": hashlib.sha256(manifest.read_bytes()).hexdigest(),
        "files.inputs": "1", "files.outputs": "1"}
    # an approval's changed files: the artifact and its tags replaced
    stamped = LOGGED.with_outputs({"public/release_notes.md": "c" * 64})
    log_fingerprints(client, run_id, stamped, manifest)
    assert read_fingerprints(uri, client.get_run(run_id)) == stamped


def test_a_changed_artifact_is_refused(store):
    uri, client, experiment, manifest = store
    run_id = client.create_run(experiment).info.run_id
    log_fingerprints(client, run_id, LOGGED, manifest)
    client.log_text(run_id, LOGGED.with_outputs({"public/x.csv": "d" * 64}).text(), ARTIFACT)
    with pytest.raises(FingerprintsUnreadable, match="differs from the fingerprints tag"):
        read_fingerprints(uri, client.get_run(run_id))


def test_a_run_of_an_earlier_version_is_read_from_its_tags(store):
    uri, client, experiment, _ = store
    run_id = client.create_run(experiment, tags={
        "input_sha256.graduates.parquet": "a" * 64,
        "output_sha256.public/all/pseoe_all.csv": "b" * 64, "version.mlflow": "3.17.2"}).info.run_id
    run = client.get_run(run_id)
    assert read_fingerprints(uri, run) == LOGGED and has_fingerprints(run.data.tags)
    nothing = client.get_run(client.create_run(experiment).info.run_id)
    assert read_fingerprints(uri, nothing) == RunFingerprints()
    assert not has_fingerprints(nothing.data.tags)
