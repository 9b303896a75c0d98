"""Expected accuracy of a release's published employment flows, simulated from its published
(corrected) flows alone, for the DRB report; and the consistency of the employed count of
pseof with the earnings-universe count of pseoe.
Privacy cost: none (post-processing of noisy values; simulation noise only).

Stand-in truth: the corrected flows of the measured tables (2-digit CIP by default), never
confidential values. Per draw, as the release does and with the flows accuracy study's
own functions (`flows_study.simulate_all_fields`): fresh exact geometric noise at the
flows epsilon on every stand-in flow, origin counts (stand-in row sums) with noise at the
total epsilon when the release measures them, both summed to the all-fields cells,
INDFLOW from the simulated noisy flows, and the release's correction (`correct_values`,
the release's non-employed weight and total). The all-fields cells' published quantities
are compared with the stand-in's, by cell-size stratum (stand-in graduates of the cell).
The draws come from simulation streams keyed by the release seed's SHA-256, so a
republication or a replay writes the same figures.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.schemas.codes import STATUS_OK
from pseo_das.schemas.pseo_layout import ALL_COHORTS
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.employment_flows.division_flows import home_state_index
from pseo_das.tasks.employment_flows.flows_candidates import with_nonemployed_weight
from pseo_das.tasks.employment_flows.flows_correction import correct_values
from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows
from pseo_das.tasks.inputs.cells import ALL_FIELDS_CIPCODE
from pseo_das.tasks.inputs.reference_inputs import ReferenceInputs
from pseo_das.tasks.privacy.geometric import geometric_variance
from pseo_das.tasks.study.flows_measures import measure_rows, published_quantities, stratum_groups
from pseo_das.tasks.study.flows_study import simulate_all_fields
from pseo_das.tasks.study.flows_study_sample import ORIGIN_KEYS, TrueFlows
from pseo_das.tasks.study.simulation_noise import simulation_generator, simulation_sample

FLOWS_ACCURACY_DRAWS = 2
# The quantities the DRB report shows: biases and errors of the three counts, and the
# zero share of the finest flows pseof publishes (division x sector).
REPORTED_QUANTITIES = ("employed", "not employed", "in-state", "division x sector")
MEASURES = ("bias", "mean_abs_error", "zero_share")


# The simulation holds several copies of its stand-in: measured tables of more origin cells
# than this, all years-after together (a national release), are simulated on one random
# sample of all-fields cells, the same in every years-after, each with every origin cell it
# sums.
STAND_IN_MAX_CELLS = 40_000


def finest_measured(tables: list[NoisyFlows]) -> list[NoisyFlows]:
    """The measured tables of the finest CIP level, by years-after."""
    measured = [t for t in tables if t.measured]
    finest = min(t.cip_level for t in measured) if measured else None
    return sorted((t for t in measured if t.cip_level == finest), key=lambda t: t.years_after)


def stand_in_flows(tables: list[NoisyFlows], seed: bytes) -> list[TrueFlows]:
    """The corrected flows of the measured tables of the finest CIP level, one per
    years-after, as a stand-in truth with the all-fields cells they sum to; above
    STAND_IN_MAX_CELLS origin cells over all years-after, those of one sample of all-fields
    cells (ORIGIN_KEYS) reused in every years-after (each kept with probability
    STAND_IN_MAX_CELLS / origin cells, from a simulation stream of `seed`): the
    simulation's size follows the cells, whatever the number of years-after."""
    finest = finest_measured(tables)
    origin_cells = sum(len(t.cells) for t in finest)

    def keys(cells: pd.DataFrame) -> pd.MultiIndex:
        return pd.MultiIndex.from_frame(cells[ORIGIN_KEYS].astype(str))

    chosen = None
    if origin_cells > STAND_IN_MAX_CELLS:
        union = keys(pd.concat([t.cells[ORIGIN_KEYS] for t in finest])).unique().sort_values()
        kept = simulation_sample(seed, "expected-flows-accuracy/sample", len(union),
                                 STAND_IN_MAX_CELLS / origin_cells)
        chosen = union[kept]
    stand_in = []
    for t in finest:
        cells, flows = t.cells, t.corrected      # in a file in a release: read the sample
        if chosen is not None:
            keep = keys(cells).isin(chosen)
            cells, flows = cells[keep].reset_index(drop=True), flows[keep]
        flows = np.asarray(flows)
        stand_in.append(TrueFlows.of_field_flows(t.years_after, cells, flows))
    return stand_in


def simulate_flows_accuracy(stand_in: list[TrueFlows], reference: ReferenceInputs,
                            flows_epsilon: float, total_epsilon: float | None,
                            nonemployed_weight: float, draws: int, seed: bytes
                            ) -> tuple[pd.DataFrame, dict[int, pd.DataFrame]]:
    """Accuracy of the published all-fields quantities against `stand_in`, by years-after
    and cell-size stratum, means over `draws` draws (total_epsilon None: the appendix's
    total, the noisy sum of the flows). Returns the measures (years_after, quantity,
    stratum, cells, bias, mean_abs_error, zero_share, ...) and, per years-after, the
    all-fields cells (ORIGIN_KEYS) with the simulated error of their employed count in
    each draw (columns error_0, error_1, ...). Privacy cost: none."""
    rows, errors = [], {}
    for t in stand_in:
        errors[t.years_after] = t.all_fields_cells[ORIGIN_KEYS].astype(str).reset_index(drop=True)
    for draw in range(draws):
        stream = (f"expected-flows-accuracy/epsilon={float(flows_epsilon)!r}/"
                  f"total={total_epsilon!r}/draw={draw}")
        for sim in simulate_all_fields(stand_in, reference, flows_epsilon, total_epsilon, seed,
                                       stream):
            t = sim.truth
            generator = simulation_generator(seed, f"{stream}/correction/y{t.years_after}")
            corrected, _ = correct_values(
                sim.noisy, with_nonemployed_weight(sim.log_w, nonemployed_weight),
                generator.standard_exponential, None if total_epsilon is None else sim.total)
            home = home_state_index(t.all_fields_cells)
            published = published_quantities(corrected, home)
            true_q = published_quantities(t.all_fields_flows, home)
            groups = stratum_groups(t.all_fields_flows.sum(axis=1))
            for row in measure_rows(published, true_q, groups, REPORTED_QUANTITIES):
                rows.append({"years_after": t.years_after, "draw": draw, **row})
            errors[t.years_after][f"error_{draw}"] = (published["employed"][:, 0]
                                                      - true_q["employed"][:, 0])
    measures = pd.DataFrame(rows)
    if measures.empty:
        return measures, errors
    summary = (measures.groupby(["years_after", "quantity", "stratum"], sort=False)
               [["cells", *MEASURES]].mean().reset_index())
    return summary, errors


def _accuracy_rows(summary: pd.DataFrame) -> list[dict]:
    """One row per (years-after, stratum): the report's columns."""
    rows = []
    for (years_after, stratum), group in summary.groupby(["years_after", "stratum"], sort=False):
        by = group.set_index("quantity")
        rows.append({
            "years_after": int(years_after), "stratum": stratum,
            "cells": int(by.loc["employed", "cells"]),
            "bias_employed": by.loc["employed", "bias"],
            "bias_nonemployed": by.loc["not employed", "bias"],
            "bias_instate": by.loc["in-state", "bias"],
            "mae_employed": by.loc["employed", "mean_abs_error"],
            "mae_nonemployed": by.loc["not employed", "mean_abs_error"],
            "zero_share": by.loc["division x sector", "zero_share"],
        })
    return rows


@release_task("simulate the accuracy of the employment flows")
def release_flows_accuracy(cfg: ReleaseConfig, tables: list[NoisyFlows],
                           reference: ReferenceInputs, seed: bytes) -> dict:
    """The DRB report's expected accuracy of the published all-fields flows, simulated from
    the corrected measured flows (`simulate_flows_accuracy`) with the release's epsilons,
    correction and non-employed weight; draws from streams of `seed` (the SHA-256 of the
    release seed). Privacy cost: none."""
    started = time.perf_counter()
    stand_in = stand_in_flows(tables, seed)
    total_epsilon = (float(cfg.flows.total_epsilon_per_tabulation) if cfg.flows.measures_total
                     else None)
    summary, errors = simulate_flows_accuracy(
        stand_in, reference, float(cfg.flows.epsilon_per_tabulation), total_epsilon,
        cfg.flows.nonemployed_weight, FLOWS_ACCURACY_DRAWS, seed)
    seconds = time.perf_counter() - started
    out = {"draws": FLOWS_ACCURACY_DRAWS, "epsilon": float(cfg.flows.epsilon_per_tabulation),
           "total_epsilon": total_epsilon, "correction": cfg.flows.correction,
           "nonemployed_weight": cfg.flows.nonemployed_weight,
           "stand_in_cells": sum(len(t.field_cells) for t in stand_in),
           "origin_cells": sum(len(t.cells) for t in finest_measured(tables)),
           "max_cells": STAND_IN_MAX_CELLS,
           "all_fields_cells": sum(len(t.all_fields_cells) for t in stand_in),
           "rows": _accuracy_rows(summary) if len(summary) else [], "errors": errors}
    progress(f"expected accuracy of the flows: {FLOWS_ACCURACY_DRAWS} simulated draws on "
             f"{out['stand_in_cells']:,} stand-in origin cells ({seconds:.1f} s)")
    return out


def all_fields_cohort_rows(pseoe: pd.DataFrame, pseof: pd.DataFrame
                           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of the all-fields institution cells by cohort: of pseoe, and of pseof at
    the nation, all industries (where y{k}_grads_emp is the cell's employed count)."""
    def of(frame: pd.DataFrame) -> pd.DataFrame:
        mine = (frame["cip_level"] == "A").to_numpy() & (frame["inst_level"] == "I").to_numpy()
        frame = frame[mine]
        return frame[(frame["grad_cohort"].astype(str) != ALL_COHORTS).to_numpy()
                     & (frame["cipcode"].astype(str) == ALL_FIELDS_CIPCODE).to_numpy()]

    national = (pseof["geo_level"] == "N").to_numpy() & (pseof["ind_level"] == "A").to_numpy()
    return of(pseoe), of(pseof[national])


def employed_and_earnings_pairs(pseoe: pd.DataFrame, pseof: pd.DataFrame, k: int
                                ) -> pd.DataFrame:
    """The all-fields institution cells by cohort published in both files at k years
    after: institution, degree_level, grad_cohort, grads_emp (pseof, nation, all
    industries) and grads_earn (pseoe). `pseoe` and `pseof` as read with every code as
    text, as a release writes them, or their `all_fields_cohort_rows`."""
    keys = ["institution", "degree_level", "grad_cohort"]
    earn, emp = all_fields_cohort_rows(pseoe, pseof)
    earn = earn[earn[f"status_y{k}_grads_earn"].astype(int).to_numpy() == STATUS_OK]
    emp = emp[emp[f"status_y{k}_grads_emp"].astype(int).to_numpy() == STATUS_OK]
    earn = earn[keys].astype(str).assign(grads_earn=earn[f"y{k}_grads_earn"].astype("int64").to_numpy())
    emp = emp[keys].astype(str).assign(grads_emp=emp[f"y{k}_grads_emp"].astype("int64").to_numpy())
    return emp.merge(earn, on=keys, how="inner", validate="one_to_one")


def grads_consistency(cfg: ReleaseConfig, pseoe: pd.DataFrame, pseof: pd.DataFrame,
                      cells: pd.DataFrame, errors: dict[int, pd.DataFrame]) -> list[dict]:
    """Per years-after, over the all-fields institution cells by cohort published in both
    files: the mean and standard deviation of grads_emp - grads_earn, and what the noise
    alone implies. grads_earn sums the noisy bins of the cell's measured cells: variance
    n_bins x noise_terms x the bin variance (the DRB report's variance table). The
    employed count's error (noise and correction) is the simulated one of
    `release_flows_accuracy` (`errors`), for the same cells: its mean is the expected mean
    of the difference, its spread adds to the earnings noise."""
    bin_variance = geometric_variance(cfg.privacy.epsilon_per_tabulation)
    keys = ["institution", "degree_level", "grad_cohort"]
    all_fields = cells[(cells["inst_level"] == "I") & (cells["cip_level"] == "A")
                       & (cells["grad_cohort"].astype(str) != ALL_COHORTS)]
    rows = []
    pseoe, pseof = all_fields_cohort_rows(pseoe, pseof)
    for k in cfg.cells.years_after:
        pairs = employed_and_earnings_pairs(pseoe, pseof, k)
        difference = (pairs["grads_emp"] - pairs["grads_earn"]).to_numpy(dtype=np.float64)
        terms = (all_fields[all_fields["years_after"] == k]
                 .assign(**{c: lambda f, c=c: f[c].astype(str) for c in keys})
                 .set_index(keys)["noise_terms"])
        n = terms.reindex(pd.MultiIndex.from_frame(pairs[keys])).to_numpy(dtype=np.float64)
        earn_variance = float(np.mean(cfg.earnings.n_bins * n * bin_variance)) if len(n) else math.nan
        simulated = errors.get(k)
        emp_error = np.array([])
        if simulated is not None and len(pairs):
            matched = pairs[keys].merge(simulated, on=keys, how="left")
            emp_error = matched.filter(like="error_").to_numpy(dtype=np.float64).ravel()
            emp_error = emp_error[~np.isnan(emp_error)]
        emp_mean = float(emp_error.mean()) if len(emp_error) else math.nan
        emp_variance = float(emp_error.var()) if len(emp_error) else math.nan
        rows.append({
            "years_after": k, "cells": len(pairs),
            "mean": float(difference.mean()) if len(pairs) else math.nan,
            "sd": float(difference.std(ddof=1)) if len(pairs) > 1 else math.nan,
            "expected_mean": emp_mean,
            "earnings_noise_sd": math.sqrt(earn_variance),
            "employed_error_sd": math.sqrt(emp_variance),
            "implied_sd": math.sqrt(earn_variance + emp_variance),
        })
    return rows
