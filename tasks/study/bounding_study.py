"""The bounding study (issue 32, item 4; `pseo-das evaluate --product bounding`): the
accuracy of the published earnings percentiles, graduate counts and employment flows at the
contribution bound k = 1, 2, 3 (privacy.max_degrees_per_person) against the truth without
any bound (every degree record counted), on synthetic data in the jobs layout where some
graduates hold a second degree (`pseo-das synth --jobs --second-degree-share S`).

At bound k the release keeps each person's k earliest degree records (the release's own
code, tasks/inputs/degree_records.py) and noises every tabulation at epsilon / k
(sensitivity k, the exact sampler). The error of a published value against the unbounded
truth splits exactly into
  * bias: what the release would publish without noise at bound k, minus what it would
    publish without noise and without bound (the degree records the bound drops); 0 at every
    k at or above the largest number of degrees of one person;
  * noise: the published value minus what it would publish without noise at bound k (its
    scale grows with k: two-sided geometric noise with q = exp(-epsilon / k));
  * binning (percentiles only): the percentile of the unbounded true histogram minus the
    true order statistic, the same at every k.
Noise-free values go through the release's own steps (the histogram percentiles of
tasks/earnings/percentiles.py; for the flows the true flows, whose published quantities
need no correction), so the three parts add up to the error.

Percentiles: the release's 4-digit CIP institution cells with earnings (tasks/study/
study_sample.py), the release's bins, measured at privacy.epsilon_per_tabulation; error
relative to the true percentile, averaged over cells and draws (draws whose noisy total is
<= 0 publish nothing and are left out, counted in `undefined_share`). Counts (graduates with
earnings: the sum of the noisy bins, as pseoe's grads_earn) and flows (all-fields
institution cells, the flows accuracy study's simulation of the release: exact noise at
flows.epsilon_per_tabulation / k on the 2-digit CIP flows, the origin counts at
flows.total_epsilon_per_tabulation / k, the release's correction): sum of |error| over cells
and components, relative to the sum of the true values. Cells are grouped by their true
size (graduates with earnings; flows: graduates) and degree level.

Synthetic data only. Privacy cost: none (a simulation; nothing is released, every noise draw
comes from a simulation stream of the study seed).
"""
from __future__ import annotations

import hashlib
import math
import tempfile
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.epsilon import exact_epsilon
from pseo_das.tasks import progress
from pseo_das.tasks.earnings.percentiles import protected_percentiles
from pseo_das.tasks.employment_flows.division_flows import home_state_index
from pseo_das.tasks.employment_flows.flows_candidates import with_nonemployed_weight
from pseo_das.tasks.employment_flows.flows_correction import correct_values
from pseo_das.tasks.inputs.constant_dollars import in_constant_dollars
from pseo_das.tasks.inputs.cpi import ConsumerPrices
from pseo_das.tasks.inputs.degree_records import write_degree_records
from pseo_das.tasks.inputs.ingest import (ValidatedInputs, find_input_files, read_inputs,
                                          read_whole)
from pseo_das.tasks.inputs.reference_inputs import ReferenceInputs
from pseo_das.tasks.study.accuracy import ALL_CELLS, PUBLISHABLE, STRATUM_EDGES
from pseo_das.tasks.study.flows_measures import published_quantities
from pseo_das.tasks.study.flows_study import simulate_all_fields
from pseo_das.tasks.study.flows_study_sample import (ORIGIN_KEYS, TrueFlows,
                                                     true_flows_by_years_after)
from pseo_das.tasks.study.simulation_noise import exact_geometric_noise, simulation_generator
from pseo_das.tasks.study.study_sample import StudySample, study_sample

DEFAULT_BOUNDING_STUDY_SEED = hashlib.sha256(b"pseo-das bounding study").hexdigest()
BOUNDS = (1, 2, 3)
FULL_DRAWS, QUICK_DRAWS = 10, 1
FLOWS_QUANTITIES = ("employed", "not employed", "in-state", "division x sector")
COUNT = "graduates with earnings"
BACHELORS = "05"
PUBLISHABLE_SIZE = STRATUM_EDGES[0]    # a release publishes a cell from a noisy count of 30
EARNINGS_KEYS = ["years_after", "institution", "degree_level", "cipcode", "grad_cohort"]
FLOWS_KEYS = ["years_after"] + ORIGIN_KEYS


def noise_epsilon(epsilon: float | Fraction, k: int) -> Fraction:
    """The parameter of the noise of a tabulation bounded to k records per person:
    epsilon / k, exactly (the release's rule)."""
    return exact_epsilon(epsilon) / k


def expected_abs_noise(epsilon: float | Fraction, k: int) -> float:
    """E|Z| of two-sided geometric noise at epsilon / k: 2q / (1 - q^2), q = exp(-epsilon/k)."""
    q = math.exp(-float(noise_epsilon(epsilon, k)))
    return 2 * q / (1 - q * q)


@dataclass(frozen=True)
class BoundedData:
    """The counting pass's records at one bound k (every degree record: k = the data's
    largest number of degrees of one person), in the bins' constant dollars."""
    k: int
    inputs: ValidatedInputs
    dropped: int


def bounded_data(data_dir: Path, cfg: ReleaseConfig, cpi: ConsumerPrices, k: int) -> BoundedData:
    """The jobs layout of `data_dir` bounded to k degrees per person by the release's own
    code (validated, derived, written to a temporary folder and read back whole)."""
    with tempfile.TemporaryDirectory(prefix="pseo-das-bounding-") as tmp:
        _, bounded = write_degree_records(Path(data_dir), Path(tmp), cfg.cells.first_cohort_year,
                                          cfg.cells.last_earnings_year,
                                          tuple(cfg.cells.years_after), k, False)
        inputs = read_inputs(Path(tmp), cfg.cells.first_cohort_year, cfg.cells.last_earnings_year)
    # the plain function (`.fn`): no Prefect server for a study
    return BoundedData(k, in_constant_dollars.fn(inputs, cpi, cfg.earnings.dollar_year),
                       bounded.dropped)


def degrees_per_person(data_dir: Path) -> pd.Series:
    """The number of degree records of each person of the jobs layout's graduates."""
    source = find_input_files(Path(data_dir), "graduates")
    source.check_columns(("person_id",))
    return read_whole(source, ("person_id",))["person_id"].value_counts()


def _align(keys: pd.DataFrame, onto: pd.DataFrame) -> np.ndarray:
    """Row of `onto` for each row of `keys` (bounded cells are truth cells: the bound only
    drops records)."""
    where = pd.MultiIndex.from_frame(onto.astype(str)).get_indexer(
        pd.MultiIndex.from_frame(keys.astype(str)))
    if (where < 0).any():
        raise AssertionError("a bounded cell is not a cell of the unbounded data")
    return where


def _spread(values: np.ndarray, where: np.ndarray, n: int) -> np.ndarray:
    """`values` (rows of the bounded cells) placed at rows `where` of n truth cells; the
    truth's cells that the bound emptied get 0."""
    out = np.zeros((n,) + values.shape[1:], values.dtype)
    out[where] = values
    return out


def cell_groups(sizes: np.ndarray, degree_level: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """(group, cells): cells of 30 and over (the release publishes a cell from a noisy count
    of 30), those of bachelor's and of other degrees, and all cells."""
    big = sizes >= PUBLISHABLE_SIZE
    bachelors = degree_level.astype(str) == BACHELORS
    return [(PUBLISHABLE, np.flatnonzero(big)),
            (f"{PUBLISHABLE}, bachelor's", np.flatnonzero(big & bachelors)),
            (f"{PUBLISHABLE}, other degrees", np.flatnonzero(big & ~bachelors)),
            (ALL_CELLS, np.arange(len(sizes)))]


def count_parts(published: np.ndarray, bounded: np.ndarray, truth: np.ndarray) -> dict:
    """Counts: relative_error = sum |published - truth| / sum truth, bias_part = sum |bounded
    - truth| / sum truth, noise_part = sum |published - bounded| / sum truth, signed_bias =
    sum (published - truth) / sum truth. `published` may have a leading draws axis."""
    total = float(truth.sum()) * (published.shape[0] if published.ndim > truth.ndim else 1)
    scale = float(truth.sum())
    if not scale:
        return dict.fromkeys(("relative_error", "bias_part", "noise_part", "signed_bias"),
                             float("nan"))
    return {"relative_error": float(np.abs(published - truth).sum()) / total,
            "bias_part": float(np.abs(bounded - truth).sum()) / scale,
            "noise_part": float(np.abs(published - bounded).sum()) / total,
            "signed_bias": float((published - truth).sum()) / total}


def percentile_parts(published: np.ndarray, binned_k: np.ndarray, binned: np.ndarray,
                     true: np.ndarray) -> dict:
    """Percentiles (`published`: draws x cells; the others: cells): the mean relative
    error |published - true| / true and its parts bias (binned_k - binned), noise
    (published - binned_k) and binning (binned - true), all over the same (cell, draw)s:
    those published (noisy total > 0) in a cell the bound did not empty. signed_bias: the
    mean of (published - true) / true; undefined_share: the share of draws not published."""
    kept = ~np.isnan(published) & ~np.isnan(binned_k)[None]

    def mean(values: np.ndarray) -> float:
        return _nanmean(np.where(kept, np.broadcast_to(values, published.shape) / true, np.nan))
    return {"relative_error": mean(np.abs(published - true)),
            "bias_part": mean(np.abs(binned_k - binned)),
            "noise_part": mean(np.abs(published - binned_k)),
            "binning_part": mean(np.abs(binned - true)),
            "signed_bias": mean(published - true),
            "undefined_share": float(np.isnan(published).mean()) if published.size else float("nan")}


@dataclass(frozen=True)
class EarningsTruth:
    sample: StudySample
    true_percentiles: np.ndarray     # cells x percentiles: the order statistics
    histograms: np.ndarray           # cells x bins, every degree record
    binned: np.ndarray               # cells x percentiles: percentiles of `histograms`


def earnings_truth(data: BoundedData, cfg: ReleaseConfig) -> EarningsTruth:
    sample = study_sample(data.inputs, cfg)
    histograms = release_histograms(sample, cfg)
    percentiles = tuple(cfg.earnings.percentiles)
    return EarningsTruth(sample, sample.true_percentiles(percentiles), histograms,
                         _percentiles(histograms, cfg))


def release_histograms(sample: StudySample, cfg: ReleaseConfig) -> np.ndarray:
    """True histograms of the study cells in the release's bins (cells x bins)."""
    edges = np.asarray(cfg.earnings.bin_edges, dtype=np.float64)
    flat = (sample.record_cell * len(edges)
            + np.searchsorted(edges, sample.earnings, side="right") - 1)
    return np.bincount(flat, minlength=len(sample.cells) * len(edges)).reshape(
        len(sample.cells), len(edges)).astype(np.int64)


def _percentiles(counts: np.ndarray, cfg: ReleaseConfig) -> np.ndarray:
    """The release's percentiles of histograms (any leading axes; NaN: total <= 0)."""
    flat = counts.reshape(-1, counts.shape[-1])
    values = protected_percentiles(flat, np.asarray(cfg.earnings.bin_edges, dtype=np.float64),
                                   np.asarray(cfg.earnings.bin_upper, dtype=np.float64),
                                   tuple(cfg.earnings.percentiles))
    return values.reshape(counts.shape[:-1] + (values.shape[-1],))


def evaluate_earnings(truth: EarningsTruth, data: BoundedData, cfg: ReleaseConfig, draws: int,
                      seed: bytes) -> tuple[list[dict], dict]:
    """Rows (k, product, quantity, group, cells, relative_error, bias_part, noise_part,
    binning_part, signed_bias, undefined_share) of the percentiles and the count of graduates
    with earnings at bound data.k, and the measured noise against its law."""
    k, n_cells = data.k, len(truth.sample.cells)
    bounded = study_sample(data.inputs, cfg)
    where = _align(bounded.cells[EARNINGS_KEYS], truth.sample.cells[EARNINGS_KEYS])
    hist_k = _spread(release_histograms(bounded, cfg), where, n_cells)
    epsilon = cfg.privacy.epsilon_per_tabulation
    noise = exact_geometric_noise(seed, f"bounding-study/earnings/k={k}",
                                  noise_epsilon(epsilon, k), (draws,) + hist_k.shape)
    published = _percentiles(hist_k[None] + noise, cfg)          # draws x cells x percentiles
    binned_k = _percentiles(hist_k, cfg)                         # no noise, bound k
    true_p = truth.true_percentiles
    n_true, n_k = truth.histograms.sum(axis=1), hist_k.sum(axis=1)
    noisy_n = n_k[None] + noise.sum(axis=2)
    rows = []
    cells = truth.sample.cells
    for group, idx in cell_groups(n_true, cells["degree_level"].to_numpy()):
        for j, x in enumerate(cfg.earnings.percentiles):
            rows.append({"k": k, "product": "earnings", "quantity": f"p{x}", "group": group,
                         "cells": len(idx),
                         **percentile_parts(published[:, idx, j], binned_k[idx, j],
                                            truth.binned[idx, j], true_p[idx, j])})
        rows.append({"k": k, "product": "earnings", "quantity": COUNT, "group": group,
                     "cells": len(idx),
                     **count_parts(noisy_n[:, idx], n_k[idx], n_true[idx]),
                     "binning_part": float("nan"), "undefined_share": float("nan")})
    law = {"k": k, "epsilon": epsilon, "noise_epsilon": str(noise_epsilon(epsilon, k)),
           "entries": int(noise.size), "measured_mean_abs": float(np.abs(noise).mean()),
           "standard_error": float(np.abs(noise).std() / math.sqrt(noise.size)),
           "law_mean_abs": expected_abs_noise(epsilon, k)}
    return rows, law


def _nanmean(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=np.float64)
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if defined.size else float("nan")


def _flows_quantities(flows: list[TrueFlows], published: list[np.ndarray] | None = None
                      ) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """The all-fields cells of every years-after (FLOWS_KEYS, inst_state) and their
    published quantities, stacked (the true ones when `published` is None)."""
    cells: list[pd.DataFrame] = []
    quantities: dict[str, list[np.ndarray]] = {q: [] for q in FLOWS_QUANTITIES}
    for i, t in enumerate(flows):
        values = t.all_fields_flows if published is None else published[i]
        q = published_quantities(values, home_state_index(t.all_fields_cells))
        cells.append(t.all_fields_cells.assign(years_after=t.years_after))
        for name in FLOWS_QUANTITIES:
            quantities[name].append(q[name])
    return (pd.concat(cells, ignore_index=True),
            {name: np.concatenate(parts) for name, parts in quantities.items()})


def evaluate_flows(truth: list[TrueFlows], data: BoundedData, cfg: ReleaseConfig,
                   reference: ReferenceInputs, draws: int, seed: bytes,
                   unbounded: bool = False) -> list[dict]:
    """Rows (k, product flows, quantity, group, cells, relative_error, bias_part,
    noise_part, signed_bias) of the all-fields flows at bound data.k (`unbounded`: the
    bound drops nothing, the true flows are `truth`'s)."""
    k = data.k
    truth_cells, true_q = _flows_quantities(truth)
    flows_k = truth if unbounded else true_flows_by_years_after(data.inputs, cfg)
    bounded_cells, bounded_q = _flows_quantities(flows_k)
    where = _align(bounded_cells[FLOWS_KEYS], truth_cells[FLOWS_KEYS])
    bounded_q = {q: _spread(v, where, len(truth_cells)) for q, v in bounded_q.items()}
    total_epsilon = (noise_epsilon(cfg.flows.total_epsilon_per_tabulation, k)
                     if cfg.flows.measures_total else None)
    published: dict[str, list[np.ndarray]] = {q: [] for q in FLOWS_QUANTITIES}
    for draw in range(draws):
        stream = f"bounding-study/flows/k={k}/draw={draw}"
        corrected = []
        for sim in simulate_all_fields(flows_k, reference,
                                       noise_epsilon(cfg.flows.epsilon_per_tabulation, k),
                                       total_epsilon, seed, stream):
            generator = simulation_generator(seed, f"{stream}/correction/y{sim.truth.years_after}")
            values, _ = correct_values(
                sim.noisy, with_nonemployed_weight(sim.log_w, cfg.flows.nonemployed_weight),
                generator.standard_exponential, None if total_epsilon is None else sim.total)
            corrected.append(values)
        _, drawn = _flows_quantities(flows_k, corrected)
        for q in FLOWS_QUANTITIES:
            published[q].append(_spread(drawn[q], where, len(truth_cells)))
    sizes = true_q["employed"][:, 0] + true_q["not employed"][:, 0]
    rows = []
    for group, idx in cell_groups(sizes, truth_cells["degree_level"].to_numpy()):
        for q in FLOWS_QUANTITIES:
            rows.append({"k": k, "product": "flows", "quantity": q, "group": group,
                         "cells": len(idx),
                         **count_parts(np.stack(published[q])[:, idx], bounded_q[q][idx],
                                       true_q[q][idx]),
                         "binning_part": float("nan"), "undefined_share": float("nan")})
    return rows


@dataclass
class BoundingResults:
    measures: pd.DataFrame       # one row per (k, product, quantity, group)
    noise_law: pd.DataFrame      # per k: measured mean |noise| per histogram bin and its law
    bounds: pd.DataFrame         # per k: degree records dropped, epsilons
    max_degrees: int
    persons_with_several: int
    persons: int


def run_bounding_study(data_dir: Path, cfg: ReleaseConfig, cpi: ConsumerPrices,
                       reference: ReferenceInputs, bounds: tuple[int, ...], draws: int,
                       seed: bytes) -> BoundingResults:
    """Every bound of `bounds` against the unbounded truth (module doc). Privacy cost: none."""
    started = time.time()
    per_person = degrees_per_person(data_dir)
    most, records = int(per_person.max()), int(per_person.sum())
    everything = bounded_data(data_dir, cfg, cpi, most)
    earnings = earnings_truth(everything, cfg)
    flows = true_flows_by_years_after(everything.inputs, cfg)
    progress(f"bounding study: truth without bound: {records:,} degree records of "
             f"{len(per_person):,} persons (at most {most} each), "
             f"{len(earnings.sample.cells):,} earnings cells ({time.time() - started:.0f} s)")
    rows, laws, dropped = [], [], []
    for k in bounds:
        data = (BoundedData(k, everything.inputs, 0) if k >= most
                else bounded_data(data_dir, cfg, cpi, k))
        earnings_rows, law = evaluate_earnings(earnings, data, cfg, draws, seed)
        rows += earnings_rows + evaluate_flows(flows, data, cfg, reference, draws, seed,
                                               unbounded=k >= most)
        laws.append(law)
        dropped.append({"k": k, "degree_records": records, "dropped": data.dropped,
                        "earnings_epsilon": str(noise_epsilon(cfg.privacy.epsilon_per_tabulation, k)),
                        "flows_epsilon": str(noise_epsilon(cfg.flows.epsilon_per_tabulation, k))})
        progress(f"bounding study: k = {k}: {data.dropped:,} degree records dropped, "
                 f"{draws} draws ({time.time() - started:.0f} s elapsed)")
    return BoundingResults(pd.DataFrame(rows), pd.DataFrame(laws), pd.DataFrame(dropped),
                           most, int((per_person > 1).sum()), len(per_person))
