"""The one-time migration of Prefect's local database (docs/operate/quickstart.md): what
`make install` runs once, `prefect server database upgrade -y`, timed on new databases.

    .venv/bin/python benchmarks/bench_prefect_database.py [--repeat 3]

Each run in a fresh process with PREFECT_HOME set to a new temporary folder (so a new
`prefect.db`, as on a new machine), timed with its peak memory (bench_release.measure).
Result: results/prefect-database-<date>.json (result_file.py).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from bench_release import BIN, measure
from release_runs import LOGS
from result_file import Run, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    run, walls, peaks = Run("prefect-database"), [], []
    LOGS.mkdir(parents=True, exist_ok=True)
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="pseo-bench-prefect-home-") as home:
            done = measure([str(BIN / "prefect"), "server", "database", "upgrade", "-y"],
                           LOGS / "prefect-database.log", dict(os.environ) | {"PREFECT_HOME": home})
        walls.append(round(done["wall_s"], 1))
        peaks.append(round(done["peak_mb"]))
        print(f"{walls[-1]} s, {peaks[-1]} MB")
    path = run.write([table("`prefect server database upgrade -y` on a new database",
                            ["runs", "median wall s", "each run s", "peak MB"],
                            [[args.repeat, statistics.median(walls),
                              ", ".join(map(str, walls)), max(peaks)]])])
    print(f"results: {path}")


if __name__ == "__main__":
    main()
