"""The auditors' copy of the verification server's requests: one MLflow run per server
session, one JSON artifact per request (`requests/<n>.json`: analyst, query SHA-256 and
canonical form, outcome, epsilon charged, released count and posterior summary) and the
metric `epsilon.verification_spent` after each. Written by one background thread so that
requests never wait on MLflow; `close` drains the queue before it ends the run, so nothing
logged by a request is lost. Privacy cost: none (it logs released values only; the ledger
in the privacy store is the authority, this is the audit trail beside it).
"""
from __future__ import annotations

import json
import queue
import threading
import time

from mlflow.entities import Metric, Param
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from pseo_das.tasks.audit.mlflow_run import (TrackingStoreError, absolute_tracking_uri,
                                             audit_experiment, initialise_sqlite_store)

EXPERIMENT = "pseo-das verification server"
_STOP = object()


class SessionLog:
    def __init__(self, tracking_uri: str, params: dict[str, str]):
        self.tracking_uri = absolute_tracking_uri(tracking_uri)
        initialise_sqlite_store(self.tracking_uri)
        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        try:
            experiment_id = audit_experiment(self.client, EXPERIMENT)
            run = self.client.create_run(experiment_id, run_name="verification server session",
                                         tags={"kind": "verification server session"})
        except MlflowException as exc:
            raise TrackingStoreError(f"MLflow tracking store {self.tracking_uri} cannot be used: "
                                     f"{str(exc).splitlines()[0]}") from exc
        self.run_id = run.info.run_id
        self.client.log_batch(self.run_id, params=[Param(k, str(v)) for k, v in params.items()])
        self.logged = 0
        self.closed = False
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="verification-mlflow-log",
                                        daemon=True)
        self._thread.start()

    def record(self, event: dict) -> None:
        """Queue one request's record (returns at once)."""
        self._queue.put(dict(event))

    def _work(self) -> None:
        while True:
            event = self._queue.get()
            if event is _STOP:
                return
            request = int(event["request"])
            self.client.log_dict(self.run_id, event, f"requests/{request:07d}.json")
            spent = event.get("global_spent")
            if spent is not None:
                from fractions import Fraction
                self.client.log_batch(self.run_id, metrics=[Metric(
                    "epsilon.verification_spent", float(Fraction(spent)),
                    int(time.time() * 1000), request)])
            self.logged += 1

    def close(self, summary: dict) -> None:
        """Drain the queue, log the session's summary and end the run."""
        if self.closed:
            return
        self.closed = True
        self._queue.put(_STOP)
        self._thread.join()
        self.client.log_text(self.run_id, json.dumps(summary, indent=1), "session_summary.json")
        self.client.set_terminated(self.run_id, "FINISHED")
