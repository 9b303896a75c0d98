"""What an audit looks at: a published release folder and the MLflow run that made it,
found from either one. Privacy cost: none (reads the audit store and the release).

A release folder names its run and tracking store in `internal/manifest.json`; a run
names its release folder in its `published_to` tag (else its `out_dir` parameter).
Anything unusable (no such folder or run, a folder that is not a release, a run that
published nothing) raises `AuditArgumentError`, which the command line turns into exit 2.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from pseo_das.errors import PseoDasError
from pseo_das.tasks.audit.mlflow_run import default_tracking_uri
from pseo_das.tasks.audit.run_fingerprints import (FingerprintsUnreadable, RunFingerprints,
                                                   has_fingerprints, read_fingerprints)
from pseo_das.tasks.publication.release_files import MANIFEST

RUN_ID_PATTERN = re.compile(r"^[0-9a-f]{32}$")


class AuditArgumentError(PseoDasError, ValueError):
    """The audit cannot start: the release folder or run id given is unusable."""

    quotes_records = False


@dataclass(frozen=True)
class AuditedRelease:
    """A release folder and its MLflow run, as logged (params, tags, metrics, fingerprints;
    `fingerprints_problem`: why the run's fingerprints could not be read)."""
    run_id: str
    tracking_uri: str
    release_dir: Path
    release_id: str
    run_status: str
    params: dict[str, str] = field(repr=False)  # holds the release seed: never print it
    tags: dict[str, str]
    metrics: dict[str, float]
    manifest: dict
    given_as: str  # "release folder" or "run id"
    experiment_id: str = ""
    lifecycle_stage: str = "active"   # "deleted": the run was deleted in MLflow
    fingerprints: RunFingerprints = field(default_factory=RunFingerprints, repr=False)
    fingerprints_problem: str | None = None

    def logged_outputs(self) -> dict[str, str]:
        """Relative path -> SHA-256, from the run's fingerprints."""
        return self.fingerprints.outputs

    def logged_inputs(self) -> dict[str, str]:
        """Input file name -> SHA-256, from the run's fingerprints."""
        return self.fingerprints.inputs

    def fetch_artifact(self, artifact_path: str, destination: Path) -> Path | None:
        """Download one artifact of the run into `destination`; None if the run has none."""
        destination.mkdir(parents=True, exist_ok=True)
        try:
            local = MlflowClient(tracking_uri=self.tracking_uri).download_artifacts(
                self.run_id, artifact_path, str(destination))
        except (MlflowException, OSError):
            return None
        path = Path(local)
        return path if path.is_file() else None


def read_manifest(release_dir: Path) -> dict:
    """The release's `internal/manifest.json`; AuditArgumentError if it is not a release."""
    path = release_dir / MANIFEST
    if not path.is_file():
        raise AuditArgumentError(f"{release_dir} is not a release folder: it has no {MANIFEST}")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AuditArgumentError(f"{path}: cannot read the manifest: {exc}") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise AuditArgumentError(f"{path} is not a release manifest (no \"files\" mapping)")
    return manifest


def _sqlite_path(tracking_uri: str) -> Path | None:
    return Path(tracking_uri.removeprefix("sqlite:///")) if tracking_uri.startswith("sqlite:///") \
        else None


def _fetch_run(tracking_uri: str, run_id: str) -> Run:
    store = _sqlite_path(tracking_uri)
    if store is not None and not store.is_file():  # MLflow would create an empty store
        raise AuditArgumentError(f"no MLflow store at {store} (tracking URI {tracking_uri}); "
                                 "give the right one with --tracking-uri")
    try:
        return MlflowClient(tracking_uri=tracking_uri).get_run(run_id)
    except MlflowException as exc:
        raise AuditArgumentError(f"MLflow run {run_id} not found in {tracking_uri} "
                                 f"({exc.message.splitlines()[0] if exc.message else exc})") from exc


def _release_dir_of(run: Run) -> Path:
    tags, params = run.data.tags, run.data.params
    folder = tags.get("published_to") or params.get("out_dir")
    if not has_fingerprints(tags):
        reason = tags.get("failure") or (
            f"it found release {params.get('release_id')} already published in "
            f"{tags['already_published']}; audit the run named in that folder's manifest"
            if "already_published" in tags else "no published_to tag")
        raise AuditArgumentError(f"MLflow run {run.info.run_id} ({run.info.status}) published no "
                                 f"files: {reason}")
    if not folder:
        raise AuditArgumentError(f"MLflow run {run.info.run_id} names no release folder "
                                 "(no published_to tag, no out_dir parameter); give the folder")
    if not Path(folder).is_dir():
        raise AuditArgumentError(f"MLflow run {run.info.run_id} published to {folder}, which does "
                                 "not exist here; give the release folder instead of the run id")
    return Path(folder)


def resolve_audit_target(target: str, tracking_uri: str | None = None) -> AuditedRelease:
    """The release and run to audit, from a release folder or a run id.

    For a folder, the run id and tracking URI come from its manifest (`tracking_uri`
    overrides the latter); for a run id, the tracking URI is `tracking_uri`, else the
    default store (`$MLFLOW_TRACKING_URI` or ./audit/mlflow.db).
    """
    path = Path(target)
    if path.is_dir():
        manifest = read_manifest(path)
        run_id = manifest.get("mlflow_run_id")
        if not run_id:
            raise AuditArgumentError(f"{path / MANIFEST} names no MLflow run (a release made "
                                     "before manifests did); give the run id and --tracking-uri")
        uri = tracking_uri or manifest.get("tracking_uri") or default_tracking_uri()
        run = _fetch_run(uri, run_id)
        release_dir, given_as = path, "release folder"
    elif path.exists():
        raise AuditArgumentError(f"{target} is a file, not a release folder")
    elif RUN_ID_PATTERN.match(target.strip().lower()):
        uri = tracking_uri or default_tracking_uri()
        run = _fetch_run(uri, target.strip().lower())
        release_dir, given_as = _release_dir_of(run), "run id"
        manifest = read_manifest(release_dir)
    else:
        raise AuditArgumentError(f"{target}: no such release folder, and not an MLflow run id "
                                 "(32 hexadecimal digits)")
    data = run.data
    try:
        logged, problem = read_fingerprints(uri, run), None
    except FingerprintsUnreadable as exc:
        logged, problem = RunFingerprints(), str(exc)
    return AuditedRelease(
        run_id=run.info.run_id, tracking_uri=uri, release_dir=release_dir.resolve(),
        release_id=data.params.get("release_id") or data.tags.get("release_id", ""),
        run_status=run.info.status, params=dict(data.params), tags=dict(data.tags),
        metrics=dict(data.metrics), manifest=manifest, given_as=given_as,
        experiment_id=run.info.experiment_id, lifecycle_stage=run.info.lifecycle_stage,
        fingerprints=logged, fingerprints_problem=problem)
