"""The disclosure review board's steps on a release held for review (`release
--hold-for-review`): approve or reject it, then publish an approved one. Wiring only: the
records and files are `tasks/publication/review.py`'s; each step runs with the privacy store
locked and verified, writes its entry in the store's hash chain, then tags the release's
MLflow run (`review.*`; an approval also updates the run's fingerprints and documents of the
files it changed, so `pseo-das audit` checks the published files against them)."""
from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

from mlflow.tracking import MlflowClient

from pseo_das.tasks.audit.run_fingerprints import log_fingerprints, read_fingerprints
from pseo_das.tasks.audit.store_witness import PUBLISHED_TAG
from pseo_das.tasks.privacy.store import PrivacyStore, store_lock
from pseo_das.tasks.privacy.store_integrity import verify_store
from pseo_das.tasks.publication.release_files import (MANIFEST, check_destination_usable,
                                                      destination_lock, discard, publish)
from pseo_das.tasks.publication.review import (STAMPED, Hold, ReviewDecision, approve,
                                               approved, reject, stage_approved)


def hold_tags(hold: Hold) -> dict[str, str]:
    """The MLflow tags of a release held for review."""
    return {"review.status": "held", "review.folder": hold.folder,
            "review.hold": json.dumps(asdict(hold), sort_keys=True),
            "mlflow.note.content": f"Release {hold.release_id} is held for review in "
                                   f"{hold.folder}: nothing is published before the disclosure "
                                   "review board approves it."}


def _tag(hold: Hold, tags: dict[str, str], files: tuple[str, ...] = ()) -> None:
    client = MlflowClient(tracking_uri=hold.tracking_uri)
    for name, value in tags.items():
        client.set_tag(hold.mlflow_run_id, name, value)
    for name in files:    # the run's copy of a file the approval changed
        client.log_artifact(hold.mlflow_run_id, str(Path(hold.folder) / name),
                            str(Path(name).parent))


def _decision_tags(decision: ReviewDecision) -> dict[str, str]:
    return {"review.status": str(decision.decision), "review.by": decision.by,
            "review.at": decision.at,
            "review.decision": json.dumps(asdict(decision), sort_keys=True),
            **({"review.clearance": decision.clearance} if decision.clearance else {})}


def _decided(store_path: Path, decide) -> tuple[Hold, ReviewDecision]:
    with store_lock(store_path):
        verify_store(store_path).raise_if_failed()
        with PrivacyStore.open(store_path) as store:
            return decide(store)


def approve_release(store_path: Path, release_id: str, by: str, clearance: str,
                    note: str | None) -> tuple[Hold, ReviewDecision]:
    hold, decision = _decided(store_path, lambda store: approve(store, release_id, by,
                                                                clearance, note))
    manifest = Path(hold.folder) / MANIFEST
    _tag(hold, _decision_tags(decision), (*STAMPED, MANIFEST))
    stamped = {name: json.loads(manifest.read_text())["files"][name] for name in STAMPED}
    client = MlflowClient(tracking_uri=hold.tracking_uri)
    logged = read_fingerprints(hold.tracking_uri, client.get_run(hold.mlflow_run_id))
    log_fingerprints(client, hold.mlflow_run_id, logged.with_outputs(stamped), manifest)
    return hold, decision


def reject_release(store_path: Path, release_id: str, by: str, reason: str
                   ) -> tuple[Hold, ReviewDecision]:
    hold, decision = _decided(store_path, lambda store: reject(store, release_id, by, reason))
    _tag(hold, _decision_tags(decision))
    return hold, decision


def publish_release(store_path: Path, release_id: str, out_dir: Path
                    ) -> tuple[Hold, ReviewDecision, Path]:
    """Publish an approved release to `out_dir`: its staged files, checked against the
    approved manifest, copied beside `out_dir` and renamed into place (as a release does,
    with the destination's lock); the publication recorded in the store. The review folder
    is removed after (the published folder holds the same bytes)."""
    out_dir = Path(out_dir).expanduser().absolute()
    check_destination_usable(out_dir)
    with destination_lock(out_dir), store_lock(store_path):
        verify_store(store_path).raise_if_failed()
        with PrivacyStore.open(store_path) as store:
            hold, decision = approved(store, release_id)
            staging = stage_approved(hold, decision, out_dir)
            try:
                head = store.add_publication(hold.attempt, hold.record_sha256, out_dir)
                publish(staging, out_dir)
            except BaseException:
                discard(staging)
                raise
    _tag(hold, {PUBLISHED_TAG: json.dumps(head.as_dict(), sort_keys=True),
                "published_to": str(out_dir), "review.status": "published"})
    shutil.rmtree(hold.folder, ignore_errors=True)
    return hold, decision, out_dir
