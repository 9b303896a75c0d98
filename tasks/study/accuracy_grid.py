"""The accuracy study's grid (seed 000 section 5.4): every method, bin count, epsilon and
percentile, with repeated noise draws, summarised by cell-size stratum.

Noise is drawn once per epsilon and draw for the widest histogram (common random numbers):
a histogram with b bins uses the first b columns of the same draw, so Log-Normal and Even
bins, and every bin count, see the same noise. Each comparison still has the exact noise
distribution; sharing only removes simulation noise from the differences between methods.

Synthetic data only. Privacy cost: none (a simulation; nothing is released).
"""
from __future__ import annotations

import hashlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.tasks import progress, release_task
from pseo_das.tasks.study.accuracy import summarise_l1, summarise_percentiles
from pseo_das.tasks.study.simulation_noise import sample_inverse_quartic, simulated_geometric_noise, simulation_generator
from pseo_das.tasks.study.study_bins import StudyBins, study_bin_sets
from pseo_das.tasks.study.study_mechanisms import (SMOOTH_LOWER, SMOOTH_SENSITIVITY, SMOOTH_SENSITIVITY_UNSPLIT,
                                    SMOOTH_UPPER, histogram_percentiles, smooth_sensitivity,
                                    smooth_sensitivity_percentiles)
from pseo_das.tasks.study.study_sample import StudySample, percentile_rank

WORKER_THREADS = 2  # this machine has 2 cores
# A fixed public default: the study runs on synthetic data, so it is meant to be repeatable.
DEFAULT_STUDY_SEED = hashlib.sha256(b"pseo-das accuracy study").hexdigest()


@dataclass(frozen=True)
class StudyGrid:
    bin_counts: tuple[int, ...]
    epsilons: tuple[float, ...]
    percentiles: tuple[int, ...] = (25, 50, 75)
    draws: int = 20


FULL_GRID = StudyGrid(bin_counts=tuple(range(10, 31)),
                      epsilons=tuple(round(0.1 * i, 1) for i in range(1, 31)))
QUICK_GRID = StudyGrid(bin_counts=(10, 15, 20, 25, 30),
                       epsilons=(0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0), draws=5)


def study_seed(seed_hex: str) -> bytes:
    text = seed_hex.strip().lower().removeprefix("0x")
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ValueError("the study seed must be 64 hexadecimal digits (256 bits)")
    return bytes.fromhex(text)


@dataclass
class StudyInputs:
    """What every epsilon step needs: the sample, its true values and true histograms."""
    sample: StudySample
    true_values: np.ndarray                    # cells x percentiles
    bin_sets: list[StudyBins]
    true_counts: list[np.ndarray]              # one cells x bins array per bin set
    ranks: np.ndarray                          # percentiles x cells: rank of each percentile


def study_inputs(sample: StudySample, grid: StudyGrid) -> StudyInputs:
    bin_sets = study_bin_sets(grid.bin_counts)
    return StudyInputs(sample, sample.true_percentiles(grid.percentiles), bin_sets,
                       [sample.true_histograms(b) for b in bin_sets],
                       np.stack([percentile_rank(sample.sizes, x) for x in grid.percentiles]))


def _label(frame: pd.DataFrame, method: str, bin_count: int | None, epsilon: float) -> pd.DataFrame:
    frame.insert(0, "epsilon", epsilon)
    frame.insert(0, "bins", pd.array([bin_count] * len(frame), dtype="Int64"))
    frame.insert(0, "method", method)
    return frame


def evaluate_histograms(inputs: StudyInputs, grid: StudyGrid, epsilon: float,
                        seed: bytes) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    """Both histogram methods at every bin count, `grid.draws` draws at `epsilon`."""
    cells = len(inputs.sample.cells)
    widest = max(b.n_bins for b in inputs.bin_sets)
    generator = simulation_generator(seed, f"accuracy-study/histograms/epsilon={epsilon!r}")
    noise = simulated_geometric_noise(generator, epsilon, (grid.draws, cells, widest))
    strata = inputs.sample.cells["stratum"].array

    def layout(bins: StudyBins, counts: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
        protected = histogram_percentiles(counts[None], noise[:, :, :bins.n_bins], bins.lower,
                                          bins.upper, grid.percentiles)
        return (_label(summarise_percentiles(protected, inputs.true_values, strata,
                                             grid.percentiles), bins.method, bins.bin_count, epsilon),
                _label(summarise_l1(protected, inputs.true_values, strata),
                       bins.method, bins.bin_count, epsilon))

    # numpy releases the GIL in the array work: two threads use both cores.
    with ThreadPoolExecutor(max_workers=WORKER_THREADS) as pool:
        done = list(pool.map(layout, inputs.bin_sets, inputs.true_counts))
    return [a for a, _ in done], [b for _, b in done]


def evaluate_smooth_sensitivity(inputs: StudyInputs, grid: StudyGrid, epsilon: float,
                                seed: bytes, split: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Smooth-sensitivity percentiles: epsilon split evenly over the percentiles (`split`,
    total cost epsilon), or the whole epsilon for each (total cost epsilon x percentiles)."""
    sample = inputs.sample
    method = SMOOTH_SENSITIVITY if split else SMOOTH_SENSITIVITY_UNSPLIT
    generator = simulation_generator(seed, f"accuracy-study/{method}/epsilon={epsilon!r}")
    epsilon_x = epsilon / len(grid.percentiles) if split else epsilon
    protected = np.empty((grid.draws, len(sample.cells), len(grid.percentiles)))
    for k in range(len(grid.percentiles)):
        s_star = smooth_sensitivity(sample.earnings, sample.offsets, inputs.ranks[k], epsilon_x / 4)
        truth = np.clip(inputs.true_values[:, k], SMOOTH_LOWER, SMOOTH_UPPER)
        eta = sample_inverse_quartic(generator, (grid.draws, len(sample.cells)))
        protected[:, :, k] = smooth_sensitivity_percentiles(truth, s_star, eta, epsilon_x)
    strata = sample.cells["stratum"].array
    return (_label(summarise_percentiles(protected, inputs.true_values, strata, grid.percentiles),
                   method, None, epsilon),
            _label(summarise_l1(protected, inputs.true_values, strata), method, None, epsilon))


@release_task("prepare the study")
def prepare_study(sample: StudySample, grid: StudyGrid) -> StudyInputs:
    """True percentiles and the true histograms of every bin set. Privacy cost: none."""
    inputs = study_inputs(sample, grid)
    progress(f"study grid: {len(inputs.bin_sets)} histogram layouts (bin counts "
             f"{min(grid.bin_counts)}-{max(grid.bin_counts)}, Log-Normal and Even) + smooth "
             f"sensitivity, {len(grid.epsilons)} epsilons, percentiles "
             f"{'/'.join(map(str, grid.percentiles))}, {grid.draws} draws")
    return inputs


@release_task("evaluate one epsilon")
def evaluate_epsilon(inputs: StudyInputs, grid: StudyGrid, epsilon: float, seed: bytes,
                     step: int, started: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every method at `epsilon`: relative accuracy and L1 summaries. Privacy cost: none."""
    t0 = time.time()
    accuracy, l1 = evaluate_histograms(inputs, grid, epsilon, seed)
    smooth = [evaluate_smooth_sensitivity(inputs, grid, epsilon, seed, split)
              for split in (True, False)]
    now = time.time()
    done, total = step + 1, len(grid.epsilons)
    left = (now - started) / done * (total - done)
    progress(f"epsilon {epsilon:g} ({done}/{total}): {len(inputs.bin_sets)} histogram layouts "
             f"and smooth sensitivity (split, unsplit) x {grid.draws} draws in {now - t0:.1f} s; elapsed "
             f"{now - started:.0f} s, about {left:.0f} s left")
    return (pd.concat(accuracy + [a for a, _ in smooth], ignore_index=True),
            pd.concat(l1 + [b for _, b in smooth], ignore_index=True))
