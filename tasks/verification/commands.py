"""What `pseo-das verify-server` does: create the ledger, register analysts, show and
check it, fit a query on synthetic data, and serve. Privacy cost: only `serve` answers
queries (see server.py); `fit` runs on synthetic data only and spends nothing."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pseo_das.epsilon import epsilon_text
from pseo_das.tasks.verification.estimates import group_estimate, selected_rows
from pseo_das.tasks.verification.ledger import VerificationLedger, verify_ledger
from pseo_das.tasks.verification.query import RegressionQuery
from pseo_das.tasks.verification.records import load_records


def read_query(path: Path) -> RegressionQuery:
    """A query from a JSON file (pydantic's ValidationError names the bad field)."""
    return RegressionQuery.model_validate(json.loads(Path(path).read_text()))


def fit_on_synthetic(data_dir: Path, query: RegressionQuery, first_year: int,
                     last_year: int) -> dict:
    """The query's coefficient on all records of a synthetic data set (what the analyst
    then asks the server to verify)."""
    records = load_records(data_dir, first_year, last_year)
    rows = np.flatnonzero(selected_rows(records, query))
    if query.trend is None:
        estimate = group_estimate(records, query, rows)
        return {"records": int(len(rows)), "coefficient": query.coefficient,
                "estimate": estimate, "in_interval": bool(query.interval.contains([estimate])[0])}
    from pseo_das.tasks.verification.estimates import group_trend_slopes
    slopes = group_trend_slopes(records, query, rows)
    return {"records": int(len(rows)), "coefficient": query.coefficient,
            "slopes": [{"first": p.first, "last": p.last, "slope": s,
                        "in_interval": bool(p.interval.contains([s])[0])}
                       for p, s in zip(query.trend, slopes)]}


def ledger_summary(store: Path) -> str:
    with VerificationLedger.open(store) as ledger:
        analysts = ledger.table("analysts")
        lines = [f"verification ledger in {store}: global budget {epsilon_text(ledger.spent())} of "
                 f"{epsilon_text(ledger.global_cap())} spent; {len(ledger.table('queries'))} "
                 f"queries answered, {len(ledger.table('requests'))} requests logged"]
        for row in analysts:
            lines.append(f"  {row['analyst']}: {epsilon_text(ledger.spent(row['analyst']))} of "
                         f"{row['budget']} spent")
    problems = verify_ledger(store)
    lines.append("  ledger intact (hash chain, rows, append-only triggers)" if not problems
                 else "  LEDGER FAILS ITS CHECK:\n" + "\n".join(f"    {p}" for p in problems))
    return "\n".join(lines)
