"""`pseo-das synth` and the jobs layout's release (docs/operate/inputs.md), measured.

    .venv/bin/python benchmarks/bench_synth.py [--large 4500000]

Each command as a user runs it, timed with its peak memory (release_runs.py), its rows read
back from the files it wrote:

  synth --graduates N          (N = --large; the outcomes layout, written in chunks)
  synth --jobs                 (200,000 persons; then a release of it at
                                privacy.max_degrees_per_person = 2 into a fresh store)
  synth --jobs --second-degree-share S   for S = 0.1, 0.2, 0.3

Result: results/synth-<date>.json (result_file.py).
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from release_runs import pseo_das, release, session_env
from result_file import Run, table

SHARES = ("0.1", "0.2", "0.3")
K2_TOML = "[privacy]\nmax_degrees_per_person = 2\n"


def rows(path: Path) -> int:
    return pq.ParquetFile(path).metadata.num_rows


def jobs_row(label: str, data: Path, run: dict) -> list:
    degrees = rows(data / "graduates.parquet")
    persons = len(set(pq.read_table(data / "graduates.parquet", columns=["person_id"])
                      .column("person_id").to_pylist()))
    return [label, persons, degrees, degrees - persons, rows(data / "jobs.parquet"),
            round(run["wall_s"], 1), round(run["peak_mb"])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", type=int, default=4_500_000, help="graduates of the large "
                        "synth run (default 4,500,000)")
    args = parser.parse_args()
    run = Run("synth")
    with tempfile.TemporaryDirectory(prefix="pseo-bench-synth-") as name:
        tmp = Path(name)
        large = pseo_das(["synth", "--out", f"{tmp}/large", "--graduates", str(args.large)],
                         "synth-large")
        outcome_rows = rows(tmp / "large" / "outcomes.parquet")
        shutil.rmtree(tmp / "large")                    # its disk, before the next runs
        jobs = [jobs_row("`synth --jobs`", tmp / "jobs",
                         pseo_das(["synth", "--out", f"{tmp}/jobs", "--jobs"], "synth-jobs"))]
        for share in SHARES:
            out = tmp / f"jobs-{share}"
            jobs.append(jobs_row(f"`synth --jobs --second-degree-share {share}`", out, pseo_das(
                ["synth", "--out", str(out), "--jobs", "--second-degree-share", share],
                f"synth-jobs-{share}")))
        config = tmp / "k2.toml"
        config.write_text(K2_TOML)
        k2 = release(tmp / "jobs", tmp / "out" / "jobs", tmp / "store", "jobs", session_env(tmp),
                     config)
        sensitivities = sorted(set(pd.read_csv(tmp / "out" / "jobs" / "internal" / "ledger.csv",
                                               dtype=str)["sensitivity"]))
    figures = [
        table("synth in the outcomes layout", ["command", "graduates", "outcome rows", "wall s",
                                               "peak MB"],
              [[f"`synth --graduates {args.large}`", args.large, outcome_rows,
                round(large["wall_s"], 1), round(large["peak_mb"])]]),
        table("synth in the jobs layout (default seed)",
              ["command", "persons", "degree rows", "persons with a second degree", "job rows",
               "wall s", "peak MB"], jobs),
        table("Release of the `synth --jobs` data at max_degrees_per_person = 2 (fresh store)",
              ["release", "wall s", "peak GB", "new epsilon", "ledger.csv sensitivities"],
              [["`release --data data/jobs --config k2.toml`", k2["wall_s"], k2["peak_gb"],
                k2["summary"]["new_epsilon"], ", ".join(sensitivities)]])]
    path = run.write(figures)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
