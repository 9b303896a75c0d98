"""The audit report's ledger table (issue 33, item 5): measured and derived tabulations
apart, and the epsilon of measurements without a formal guarantee (maximum observed
sensitivity) said to be what it is."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pandas as pd

from pseo_das.tasks.audit.audit_report import write_audit_report
from pseo_das.tasks.audit.ledger_check import DERIVED, MEASURED, NOT_FORMAL, ledger_table
from pseo_das.tasks.audit.verification import PASSED, AuditVerdict, CheckResult

LEDGER = pd.DataFrame({
    "tabulation_id": ["earnings.I.cip4.y1", "earnings.I.cip2.y1", "flows.I.cip2.y1",
                      "cell_statistics.mean.y1", "cell_statistics.mean.y5", "cip-recast.flows"],
    "product": ["earnings histograms", "earnings histograms", "employment flows",
                "cell statistics", "cell statistics", "employment flows"],
    "mechanism": ["two-sided geometric", "sum of noisy counts", "two-sided geometric",
                  "Laplace (continuous)", "Laplace (continuous)",
                  "randomized post-processing (weighted draws)"],
    "epsilon": [Fraction(1), Fraction(0), Fraction(6, 5), Fraction(1, 2), Fraction(1, 2),
                Fraction(0)],
    "formal_guarantee": ["yes", "yes", "yes", "no", "no", "yes"],
})


def test_the_ledger_table_separates_measured_not_formal_and_derived():
    assert ledger_table(LEDGER) == [
        {"kind": MEASURED, "product": "earnings histograms", "tabulations": "1", "epsilon": "1"},
        {"kind": MEASURED, "product": "employment flows", "tabulations": "1", "epsilon": "1.2"},
        {"kind": NOT_FORMAL, "product": "cell statistics", "tabulations": "2", "epsilon": "1"},
        {"kind": DERIVED, "product": "earnings histograms", "tabulations": "1", "epsilon": "0"},
        {"kind": DERIVED, "product": "employment flows", "tabulations": "1", "epsilon": "0"}]
    assert "NOT a formal differential-privacy guarantee (maximum observed sensitivity" in NOT_FORMAL


def test_the_audit_report_shows_the_ledger_table(tmp_path):
    ledger = CheckResult("ledger", PASSED, "6 rows identical", {"ledger rows": 6},
                         table=ledger_table(LEDGER))
    verdict = AuditVerdict("2026Q4-test", "run", "sqlite:///x.db", Path("release"), "release folder",
                           "FINISHED", [ledger], "pseo-das audit release", "20261126T000000Z",
                           "0.1.0")
    markdown, _ = write_audit_report(verdict, tmp_path)
    text = markdown.read_text()
    assert "| kind | product | tabulations | epsilon |\n|---|---|---|---|\n" in text
    assert f"| {NOT_FORMAL} | cell statistics | 2 | 1 |" in text
    assert text.index(f"| {MEASURED} |") < text.index(f"| {NOT_FORMAL} |") < \
        text.index(f"| {DERIVED} |")
