"""The accuracy study (seed 000 section 5) as a Prefect flow: synthetic microdata in,
tidy accuracy tables, figures and an HTML report out. No epsilon is spent: the study runs
on synthetic data and every noise draw is a simulation."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from prefect import flow

from pseo_das.config import load_config
from pseo_das.version import code_version
from pseo_das.tasks.study.accuracy_findings import Finding
from pseo_das.tasks.study.accuracy_grid import (DEFAULT_STUDY_SEED, FULL_GRID, QUICK_GRID, StudyGrid,
                                 evaluate_epsilon, prepare_study, study_seed)
from pseo_das.tasks.study.accuracy_outputs import write_study_outputs
from pseo_das.tasks.inputs.constant_dollars import in_constant_dollars
from pseo_das.tasks.inputs.cpi import read_cpi
from pseo_das.tasks.inputs.ingest import validate_inputs
from pseo_das.tasks.study.study_sample import build_study_sample


@dataclass
class StudyResult:
    out_dir: Path
    seconds: float
    findings: list[Finding]


@flow(name="accuracy_study")
def accuracy_study(data_dir: Path, out_dir: Path, quick: bool = False,
                   seed_hex: str = DEFAULT_STUDY_SEED,
                   bin_counts: list[int] | None = None, epsilons: list[float] | None = None,
                   draws: int | None = None) -> StudyResult:
    """Run the grid on the synthetic data in `data_dir`; write results to `out_dir`.

    The grid is section 5.4's (FULL_GRID), or QUICK_GRID with `quick`; `bin_counts`,
    `epsilons` and `draws` override either.
    """
    started = time.time()
    base = QUICK_GRID if quick else FULL_GRID
    grid = StudyGrid(tuple(bin_counts or base.bin_counts), tuple(epsilons or base.epsilons),
                     base.percentiles, draws or base.draws)
    seed = study_seed(seed_hex)
    cfg = load_config()
    inputs = validate_inputs(Path(data_dir), cfg.cells.first_cohort_year, cfg.cells.last_earnings_year)
    inputs = in_constant_dollars(inputs, read_cpi(), cfg.earnings.dollar_year)  # as a release
    sample = build_study_sample(inputs, cfg)
    prepared = prepare_study(sample, grid)
    results = [evaluate_epsilon(prepared, grid, eps, seed, step, started)
               for step, eps in enumerate(grid.epsilons)]
    seconds = time.time() - started
    study = {"data_dir": str(data_dir), "graduates": len(inputs.graduates), "quick": quick,
             "seed": seed_hex, "years_after": ", ".join(map(str, cfg.cells.years_after)),
             "runtime": f"{seconds:.0f} s for the flow up to the report (2 threads)",
             "code_version": code_version()}
    findings = write_study_outputs(Path(out_dir), results, sample, prepared.true_values, grid, study)
    return StudyResult(Path(out_dir), time.time() - started, findings)
