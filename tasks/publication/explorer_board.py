"""The review board's view of the explorer (the internal copy only): from a release's
internal folder, the DRB report's simulated accuracy of the published percentiles by cell
size, the epsilon of each product (ledger.csv) and the lifetime budget of each population
(lifetime_budget.csv, release_summary.json); from its public pseoe, the suppression map
(the share of suppressed earnings cells per institution and degree level). Privacy cost:
none (documents and files the release already wrote)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path

import pandas as pd

from pseo_das.tasks.publication.explorer_data import (EARNINGS_FIELDS, SUPPRESSED,
                                                      ExplorerInputError)

DRB_REPORT = "drb_report.md"
ACCURACY_HEADER = ("| cell size | percentile | cells | mean relative accuracy | "
                   "median relative accuracy | mean absolute error ($) |")


def _internal_file(internal: Path, name: str) -> Path:
    path = internal / name
    if not path.is_file():
        raise ExplorerInputError(f"{path}: missing; the review board's view is made from "
                                   "a release's internal folder")
    return path


def accuracy_rows(drb_report: str) -> list[dict]:
    """The rows of the DRB report's table "Expected accuracy of the published percentiles"
    (rendered by reports/templates/drb_report.md.j2): cell size, percentile, cells, mean
    and median relative accuracy, mean absolute error in dollars."""
    lines = drb_report.splitlines()
    try:
        start = lines.index(ACCURACY_HEADER) + 2
    except ValueError:
        return []       # the release published no measured cell: nothing was simulated
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        size, percentile, cells, mean, median, error = [c.strip() for c in line.strip("|").split("|")]
        rows.append({"size": size, "percentile": int(percentile),
                     "cells": int(cells.replace(",", "")), "mean_accuracy": float(mean),
                     "median_accuracy": float(median),
                     "mean_abs_error": int(error.replace(",", ""))})
    overall = rows[-1]["size"] if rows else None      # the table ends with every cell's row
    return [r | {"all_sizes": r["size"] == overall} for r in rows]


def epsilon_by_product(ledger: pd.DataFrame) -> list[dict]:
    """The epsilon each product spent in this release (sum over its measured tabulations;
    derived tabulations spend 0), exact, and as a number for the chart."""
    spent: dict[str, Fraction] = {}
    for product, epsilon in zip(ledger["product"], ledger["epsilon"].astype(str)):
        spent[product] = spent.get(product, Fraction(0)) + Fraction(epsilon)
    return [{"product": p, "epsilon": str(e), "value": float(e)} for p, e in spent.items()]


def lifetime_budget(table: pd.DataFrame) -> dict[str, list]:
    """institution -> [[degree level, cohort, before, this release, after], ...] (exact
    epsilons as text)."""
    out: dict[str, list] = {}
    for row in table.itertuples(index=False):
        out.setdefault(row.institution, []).append(
            [row.degree_level, row.grad_cohort, row.before, row.this_release, row.after])
    return out


MEDIANS = [1 + EARNINGS_FIELDS.index(f) for f in EARNINGS_FIELDS if "_p50_" in f]


def suppression_map(earnings: Mapping[str, dict]) -> dict[str, dict[str, list[int]]]:
    """unit -> degree level -> [medians suppressed, medians published] over every field,
    cohort and year after, from the explorer's earnings cells (`EarningsUnits`)."""
    out: dict[str, dict[str, list[int]]] = {}
    for unit, cells in earnings.items():
        for key, values in cells.items():
            counts = out.setdefault(unit, {}).setdefault(key.split("|")[0], [0, 0])
            medians = [values[i] for i in MEDIANS]
            counts[0] += sum(v == SUPPRESSED for v in medians)
            counts[1] += sum(isinstance(v, int) for v in medians)
    return out


def board_data(internal: Path, earnings: Mapping[str, dict]) -> dict:
    """Everything the review board's view shows."""
    internal = Path(internal)
    text = lambda name: _internal_file(internal, name).read_text()   # noqa: E731
    read = lambda name: pd.read_csv(_internal_file(internal, name), dtype=str,  # noqa: E731
                                    keep_default_na=False)
    summary = json.loads(text("release_summary.json"))
    return {
        "accuracy": accuracy_rows(text(DRB_REPORT)),
        "epsilon": epsilon_by_product(read("ledger.csv")),
        "release_epsilon": summary.get("new_epsilon"),
        "lifetime_cap": summary.get("lifetime_epsilon_cap"),
        "max_lifetime": summary.get("max_lifetime_epsilon"),
        "lifetime": lifetime_budget(read("lifetime_budget.csv")),
        "suppression": suppression_map(earnings),
    }
