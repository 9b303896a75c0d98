"""The audit experiments open in MLflow's UI as runs (the classic layout), not as a GenAI
overview: tagged when created, and when an experiment of an earlier version is used."""
from __future__ import annotations

from mlflow.tracking import MlflowClient

from pseo_das.tasks.audit.mlflow_run import EXPERIMENT, EXPERIMENT_KIND, AuditRun


def test_the_release_experiment_is_a_classic_one(tmp_path):
    uri = f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}"
    run = AuditRun(uri, "r1")
    tags = MlflowClient(uri).get_experiment(run.experiment_id).tags
    assert tags["mlflow.experimentKind"] == EXPERIMENT_KIND["mlflow.experimentKind"]


def test_an_experiment_of_an_earlier_version_is_tagged_when_used(tmp_path):
    uri = f"sqlite:///{tmp_path / 'old' / 'mlflow.db'}"
    AuditRun(uri, "r0")
    client = MlflowClient(uri)
    old = client.get_experiment_by_name(EXPERIMENT)
    client.delete_experiment_tag(old.experiment_id, "mlflow.experimentKind")
    assert "mlflow.experimentKind" not in client.get_experiment(old.experiment_id).tags
    AuditRun(uri, "r1")
    assert client.get_experiment(old.experiment_id).tags["mlflow.experimentKind"] == \
        "custom_model_development"
