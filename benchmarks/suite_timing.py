"""The test suite's time and memory, from the saved log of a run (docs/develop/tests.md).

    CI=true /usr/bin/time -v bash .ci/run > suite.log 2>&1      # on a fresh clone, at COMMIT
    .venv/bin/python benchmarks/suite_timing.py suite.log --commit COMMIT \
        --command 'CI=true /usr/bin/time -v bash .ci/run' [--note TEXT]

The suite is not run here (it takes 20 minutes or more on the 2-core machine): the log of a
run made as above is read. From pytest's last line (`979 passed, 66 warnings in 1198.85s
(0:19:58)`), its `--durations` table and `/usr/bin/time -v`'s report (wall, user, system,
peak resident set, exit status) it writes results/suite-timing-<date>.json (result_file.py),
dated when the run started (the log's modification time less the wall time, unless --date).
`time -v` measures the whole command (install included) and, for the peak, the largest
single process of it, not the sum of pytest's workers.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from result_file import SCHEMA, machine, table, write

SUMMARY = re.compile(r"^=+ (?P<counts>\d+ \w+(?:, \d+ \w+)*) in (?P<seconds>[\d.]+)s\b.*=+$")
DURATION = re.compile(r"^(?P<seconds>[\d.]+)s (?P<phase>call|setup|teardown)\s+(?P<test>\S+)$")
TIME_FIELDS = {"User time (seconds)": "user_s", "System time (seconds)": "system_s",
               "Elapsed (wall clock) time (h:mm:ss or m:ss)": "wall",
               "Maximum resident set size (kbytes)": "peak_kb", "Exit status": "exit_status"}


class LogError(ValueError):
    """The log lacks what a result needs."""


def clock_seconds(text: str) -> float:
    """`1:02:03.4` or `21:16.31` as seconds."""
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def parse(log: str, slowest: int = 5) -> dict:
    """From a pytest run's log under `/usr/bin/time -v`: the counts, pytest's seconds, the
    `slowest` longest test phases and time's wall, user, system seconds, peak GB, exit."""
    found: dict = {"durations": []}
    for line in log.splitlines():
        line = line.strip()
        if match := SUMMARY.match(line):
            found["counts"] = {word: int(n) for n, word in
                               (item.split() for item in match["counts"].split(", "))}
            found["pytest_s"] = float(match["seconds"])
        elif match := DURATION.match(line):
            found["durations"].append([match["test"], match["phase"], float(match["seconds"])])
        elif ":" in line and (key := line.rsplit(": ", 1)[0]) in TIME_FIELDS:
            found[TIME_FIELDS[key]] = line.rsplit(": ", 1)[1]
    missing = [name for name in ("counts", *TIME_FIELDS.values()) if name not in found]
    if missing:
        raise LogError("not the log of a pytest run under /usr/bin/time -v: no "
                       + ", ".join(missing))
    return {"counts": found["counts"], "pytest_s": found["pytest_s"],
            "wall_s": clock_seconds(found["wall"]), "user_s": float(found["user_s"]),
            "system_s": float(found["system_s"]),
            "peak_gb": round(int(found["peak_kb"]) / 1e6, 2),        # kB as time -v prints them
            "exit_status": int(found["exit_status"]),
            "slowest": sorted(found["durations"], key=lambda d: -d[2])[:slowest]}


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"        # as pytest and time print them


def figures(run: dict) -> list[dict]:
    counts = ", ".join(f"{n} {word}" for word, n in run["counts"].items())
    return [table("The suite", ["tests", "pytest wall", "whole command wall", "user s",
                                "system s", "peak RSS GB (largest process, 10^6 kB)", "exit status"],
                  [[counts, minutes(run["pytest_s"]), minutes(run["wall_s"]), run["user_s"],
                    run["system_s"], run["peak_gb"], run["exit_status"]]]),
            table(f"Its {len(run['slowest'])} slowest test phases", ["test", "phase", "s"],
                  [[f"`{test}`", phase, seconds] for test, phase, seconds in run["slowest"]])]


def record(run: dict, *, date: str, commit: str, command: str, notes: str = "") -> dict:
    return {"schema": SCHEMA, "benchmark": "suite-timing", "date": date, "commit": commit,
            "command": command, "machine": machine(),
            "load_average": {"before": [], "after": []}, "source": "measured",
            "figures": figures(run), "details": run} | ({"notes": notes} if notes else {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--commit", required=True, help="the commit of the clone measured")
    parser.add_argument("--command", required=True, help="the command whose log it is")
    parser.add_argument("--date", help="when the run started, UTC (default: the log's "
                        "modification time less the run's wall time)")
    parser.add_argument("--note", default="", help="a paragraph shown under the tables")
    args = parser.parse_args(argv)
    try:
        run = parse(args.log.read_text(errors="replace"))
    except (OSError, LogError) as error:
        print(f"{args.log}: {error}", file=sys.stderr)
        return 2
    date = args.date or time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.stat(args.log).st_mtime - run["wall_s"]))
    path = write(record(run, date=date, commit=args.commit, command=args.command,
                        notes=args.note))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
