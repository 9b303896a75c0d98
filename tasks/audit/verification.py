"""What every audit check returns, the helpers they share, and the audit's verdict.

Each check of `pseo-das audit` returns a `CheckResult`: passed, failed, skipped (could
not be done, e.g. the confidential inputs are not available here) or waived (not asked
for: `--no-replay`), with the figures behind the verdict and one finding per difference,
naming the file, tabulation or value and how it differs. The checks:
`tasks/fingerprint_checks.py` (published files, inputs), `tasks/ledger_check.py`
(privacy ledger and configuration), `tasks/replay.py` (replay). Privacy cost: none.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from pseo_das.config import ReleaseConfig

PASSED, FAILED, SKIPPED, WAIVED = "passed", "failed", "skipped", "waived"
EPSILON_TOLERANCE = 1e-9


@dataclass
class CheckResult:
    """One line of the verdict: a check, its outcome and the figures behind it."""
    name: str
    status: str                  # passed, failed, skipped or waived
    summary: str                 # one sentence with the figures
    figures: dict[str, object] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)   # what differs, one item each
    notes: list[str] = field(default_factory=list)      # context that is not a failure
    table: list[dict[str, str]] = field(default_factory=list)  # rows of a breakdown, same keys

    @property
    def passed(self) -> bool:
        return self.status == PASSED


def short(sha256: str | None) -> str:
    return "none" if sha256 is None else sha256[:16] + "…"


def same_epsilon(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=EPSILON_TOLERANCE, abs_tol=EPSILON_TOLERANCE)


# -- configuration as logged -----------------------------------------------------------

def logged_configuration(params: dict[str, str]) -> dict[str, dict[str, object]]:
    """The release configuration rebuilt from the run's parameters (`section.key`, values
    JSON-encoded unless they are strings), nested by section."""
    sections = set(ReleaseConfig.model_fields)
    config: dict[str, dict[str, object]] = {}
    for name, text in params.items():
        section, _, key = name.partition(".")
        if section not in sections or not key:
            continue
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        config.setdefault(section, {})[key] = value
    return config


def flatten(config: dict[str, dict[str, object]]) -> dict[str, object]:
    return {f"{section}.{key}": value for section, values in config.items()
            for key, value in values.items()}


def configuration_differences(expected: dict[str, object], found: dict[str, object],
                              found_name: str) -> list[str]:
    """Every `section.key` whose value in `found` is not the logged one."""
    out = []
    for key in sorted(set(expected) | set(found)):
        if key not in found:
            out.append(f"{key}: logged as {json.dumps(expected[key])}, missing from {found_name}")
        elif key not in expected:
            out.append(f"{key}: {json.dumps(found[key])} in {found_name}, not in the run's "
                       "parameters")
        elif found[key] != expected[key]:
            out.append(f"{key}: {json.dumps(found[key])} in {found_name}, logged as "
                       f"{json.dumps(expected[key])}")
    return out


# -- the verdict -----------------------------------------------------------------------

@dataclass
class AuditVerdict:
    """Every check of one audit, and how to reproduce it. Exit 0 only when every check
    passed or was explicitly waived (--no-replay); 1 when one failed or could not run."""
    release_id: str
    run_id: str
    tracking_uri: str
    release_dir: Path
    given_as: str
    run_status: str
    checks: list[CheckResult]
    command: str
    audited_at: str
    code_version: str
    report_md: Path | None = None
    report_html: Path | None = None
    demo_inputs: tuple[str, ...] = ()     # the packaged demo inputs the release was built on
    review: str = "not held for review (published at once)"   # the board's decision, in words

    @property
    def outcome(self) -> str:
        statuses = {c.status for c in self.checks}
        if FAILED in statuses:
            return "FAIL"
        return "INCOMPLETE" if SKIPPED in statuses else "PASS"

    @property
    def exit_code(self) -> int:
        return 0 if self.outcome == "PASS" else 1

    def conclusion(self) -> str:
        """The verdict and what it rests on: the checks, the demo inputs, the review."""
        names = ", ".join(c.name for c in self.checks)
        demo = (f" Built on the packaged DEMO inputs ({', '.join(self.demo_inputs)}): not fit "
                "for publication." if self.demo_inputs else "")
        return (f"{self._outcome_sentence()} Checks: {names}.{demo} Disclosure review: "
                f"{self.review}.")

    def _outcome_sentence(self) -> str:
        def named(status: str) -> list[str]:
            return [c.name for c in self.checks if c.status == status]
        n = len(self.checks)
        if self.outcome == "FAIL":
            failed = named(FAILED)
            return f"FAIL: {len(failed)} of {n} checks failed ({', '.join(failed)})."
        if self.outcome == "INCOMPLETE":
            skipped = named(SKIPPED)
            return (f"INCOMPLETE: no check failed, but {len(skipped)} of {n} could not run "
                    f"({', '.join(skipped)}); give --data DIR with the confidential inputs (and "
                    "the custodian's --seed-key for the replay), or --no-replay to accept an "
                    "audit without them.")
        waived = named(WAIVED)
        if waived:
            return (f"PASS: {len(named(PASSED))} of {n} checks passed; {', '.join(waived)} waived "
                    "with --no-replay (the confidential inputs were not replayed).")
        return f"PASS: all {n} checks passed."

    def printed(self, max_findings: int = 8) -> str:
        """The verdict as printed by `pseo-das audit`: one line per check, then the result."""
        lines = [f"Audit of release {self.release_id}: MLflow run {self.run_id} in {self.tracking_uri}",
                 f"  release folder: {self.release_dir}"]
        for check in self.checks:
            lines.append(f"  {'[' + check.status.upper() + ']':<9} {check.name}: {check.summary}")
            for finding in check.findings[:max_findings]:
                lines.append(f"              - {finding}")
            if len(check.findings) > max_findings:
                lines.append(f"              - ... and {len(check.findings) - max_findings} more "
                             "(see the report)")
        lines.append(self.conclusion())
        if self.report_md is not None:
            lines.append(f"  report:    {self.report_html}  (+ {self.report_md.name})")
        lines.append(f"  reproduce: {self.command}")
        return "\n".join(lines)
