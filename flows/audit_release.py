"""The audit of a published release as a Prefect flow (`pseo-das audit`): wiring only.

Checks the release folder against its MLflow run (outputs, ledger, inputs), replays the
release into a temporary folder and a temporary audit store, and writes the verdict as
an audit report. Privacy cost: none; the replay redraws the release's own noise from
its logged seed and is deleted afterwards.
"""
from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path

from mlflow.tracking import MlflowClient

from pseo_das.flows.quarterly_release import quarterly_release
from pseo_das.config import ConfigError
from pseo_das.version import code_version
from pseo_das.tasks.audit.audit_report import default_report_dir, utc_timestamp, write_audit_report
from pseo_das.tasks import progress, release_flow, release_task
from pseo_das.tasks.audit.audit_target import AuditedRelease, resolve_audit_target
from pseo_das.tasks.audit.run_fingerprints import read_fingerprints
from pseo_das.tasks.publication.review import (Decision, ReviewDecision, decision_from_tags,
                                               stamp_clearance)
from pseo_das.tasks.audit.replay import (ReplayNeedsCustodian, ReplayNotPossible, compare_replay,
                                         plan_replay)
from pseo_das.tasks.audit.fingerprint_checks import InputLocations, check_inputs, check_outputs, locate_inputs
from pseo_das.tasks.audit.ledger_check import check_ledger
from pseo_das.tasks.audit.store_check import check_store
from pseo_das.tasks.audit.store_witness import repair_if_abandoned
from pseo_das.tasks.audit.verification import FAILED, PASSED, SKIPPED, WAIVED, AuditVerdict, CheckResult


def _audit_task(name: str, fn):
    return release_task(name)(fn)


verify_outputs = _audit_task("audit: published files", check_outputs)
verify_ledger = _audit_task("audit: privacy ledger", check_ledger)
verify_inputs = _audit_task("audit: input fingerprints", check_inputs)
verify_store = _audit_task("audit: privacy store", check_store)


def replay_release(release: AuditedRelease, locations: InputLocations, inputs: CheckResult,
                   wanted: bool, workdir: Path) -> CheckResult:
    """Run `quarterly_release` again as logged and compare what it publishes."""
    if not wanted:
        return CheckResult("replay", WAIVED, "not run (--no-replay)")
    if inputs.status == FAILED:
        return CheckResult("replay", SKIPPED, "not run: the inputs differ from those the run "
                           "logged, so a replay could not reproduce the release")
    if inputs.status != PASSED:
        return CheckResult("replay", SKIPPED, "not run: the inputs are not available here "
                           "(give --data DIR)")
    workdir.mkdir(parents=True)
    try:
        plan = plan_replay(release, locations, workdir)
    except ReplayNeedsCustodian as exc:
        return CheckResult("replay", SKIPPED, f"not run: {exc}")
    except (ReplayNotPossible, ConfigError) as exc:
        return CheckResult("replay", FAILED, f"not run: {exc}", findings=[str(exc)])
    progress(f"replaying release {plan.release_id} into {plan.out_dir} (audit store "
             f"{plan.tracking_uri})")
    try:
        result = quarterly_release(plan.data_dir, plan.out_dir, plan.seed.secret(),
                                   plan.release_id, config_path=plan.config_path,
                                   tracking_uri=plan.tracking_uri,
                                   reference_dir=plan.reference_dir, store=plan.store,
                                   supersede=plan.supersede, remeasure=plan.remeasure)
    except Exception as exc:  # the replay's own failure is the finding
        reason = f"the replay stopped: {type(exc).__name__}: {exc}"
        return CheckResult("replay", FAILED, reason, findings=[reason], notes=list(plan.notes))
    run = MlflowClient(tracking_uri=plan.tracking_uri).get_run(result.mlflow_run_id)
    clearance = decision_from_tags(release.tags)
    if clearance is not None and clearance.decision == Decision.APPROVED:
        stamp_clearance(result.out_dir, clearance, result.out_dir)  # as its approval did
    return compare_replay(release, result.out_dir, run.data.params,
                          read_fingerprints(plan.tracking_uri, run).inputs, list(plan.notes))


def review_words(decision: ReviewDecision | None) -> str:
    """The disclosure review board's decision on the release, as the verdict states it."""
    if decision is None:
        return "not held for review (published at once)"
    if decision.decision == Decision.APPROVED:
        return f"cleared by {decision.by} on {decision.at}, clearance {decision.clearance}"
    return f"{decision.decision.value} by {decision.by} on {decision.at}"


def audit_command(release: AuditedRelease, data_dir: Path | None, replay: bool) -> str:
    """The command line that repeats this audit."""
    words = ["pseo-das", "audit", str(release.release_dir), "--tracking-uri", release.tracking_uri]
    if data_dir is not None:
        words += ["--data", str(Path(data_dir).resolve())]
    if not replay:
        words.append("--no-replay")
    return shlex.join(words)


def _json_or_none(path: Path | None) -> dict | None:
    try:
        return json.loads(path.read_text()) if path is not None else None
    except (OSError, ValueError):
        return None


@release_flow("audit_release")
def audit_release(target: str, tracking_uri: str | None = None, data_dir: Path | None = None,
                  report_dir: Path | None = None, replay: bool = True) -> AuditVerdict:
    """Audit the release given by `target` (a release folder or an MLflow run id).

    `tracking_uri` overrides the store named by the release's manifest (or the default
    store, for a run id); `data_dir` overrides the logged folder of the confidential
    inputs; `replay=False` (--no-replay) skips the replay and accepts inputs that are not
    available. The report goes to `report_dir` (default audit_reports/<id>-<UTC time>/).
    Raises AuditArgumentError when `target` is unusable.
    """
    audited_at = utc_timestamp()
    release = resolve_audit_target(target, tracking_uri)
    client = MlflowClient(tracking_uri=release.tracking_uri)
    logged_store = release.params.get("store")
    repaired = repair_if_abandoned(client, release.run_id,
                                   Path(logged_store) if logged_store else None)
    if repaired:
        progress(repaired)
        release = resolve_audit_target(target, tracking_uri)
    progress(f"auditing release {release.release_id} in {release.release_dir}: MLflow run "
             f"{release.run_id} in {release.tracking_uri}")
    with tempfile.TemporaryDirectory(prefix="pseo-das-audit-") as scratch:
        work = Path(scratch)
        logged_manifest = _json_or_none(release.fetch_artifact("internal/manifest.json", work / "run"))
        logged_ledger = release.fetch_artifact("internal/ledger.csv", work / "run")
        outputs = verify_outputs(release, logged_manifest)
        if repaired:
            outputs.notes.append(f"repaired before the checks: {repaired}")
        store = verify_store(release, client)
        ledger = verify_ledger(release, logged_ledger)
        locations = locate_inputs(release, data_dir)
        inputs = verify_inputs(release, locations, unavailable_accepted=not replay)
        replayed = replay_release(release, locations, inputs, replay, work / "replay")
    summary = _json_or_none(release.release_dir / "internal" / "release_summary.json") or {}
    verdict = AuditVerdict(release.release_id, release.run_id, release.tracking_uri,
                           release.release_dir, release.given_as, release.run_status,
                           [outputs, ledger, store, inputs, replayed],
                           audit_command(release, data_dir, replay), audited_at, code_version(),
                           demo_inputs=tuple(summary.get("demo_inputs", ())),
                           review=review_words(decision_from_tags(release.tags)))
    folder = Path(report_dir) if report_dir else default_report_dir(release.release_id, audited_at)
    verdict.report_md, verdict.report_html = write_audit_report(verdict, folder)
    progress(f"audit of release {release.release_id}: {verdict.conclusion()}")
    return verdict
