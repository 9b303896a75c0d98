"""The scheduled quarterly release: its deployment, and a rerun of a scheduled run."""
from __future__ import annotations

from conftest import public_table

from datetime import datetime

import pytest

from pseo_das.flows.scheduled_release import (QUARTERLY_CRON, RETRIES, quarter_release_id,
                                     quarterly_deployment, scheduled_quarterly_release)
from pseo_das.tasks.privacy.store import PrivacyStore, init_store


@pytest.mark.parametrize("month, quarter", [(1, "Q1"), (3, "Q1"), (4, "Q2"), (9, "Q3"), (12, "Q4")])
def test_release_id_is_the_scheduled_quarter(month, quarter):
    assert quarter_release_id(datetime(2027, month, 15, 6)) == "2027" + quarter


def test_deployment_is_quarterly_parameterised_and_retried(tmp_path):
    deployment = quarterly_deployment(tmp_path / "data", tmp_path / "releases",
                                      tracking_uri="sqlite:///x.db")
    (schedule,) = deployment.schedules
    assert schedule.schedule.cron == QUARTERLY_CRON == "0 6 15 1,4,7,10 *"
    assert schedule.schedule.timezone == "America/New_York"
    assert deployment.parameters == {"data_dir": str((tmp_path / "data").resolve()),
                                     "releases_dir": str((tmp_path / "releases").resolve()),
                                     "tracking_uri": "sqlite:///x.db"}
    assert scheduled_quarterly_release.retries == RETRIES == 2


@pytest.mark.slow
def test_a_rerun_of_a_scheduled_release_spends_nothing(tmp_path):
    from test_ingest import write_releasable
    uri = f"sqlite:///{tmp_path / 'audit' / 'mlflow.db'}"
    data = write_releasable(tmp_path / "data")    # the claim does not depend on the size
    kwargs = dict(data_dir=str(data), releases_dir=str(tmp_path / "releases"),
                  tracking_uri=uri, release_id="2027Q1", store=str(init_store(tmp_path / "store")))
    first = scheduled_quarterly_release(**kwargs)
    assert first["new_epsilon"] == "7.5" and not first["already_published"]
    store = PrivacyStore.open(tmp_path / "store")
    spent = store.spends()
    again = scheduled_quarterly_release(**kwargs)  # what a retry after publication does
    assert again["already_published"]
    assert store.spends().equals(spent) and len(store.attempts("2027Q1")) == 1
    store.close()
    assert public_table(tmp_path / "releases" / "2027Q1", "pseof_all.csv").exists()
    # The rerun is recorded as a child of the run that published, without the seed again.
    from mlflow.tracking import MlflowClient
    rerun = MlflowClient(tracking_uri=uri).get_run(again["mlflow_run_id"]).data
    assert rerun.tags["mlflow.parentRunId"] == rerun.tags["rerun_of_run"] == first["mlflow_run_id"]
    assert "release_seed" not in rerun.params and "release_seed_sha256" not in rerun.params
