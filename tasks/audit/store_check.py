"""The privacy-store check of an audit: the store the release used is intact (hash chain,
rows, triggers, objects), is the store the run recorded (its id and chain heads, and
those of every other run that used it), and the release's internal files agree with it
(lifetime_budget.csv recomputed from the store, release_summary.json, the DRB report's
policy and chain heads). Privacy cost: none (bookkeeping only; no noisy value is read).
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from pseo_das.tasks.audit.audit_target import AuditedRelease
from pseo_das.tasks.audit.mlflow_run import runs_of_store
from pseo_das.tasks.audit.store_witness import (plaintext_seed_runs, recorded_heads,
                                                witness_problems)
from pseo_das.tasks.audit.verification import FAILED, PASSED, CheckResult
from pseo_das.tasks.measurements.release_plan import lifetime_budget_file, lifetime_table
from pseo_das.tasks.privacy.store import PrivacyStore, StoreError, epsilon_text, store_exists
from pseo_das.tasks.measurements.publication_record import record_objects
from pseo_das.tasks.privacy.store_integrity import check_recorded_heads, verify_store

LIFETIME = "internal/lifetime_budget.csv"
SUMMARY = "internal/release_summary.json"
DRB = "internal/drb_report.md"


def check_store(release: AuditedRelease, client) -> CheckResult:
    """See the module docstring."""
    store_path = Path(release.params.get("store", ""))
    if not release.params.get("store") or not store_exists(store_path):
        return CheckResult("privacy store", FAILED, f"the release's privacy store {store_path} is "
                           "not here", findings=[f"no privacy store at {store_path}"])
    try:
        report = verify_store(store_path, check_objects=True, record_objects=record_objects)
    except StoreError as exc:       # e.g. a store of an earlier version, without a chain
        return CheckResult("privacy store", FAILED, f"the release's privacy store cannot be "
                           f"checked: {exc}", findings=[str(exc)])
    findings = list(report.problems)
    with PrivacyStore.open(store_path) as store:
        if store.store_id != release.params.get("store_id"):
            findings.append(f"the store at {store_path} has id {store.store_id}; the run recorded "
                            f"{release.params.get('store_id')}: it is not the store the release used")
        heads = recorded_heads(release.params, release.tags)
        findings += check_recorded_heads(store, heads, f"the run {release.run_id}")
        manifest_heads = release.manifest.get("store_chain")
        if manifest_heads != {k: heads.get(k) for k in ("read", "written")}:
            findings.append(f"manifest.json store_chain {manifest_heads} differs from the chain "
                            f"heads the run logged {heads}")
        findings += check_recorded_heads(store, manifest_heads or {}, "manifest.json")
        experiment = release.experiment_id
        runs = runs_of_store(client, experiment, store_path, store.store_id)
        findings += witness_problems(store, [r for r in runs if r.info.run_id != release.run_id])
        findings += plaintext_seed_runs(runs)
        findings += internal_file_findings(release, store)
    figures = {"chain entries": report.entries, "objects checked": report.objects_checked,
               "chain head": f"{report.head.seq} {report.head.sha256[:16]}…"}
    if findings:
        return CheckResult("privacy store", FAILED, f"{len(findings)} problem(s): {findings[0]}",
                           figures, findings)
    return CheckResult("privacy store", PASSED,
                       f"the store is intact ({report.entries} chain entries, "
                       f"{report.objects_checked} objects), is the store the run recorded, holds "
                       "the chain heads of this and every other run that used it, and "
                       f"{LIFETIME}, {SUMMARY} and the DRB report agree with it", figures)


def internal_file_findings(release: AuditedRelease, store: PrivacyStore) -> list[str]:
    """The internal files that speak about the store, recomputed from the store."""
    attempt_text = release.params.get("store_attempt", "")
    if not attempt_text.isdigit():
        return [f"the run logged no store attempt ({attempt_text!r})"]
    try:
        attempt = store.attempt(int(attempt_text))
        plan = store.get_frame(attempt.plan_sha256)
        policy = store.policy_number(attempt.policy)
    except (StoreError, TypeError) as exc:
        return [f"attempt {attempt_text} of the store cannot be read: {exc}"]
    findings = []
    try:
        table = lifetime_table(store, plan, attempt.attempt)
    except StoreError as exc:   # e.g. a measurement row forged around the store's checks
        return [f"{LIFETIME} cannot be recomputed from the store: {exc}"]
    expected = lifetime_budget_file(table)
    path = release.release_dir / LIFETIME
    try:
        published = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        published = None
        findings.append(f"{LIFETIME}: cannot read it ({exc})")
    if published is not None:
        buffer = io.StringIO()
        expected.to_csv(buffer, index=False)
        expected_text = pd.read_csv(io.StringIO(buffer.getvalue()), dtype=str,
                                    keep_default_na=False)
        if not published.equals(expected_text):
            findings.append(f"{LIFETIME}: differs from the lifetime epsilon (and delta) per population "
                            f"recomputed from the store for attempt {attempt.attempt}")
    try:
        summary = json.loads((release.release_dir / SUMMARY).read_text())
    except (OSError, ValueError) as exc:
        summary = {}
        findings.append(f"{SUMMARY}: cannot read it ({exc})")
    cap = epsilon_text(policy.lifetime_cap)
    for key, value in (("lifetime_epsilon_cap", cap),
                       ("max_lifetime_epsilon", epsilon_text(max(table["after"], default=0))),
                       ("store", str(store.path)), ("mlflow_run_id", release.run_id)):
        if summary and summary.get(key) != value:
            findings.append(f"{SUMMARY}: {key} is {summary.get(key)!r}, the store says {value!r}")
    try:
        drb = (release.release_dir / DRB).read_text()
    except OSError as exc:
        drb = ""
        findings.append(f"{DRB}: cannot read it ({exc})")
    heads = release.manifest.get("store_chain") or {}
    wanted = [f"policy {policy.policy}, set by\n{policy.set_by}", release.run_id] + \
        [head["sha256"] for head in heads.values()]
    missing = [w for w in wanted if drb and w not in drb]
    if missing:
        findings.append(f"{DRB}: does not state {', '.join(map(repr, missing))} (the store's "
                        "policy, the run id and the chain heads)")
    return findings
