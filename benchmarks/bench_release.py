"""Benchmark of `pseo-das release`: wall time and peak memory on a tiny input (the fixed
cost) and on about 1 and 10 million outcome rows, against the plain-NumPy baseline
(benchmarks/baseline_numpy.py) of the same histogram, noise and percentile steps.

    python benchmarks/bench_release.py [--sizes tiny,1m,10m] [--repeat N]

Every measurement is a fresh process (os.wait4 gives its peak RSS). The release runs as
a user runs it: temporary Prefect server, MLflow SQLite store; one warm-up release first
creates the Prefect and MLflow databases, so one-time migrations are not counted.
Marginal cost = wall(size) - wall(tiny); targets: fixed cost < 15 s, release marginal
cost <= 3 x baseline marginal cost.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
BIN = Path(sys.executable).parent
SIZES = {"tiny": 2_000, "1m": 425_000, "10m": 4_250_000}  # graduates (~2.35 outcome rows each)
SEED = "5eed" * 16


def measure(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one child process; fails loudly if it fails."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    errors = child.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{errors[-3000:]}")
    return wall, usage.ru_maxrss / 1024


def dataset(size: str) -> tuple[Path, int]:
    data = RESULTS / "data" / size
    if not (data / "outcomes.parquet").exists():
        print(f"building {size} data set ({SIZES[size]:,} graduates) ...", flush=True)
        subprocess.run([str(BIN / "pseo-das"), "synth", "--out", str(data),
                        "--graduates", str(SIZES[size])], check=True, stdout=subprocess.DEVNULL)
    import pyarrow.parquet as pq
    return data, pq.ParquetFile(data / "outcomes.parquet").metadata.num_rows


def release(data: Path, work: Path, tracking_uri: str, label: str) -> tuple[float, float]:
    out = work / f"release-{label}-{time.monotonic_ns()}"
    result = measure([str(BIN / "pseo-das"), "release", "--data", str(data), "--out", str(out),
                      "--seed", SEED, "--release-id", label, "--tracking-uri", tracking_uri])
    shutil.rmtree(out)
    return result


def median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), max(p[1] for p in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="tiny,1m,10m")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (10m: 1)")
    args = parser.parse_args()
    sizes = ["tiny"] + [s for s in args.sizes.split(",") if s != "tiny"]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tracking_uri = f"sqlite:///{work / 'mlflow.db'}"
        tiny, _ = dataset("tiny")
        release(tiny, work, tracking_uri, "warm-up")
        for size in sizes:
            data, n_rows = dataset(size)
            repeat = 1 if size == "10m" else args.repeat
            print(f"measuring {size} ({n_rows:,} outcome rows) x {repeat} ...", flush=True)
            rel = median([release(data, work, tracking_uri, size) for _ in range(repeat)])
            base = median([measure([sys.executable, str(HERE / "baseline_numpy.py"), str(data)])
                           for _ in range(repeat)])
            rows[size] = {"outcome_rows": n_rows, "release_s": rel[0], "release_peak_mb": rel[1],
                          "baseline_s": base[0], "baseline_peak_mb": base[1]}
    for row in rows.values():
        row["release_marginal_s"] = row["release_s"] - rows["tiny"]["release_s"]
        row["baseline_marginal_s"] = row["baseline_s"] - rows["tiny"]["baseline_s"]
        row["ratio"] = (row["release_marginal_s"] / row["baseline_marginal_s"]
                        if row["baseline_marginal_s"] > 0.5 else None)
    print_table(rows)
    RESULTS.mkdir(exist_ok=True)
    record = RESULTS / f"bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    record.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                                              "platform": platform.platform()},
                                  "results": rows}, indent=2))
    print(f"\nresults written to {record}")


def print_table(rows: dict[str, dict]) -> None:
    print("\n| size | outcome rows | release s | release peak MB | baseline s | baseline peak MB "
          "| release marginal s | baseline marginal s | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size, r in rows.items():
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        print(f"| {size} | {r['outcome_rows']:,} | {r['release_s']:.1f} | {r['release_peak_mb']:.0f} "
              f"| {r['baseline_s']:.1f} | {r['baseline_peak_mb']:.0f} | {r['release_marginal_s']:.1f} "
              f"| {r['baseline_marginal_s']:.1f} | {ratio} |")
    fixed = rows["tiny"]["release_s"]
    print(f"\nfixed cost (release on tiny): {fixed:.1f} s (target < 15 s)")
    for size, r in rows.items():
        if r["ratio"] is not None:
            print(f"{size}: release marginal / baseline marginal = {r['ratio']:.2f} (target <= 3)")


if __name__ == "__main__":
    main()
