"""The flows accuracy study: true flows of synthetic data against the flows every
candidate post-processing would publish, at several epsilons, with repeated noise draws.

Per epsilon and draw, as a release does: the measured 2-digit CIP flows get exact
two-sided geometric noise on every destination (at the whole flows epsilon, or at
(1 - share) x epsilon when the origin cell's graduate count is measured as its own
tabulation with share x epsilon: the same total epsilon, sequential composition), the
all-fields flows are their sums, INDFLOW comes from the noisy 2-digit flows of every
years-after, and each candidate corrects the all-fields cells with the A.3.2 weights of the
packaged (SYNTHETIC) J2J and QCEW files. The published quantities of the all-fields
institution cells are then compared with the true ones, by cell-size stratum (true
graduates of the cell).

A candidate's target total is either the noisy sum of the cell's flows (the appendix's) or
the measured count (true count + geometric noise at share x epsilon, summed from the
2-digit cells like the flows). Randomised candidates draw from a simulation stream of the
study seed. Synthetic data only. Privacy cost: none (a simulation; nothing is released).
"""
from __future__ import annotations

import hashlib
import time
from fractions import Fraction
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.tasks import progress
from pseo_das.tasks.employment_flows.division_flows import home_state_index
from pseo_das.tasks.employment_flows.flows_candidates import (appendix_correction, employed_threshold,
                                                              simplex_projection,
                                                              thresholded_correction,
                                                              with_nonemployed_weight)
from pseo_das.tasks.codes.destinations import NONEMPLOYED
from pseo_das.tasks.employment_flows.flows_correction import industry_flows, log_weights
from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows
from pseo_das.tasks.inputs.reference_inputs import ReferenceInputs
from pseo_das.tasks.study.flows_measures import measure_rows, published_quantities, stratum_groups
from pseo_das.tasks.study.flows_study_sample import ALL_FIELDS_LEVEL, MEASURED_LEVEL, TrueFlows
from pseo_das.tasks.study.simulation_noise import exact_geometric_noise, simulation_generator

DEFAULT_FLOWS_STUDY_SEED = hashlib.sha256(b"pseo-das flows accuracy study").hexdigest()
NOISY_SUM = "noisy sum"        # the appendix's total: the sum of the cell's noisy flows
MEASURED = "measured"          # the cell's graduate count, its own tabulation
# A true zero flow passes the threshold with probability at most alpha: 1/1021 leaves
# about one spurious flow per origin cell of 1,021 destinations.
THRESHOLD_ALPHA = 1 / 1021
# The non-employed weight of the evidence-based appendix variant (relative to the
# geometric mean of the cell's employed weights): a public constant calibrated on
# synthetic data by this study, at epsilon 1.5 with a measured total at 20% of it
# (`--nonemployed-weights`; 200,000 graduates and the tests' 30,000 of seed 7). The bias of
# not employed is about -75% at weight 1, -25% at 0.01, -2% (200,000) / -14% (30,000) at
# 1e-4, and -0.4% to +0.4% / -2.2% to +3.7% at 3e-6; lower weights change nothing on the
# large data and let small cells' clipped non-employed noise through (+5.5% at 1e-6 on the
# small data). The removal weights of likely destinations are far below the geometric mean,
# so the non-employed flow, rarely a clipped zero, must weigh less than they do to be
# spared until the spurious employed units are gone.
CALIBRATED_NONEMPLOYED_WEIGHT = 3e-6


@dataclass(frozen=True)
class FlowsStudyGrid:
    epsilons: tuple[float, ...]
    total_shares: tuple[float, ...]      # shares of epsilon for a measured total
    draws: int
    nonemployed_weights: tuple[float, ...] = (1.0, 0.01, CALIBRATED_NONEMPLOYED_WEIGHT)


FULL_FLOWS_GRID = FlowsStudyGrid(epsilons=(0.5, 1.0, 1.5, 2.0, 3.0), total_shares=(0.1, 0.2),
                                 draws=5)
QUICK_FLOWS_GRID = FlowsStudyGrid(epsilons=(1.5,), total_shares=(0.1,), draws=2)


@dataclass(frozen=True)
class Candidate:
    """A post-processing with its target total and non-employed weight."""
    name: str
    total: str                           # NOISY_SUM or MEASURED
    nonemployed_weight: float
    correct: Callable                    # (noisy, total, log_w, epsilon, exponentials) -> flows


def _appendix(noisy, total, log_w, epsilon, exponentials):
    return appendix_correction(noisy, total, log_w, exponentials)


def _thresholded(noisy, total, log_w, epsilon, exponentials):
    threshold = employed_threshold(epsilon, THRESHOLD_ALPHA, noisy.shape[1])
    return thresholded_correction(noisy, total, log_w, threshold, exponentials)


def _projection(noisy, total, log_w, epsilon, exponentials):
    return simplex_projection(noisy, total, log_w)


def candidates(grid: FlowsStudyGrid) -> list[Candidate]:
    """The appendix (each non-employed weight) and the sparsity-aware and projection
    candidates (calibrated weight), each with the noisy-sum and the measured total."""
    out = []
    for total in (NOISY_SUM, MEASURED):
        for weight in grid.nonemployed_weights:
            out.append(Candidate(f"appendix, non-employed weight {weight:g}", total, weight,
                                 _appendix))
        out.append(Candidate("thresholded", total, CALIBRATED_NONEMPLOYED_WEIGHT, _thresholded))
        out.append(Candidate("simplex projection", total, CALIBRATED_NONEMPLOYED_WEIGHT,
                             _projection))
    return out


def split_epsilon(epsilon: float, share: float) -> tuple[float, float]:
    """(flows epsilon, total epsilon) of a measured total at `share` of `epsilon`, as the
    decimals they are (0.8 x 1.5 = 1.2, not 1.2000000000000002)."""
    total = round(epsilon * share, 10)
    return round(epsilon - total, 10), total


def _table(cells: pd.DataFrame, noisy: np.ndarray, level: str, years_after: int) -> NoisyFlows:
    tab_id = f"study.flows.cip{level}.y{years_after}"
    return NoisyFlows(tab_id, level, years_after, cells.assign(noise_terms=1), noisy, (tab_id,))


def noisy_field_flows(truth: list[TrueFlows], epsilon: float | Fraction, seed: bytes,
                      stream: str
                      ) -> list[np.ndarray]:
    """Noisy 2-digit CIP flows of every years-after at `epsilon` (exact geometric noise),
    in the dtype of the true flows (a release's stand-in truth is its 32-bit corrected
    flows: every years-after is held at once, so a national release keeps them 32-bit)."""
    return [(t.field_flows + exact_geometric_noise(seed, f"{stream}/flows/y{t.years_after}",
                                                   epsilon, t.field_flows.shape)
             ).astype(t.field_flows.dtype, copy=False)
            for t in truth]


@dataclass(frozen=True)
class SimulatedFlows:
    """One simulated release of the all-fields flows of one years-after, before the
    correction: the noisy flows (sums of the simulated noisy 2-digit flows), the target
    total (the measured count, or the noisy sum of the flows) and the A.3.2 log weights at
    non-employed weight 1 (`with_nonemployed_weight` sets another)."""
    truth: TrueFlows
    noisy: np.ndarray
    total: np.ndarray
    log_w: np.ndarray


def simulate_all_fields(truth: list[TrueFlows], reference: ReferenceInputs,
                        flows_epsilon: float | Fraction, total_epsilon: float | Fraction | None,
                        seed: bytes, stream: str
                        ) -> list[SimulatedFlows]:
    """What a release would correct, simulated from `truth` (true flows, or a stand-in):
    exact geometric noise at `flows_epsilon` on every 2-digit flow (stream
    `{stream}/flows/y{k}`), the origin counts (row sums of `truth`'s 2-digit flows) with
    noise at `total_epsilon` (`{stream}/total/y{k}`; None: no measured count, the target
    is the noisy sum of the flows), both summed to the all-fields cells, and INDFLOW from
    the simulated noisy 2-digit flows of every years-after. Privacy cost: none."""
    noisy = noisy_field_flows(truth, flows_epsilon, seed, stream)
    indflow = industry_flows([_table(t.field_cells, n, MEASURED_LEVEL, t.years_after)
                              for t, n in zip(truth, noisy)])
    out = []
    for t, field_noisy in zip(truth, noisy):
        all_noisy = t.sum_to_all_fields(field_noisy)
        if total_epsilon:
            sizes = t.field_flows.sum(axis=1)
            measured = sizes + exact_geometric_noise(seed, f"{stream}/total/y{t.years_after}",
                                                     total_epsilon, sizes.shape)
            total = t.sum_to_all_fields(measured)
        else:
            total = all_noisy.sum(axis=1)
        log_w = log_weights(_table(t.all_fields_cells, all_noisy, ALL_FIELDS_LEVEL,
                                   t.years_after), reference, indflow, 1.0)
        out.append(SimulatedFlows(t, all_noisy, total, log_w))
    return out


def earnings_universe_measures(published_employed: np.ndarray, truth: TrueFlows,
                               idx: np.ndarray) -> dict[str, float]:
    """The published employed count (pseof's grads_emp) of the cells `idx` against their
    true earnings-universe count (pseoe's grads_earn before noise): the sum of the true
    counts, the bias of the sum, the mean difference and mean absolute difference per
    cell. NaN when `truth` has no earnings-universe counts."""
    if truth.earnings_universe is None or len(idx) == 0:
        return dict.fromkeys(EARNINGS_UNIVERSE_COLUMNS, float("nan"))
    earn = truth.earnings_universe[idx]
    difference = published_employed[idx, 0] - earn
    total = float(earn.sum())
    return {"true_grads_earn_sum": total,
            "bias_vs_grads_earn": float(difference.sum()) / total if total else float("nan"),
            "mean_diff_vs_grads_earn": float(difference.mean()),
            "mae_vs_grads_earn": float(np.abs(difference).mean()),
            "true_diff_vs_grads_earn": float((truth.all_fields_flows[idx].sum(axis=1)
                                              - truth.all_fields_flows[idx, NONEMPLOYED]
                                              - earn).mean())}


EARNINGS_UNIVERSE_COLUMNS = ("true_grads_earn_sum", "bias_vs_grads_earn",
                             "mean_diff_vs_grads_earn", "mae_vs_grads_earn",
                             "true_diff_vs_grads_earn")


def evaluate_setting(truth: list[TrueFlows], reference: ReferenceInputs, grid: FlowsStudyGrid,
                     epsilon: float, share: float | None, draw: int, seed: bytes) -> list[dict]:
    """Measures of every candidate of one total kind (share None: the noisy sum) for one
    epsilon and draw, every years-after. The rows of the quantity "employed" also compare
    the published employed count with the true earnings-universe count
    (EARNINGS_UNIVERSE_COLUMNS; NaN on the other rows)."""
    flows_epsilon, total_epsilon = split_epsilon(epsilon, share) if share else (epsilon, 0.0)
    stream = f"epsilon={epsilon!r}/share={share!r}/draw={draw}"
    total_kind = MEASURED if share else NOISY_SUM
    mine = [c for c in candidates(grid) if c.total == total_kind]
    rows = []
    for sim in simulate_all_fields(truth, reference, flows_epsilon, total_epsilon if share else None,
                                   seed, stream):
        t = sim.truth
        home = home_state_index(t.all_fields_cells)
        true_q = published_quantities(t.all_fields_flows, home)
        groups = stratum_groups(t.all_fields_flows.sum(axis=1))
        for candidate in mine:
            log_w = with_nonemployed_weight(sim.log_w, candidate.nonemployed_weight)
            generator = simulation_generator(seed, f"{stream}/{candidate.name}/y{t.years_after}")
            published = published_quantities(
                candidate.correct(sim.noisy, sim.total, log_w, flows_epsilon,
                                  generator.standard_exponential), home)
            universe = {label: earnings_universe_measures(published["employed"], t, idx)
                        for label, idx in groups}
            for row in measure_rows(published, true_q, groups):
                extra = (universe[row["stratum"]] if row["quantity"] == "employed"
                         else dict.fromkeys(EARNINGS_UNIVERSE_COLUMNS, float("nan")))
                rows.append({"candidate": candidate.name, "total": total_kind,
                             "total_share": share or 0.0, "epsilon": epsilon,
                             "flows_epsilon": flows_epsilon, "draw": draw,
                             "years_after": t.years_after, **row, **extra})
    return rows


def evaluate_epsilon(truth: list[TrueFlows], reference: ReferenceInputs, grid: FlowsStudyGrid,
                     epsilon: float, seed: bytes, step: int, started: float) -> pd.DataFrame:
    """Every candidate, total and draw at one epsilon: one row per (candidate, total share,
    draw, years-after, quantity, stratum)."""
    rows = []
    for draw in range(grid.draws):
        for share in (None, *grid.total_shares):
            rows += evaluate_setting(truth, reference, grid, epsilon, share, draw, seed)
    progress(f"flows study: epsilon {epsilon:g} done ({step + 1}/{len(grid.epsilons)}, "
             f"{grid.draws} draws, {time.time() - started:.0f} s elapsed)")
    return pd.DataFrame(rows)


def summarise_draws(measures: pd.DataFrame) -> pd.DataFrame:
    """Mean of every measure over the draws (and the draws' standard deviation of the bias)."""
    keys = ["candidate", "total", "total_share", "epsilon", "flows_epsilon", "years_after",
            "quantity", "stratum"]
    grouped = measures.groupby(keys, sort=False, observed=True)
    summary = grouped[["cells", "true_sum", "published_sum", "bias", "mean_abs_error",
                       "relative_error", "zero_share", *EARNINGS_UNIVERSE_COLUMNS]].mean()
    summary["bias_sd"] = grouped["bias"].std(ddof=1)
    summary["draws"] = grouped["draw"].nunique()
    return summary.reset_index()
