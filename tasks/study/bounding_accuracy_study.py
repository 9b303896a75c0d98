"""The bounding study from synthetic data in the jobs layout to its report (`pseo-das
evaluate --product bounding`; tasks/study/bounding_study.py). Synthetic data only; no
epsilon is spent (every draw is a simulation)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pseo_das.config import load_config
from pseo_das.tasks.inputs.cpi import find_cpi, read_cpi
from pseo_das.tasks.inputs.ingest import InputLayout, InputValidationError, input_layout
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir, load_reference_inputs
from pseo_das.tasks.study.accuracy_grid import study_seed
from pseo_das.tasks.study.bounding_outputs import write_bounding_outputs
from pseo_das.tasks.study.bounding_study import (BOUNDS, DEFAULT_BOUNDING_STUDY_SEED,
                                                 FULL_DRAWS, QUICK_DRAWS, run_bounding_study)
from pseo_das.version import code_version


@dataclass
class BoundingStudyResult:
    out_dir: Path
    seconds: float
    study: dict          # what was run, the recommended k and each k's mean headline error


def bounding_accuracy_study(data_dir: Path, out_dir: Path, quick: bool = False,
                            seed_hex: str = DEFAULT_BOUNDING_STUDY_SEED,
                            draws: int | None = None) -> BoundingStudyResult:
    """Run the study on the jobs layout in `data_dir` at k = 1, 2, 3 with the default
    configuration's epsilons; write its files to `out_dir`. `quick`: QUICK_DRAWS noise
    draws per k instead of FULL_DRAWS (`draws` overrides either). The same data, draws and
    seed give the same tables."""
    started = time.time()
    if input_layout(Path(data_dir)) is not InputLayout.JOBS:
        raise InputValidationError(
            f"{data_dir}: the bounding study needs the jobs layout (graduates one row per "
            "degree, and jobs): e.g. `pseo-das synth --out DIR --jobs --second-degree-share 0.2`")
    draws = draws or (QUICK_DRAWS if quick else FULL_DRAWS)
    cfg = load_config()
    reference = default_reference_dir()
    results = run_bounding_study(Path(data_dir), cfg, read_cpi(find_cpi(reference)),
                                 load_reference_inputs(reference), BOUNDS, draws,
                                 study_seed(seed_hex))
    seconds = time.time() - started
    study = {"data_dir": str(data_dir), "quick": quick, "seed": seed_hex, "draws": draws,
             "bounds": list(BOUNDS),
             "degree_records": int(results.bounds["degree_records"].iloc[0]),
             "earnings_epsilon": cfg.privacy.epsilon_per_tabulation,
             "flows_epsilon": cfg.flows.epsilon_per_tabulation,
             "total_epsilon": (cfg.flows.total_epsilon_per_tabulation
                               if cfg.flows.measures_total else "none (the noisy sum)"),
             "nonemployed_weight": cfg.flows.nonemployed_weight,
             "percentiles": list(cfg.earnings.percentiles),
             "runtime": f"{seconds:.0f} s up to the report", "code_version": code_version()}
    study = write_bounding_outputs(Path(out_dir), results, study, tuple(cfg.earnings.percentiles))
    return BoundingStudyResult(Path(out_dir), time.time() - started, study)
