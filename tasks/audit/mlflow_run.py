"""The audit trail in MLflow: one run per release with every parameter, the seed, every
epsilon spend, counts, fingerprints and the release documents. Privacy cost: none.

The seed is logged here and only here: whoever can read this store can regenerate the
noise, so the store must be protected like the confidential data.
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from contextlib import closing
from fractions import Fraction
from pathlib import Path

import pandas as pd
from mlflow.entities import Metric, Param, RunTag, ViewType
from mlflow.exceptions import MlflowException
from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
from mlflow.tracking.default_experiment import DEFAULT_EXPERIMENT_ID
from mlflow.tracking import MlflowClient
from mlflow.utils.uri import append_to_uri_path, resolve_uri_if_local
from mlflow.version import VERSION as MLFLOW_VERSION

from pseo_das.errors import PseoDasError, withhold
from pseo_das.config import ReleaseConfig
from pseo_das.epsilon import epsilon_text
from pseo_das.version import package_versions
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.employment_flows.division_flows import FlowsRelease
from pseo_das.tasks.privacy.file_modes import private_folder, write_private
from pseo_das.tasks.privacy.ledger import PrivacyLedger
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.measurements.release_plan import ReleasePlan
from pseo_das.tasks.audit.ledger_dataset import log_ledger
from pseo_das.tasks.inputs.reference_cache import cache_root
from pseo_das.tasks.audit.run_fingerprints import RunFingerprints, log_fingerprints
from pseo_das.tasks.publication.explorer import EXPLORER
from pseo_das.tasks.publication.release_files import MANIFEST

EXPERIMENT = "pseo-das quarterly release"
DEFAULT_AUDIT_DIR = Path("audit")
# Large tables (the state flows, the flows files, the histograms) stay with the release;
# the run carries their SHA-256 (run_fingerprints.ARTIFACT).
NOT_COPIED_TO_MLFLOW = re.compile(
    r"flows_state\.(csv|parquet)|(pseof|pseoh)_\w+\.(csv|csv\.gz|xlsx|parquet)")


def default_tracking_uri() -> str:
    """MLFLOW_TRACKING_URI if set, else a SQLite store at ./audit/mlflow.db."""
    return os.environ.get("MLFLOW_TRACKING_URI") or \
        f"sqlite:///{(DEFAULT_AUDIT_DIR / 'mlflow.db').resolve()}"


class TrackingStoreError(PseoDasError, RuntimeError):
    """The MLflow tracking store cannot be used."""

    quotes_records = False


def absolute_tracking_uri(tracking_uri: str) -> str:
    """A SQLite or file tracking URI with an absolute path (as every record names it).
    MLflow 3 refuses its file store (a folder) unless MLFLOW_ALLOW_FILE_STORE=true:
    TrackingStoreError then, saying what to use instead, before anything is written."""
    for scheme in ("sqlite:///", "file://"):
        if tracking_uri.startswith(scheme):
            path = Path(tracking_uri.removeprefix(scheme)).expanduser()
            uri = scheme + str(path.resolve())
            break
    else:
        if "://" in tracking_uri:
            return tracking_uri
        uri = "file://" + str(Path(tracking_uri).expanduser().resolve())  # a plain folder
    if uri.startswith("file://") and \
            os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("true", "1"):
        folder = uri.removeprefix("file://")
        raise TrackingStoreError(
            f"MLflow tracking store {tracking_uri}: a folder (MLflow's file store), which "
            f"MLflow {MLFLOW_VERSION} no longer writes to. Use a SQLite store, e.g. "
            f"--tracking-uri sqlite:///{folder}/mlflow.db, or a tracking server's http(s) "
            "address (or set MLFLOW_ALLOW_FILE_STORE=true, MLflow's own opt-out)")
    return uri


def initialise_sqlite_store(tracking_uri: str) -> None:
    """Create a new SQLite tracking store in a temporary file and link it into place: a
    kill leaves either no store or a complete one, never a half-created schema. The new
    store is a copy of this MLflow version's empty store (`empty_store`)."""
    if not tracking_uri.startswith("sqlite:///"):
        return
    path = Path(tracking_uri.removeprefix("sqlite:///"))
    try:
        if not path.parent.exists():
            private_folder(path.parent)
        if path.exists():
            return
        temporary = path.with_name(f".{path.name}.{os.getpid()}.init")
        temporary.unlink(missing_ok=True)
        empty = empty_store()
        write_private(temporary, empty or b"")   # run logs hold seeds and parameters: owner only
        if empty is None:
            build_empty_store(temporary)
        else:
            own_default_experiment(temporary)
        try:
            os.link(temporary, path)          # never replaces a store created meanwhile
        except FileExistsError:
            pass
        temporary.unlink(missing_ok=True)
    except OSError as exc:
        raise TrackingStoreError(f"MLflow tracking store {tracking_uri}: cannot create it "
                                 f"({exc.strerror or exc})") from exc


def runs_of_store(client: MlflowClient, experiment_id: str, store_path: Path, store_id: str,
                  exclude_run: str | None = None) -> list:
    """Every run of the experiment (any status, deleted included) that used the privacy
    store: a store at `store_path` (whatever its id: a store deleted and created again there
    has another), or a store with the id `store_id` (wherever it was: a copy, or the store
    before it was moved)."""
    runs, token = [], None
    while True:
        page = client.search_runs([experiment_id], run_view_type=ViewType.ALL,
                                  max_results=1000, page_token=token)
        runs += [r for r in page if (r.data.params.get("store") == str(store_path)
                                     or r.data.params.get("store_id") == store_id)
                 and r.info.run_id != exclude_run]
        token = page.token
        if not token:
            return runs


def existing_runs_of_store(tracking_uri: str, store_path: Path, store_id: str) -> list | None:
    """The runs of an existing tracking store that used the store (None if there is no
    tracking store or no pseo-das experiment there: nothing to compare with)."""
    tracking_uri = absolute_tracking_uri(tracking_uri)
    if tracking_uri.startswith("sqlite:///") and \
            not Path(tracking_uri.removeprefix("sqlite:///")).is_file():
        return None
    client = MlflowClient(tracking_uri=tracking_uri)
    try:
        experiment = client.get_experiment_by_name(EXPERIMENT)
    except MlflowException as exc:
        raise TrackingStoreError(f"MLflow tracking store {tracking_uri} cannot be read: "
                                 f"{str(exc).splitlines()[0]}") from exc
    return None if experiment is None else runs_of_store(client, experiment.experiment_id,
                                                         store_path, store_id)


SQLITE_HEADER = b"SQLite format 3\x00"


def empty_store() -> bytes | None:
    """The bytes of a new SQLite tracking store of this MLflow version, as MLflow creates it
    (its schema and the Default experiment). MLflow builds a new store by running every
    migration of its schema, seconds; it is done once per MLflow version and kept in
    the cache folder (reference_cache.cache_root() / "mlflow"), and every new store is a
    copy. Made again when the kept one is missing or not a SQLite file; None when the cache
    folder cannot be written (the store is then built in place)."""
    kept = cache_root() / "mlflow" / f"empty-store-{MLFLOW_VERSION}.db"
    try:
        empty = kept.read_bytes()
        if empty.startswith(SQLITE_HEADER):
            return empty
    except OSError:
        pass
    try:
        private_folder(kept.parent)
        temporary = kept.with_name(f".{kept.name}.{os.getpid()}.init")
        temporary.unlink(missing_ok=True)
        write_private(temporary, b"")
        build_empty_store(temporary)
        os.replace(temporary, kept)       # whole or not at all, whoever finishes first
        return kept.read_bytes()
    except OSError:
        return None


def own_default_experiment(path: Path) -> None:
    """The Default experiment of a copied store as MLflow would have created it here and
    now: its artifact folder under this process's ./mlruns (not under the folder of the
    process that made the empty store) and its creation time."""
    location = append_to_uri_path(resolve_uri_if_local(DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH),
                                  DEFAULT_EXPERIMENT_ID)
    now = int(time.time() * 1000)
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE experiments SET artifact_location = ?, creation_time = ?, "
                   "last_update_time = ? WHERE experiment_id = ?",
                   (str(location), now, now, int(DEFAULT_EXPERIMENT_ID)))


def build_empty_store(path: Path) -> None:
    """MLflow's own creation of a SQLite tracking store in the (empty) file `path`."""
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()


# MLflow 3's UI shows an experiment tagged this way as runs with their parameters, metrics
# and artifacts (the classic layout), not as a GenAI overview of traces.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


def audit_experiment(client: MlflowClient, name: str) -> str:
    """The id of the experiment `name`, created (with its artifacts beside a SQLite store)
    if missing, and tagged as a classic experiment (EXPERIMENT_KIND)."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        artifacts = None
        uri = client.tracking_uri
        if uri.startswith("sqlite:///"):
            artifacts = (Path(uri.removeprefix("sqlite:///")).parent / "artifacts").resolve().as_uri()
        return client.create_experiment(name, artifact_location=artifacts, tags=EXPERIMENT_KIND)
    for key, value in EXPERIMENT_KIND.items():
        if experiment.tags.get(key) != value:      # an experiment of an earlier version
            client.set_experiment_tag(experiment.experiment_id, key, value)
    return experiment.experiment_id


class AuditRun:
    """One MLflow run; ended FINISHED by `finish`, FAILED by `fail`."""

    def __init__(self, tracking_uri: str, release_id: str):
        self.tracking_uri = absolute_tracking_uri(tracking_uri)
        initialise_sqlite_store(self.tracking_uri)
        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        try:
            self.experiment_id = audit_experiment(self.client, EXPERIMENT)
            run = self.client.create_run(self.experiment_id, run_name=release_id,
                                         tags={"release_id": release_id})
        except MlflowException as exc:
            raise TrackingStoreError(f"MLflow tracking store {self.tracking_uri} cannot be used: "
                                     f"{str(exc).splitlines()[0]}") from exc
        self.run_id = run.info.run_id

    def runs_of_store(self, store_path: Path, store_id: str) -> list:
        """Every other run of the experiment that used the privacy store (at `store_path`,
        or with the id `store_id`)."""
        return runs_of_store(self.client, self.experiment_id, store_path, store_id, self.run_id)

    def log_params(self, params: dict[str, object]) -> None:
        items = [Param(k, v if isinstance(v, str) else json.dumps(v)) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[start:start + 100])

    def log_metrics(self, metrics: dict[str, float]) -> None:
        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
        for start in range(0, len(items), 500):
            self.client.log_batch(self.run_id, metrics=items[start:start + 500])

    def set_tags(self, tags: dict[str, str]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_file(self, path: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_text(self, text: str, artifact_file: str) -> None:
        self.client.log_text(self.run_id, text, artifact_file)

    def finish(self) -> None:
        self.client.set_terminated(self.run_id, "FINISHED")

    def fail(self, exc: BaseException) -> None:
        """The run FAILED, tagged with the exception as Prefect sees it (`withhold`)."""
        shown = withhold(exc)
        self.set_tags({"failure": f"{type(shown).__name__}: {shown}"[:5000]})
        self.client.set_terminated(self.run_id, "FAILED")


def release_parameters(cfg: ReleaseConfig, release_id: str, data_dir: Path,
                       reference_dir: Path, out_dir: Path, store: Path, store_id: str,
                       code_version: str, supersede: bool, remeasure: str | None
                       ) -> dict[str, object]:
    return {**cfg.flat(), "release_id": release_id,
            "data_dir": str(Path(data_dir).resolve()),
            "reference_dir": str(Path(reference_dir).resolve()),
            "out_dir": str(Path(out_dir).resolve()),
            "store": str(Path(store).resolve()), "store_id": store_id,
            "code_version": code_version,
            "supersede": str(supersede).lower(), "remeasure": remeasure or ""}


def rerun_tags(release_id: str, out_dir: Path, release_run_id: str) -> dict[str, str]:
    """The tags of a rerun that found its release already published: a child of the run
    that published it (MLflow's parent link), with a note; its seed stays on that run."""
    return {"already_published": str(out_dir), "rerun_of_run": release_run_id,
            "mlflow.parentRunId": release_run_id,
            "mlflow.note.content": f"Rerun of release {release_id}: it was already published in "
                                   f"{out_dir} by run {release_run_id}. Nothing was measured, "
                                   "spent or written; the seed and the record are on that run."}


def seed_parameters(release_seed: ReleaseSeed, plan: ReleasePlan) -> dict[str, object]:
    """The seed's commitment (its SHA-256; known once the privacy store has recorded the
    plan) and that plan. Never the seed: the run log is handed to auditors, and whoever holds
    the seed regenerates every draw; the replay reads it from the privacy store."""
    return {"release_seed_sha256": release_seed.sha256,
            "store_attempt": str(plan.attempt.attempt),
            "store_new_spending": str(plan.new_spending).lower(),
            "store_supersedes": str(plan.superseded) if plan.superseded else "none"}


@release_task("record audit run")
def record_release(audit: AuditRun, ledger: PrivacyLedger, cells: pd.DataFrame,
                   flows: FlowsRelease, staging: Path, input_fingerprints: dict[str, str],
                   manifest: dict[str, str], plan_summary: dict) -> None:
    """Spends (new and reused), counts, fingerprints (one artifact, `run_fingerprints`), the
    ledger as an MLflow table (the run's Artifacts, and the experiment's Evaluation view)
    and the release documents to the MLflow run."""
    metrics = {f"epsilon.{e.tabulation_id}": e.epsilon for e in ledger.entries}
    metrics.update({
        "new_epsilon": float(Fraction(plan_summary["new_epsilon"])),
        "measurements.new": plan_summary["new_measurements"],
        "measurements.reused": plan_summary["reused_measurements"],
        "epsilon.total": ledger.total_epsilon,
        "release_delta": ledger.guarantee().delta,
        "cells.total": len(cells),
        "cells.suppressed": int((~cells["published"]).sum()),
        "cells.published": int(cells["published"].sum()),
    })
    for (level, years), group in cells.groupby(["agg_level_pseo", "years_after"]):
        metrics[f"cells.agg_level_{level}.y{years}"] = len(group)
        metrics[f"cells_suppressed.agg_level_{level}.y{years}"] = int((~group["published"]).sum())
    for c in flows.correction:
        for key in ("origin_cells", "negative_flows_set_to_zero", "cells_with_negative_total",
                    "units_removed"):
            metrics[f"flows.{key}.{c['tabulation_id']}"] = c[key]
    metrics["flows.division_flows_at_risk"] = flows.suppression["division_flows_at_risk"]
    metrics["flows.division_flows_suppressed"] = flows.suppression["division_flows_suppressed"]
    audit.log_metrics(metrics)   # floats, for display; the exact values are params:
    guarantee = ledger.guarantee()
    audit.log_params({f"ledger_epsilon.{e.tabulation_id}": epsilon_text(e.epsilon)
                      for e in ledger.entries}
                     | {"ledger_epsilon.total": epsilon_text(ledger.total_epsilon),
                        "ledger_epsilon.formal": epsilon_text(guarantee.formal_epsilon),
                        "ledger_epsilon.non_formal": epsilon_text(guarantee.non_formal_epsilon),
                        "ledger_delta.total": epsilon_text(guarantee.delta),
                        "guarantee.pure_epsilon_dp": str(guarantee.pure).lower(),
                        "guarantee.sampled_exactly": str(guarantee.all_exact).lower()})
    log_fingerprints(audit.client, audit.run_id,
                     RunFingerprints(input_fingerprints, manifest, package_versions()),
                     staging / MANIFEST)
    log_ledger(audit.client, audit.run_id, ledger.to_frame())
    for path in sorted(staging.rglob("*")):
        if path.is_file() and not NOT_COPIED_TO_MLFLOW.fullmatch(path.name) \
                and EXPLORER not in path.relative_to(staging).parts:   # fingerprinted only
            audit.log_file(path, str(path.parent.relative_to(staging)))
    progress(f"audit run {audit.run_id}: {len(metrics)} metrics and the release documents logged")


def cell_statistics_parameters(kept: dict) -> dict[str, object]:
    """What the MLflow run says about the cell statistics (pseom_all.csv): the variant,
    whether it is a formal guarantee, chi per statistic and scope group (published by MOS
    without noise, in the bins' constant dollars) and the epsilon this release newly spent
    on them (0 when every population reuses its stored measurement); the release's epsilon
    split into formal and non-formal spending is logged with the ledger. Privacy cost: none
    (chi is published anyway)."""
    formal = kept["variant"] == "mos-dp"
    return ({"cell_statistics.variant": kept["variant"],
             "cell_statistics.formal_guarantee": "yes" if formal else
             "NO: maximum observed sensitivity; chi is computed from the data and published "
             "without noise",
             "cell_statistics.epsilon": kept["epsilon"],
             "cell_statistics.new_epsilon": kept["new_epsilon"]}
            | {f"cell_statistics.chi.{statistic}.{group}": repr(value)
               for statistic, groups in kept["chi"].items() for group, value in groups.items()})
