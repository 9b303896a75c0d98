"""The privacy ledger in a release's MLflow run, where a reviewer finds it: an MLflow table
(the artifact `audit/ledger_table.json`, shown as a table in the artifact viewer) and a
dataset input named `privacy-ledger`, context `release`, which the MLflow UI lists in the
run's Datasets column (name, digest of its rows, schema, row count). Privacy cost: none
(the ledger is published with the release)."""
from __future__ import annotations

import pandas as pd
from mlflow.data.code_dataset_source import CodeDatasetSource
from mlflow.data.pandas_dataset import from_pandas
from mlflow.entities import DatasetInput, InputTag
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

LEDGER_TABLE = "audit/ledger_table.json"
DATASET = "privacy-ledger"
CONTEXT = "release"
# Where the dataset comes from: the release's own ledger, also an artifact of the run.
SOURCE = {"mlflow.source.name": "pseo-das release", "artifact": "internal/ledger.csv"}


def log_ledger(client: MlflowClient, run_id: str, ledger: pd.DataFrame) -> None:
    """Log `ledger` (as ledger.csv has it) as the run's table and dataset input."""
    rows = ledger.astype(str).astype(object)
    client.log_table(run_id, rows, LEDGER_TABLE)
    dataset = from_pandas(rows, name=DATASET, source=CodeDatasetSource(SOURCE))
    client.log_inputs(run_id, datasets=[DatasetInput(
        dataset._to_mlflow_entity(), tags=[InputTag(MLFLOW_DATASET_CONTEXT, CONTEXT)])])
