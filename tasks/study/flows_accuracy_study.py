"""The flows accuracy study from synthetic microdata to its report (`pseo-das evaluate
--product flows`). Synthetic data only; no epsilon is spent (every draw is a simulation)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pseo_das.config import load_config
from pseo_das.tasks.inputs.constant_dollars import in_constant_dollars
from pseo_das.tasks.inputs.cpi import find_cpi, read_cpi
from pseo_das.tasks.inputs.ingest import read_inputs
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir, load_reference_inputs
from pseo_das.tasks.study.accuracy_grid import study_seed
from pseo_das.tasks.study.flows_study import (CALIBRATED_NONEMPLOYED_WEIGHT, DEFAULT_FLOWS_STUDY_SEED,
                                              FULL_FLOWS_GRID, QUICK_FLOWS_GRID, FlowsStudyGrid,
                                              evaluate_epsilon, summarise_draws)
from pseo_das.tasks.study.flows_study_outputs import write_flows_study_outputs
from pseo_das.tasks.study.flows_study_sample import true_flows_by_years_after
from pseo_das.version import code_version


@dataclass
class FlowsStudyResult:
    out_dir: Path
    seconds: float
    outcome: dict            # the recommendation and the target rows at the release epsilon


@dataclass(frozen=True)
class ShippedDefault:
    """The flows post-processing `default_config.toml` ships: the flows epsilon of one
    years after (measured origin count included), the count's share of it and the
    non-employed weight of the appendix's correction."""
    epsilon: float
    total_share: float
    nonemployed_weight: float

    @property
    def setting(self) -> str:
        """Its label in the study's tables (`flows_study_outputs.setting_label`)."""
        total = (f"measured total ({self.total_share:.0%} of epsilon)" if self.total_share
                 else "noisy-sum total")
        return f"appendix, non-employed weight {self.nonemployed_weight:g}, {total}"


def shipped_default(cfg) -> ShippedDefault:
    flows = cfg.flows
    epsilon = flows.epsilon_per_tabulation + flows.total_epsilon_per_tabulation   # exact
    share = flows.total_epsilon_per_tabulation / epsilon if flows.measures_total else 0
    return ShippedDefault(float(epsilon), float(share), flows.nonemployed_weight)


def _with(values, value) -> tuple:
    """`values` with `value` added (sorted) when it is not among them; as is for None."""
    values = tuple(values)
    return values if value is None or value in values else tuple(sorted(values + (value,)))


def flows_accuracy_study(data_dir: Path, out_dir: Path, quick: bool = False,
                         seed_hex: str = DEFAULT_FLOWS_STUDY_SEED,
                         epsilons: list[float] | None = None, draws: int | None = None,
                         total_shares: list[float] | None = None,
                         nonemployed_weights: list[float] | None = None) -> FlowsStudyResult:
    """Run the flows study on the synthetic data in `data_dir`; write results to `out_dir`.
    The grid is FULL_FLOWS_GRID, or QUICK_FLOWS_GRID with `quick`; the other arguments
    override either. The shipped default's settings are always in the grid (its epsilon
    unless `epsilons` are given), and the report says whether it wins. The same data, grid
    and seed give the same tables."""
    started = time.time()
    cfg = load_config()
    shipped = shipped_default(cfg)
    base = QUICK_FLOWS_GRID if quick else FULL_FLOWS_GRID
    grid = FlowsStudyGrid(
        _with(epsilons or base.epsilons, shipped.epsilon if epsilons is None else None),
        _with(total_shares or base.total_shares, shipped.total_share),
        draws or base.draws,
        _with(nonemployed_weights or base.nonemployed_weights, shipped.nonemployed_weight))
    seed = study_seed(seed_hex)
    inputs = read_inputs(Path(data_dir), cfg.cells.first_cohort_year, cfg.cells.last_earnings_year)
    # earnings in the floor's dollars, as a release compares them with the floor
    inputs = in_constant_dollars(inputs, read_cpi(find_cpi(default_reference_dir())),
                                 cfg.earnings.dollar_year)
    reference = load_reference_inputs(default_reference_dir())
    truth = true_flows_by_years_after(inputs, cfg)
    measures = pd.concat([evaluate_epsilon(truth, reference, grid, eps, seed, step, started)
                          for step, eps in enumerate(grid.epsilons)], ignore_index=True)
    summary = summarise_draws(measures)
    seconds = time.time() - started
    study = {"data_dir": str(data_dir), "graduates": len(inputs.graduates), "quick": quick,
             "seed": seed_hex, "epsilons": list(grid.epsilons), "draws": grid.draws,
             "total_shares": list(grid.total_shares),
             "total_shares_text": ", ".join(f"{s:.0%}" for s in grid.total_shares),
             "nonemployed_weights": list(grid.nonemployed_weights),
             "calibrated_weight": f"{CALIBRATED_NONEMPLOYED_WEIGHT:g}",
             # the flows epsilon of one years-after, measured total included
             "release_epsilon": shipped.epsilon, "shipped_default": shipped.setting,
             "runtime": f"{seconds:.0f} s up to the report", "code_version": code_version()}
    outcome = write_flows_study_outputs(Path(out_dir), measures, summary, study)
    return FlowsStudyResult(Path(out_dir), time.time() - started, outcome)
