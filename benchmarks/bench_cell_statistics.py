"""The cell statistics (pseom_all.csv, docs/method/cell-statistics.md) in one privacy store
over three releases, and the mos accuracy study, measured.

    .venv/bin/python benchmarks/bench_cell_statistics.py

On the default synthetic data (`pseo-das synth`, cached in results/data/synth-200000/) with
`[mos]` enabled (its defaults, acknowledge_not_formally_dp): release A of the data without the
bachelor's graduates of 2019 and later, then B and C of all of it, into one store; for each
its wall time and peak memory, new epsilon, the cell statistics' units measured / reused and
their new epsilon (release_summary.json); whether B's and C's pseom_all.csv and ledger.csv
are the same bytes and A's rows are in B's; `pseo-das store verify`. Then
`pseo-das evaluate --product mos` on the
same data: its time and memory, and the median absolute error of `mean_y1` by method and
size class (its mos_accuracy.csv). Results: results/cell-statistics-<date>.json (the
releases) and results/mos-accuracy-<date>.json (the study), result_file.py.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench_release import RESULTS
from pseo_das.schemas.distribution import open_table, table_path
from release_runs import pseo_das, release, session_env
from result_file import Run, table

MOS_TOML = "[mos]\nenabled = true\nacknowledge_not_formally_dp = true\n"
LEFT_OUT = ("05", 2019)          # A: without the bachelor's graduates of 2019 and later


def synthetic() -> Path:
    data = RESULTS / "data" / "synth-200000"
    if not (data / "outcomes.parquet").exists():
        pseo_das(["synth", "--out", str(data)], "synth-200000")
    return data


def without_recent_bachelors(data: Path, out: Path) -> Path:
    """`data` less the graduates of degree LEFT_OUT[0] from year LEFT_OUT[1] (and their
    outcomes); the same IPEDS files."""
    graduates = pq.read_table(data / "graduates.parquet")
    level = pc.cast(graduates["degree_level"], "string")
    left = pc.and_(pc.equal(level, LEFT_OUT[0]),
                   pc.greater_equal(graduates["grad_year"], LEFT_OUT[1]))
    kept = graduates.filter(pc.invert(left))
    outcomes = pq.read_table(data / "outcomes.parquet")
    out.mkdir(parents=True)
    pq.write_table(kept, out / "graduates.parquet")
    pq.write_table(outcomes.filter(pc.is_in(outcomes["person_id"], kept["person_id"])),
                   out / "outcomes.parquet")
    shutil.copytree(data / "ipeds", out / "ipeds")
    return out


def mean_y1_errors(study: Path) -> tuple[list[str], list[list]]:
    """The study's median absolute errors of mean_y1: one row per epsilon and method (the
    published histograms', at zero extra epsilon, once), a column per size class."""
    errors = pd.read_csv(study / "mos_accuracy.csv")
    errors = errors[errors["statistic"] == "mean_y1"]
    classes = list(dict.fromkeys(errors["size_class"]))
    cells = errors.groupby("size_class")["cells"].max()
    rows, published = [], []
    for (epsilon, method, extra), group in errors.groupby(
            ["epsilon", "method", "extra_epsilon"], sort=False):
        by_class = group.set_index("size_class")["median_abs_error"]
        row = [f"{epsilon:g}" if extra else "0 extra", method,
               *(round(by_class[c]) if c in by_class else None for c in classes)]
        (rows if extra else published).append(row)
    return [f"{c} ({cells[c]} cells)" for c in classes], rows + published[:1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    run = Run("cell-statistics")
    data = synthetic()
    with tempfile.TemporaryDirectory(prefix="pseo-bench-mos-") as name:
        tmp = Path(name)
        env = session_env(tmp)
        config = tmp / "mos.toml"
        config.write_text(MOS_TOML)
        before = without_recent_bachelors(data, tmp / "syn200-before")
        releases = {r: release(d, tmp / "rel" / r, tmp / "store", r, env, config)
                    for r, d in (("A", before), ("B", data), ("C", data))}

        def read(r: str, name: str) -> bytes:
            return table_path(tmp / "rel" / r / "public", name).read_bytes() \
                if name.startswith("pseo") else (tmp / "rel" / r / "internal" / name).read_bytes()

        def rows(r: str) -> set[str]:
            with open_table(table_path(tmp / "rel" / r / "public", "pseom_all.csv")) as text:
                return set(text.read().splitlines())
        same = all(read("B", f) == read("C", f) for f in ("pseom_all.csv", "ledger.csv"))
        a_in_b = rows("A") <= rows("B")
        pseo_das(["store", "verify", str(tmp / "store")], "store-verify", env)   # or fails
    rows = []
    for r, measured in releases.items():
        s, cells = measured["summary"], measured["summary"]["cell_statistics"]
        rows.append([r, s["new_epsilon"], cells["new_measurements"],
                     cells["reused_measurements"], cells["new_epsilon"], s["max_lifetime_epsilon"],
                     measured["wall_s"], measured["peak_gb"]])
    path = run.write([
        table("Releases into one store with [mos] enabled (A: without the bachelor's graduates "
              "of 2019 and later; B, C: all of the data)",
              ["release", "new epsilon", "cell statistics: units measured",
               "units reused", "new epsilon of the cell statistics",
               "largest lifetime epsilon", "wall s", "peak GB"], rows),
        table("Checks", ["what", "holds"],
              [["B's and C's pseom_all.csv and ledger.csv: same bytes", same],
               ["A's pseom_all.csv rows are in B's unchanged", a_in_b],
               ["`pseo-das store verify store` passes", True]])],
        details={"releases": releases})
    print(f"results: {path}")
    run = Run("mos-accuracy")
    with tempfile.TemporaryDirectory(prefix="pseo-bench-mos-") as name:
        study = pseo_das(["evaluate", "--product", "mos", "--data", str(data), "--out",
                          f"{name}/study"], "evaluate-mos", session_env(Path(name)))
        classes, errors = mean_y1_errors(Path(name) / "study")
    path = run.write([
        table("`pseo-das evaluate --product mos` on the same data: median absolute error of "
              "mean_y1 (2016 dollars) by the cell's true observations",
              ["epsilon E", "method", *classes], errors),
        table("The study's run", ["wall s", "peak GB"],
              [[round(study["wall_s"]), round(study["peak_mb"] / 1024, 1)]])],
        details={"study": study})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
