"""The accuracy study's output folder: tidy CSV tables, the study description and the
rendered report. Privacy cost: none (synthetic data, simulation summaries)."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.tasks.study.accuracy_report import write_accuracy_report
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.study.accuracy import STRATUM_ORDER
from pseo_das.tasks.study.accuracy_findings import Finding, check_findings
from pseo_das.tasks.study.accuracy_grid import StudyGrid
from pseo_das.tasks.study.study_sample import StudySample


def _ordered(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    stratum = pd.Categorical(frame["stratum"], categories=list(STRATUM_ORDER), ordered=True)
    return (frame.assign(stratum=stratum).sort_values(keys, kind="stable")
            .reset_index(drop=True))


def study_tables(results: list[tuple[pd.DataFrame, pd.DataFrame]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-epsilon summaries as two tidy tables, sorted by method, bins, epsilon, stratum."""
    accuracy = pd.concat([a for a, _ in results], ignore_index=True)
    l1 = pd.concat([b for _, b in results], ignore_index=True)
    accuracy = _ordered(accuracy, ["method", "bins", "epsilon", "percentile", "stratum"])
    l1 = _ordered(l1, ["method", "bins", "epsilon", "stratum"])
    return accuracy, l1


def cells_table(sample: StudySample, true_values: np.ndarray,
                percentiles: tuple[int, ...]) -> pd.DataFrame:
    """The study cells with their true count, stratum and true percentiles."""
    cells = sample.cells.copy()
    for k, x in enumerate(percentiles):
        cells[f"true_p{x}"] = true_values[:, k]
    return cells


def _range_text(values: list[float]) -> str:
    values = sorted(values)
    if len(values) > 3:
        steps = {round(b - a, 9) for a, b in zip(values, values[1:])}
        if len(steps) == 1:
            return f"{values[0]:g} to {values[-1]:g} by {steps.pop():g} ({len(values)} values)"
    return ", ".join(f"{v:g}" for v in values)


@release_task("write the study outputs")
def write_study_outputs(out_dir: Path, results: list[tuple[pd.DataFrame, pd.DataFrame]],
                        sample: StudySample, true_values: np.ndarray, grid: StudyGrid,
                        study: dict) -> list[Finding]:
    """relative_accuracy.csv, l1_error.csv, cells.csv, findings.csv, study.json, figures and
    accuracy_report.html/.md in `out_dir`. Returns the checked findings."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    accuracy, l1 = study_tables(results)
    accuracy.to_csv(out_dir / "relative_accuracy.csv", index=False)
    l1.to_csv(out_dir / "l1_error.csv", index=False)
    cells_table(sample, true_values, grid.percentiles).to_csv(out_dir / "cells.csv", index=False)
    findings = check_findings(accuracy, l1)
    pd.DataFrame([asdict(f) for f in findings]).to_csv(out_dir / "findings.csv", index=False)
    strata = sample.cells["stratum"].value_counts(sort=False)
    study = {**study, "grid": asdict(grid), "cells": len(sample.cells),
             "records": len(sample.earnings),
             "bin_counts_text": _range_text(list(grid.bin_counts)),
             "epsilons_text": _range_text(list(grid.epsilons)),
             "strata": [{"stratum": s, "cells": int(n)} for s, n in strata.items()]}
    (out_dir / "study.json").write_text(json.dumps(study, indent=2, default=str) + "\n")
    report = write_accuracy_report(out_dir, accuracy, l1, findings, study)
    progress(f"accuracy study written to {out_dir} (report: {report.name})")
    return findings
