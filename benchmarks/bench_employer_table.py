"""The employer-side table in a release (docs/method/employer-protection.md), measured.

    .venv/bin/python benchmarks/bench_employer_table.py [--graduates 200000]

On `pseo-das synth --employers` data (cached in results/data/employers-<N>/) with the
default `[employer_table]` switched on: a first release into a fresh store, a second release
of the same data into that store, and the first release again without the table (another
fresh store, the same release id). For each: wall time and peak memory
(bench_release.measure), new epsilon and units reused (release_summary.json); then whether the second release's pseoemp_all.csv and
the other tables without the table are the same bytes, the ledger's employer worst case per
years after, and the error of the first release's table against the true counts
(employer_table_error.py). Result: results/employer-table-<date>.json (result_file.py).
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd

from bench_release import RESULTS
from employer_table_error import table_error
from pseo_das.schemas.distribution import table_path
from release_runs import pseo_das, release, session_env
from result_file import Run, table

TABLE_TOML = "[employer_table]\nenabled = true\n"       # the defaults: smooth-laplace, alpha 0.01
OTHER_TABLES = ("pseoe_all.csv", "pseof_all.csv", "pseoh_all.csv")


def synthetic(graduates: int) -> Path:
    data = RESULTS / "data" / f"employers-{graduates}"
    if not (data / "outcomes.parquet").exists():
        pseo_das(["synth", "--out", str(data), "--employers", "--graduates", str(graduates)],
                 "employers-synth")
    return data


def same_bytes(a: Path, b: Path, name: str) -> bool:
    return (table_path(a / "public", name).read_bytes()
            == table_path(b / "public", name).read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graduates", type=int, default=200_000)
    args = parser.parse_args()
    run = Run("employer-table")
    data = synthetic(args.graduates)
    with tempfile.TemporaryDirectory(prefix="pseo-bench-employer-") as name:
        tmp = Path(name)
        config = tmp / "table.toml"
        config.write_text(TABLE_TOML)
        env = session_env(tmp)
        releases = {
            "first, with the table": release(data, tmp / "big1", tmp / "S", "big1", env, config),
            "second, same store": release(data, tmp / "big2", tmp / "S", "big2", env, config),
            "first, without the table": release(data, tmp / "plain", tmp / "P", "big1", env)}
        rows = len(pd.read_csv(table_path(tmp / "big1" / "public", "pseoemp_all.csv")))
        second_same = same_bytes(tmp / "big1", tmp / "big2", "pseoemp_all.csv")
        others_same = all(same_bytes(tmp / "big1", tmp / "plain", t) for t in OTHER_TABLES)
        ledger = pd.read_csv(tmp / "big1" / "internal" / "ledger.csv", dtype=str)
        ledger = ledger[ledger["tabulation_id"].str.startswith("employer_table")]
        errors = table_error(data, tmp / "big1", config)
    worst = {int(t.rsplit(".y", 1)[1]): (int(n), e) for t, n, e in
             ledger[["tabulation_id", "n_cells", "employer_epsilon"]].itertuples(index=False)}
    figures = [
        table(f"Releases of {args.graduates:,} graduates with employers (pseo-das synth "
              "--employers), [employer_table] enabled with its defaults",
              ["release", "wall s", "peak GB", "new epsilon", "units reused"],
              [[label, r["wall_s"], r["peak_gb"], r["summary"]["new_epsilon"],
                r["summary"]["reused_measurements"]]
               for label, r in releases.items()]),
        table("The published table", ["what", "value"],
              [["rows of pseoemp_all.csv (cohorts and all cohorts x 1,020)", rows],
               ["the second release's pseoemp_all.csv: same bytes", second_same],
               [f"{', '.join(OTHER_TABLES)}: same bytes without the table", others_same]]),
        table("Error of the first release's pseoemp_all.csv against the true counts "
              "(employer_table_error.py)",
              ["years after", "cohorts", "employers' worst case epsilon (ledger)",
               "cohort cell: mean absolute error", "closed form 2 S*/epsilon",
               "mean true count", "cells with S* > 1 (%)",
               "all-cohort cell: mean absolute error", "all-cohort mean true count"],
              [[e["years_after"], e["cohorts"], worst.get(e["years_after"], (None, None))[1],
                round(e["cohort_error"], 2),
                None if e["expected"] is None else round(e["expected"], 2),
                round(e["cohort_truth"], 1), round(100 * e["above_share"], 1),
                round(e["all_error"], 1), round(e["all_truth"], 1)] for e in errors])]
    path = run.write(figures, details={"releases": releases, "errors": errors,
                                       "graduates": args.graduates})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
