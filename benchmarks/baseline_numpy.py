"""Plain-NumPy yardstick for the release's histogram, noise and percentile steps.

Reads the same Parquet inputs, builds the institution x degree x 4-digit CIP x cohort
cells, and for 1, 5 and 10 years after graduation counts earnings into the 21 bins
(searchsorted + bincount), adds two-sided geometric noise to every bin of every
observable cell (ChaCha20, as the release), and computes the 25th/50th/75th percentiles
vectorized. No validation, no derived levels, no files, no audit: the bare arithmetic.

    python benchmarks/baseline_numpy.py DATA_DIR
"""
from __future__ import annotations

import sys
import time

import numpy as np
import pyarrow.parquet as pq
from randomgen import ChaCha

EDGES = np.array([10000, 17403, 22876, 27512, 31857, 36128, 40449, 44914, 49605, 54609, 60027,
                  65982, 72639, 80226, 89080, 99735, 113106, 130970, 157509, 207050, 262475], float)
UPPER = np.append(EDGES[1:], 614597.0)
FIRST, LAST, EPSILON = 2001, 2022, 1.0


def codes(column) -> np.ndarray:
    return column.dictionary_encode().combine_chunks().indices.to_numpy()


def main(data_dir: str) -> None:
    started = time.perf_counter()
    g = pq.read_table(f"{data_dir}/graduates.parquet")
    o = pq.read_table(f"{data_dir}/outcomes.parquet", columns=["person_id", "years_after", "earnings"])
    person = g["person_id"].to_numpy()
    degree_codes = codes(g["degree_level"])
    degree_names = g["degree_level"].dictionary_encode().combine_chunks().dictionary.to_pylist()
    window = np.array([3 if d == "05" else 5 for d in degree_names])[degree_codes]
    cohort = FIRST + (g["grad_year"].to_numpy() - FIRST) // window * window
    cip_names = g["cipcode"].dictionary_encode().combine_chunks().dictionary.to_pylist()
    cip4 = np.unique([c[:5] for c in cip_names], return_inverse=True)[1][codes(g["cipcode"])]
    parts = (codes(g["institution"]), degree_codes, cip4, cohort - FIRST)
    key = np.ravel_multi_index(parts, [int(x.max()) + 1 for x in parts])
    cells, graduate_cell = np.unique(key, return_inverse=True)
    first_member = np.zeros(len(cells), dtype=np.int64)
    first_member[graduate_cell] = np.arange(len(key))
    cell_end = cohort[first_member] + window[first_member] - 1

    order = np.argsort(person)
    row = order[np.searchsorted(person[order], o["person_id"].to_numpy())]
    earnings = o["earnings"].to_numpy(zero_copy_only=False)
    years = o["years_after"].to_numpy()
    p = -np.expm1(-EPSILON)
    published = finite = 0
    for k in (1, 5, 10):
        observable = cell_end + k <= LAST
        position = np.full(len(cells), -1)
        position[observable] = np.arange(observable.sum())
        chosen = (years == k) & (earnings >= EDGES[0])
        cell = position[graduate_cell[row[chosen]]]
        bins = np.searchsorted(EDGES, earnings[chosen], side="right") - 1
        n = int(observable.sum())
        counts = np.bincount(cell[cell >= 0] * 21 + bins[cell >= 0], minlength=n * 21).reshape(n, 21)
        rng = np.random.Generator(ChaCha(key=k, rounds=20))
        noisy = counts + rng.geometric(p, counts.shape) - rng.geometric(p, counts.shape)
        cumulative = noisy.cumsum(axis=1)
        total = cumulative[:, -1]
        for y in (25, 50, 75):
            j = np.argmax(100 * cumulative >= y * total[:, None], axis=1)
            before = np.where(j > 0, cumulative[np.arange(n), np.maximum(j - 1, 0)], 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                value = EDGES[j] + (UPPER[j] - EDGES[j]) * (y / 100 * total - before) / noisy[np.arange(n), j]
            finite += int(np.isfinite(value[total > 0]).sum())
        published += int((total >= 30).sum())
    print(f"baseline: {len(cells):,} cells, {published:,} published cell-years, {finite:,} percentiles, "
          f"{time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1])
