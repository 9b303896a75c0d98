"""Plain-NumPy yardstick for the release's histogram, noise and percentile steps.

Reads the needed Parquet columns, links outcomes to graduates, builds the institution x
degree x 4-digit CIP x cohort cells, and for 1, 5 and 10 years after graduation counts
earnings into the bins (searchsorted + bincount), adds two-sided geometric noise to every
bin of every observable cell (ChaCha20 under numpy's Generator, keyed exactly as
tasks/privacy/streams.py keys it, cells in the same canonical order) and computes the
percentiles vectorized. Parameters come from pseo_das/default_config.toml.
No validation, no derived levels, no files, no audit: the bare arithmetic.

    python benchmarks/baseline_numpy.py DATA_DIR [--seed HEX64]
"""
from __future__ import annotations

import argparse
import hashlib
import time
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from randomgen import ChaCha

CONFIG = Path(__file__).resolve().parents[1] / "pseo_das" / "default_config.toml"
STREAM_DOMAIN = b"pseo-das/noise-stream/v1"  # as in tasks/privacy/streams.py
DEFAULT_SEED = "5eed" * 16


def sorted_codes(column: pa.ChunkedArray, rename=lambda s: s) -> tuple[np.ndarray, np.ndarray]:
    """Integer code of each row, numbered in sorted order of the (renamed) distinct values.
    `rename` runs once per distinct value, never per row."""
    array = column.combine_chunks()
    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    distinct, rank = np.unique([rename(v) for v in array.dictionary.to_pylist()], return_inverse=True)
    return rank[array.indices.to_numpy()], distinct


def noise_generator(seed: bytes, tabulation_id: str) -> np.random.Generator:
    """The release's noise stream for one tabulation: ChaCha20 keyed by SHA-256."""
    key = hashlib.sha256(STREAM_DOMAIN + b"\x00" + seed + b"\x00" + tabulation_id.encode()).digest()
    return np.random.Generator(ChaCha(key=int.from_bytes(key, "little"), counter=0, rounds=20))


def build_cells(graduates: pa.Table, cfg: dict) -> tuple[np.ndarray, np.ndarray]:
    """Each graduate's cell (0.. in canonical order) and each cell's last cohort year."""
    first = cfg["cells"]["first_cohort_year"]
    institution, _ = sorted_codes(graduates["institution"])
    degree, degrees = sorted_codes(graduates["degree_level"])
    cip4, _ = sorted_codes(graduates["cipcode"], lambda c: c[:2] + c[3:5])
    by_degree = cfg["cells"]["cohort_years_by_degree"]
    window = np.array([by_degree.get(d, cfg["cells"]["default_cohort_years"]) for d in degrees])[degree]
    cohort = first + (graduates["grad_year"].to_numpy().astype(np.int64) - first) // window * window
    parts = (institution, degree, cip4, cohort - first)
    key = np.ravel_multi_index(parts, [int(p.max()) + 1 for p in parts])
    _, graduate_cell = np.unique(key, return_inverse=True)
    member = np.empty(graduate_cell.max() + 1, dtype=np.int64)
    member[graduate_cell] = np.arange(len(key))
    return graduate_cell, (cohort + window - 1)[member]


def percentiles(noisy: np.ndarray, lower: np.ndarray, upper: np.ndarray, ys) -> np.ndarray:
    """First-bin rule: first J with 100 C(J) >= Y T, interpolated in bin J; NaN if T <= 0."""
    cumulative = noisy.cumsum(axis=1)
    total = cumulative[:, -1]
    rows = np.arange(len(noisy))
    out = np.full((len(noisy), len(ys)), np.nan)
    for k, y in enumerate(ys):
        j = np.argmax(100 * cumulative >= y * total[:, None], axis=1)
        before = np.where(j > 0, cumulative[rows, j - 1], 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = lower[j] + (upper[j] - lower[j]) * (y / 100 * total - before) / noisy[rows, j]
        out[total > 0, k] = value[total > 0]
    return out


def noisy_tables(data_dir: Path, seed: bytes, cfg: dict) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """years_after -> (noisy counts: observable cells x bins, percentiles: cells x 3)."""
    edges = np.asarray(cfg["earnings"]["bin_edges"], dtype=np.float64)
    upper = np.append(edges[1:], cfg["earnings"]["top_bin_upper"])
    graduates = pq.read_table(data_dir / "graduates.parquet",
                              columns=["person_id", "institution", "degree_level", "cipcode", "grad_year"])
    outcomes = pq.read_table(data_dir / "outcomes.parquet", columns=["person_id", "years_after", "earnings"])
    graduate_cell, cell_end = build_cells(graduates, cfg)
    person = graduates["person_id"].to_numpy()
    order = np.argsort(person, kind="stable")
    row = order[np.searchsorted(person[order], outcomes["person_id"].to_numpy())]
    earnings = outcomes["earnings"].to_numpy(zero_copy_only=False)  # nulls -> NaN
    years = outcomes["years_after"].to_numpy()
    p, n_bins = -np.expm1(-cfg["privacy"]["epsilon_per_tabulation"]), len(edges)
    tables = {}
    for k in cfg["cells"]["years_after"]:
        observable = cell_end + k <= cfg["cells"]["last_earnings_year"]
        n = int(observable.sum())
        position = np.full(len(cell_end), -1)
        position[observable] = np.arange(n)
        chosen = (years == k) & (earnings >= cfg["earnings"]["sample_floor"])
        cell = position[graduate_cell[row[chosen]]]
        bins = np.searchsorted(edges, earnings[chosen], side="right") - 1
        kept = cell >= 0
        counts = np.bincount(cell[kept] * n_bins + bins[kept], minlength=n * n_bins).reshape(n, n_bins)
        rng = noise_generator(seed, f"earnings.I.cip4.y{k}")
        noisy = counts + (rng.geometric(p, counts.shape) - rng.geometric(p, counts.shape))
        tables[k] = noisy, percentiles(noisy, edges, upper, cfg["earnings"]["percentiles"])
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--seed", default=DEFAULT_SEED, help="release seed, 64 hex digits")
    args = parser.parse_args()
    started = time.perf_counter()
    cfg = tomllib.loads(CONFIG.read_text())
    tables = noisy_tables(args.data_dir, bytes.fromhex(args.seed), cfg)
    summary = ", ".join(f"y{k}: {len(c):,} cells, {int(np.isfinite(q).sum()):,} percentiles"
                        for k, (c, q) in tables.items())
    print(f"baseline: {summary} ({time.perf_counter() - started:.2f} s)")


if __name__ == "__main__":
    main()
