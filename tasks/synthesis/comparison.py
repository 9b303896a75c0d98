"""The synthesizer's comparison of confidential and synthetic data: marginals, two-way
tables and one regression, computed here, rendered by reports/ (render only). Privacy
cost: none claimed; the comparison holds exact statistics of the confidential data, so
its report is for disclosure review only and is never released.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pseo_das.schemas.codes import YEARS_AFTER
from pseo_das.tasks.verification.estimates import group_estimate, selected_rows
from pseo_das.tasks.verification.query import RegressionQuery
from pseo_das.tasks.verification.records import records_from_frames

TOP = 10
CHECK_QUERY = RegressionQuery(outcome="log_earnings", covariates=["degree_level", "cip2", "grad_year"],
                              references={"degree_level": "05"}, coefficient="degree_level[07]",
                              interval={"lower": 0.0}, subset={"years_after": [5]})


def shares(values: pd.Series) -> pd.Series:
    return values.astype(str).value_counts(normalize=True)


def marginal(name: str, confidential: pd.Series, synthetic: pd.Series, top: int | None = TOP) -> dict:
    """Shares of each level in both files (the `top` largest confidential levels), and the
    total variation distance over all levels."""
    a, b = shares(confidential), shares(synthetic)
    both = pd.concat([a.rename("confidential"), b.rename("synthetic")], axis=1).fillna(0.0)
    both = both.sort_values("confidential", ascending=False)
    rows = both.head(top) if top else both.sort_index()
    return {"name": name, "levels": len(both), "tvd": float(0.5 * (both["confidential"] - both["synthetic"]).abs().sum()),
            "rows": [{"level": level, "confidential": float(r.confidential), "synthetic": float(r.synthetic)}
                     for level, r in rows.iterrows()]}


def joined(graduates: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    g = graduates.astype({c: str for c in ("institution", "inst_state", "degree_level", "cipcode")})
    frame = outcomes.merge(g, on="person_id", how="inner")
    frame["employed"] = frame["earnings"].notna()
    frame["cip2"] = frame["cipcode"].str[:2]
    return frame


def comparison_context(conf_g: pd.DataFrame, conf_o: pd.DataFrame, syn_g: pd.DataFrame,
                       syn_o: pd.DataFrame) -> dict:
    conf, syn = joined(conf_g, conf_o), joined(syn_g, syn_o)
    marginals = [
        marginal("institution", conf_g["institution"], syn_g["institution"]),
        marginal("degree level", conf_g["degree_level"], syn_g["degree_level"], None),
        marginal("state of institution", conf_g["inst_state"], syn_g["inst_state"]),
        marginal("CIP family (2-digit)", conf_g["cipcode"].astype(str).str[:2],
                 syn_g["cipcode"].astype(str).str[:2]),
        marginal("graduation year", conf_g["grad_year"], syn_g["grad_year"], None),
        marginal("years after (outcome records)", conf_o["years_after"], syn_o["years_after"], None),
        marginal("industry (employed records)", conf_o["industry"].dropna(), syn_o["industry"].dropna()),
        marginal("state of employment (employed records)", conf_o["emp_state"].dropna(),
                 syn_o["emp_state"].dropna()),
    ]
    two_way = [
        marginal("degree level x CIP family (joint)",
                 conf_g["degree_level"].astype(str) + " x " + conf_g["cipcode"].astype(str).str[:2],
                 syn_g["degree_level"].astype(str) + " x " + syn_g["cipcode"].astype(str).str[:2]),
        marginal("years after x employed (joint, records)",
                 conf["years_after"].astype(str) + " x " + conf["employed"].astype(str),
                 syn["years_after"].astype(str) + " x " + syn["employed"].astype(str), None),
    ]
    by_degree = []
    for level in sorted(set(conf["degree_level"]) | set(syn["degree_level"])):
        row = {"degree_level": level}
        for k in YEARS_AFTER:
            for label, frame in (("confidential", conf), ("synthetic", syn)):
                mine = frame[(frame["degree_level"] == level) & (frame["years_after"] == k)]
                row[f"{label}_employed_{k}"] = float(mine["employed"].mean()) if len(mine) else None
                row[f"{label}_median_{k}"] = float(mine["earnings"].median()) if mine["employed"].any() else None
        by_degree.append(row)
    in_state = []
    for k in YEARS_AFTER:
        row = {"years_after": k}
        for label, frame in (("confidential", conf), ("synthetic", syn)):
            employed = frame[(frame["years_after"] == k) & frame["employed"]]
            row[label] = float((employed["emp_state"].astype(str) == employed["inst_state"]).mean()) \
                if len(employed) else None
        in_state.append(row)
    regression = {}
    for label, (g, o) in (("confidential", (conf_g, conf_o)), ("synthetic", (syn_g, syn_o))):
        records = records_from_frames(g, o, label)
        rows = np.flatnonzero(selected_rows(records, CHECK_QUERY))
        regression[label] = group_estimate(records, CHECK_QUERY, rows)
    return {"marginals": marginals, "two_way": two_way, "by_degree": by_degree,
            "in_state": in_state, "regression": regression,
            "regression_query": CHECK_QUERY.model_dump(mode="json", exclude_none=True),
            "years_after": list(YEARS_AFTER)}
