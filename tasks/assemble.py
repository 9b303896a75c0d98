"""Assemble a release folder in staging: public tables and release notes, then the
internal ledger, configuration, disclosure review board report and manifest."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.version import package_versions
from reports.context import flows_context, release_context, suppression_summary
from reports.render import render_markdown, to_html
from tasks import progress, release_task
from tasks.accuracy import release_accuracy
from tasks.division_flows import FlowsRelease
from tasks.mechanism import GEOMETRIC, PrivacyLedger
from tasks.privacy_budget import BudgetDecision, lifetime_summary
from tasks.noisy_histograms import NoisyHistograms
from tasks.release_files import fingerprints, write_code_table, write_csv, write_manifest


@dataclass
class ReleaseIdentity:
    release_id: str
    seed_sha256: str
    code_version: str
    mlflow_run_id: str
    tracking_uri: str
    config_sha256: str  # SHA-256 of the configuration as canonical JSON (sorted keys)


def ledger_checks(ledger: PrivacyLedger, tables: list[NoisyHistograms],
                  flows: FlowsRelease) -> list[dict]:
    """Every noisy value comes from a ledger entry; the total is within the cap."""
    drawn = (sum(t.counts.size for t in tables if t.measured)
             + sum(t.noisy.size for t in flows.tables if t.measured))
    recorded = sum(e.n_cells * e.n_bins for e in ledger.entries if e.mechanism == GEOMETRIC)
    return [
        {"name": "noisy values drawn = noisy values recorded in the ledger",
         "result": ("passed" if drawn == recorded else "FAILED") + f" ({drawn:,} / {recorded:,})"},
        {"name": f"total epsilon within the cap {ledger.epsilon_cap:g}",
         "result": ("passed" if ledger.total_epsilon <= ledger.epsilon_cap else "FAILED")
         + f" ({ledger.total_epsilon:g})"},
    ]


@release_task("write release files")
def write_release(staging: Path, identity: ReleaseIdentity, cfg: ReleaseConfig,
                  ledger: PrivacyLedger, tables: list[NoisyHistograms], pseoe: pd.DataFrame,
                  pseoh: pd.DataFrame, cells: pd.DataFrame, flows: FlowsRelease,
                  budget: BudgetDecision, checks: list[dict],
                  input_fingerprints: dict[str, str]) -> dict[str, str]:
    """Write every file of the release into `staging`; return the manifest."""
    public, internal = staging / "public", staging / "internal"
    write_code_table(pseoe, public / "pseoe.csv")
    write_code_table(pseoh, public / "pseoh.csv")
    write_code_table(flows.pseof, public / "pseof.csv")
    write_code_table(flows.flows_state, internal / "flows_state.csv")
    context = release_context(cfg, ledger, tables, cells, release_id=identity.release_id,
                              code_version=identity.code_version,
                              seed_sha256=identity.seed_sha256,
                              config_sha256=identity.config_sha256,
                              n_pseoe_rows=len(pseoe), n_pseoh_rows=len(pseoh))
    context["flows"] = flows_context(cfg, flows)
    notes = render_markdown("release_notes.md.j2", context)
    (public / "release_notes.md").write_text(notes)
    (public / "release_notes.html").write_text(
        to_html(notes, f"PSEO release {identity.release_id}: release notes"))

    checks = checks + flows.checks + ledger_checks(ledger, tables, flows)
    write_csv(ledger.to_frame(), internal / "ledger.csv")
    write_csv(budget.populations, internal / "lifetime_budget.csv")
    (internal / "config.json").write_text(json.dumps(cfg.model_dump(mode="json"), indent=2) + "\n")
    drb = render_markdown("drb_report.md.j2", dict(
        context, ledger=ledger.entries, mlflow_run_id=identity.mlflow_run_id,
        tracking_uri=identity.tracking_uri, suppression=suppression_summary(cells),
        checks=checks, input_fingerprints=input_fingerprints,
        lifetime=lifetime_summary(budget),
        accuracy=release_accuracy(cfg, tables, bytes.fromhex(identity.seed_sha256)),
        output_fingerprints=fingerprints(staging), config_flat=cfg.flat(),
        package_versions=package_versions()))
    (internal / "drb_report.md").write_text(drb)
    (internal / "drb_report.html").write_text(
        to_html(drb, f"DRB report: PSEO release {identity.release_id}"))
    manifest = write_manifest(staging, identity.release_id, identity.mlflow_run_id,
                              identity.tracking_uri)
    progress(f"wrote {len(manifest)} files to staging")
    return manifest
