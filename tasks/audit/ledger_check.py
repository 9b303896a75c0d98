"""The ledger check of an audit: the release's privacy ledger against the ledger the
run logged (row for row), against the logged configuration (each measured tabulation's
epsilon, 0 for derived tables, the planned total and the cap) and against the run's
epsilon metrics. Privacy cost: none.
"""
from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.epsilon import epsilon_text, exact_epsilon
from pseo_das.tasks.audit.audit_target import AuditedRelease
from pseo_das.tasks.privacy.ledger import (FORMAL_NO, MEASURING_MECHANISMS, entry_of_ledger_row,
                                           ledger_row)
from pseo_das.tasks.privacy.statement import Mechanism, release_guarantee
from pseo_das.tasks.earnings.cell_statistics import PRODUCT as CELL_STATISTICS_PRODUCT
from pseo_das.tasks.employment_flows.employer_table import PRODUCT as EMPLOYER_TABLE_PRODUCT
from pseo_das.tasks.employment_flows.noisy_flows import PRODUCT as FLOWS_PRODUCT
from pseo_das.tasks.employment_flows.noisy_flows import TOTAL_PRODUCT as FLOWS_TOTAL_PRODUCT
from pseo_das.tasks.earnings.noisy_histograms import PRODUCT as EARNINGS_PRODUCT
from pseo_das.tasks.audit.verification import (FAILED, PASSED, CheckResult,
                                configuration_differences, flatten, logged_configuration,
                                same_epsilon)

LEDGER = "internal/ledger.csv"
CONFIG = "internal/config.json"
SUMMARY = "internal/release_summary.json"
# The configuration value that sets the epsilon of each product's measured tabulations.
EPSILON_SETTING = {EARNINGS_PRODUCT: "privacy.epsilon_per_tabulation",
                   FLOWS_PRODUCT: "flows.epsilon_per_tabulation",
                   FLOWS_TOTAL_PRODUCT: "flows.total_epsilon_per_tabulation",
                   CELL_STATISTICS_PRODUCT: "mos.epsilon",
                   EMPLOYER_TABLE_PRODUCT: "employer_table.epsilon"}
MEASURING = MEASURING_MECHANISMS | {Mechanism.LAPLACE}   # mechanisms that spend epsilon


def _read_ledger_text(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def ledger_row_differences(published: pd.DataFrame, logged: pd.DataFrame) -> list[str]:
    """Row-for-row comparison of the release's ledger.csv with the run's ledger artifact,
    as text, naming the tabulation and column of each difference."""
    out = []
    if list(published.columns) != list(logged.columns):
        out.append(f"ledger.csv columns {list(published.columns)} differ from the run's "
                   f"{list(logged.columns)}")
        return out
    ids_p, ids_l = list(published["tabulation_id"]), list(logged["tabulation_id"])
    for tab in sorted(set(ids_l) - set(ids_p)):
        out.append(f"tabulation {tab}: in the run's ledger, missing from the release's ledger.csv")
    for tab in sorted(set(ids_p) - set(ids_l)):
        out.append(f"tabulation {tab}: in the release's ledger.csv, not in the run's ledger")
    for tab in sorted({t for t in ids_p if ids_p.count(t) > 1}):
        out.append(f"tabulation {tab}: {ids_p.count(tab)} rows in the release's ledger.csv")
    logged_rows = logged.drop_duplicates("tabulation_id").set_index("tabulation_id")
    for _, row in published.drop_duplicates("tabulation_id").iterrows():
        tab = row["tabulation_id"]
        if tab not in logged_rows.index:
            continue
        for column in published.columns.drop("tabulation_id"):
            if row[column] != logged_rows.at[tab, column]:
                out.append(f"tabulation {tab}: {column} is {row[column]!r} in the release's "
                           f"ledger.csv, {logged_rows.at[tab, column]!r} in the run's ledger")
    common = [t for t in ids_p if t in set(ids_l)]
    if not out and common != [t for t in ids_l if t in set(ids_p)]:
        first = next(i for i, (a, b) in enumerate(zip(ids_p, ids_l)) if a != b)
        out.append(f"the rows are in another order than in the run's ledger (row {first + 1}: "
                   f"{ids_p[first]} vs {ids_l[first]})")
    return out


def _exact_or_none(text: str) -> Fraction | None:
    try:
        return exact_epsilon(text)
    except (ValueError, ZeroDivisionError, TypeError):
        return None


def epsilon_findings(ledger: pd.DataFrame, settings: dict[str, object]) -> list[str]:
    """Measured tabulations at their product's configured epsilon, derived ones at 0, in
    exact arithmetic."""
    out = []
    for _, row in ledger.iterrows():
        tab, product, epsilon = row["tabulation_id"], row["product"], row["epsilon"]
        if epsilon is None:
            out.append(f"tabulation {tab}: epsilon {row['epsilon_text']!r} is not a number")
        elif row["mechanism"] in MEASURING:
            setting = EPSILON_SETTING.get(product)
            logged = settings.get(setting) if setting is not None else None
            if setting is None:
                out.append(f"tabulation {tab}: unknown product {product!r}, no configured epsilon")
            elif not isinstance(logged, (int, float)) or isinstance(logged, bool):
                out.append(f"tabulation {tab}: the run logged no {setting}")
            elif epsilon != exact_epsilon(logged):
                out.append(f"tabulation {tab} ({product}, measured): epsilon "
                           f"{epsilon_text(epsilon)} in the ledger, but the logged configuration "
                           f"sets {setting} = {epsilon_text(settings[setting])}")
        elif epsilon != 0:
            out.append(f"tabulation {tab} ({row['mechanism']}): epsilon {epsilon_text(epsilon)}, "
                       "but a derived or post-processed table spends 0")
    return out


def _differs(column: str, stated: str, written: str) -> bool:
    """Whether ledger.csv's `written` text differs from the statement's `stated` value. The
    sensitivity column holds MOS's data-dependent chi beside the declared integers when the
    cell statistics are measured, and is then written as floats ('1.0' for 1)."""
    if column == "sensitivity":
        try:
            return float(stated) != float(written)
        except ValueError:
            pass
    return stated != written


def logged_bound(settings: dict[str, object]) -> int:
    """The logged privacy.max_degrees_per_person (1 when absent: releases before it)."""
    try:
        return max(1, int(str(settings.get("privacy.max_degrees_per_person", 1))))
    except ValueError:
        return 1


def statement_findings(ledger: pd.DataFrame, summary: dict, bound: int = 1
                       ) -> tuple[list[str], dict]:
    """Each measured row of ledger.csv read back as the privacy statement it records (a row
    its mechanism cannot have, e.g. geometric noise at another sensitivity than the logged
    contribution bound `bound`, is a finding), and the release's guarantee derived from them
    against release_summary.json's."""
    out, statements = [], []
    for _, row in ledger[ledger["mechanism"].isin(list(MEASURING))].iterrows():
        try:
            entry = entry_of_ledger_row(row.to_dict(), geometric_sensitivity=bound)
        except (ValueError, KeyError, TypeError, ZeroDivisionError) as exc:
            out.append(f"tabulation {row['tabulation_id']}: not a privacy statement ({exc})")
            continue
        again = ledger_row(entry)
        for column in ledger.columns.drop("tabulation_id"):
            if column != "epsilon" and _differs(column, str(again[column]), row[column]):
                out.append(f"tabulation {row['tabulation_id']}: {column} {row[column]!r} is not "
                           f"what its {row['mechanism']} statement says ({str(again[column])!r})")
        statements.append(entry.statement)
    guarantee = release_guarantee(statements)
    stated = summary.get("guarantee")
    if stated is not None:
        for key, value in (("epsilon", epsilon_text(guarantee.epsilon)),
                           ("delta", epsilon_text(guarantee.delta)),
                           ("pure_epsilon_dp", guarantee.pure),
                           ("sampled_exactly", guarantee.all_exact)):
            if stated.get(key) != value:
                out.append(f"{SUMMARY}: guarantee {key} is {stated.get(key)!r}, the ledger's "
                           f"statements give {value!r}")
    return out, {"guarantee (from the ledger's statements)": guarantee.graduates_sentence(),
                 "sampling": guarantee.sampling_sentence()}


def metric_findings(ledger: pd.DataFrame, metrics: dict[str, float]) -> list[str]:
    """The run's `epsilon.<tabulation>` metrics against the ledger."""
    logged = {k.removeprefix("epsilon."): v for k, v in metrics.items()
              if k.startswith("epsilon.") and k != "epsilon.total"}
    in_ledger = dict(zip(ledger["tabulation_id"], ledger["epsilon"]))
    out = [f"tabulation {t}: in the ledger, but the run has no metric epsilon.{t}"
           for t in sorted(set(in_ledger) - set(logged))]
    out += [f"metric epsilon.{t} = {logged[t]:g}: no such tabulation in the ledger"
            for t in sorted(set(logged) - set(in_ledger))]
    out += [f"tabulation {t}: epsilon {epsilon_text(in_ledger[t])} in the ledger, metric "
            f"epsilon.{t} = {logged[t]:g}" for t in sorted(set(logged) & set(in_ledger))
            if in_ledger[t] is not None and not same_epsilon(float(in_ledger[t]), logged[t])]
    return out


def problem_subjects(findings: list[str], config_findings: list[str]) -> list[str]:
    """What the findings are about (tabulations, the total, config.json), in order."""
    subjects: dict[str, None] = {}
    for finding in findings:
        tab = re.match(r"tabulation (\S+?):? ", finding)
        if finding in config_findings:
            subjects[CONFIG] = None
        elif tab:
            subjects[f"tabulation {tab.group(1)}"] = None
        else:
            subjects["the total" if finding.startswith("total epsilon") else finding] = None
    return list(subjects)


def _planned(config: dict[str, dict[str, object]]) -> ReleaseConfig | None:
    try:
        return ReleaseConfig.model_validate(config)
    except ValueError:
        return None


def total_findings(total: Fraction, by_product: pd.DataFrame, metrics: dict[str, float],
                   settings: dict[str, object], plan: ReleaseConfig | None) -> list[str]:
    """The ledger's total against `epsilon.total`, the cap, and the configuration's plan
    (number of measured tabulations per product, planned total), exactly (the metric, a
    float for display, within rounding)."""
    out = []
    cap, logged_total = settings.get("privacy.epsilon_cap"), metrics.get("epsilon.total")
    if logged_total is None:
        out.append("the run has no epsilon.total metric")
    elif not same_epsilon(float(total), logged_total):
        out.append(f"total epsilon: {epsilon_text(total)} in the ledger, metric epsilon.total = "
                   f"{logged_total:g}")
    if not isinstance(cap, (int, float)) or isinstance(cap, bool):
        out.append("the run logged no privacy.epsilon_cap")
    elif total > exact_epsilon(cap):
        out.append(f"total epsilon {epsilon_text(total)} exceeds the cap privacy.epsilon_cap = "
                   f"{epsilon_text(cap)}")
    if plan is None:
        out.append("the logged configuration is not a valid configuration for this code; "
                   "the planned total could not be computed")
        return out
    planned = {EARNINGS_PRODUCT: plan.n_earnings_tabulations(),
               FLOWS_PRODUCT: plan.n_flows_tabulations(),
               FLOWS_TOTAL_PRODUCT: plan.n_flows_total_tabulations(),
               CELL_STATISTICS_PRODUCT: plan.n_mos_tabulations(),
               EMPLOYER_TABLE_PRODUCT: plan.n_employer_table_tabulations()}
    for product, n in planned.items():
        found = int(by_product["count"].get(product, 0))
        if found != n:
            out.append(f"{product}: {found} measured tabulations in the ledger, the logged "
                       f"configuration plans {n}")
    if total != plan.planned_total_epsilon():
        out.append(f"total epsilon {epsilon_text(total)} in the ledger, the logged configuration "
                   f"plans {epsilon_text(plan.planned_total_epsilon())}")
    return out


# The kinds of ledger entries, in the order the audit report lists them.
MEASURED = "measured: formal differential privacy"
NOT_FORMAL = ("measured: NOT a formal differential-privacy guarantee (maximum observed "
              "sensitivity, a bound read from the data)")
DERIVED = "derived from measured tabulations (post-processing: no privacy loss)"


def ledger_table(ledger: pd.DataFrame) -> list[dict[str, str]]:
    """The ledger by product and kind (measured with a formal guarantee, measured without
    one, derived), with the number of entries and their epsilon."""
    not_formal = ledger["formal_guarantee"] == FORMAL_NO if "formal_guarantee" in ledger \
        else pd.Series(False, index=ledger.index)
    measuring = ledger["mechanism"].isin(list(MEASURING))
    kinds = pd.Series(DERIVED, index=ledger.index).mask(measuring, MEASURED) \
        .mask(measuring & not_formal, NOT_FORMAL)
    rows = []
    for kind in (MEASURED, NOT_FORMAL, DERIVED):
        of_kind = ledger[kinds == kind]
        for product, entries in of_kind.groupby("product", sort=False):
            spent = sum((e for e in entries["epsilon"] if e is not None), Fraction(0))
            rows.append({"kind": kind, "product": str(product),
                         "tabulations": str(len(entries)), "epsilon": epsilon_text(spent)})
    return rows


def check_ledger(release: AuditedRelease, logged_ledger: Path | None) -> CheckResult:
    """The release's ledger.csv against the run's ledger artifact (row for row), the
    logged configuration (epsilon per measured tabulation, 0 for derived tables), the
    run's epsilon metrics and the cap; internal/config.json against the logged values."""
    path = release.release_dir / LEDGER
    if not path.is_file():
        return CheckResult("ledger", FAILED, f"the release has no {LEDGER}", {},
                           [f"{LEDGER}: missing from the release folder"])
    published = _read_ledger_text(path)
    findings: list[str] = []
    if logged_ledger is None:
        findings.append(f"the run {release.run_id} has no {LEDGER} artifact to compare with")
    else:
        findings += ledger_row_differences(published, _read_ledger_text(logged_ledger))
    required = {"tabulation_id", "product", "mechanism", "epsilon"}
    if not required <= set(published.columns):
        findings.append(f"{LEDGER} lacks the columns {sorted(required - set(published.columns))}")
        return CheckResult("ledger", FAILED, findings[0], {"rows": len(published)}, findings)

    ledger = published.assign(epsilon_text=published["epsilon"],
                              epsilon=published["epsilon"].map(_exact_or_none))
    config = logged_configuration(release.params)
    settings = flatten(config)
    findings += epsilon_findings(ledger, settings)
    findings += metric_findings(ledger, release.metrics)
    try:
        summary = json.loads((release.release_dir / SUMMARY).read_text())
    except (OSError, ValueError):
        summary = {}   # the store check names an unreadable release_summary.json
    stated, guarantee_figures = statement_findings(published, summary, logged_bound(settings))
    findings += stated

    total = sum((e for e in ledger["epsilon"] if e is not None), Fraction(0))
    measured = ledger[ledger["mechanism"].isin(list(MEASURING))]
    by_product = measured.groupby("product")["epsilon"].agg(
        count="count", sum=lambda s: sum((e for e in s if e is not None), Fraction(0)))
    plan = _planned(config)
    findings += total_findings(total, by_product, release.metrics, settings, plan)
    cap, logged_total = settings.get("privacy.epsilon_cap"), release.metrics.get("epsilon.total")
    figures: dict[str, object] = {"ledger rows": len(ledger),
                                  "total epsilon (ledger)": epsilon_text(total),
                                  "epsilon.total (run metric)": logged_total,
                                  "privacy.epsilon_cap": cap}
    if plan is not None:
        figures["planned total epsilon (configuration)"] = epsilon_text(plan.planned_total_epsilon())
    figures.update(guarantee_figures)
    config_path = release.release_dir / CONFIG
    try:
        on_disk = flatten(json.loads(config_path.read_text()))
        config_findings = configuration_differences(settings, on_disk, CONFIG)
    except (OSError, ValueError, AttributeError) as exc:
        config_findings = [f"{CONFIG}: cannot be read ({exc})"]
    findings += config_findings

    if findings:
        return CheckResult("ledger", FAILED, f"{len(findings)} problem(s) with "
                           + ", ".join(problem_subjects(findings, config_findings)), figures,
                           findings, table=ledger_table(ledger))
    products = ", ".join(f"{int(r['count'])} {p} x {epsilon_text(r['sum'] / r['count'])}"
                         for p, r in by_product.iterrows())
    return CheckResult(
        "ledger", PASSED,
        f"{len(ledger)} rows identical to the run's ledger; {len(measured)} measured tabulations at "
        f"the configured epsilon ({products}), {len(ledger) - len(measured)} derived at 0; total "
        f"{epsilon_text(total)} = epsilon.total, within the cap {epsilon_text(cap)} (exact); "
        "config.json = the logged "
        "configuration", figures, table=ledger_table(ledger))
