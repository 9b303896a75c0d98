"""The privacy ledger as the release run's MLflow dataset input (issue 36 item 5): logged in
a real MLflow store and read back, as the UI's Datasets column lists it."""
from __future__ import annotations

import json

from mlflow.tracking import MlflowClient

from pseo_das.tasks.audit.ledger_dataset import CONTEXT, DATASET, LEDGER_TABLE, log_ledger
from pseo_das.tasks.privacy.ledger import PrivacyLedger, derived_entry


def ledger_frame(n_cells: int):
    return PrivacyLedger.of("10", [
        derived_entry("earnings.I.cip2.y1", "earnings", n_cells, 14, "earnings.I.cip4.y1"),
        derived_entry("earnings.A.cipA.y1", "earnings", 3, 14, "earnings.I.cip4.y1")]).to_frame()


def test_the_ledger_is_a_dataset_input_of_the_run(tracking_uri, tmp_path):
    client = MlflowClient(tracking_uri)
    # artifacts in tmp_path too (MLflow's default is ./mlruns, in the checkout)
    experiment = client.create_experiment("ledger dataset",
                                          artifact_location=(tmp_path / "artifacts").as_uri())
    logged, bare = (client.create_run(experiment).info.run_id for _ in range(2))
    ledger = ledger_frame(120)
    log_ledger(client, logged, ledger)

    inputs = client.get_run(logged).inputs.dataset_inputs
    assert len(inputs) == 1
    dataset = inputs[0].dataset
    assert dataset.name == DATASET == "privacy-ledger"
    assert {(t.key, t.value) for t in inputs[0].tags} == {("mlflow.data.context", CONTEXT)}
    assert json.loads(dataset.profile)["num_rows"] == 2
    assert [c["name"] for c in json.loads(dataset.schema)["mlflow_colspec"]] == list(ledger.columns)
    assert json.loads(dataset.source)["tags"]["artifact"] == "internal/ledger.csv"
    table = json.loads(open(client.download_artifacts(logged, LEDGER_TABLE)).read())
    assert table["columns"] == list(ledger.columns) and len(table["data"]) == 2
    # negative controls: a run without it has no dataset; another ledger, another digest
    assert client.get_run(bare).inputs.dataset_inputs == []
    log_ledger(client, bare, ledger_frame(121))
    assert client.get_run(bare).inputs.dataset_inputs[0].dataset.digest != dataset.digest
