"""Micro-benchmark of the flows correction's removal step (A.3.2, issue 13 item 6):
the segment-wise selection of `flows_candidates.remove_units` against the former
implementation, a global lexsort of every unit by (cell, clock), kept here as the plain
NumPy baseline. Both read the same noisy flows, weights and exponential draws; the run
checks that they remove the same units (draw for draw) and prints both times.

The noisy flows are simulated: origin cells of Zipf-like sizes whose graduates go mostly to
a few destinations, plus two-sided geometric noise at epsilon on all 1,021 destinations
(the study's simulation stream, never a release stream).

    python benchmarks/bench_flows_correction.py --units 20000000 [--epsilon 1.5] [--repeat 3]

Results: benchmarks/results/flows-correction-<date>.json (result_file.py), rendered in
docs/method/flows-accuracy.md.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from pseo_das.tasks.codes.destinations import NONEMPLOYED, N_DESTINATIONS
from pseo_das.tasks.employment_flows.flows_candidates import remove_units
from pseo_das.tasks.study.simulation_noise import simulated_geometric_noise, simulation_generator
from result_file import Run, table

SEED = b"pseo-das flows correction benchmark"


def lexsort_removal(flows: np.ndarray, excess: np.ndarray, log_w: np.ndarray,
                    exponentials) -> np.ndarray:
    """The removal as the flows correction did it before: one lexsort of all units."""
    flows = flows.copy()
    rows, cols = np.nonzero((flows > 0) & (excess[:, None] > 0))
    units = np.minimum(flows[rows, cols], excess[rows])
    entry = np.repeat(np.arange(len(rows)), units)
    waits = pd.Series(exponentials(len(entry))).groupby(entry, sort=False).cumsum().to_numpy()
    clock = np.log(waits) - log_w[rows, cols][entry]
    unit_row = rows[entry]
    order = np.lexsort((clock, unit_row))
    first_of_row = np.searchsorted(unit_row[order], unit_row[order], side="left")
    rank = np.arange(len(order)) - first_of_row
    removed_units = order[rank < excess[unit_row[order]]]
    flows[rows, cols] -= np.bincount(entry[removed_units], minlength=len(rows))
    return flows


def simulated_cells(n_cells: int, epsilon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clipped noisy flows, the excess over the noisy total, and log weights."""
    generator = simulation_generator(SEED, f"cells={n_cells}")
    sizes = np.minimum(generator.zipf(1.6, n_cells), 2_000) + 4
    true = np.zeros((n_cells, N_DESTINATIONS), dtype=np.int64)
    usual = generator.integers(0, NONEMPLOYED, size=(n_cells, 8))
    for k in range(8):
        np.add.at(true, (np.arange(n_cells), usual[:, k]), sizes // 10)
    true[:, NONEMPLOYED] += sizes - true.sum(axis=1)
    noisy = true + simulated_geometric_noise(generator, epsilon, true.shape)
    total = noisy.sum(axis=1)
    clipped = np.where(total[:, None] >= 0, np.maximum(noisy, 0), 0)
    excess = np.where(total >= 0, clipped.sum(axis=1) - total, 0)
    return clipped, excess, generator.normal(size=true.shape)


def units_per_cell(epsilon: float) -> float:
    clipped, excess, _ = simulated_cells(500, epsilon)
    return float(np.minimum(clipped, excess[:, None]).sum()) / 500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=20_000_000, help="about this many units")
    parser.add_argument("--epsilon", type=float, default=1.5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    run = Run("flows-correction")
    n_cells = max(1, int(args.units / units_per_cell(args.epsilon)))
    clipped, excess, log_w = simulated_cells(n_cells, args.epsilon)
    units = int(np.minimum(clipped, excess[:, None]).sum())
    print(f"{n_cells:,} origin cells x {N_DESTINATIONS:,} destinations, {units:,} units, "
          f"{int(excess.sum()):,} to remove")
    draws = simulation_generator(SEED, "exponentials").standard_exponential(units)
    times: dict[str, list[float]] = {"global lexsort (before)": [], "segment-wise (now)": []}
    results = {}
    for _ in range(args.repeat):
        for name, removal in (("global lexsort (before)", lexsort_removal),
                              ("segment-wise (now)", remove_units)):
            started = time.perf_counter()
            results[name] = removal(clipped, excess, log_w, lambda n: draws[:n])
            times[name].append(time.perf_counter() - started)
    same = all(np.array_equal(r, results["segment-wise (now)"]) for r in results.values())
    for name, t in times.items():
        print(f"{name:>24}: best {min(t):6.2f} s, median {np.median(t):6.2f} s")
    ratio = min(times["segment-wise (now)"]) / min(times["global lexsort (before)"])
    print(f"segment-wise / lexsort = {ratio:.2f}; identical draw for draw: {same}")
    best = {name: round(min(t), 1) for name, t in times.items()}
    path = run.write([table(f"The removal step, best of {args.repeat} (epsilon {args.epsilon:g})",
                            ["origin cells", "units", "removed", "global lexsort (before) s",
                             "segment-wise (now) s", "ratio", "same units removed"],
                            [[n_cells, units, int(excess.sum()), best["global lexsort (before)"],
                              best["segment-wise (now)"], round(ratio, 2), same]])],
                     details={"times_s": times})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
