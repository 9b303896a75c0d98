"""The audit report: the verdict of `pseo-das audit` rendered with Jinja to Markdown and
HTML. Privacy cost: none (it names files, tabulations and fingerprints, never the seed
or a confidential value)."""
from __future__ import annotations

import time
from pathlib import Path

from pseo_das.config import RELEASE_ID
from pseo_das.reports.render import render_markdown, to_html
from pseo_das.tasks.audit.verification import AuditVerdict

DEFAULT_REPORTS_DIR = Path("audit_reports")


def default_report_dir(release_id: str, audited_at: str) -> Path:
    """audit_reports/<release id>-<UTC timestamp>/ under the current folder, never reused.
    A release id that is not a valid one (a run can be edited) names no folder."""
    name = release_id if RELEASE_ID.fullmatch(release_id or "") else "release"
    base = DEFAULT_REPORTS_DIR / f"{name}-{audited_at}"
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = base.with_name(f"{base.name}-{n}")
    return folder


def utc_timestamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def audit_context(verdict: AuditVerdict) -> dict:
    return {
        "verdict": verdict, "outcome": verdict.outcome, "conclusion": verdict.conclusion(),
        "checks": [{"name": c.name, "status": c.status, "summary": _cell(c.summary),
                    "figures": {k: _cell(v) for k, v in c.figures.items()},
                    "table": [{k: _cell(v) for k, v in row.items()} for row in c.table],
                    "findings": c.findings, "notes": c.notes} for c in verdict.checks],
    }


def write_audit_report(verdict: AuditVerdict, report_dir: Path) -> tuple[Path, Path]:
    """Write audit_report.md and audit_report.html into `report_dir` (created)."""
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    md_path, html_path = report_dir / "audit_report.md", report_dir / "audit_report.html"
    text = render_markdown("audit_report.md.j2", audit_context(verdict))
    md_path.write_text(text)
    html_path.write_text(to_html(text, f"Audit of PSEO release {verdict.release_id}: "
                                       f"{verdict.outcome}"))
    return md_path, html_path
