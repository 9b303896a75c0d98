"""The flows study over its full grid (docs/method/flows-accuracy.md): its time and memory.

    .venv/bin/python benchmarks/bench_flows_study.py [--quick]

`pseo-das evaluate --product flows --data DATA --out OUT` (with --quick: the reduced grid) as
a user runs it, in a fresh process, timed with its wall, CPU (user + system) and peak memory
(release_runs.py), on the default synthetic data (`pseo-das synth`, 200,000 graduates; cached
by bench_cell_statistics.synthetic), into a temporary folder. Result:
results/flows-study-<date>.json (result_file.py).
"""
from __future__ import annotations

import argparse
import tempfile

from bench_cell_statistics import synthetic
from bench_published_release import COMMAND_COLUMNS, command_row, timed
from result_file import Run, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the reduced grid")
    args = parser.parse_args()
    run = Run("flows-study")
    data = synthetic()
    quick = ["--quick"] if args.quick else []
    with tempfile.TemporaryDirectory(prefix="pseo-bench-flows-study-") as name:
        done, cpu = timed(["evaluate", "--product", "flows", "--data", str(data), "--out",
                           f"{name}/flows-study", *quick], "flows-study", None)
    label = f"`evaluate --product flows {' '.join(quick)}`".replace(" `", "`")
    path = run.write([table("The flows study on the default synthetic data", COMMAND_COLUMNS,
                            [command_row(label, done, cpu)])])
    print(f"results: {path}")


if __name__ == "__main__":
    main()
