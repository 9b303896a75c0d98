"""The bounding study's files (`pseo-das evaluate --product bounding`): tables, the
recommended bound and the report. Privacy cost: none (aggregate errors of simulated
outputs on synthetic data).

The recommended k is the bound with the smallest mean, over the HEADLINE measures, of the
total relative error in the cells of 30 and over (ties: the smaller k, the less noise).
Each measure weighs the same: the three published percentiles, the count of graduates with
earnings, and the flows employed, not employed, in-state and by division x sector.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from pseo_das.reports.render import render_markdown, to_html
from pseo_das.tasks import progress
from pseo_das.tasks.study.accuracy import PUBLISHABLE
from pseo_das.tasks.study.bounding_study import COUNT, FLOWS_QUANTITIES, BoundingResults

HEADLINE_GROUP = PUBLISHABLE
BACHELORS_GROUP = f"{PUBLISHABLE}, bachelor's"
MEASURES_CSV, BY_K_CSV = "bounding_accuracy.csv", "bounding_by_k.csv"


def headline(percentiles: tuple[int, ...]) -> list[tuple[str, str]]:
    return ([("earnings", f"p{x}") for x in percentiles] + [("earnings", COUNT)]
            + [("flows", q) for q in FLOWS_QUANTITIES])


def headline_rows(measures: pd.DataFrame, group: str,
                  percentiles: tuple[int, ...]) -> list[dict]:
    """Per headline measure: its rows of `group`, one per k (k, relative_error, bias_part,
    noise_part, binning_part)."""
    rows = []
    mine = measures[measures["group"] == group]
    for product, quantity in headline(percentiles):
        at = mine[(mine["product"] == product) & (mine["quantity"] == quantity)].sort_values("k")
        rows.append({"product": product, "quantity": quantity,
                     "cells": int(at["cells"].iloc[0]) if len(at) else 0,
                     "best_k": int(at.loc[at["relative_error"].idxmin(), "k"]) if len(at) else None,
                     "by_k": at[["k", "relative_error", "bias_part", "noise_part",
                                 "binning_part"]].to_dict("records")})
    return rows


def recommended_k(measures: pd.DataFrame, percentiles: tuple[int, ...]) -> tuple[int, dict]:
    """The bound with the smallest mean headline error (module doc) and each k's mean."""
    wanted = pd.MultiIndex.from_tuples(headline(percentiles), names=["product", "quantity"])
    mine = measures[measures["group"] == HEADLINE_GROUP].set_index(["product", "quantity"])
    mine = mine[mine.index.isin(wanted)]
    means = mine.groupby("k")["relative_error"].mean().sort_index()
    return int(means.idxmin()), {int(k): float(v) for k, v in means.items()}


def write_bounding_outputs(out_dir: Path, results: BoundingResults, study: dict,
                           percentiles: tuple[int, ...]) -> dict:
    """bounding_accuracy.csv, bounding_by_k.csv, bounding_study.json and
    bounding_report.md/.html in `out_dir`. Returns the study's summary (with the
    recommended k and the mean headline error of each k)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results.measures.to_csv(out_dir / MEASURES_CSV, index=False)
    by_k = results.bounds.merge(results.noise_law, on="k")
    by_k.to_csv(out_dir / BY_K_CSV, index=False)
    best, means = recommended_k(results.measures, percentiles)
    study = {**study, "max_degrees": results.max_degrees, "persons": results.persons,
             "persons_with_several": results.persons_with_several,
             "recommended_k": best, "mean_headline_error": means}
    (out_dir / "bounding_study.json").write_text(json.dumps(study, indent=2, default=str) + "\n")
    context = {"study": study, "by_k": by_k.to_dict("records"),
               "headline": headline_rows(results.measures, HEADLINE_GROUP, percentiles),
               "bachelors": headline_rows(results.measures, BACHELORS_GROUP, percentiles)}
    text = render_markdown("bounding_report.md.j2", context)
    (out_dir / "bounding_report.md").write_text(text)
    (out_dir / "bounding_report.html").write_text(to_html(text, "PSEO bounding study"))
    progress(f"bounding study written to {out_dir}")
    return study
