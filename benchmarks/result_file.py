"""Benchmark result files: one JSON schema for every benchmark, written here and rendered
into the docs by docs/hooks/benchmarks.py (a page's `<!-- bench: NAME -->` line becomes the
tables of NAME's latest result).

A result is `benchmarks/results/<name>-<YYYYMMDDTHHMMSSZ>.json`:

    {"schema": 1,
     "benchmark": "light-commands",            # NAME: letters, digits and dashes
     "date": "2026-11-26T13:50:02Z",           # UTC, when the run started
     "commit": "d75c9f5",                      # measured code; "+changes": a modified checkout
     "command": ".venv/bin/python benchmarks/bench_light_commands.py --repeat 3",
     "machine": {"cpus": 2, "python": "3.11.7", "platform": "Linux-..."},
     "load_average": {"before": [1.2, 1.5, 1.4], "after": [1.3, 1.5, 1.4]},   # 1, 5, 15 min
     "source": "measured",                     # or how the figures came (e.g. transcribed)
     "figures": [{"title": "...", "columns": ["command", "median s"],
                  "rows": [["--help", 0.05], ...]}],
     "notes": "...",                           # optional: one paragraph under the tables
     "details": {...}}                         # optional: the raw runs, the script's own shape

`figures` holds what the docs show (numbers already rounded as they should be read);
`details` whatever else the script keeps. The folder's data/ and logs/ are git-ignored, the
result files are committed.
"""
from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

SCHEMA = 1
RESULTS = Path(__file__).resolve().parent / "results"
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
REQUIRED = ("benchmark", "date", "commit", "command", "machine", "load_average", "source",
            "figures")


def commit() -> str:
    """The commit measured (`+changes` when the checkout differs from it)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=RESULTS.parent, capture_output=True,
                              text=True).stdout
    head = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no").strip()
                   else "")


def machine() -> dict:
    return {"cpus": os.cpu_count(), "python": sys.version.split()[0],
            "platform": platform.platform()}


class Run:
    """The frame of one benchmark run: its start (date, load, commit) when created, its end
    and figures when written."""

    def __init__(self, benchmark: str, argv: list[str] | None = None):
        if not NAME.match(benchmark):
            raise ValueError(f"benchmark name {benchmark!r}: letters, digits and dashes")
        self.benchmark = benchmark
        self.started = time.gmtime()
        self.load_before = list(os.getloadavg())
        self.commit = commit()
        script = Path(sys.argv[0])
        self.command = " ".join([".venv/bin/python", f"benchmarks/{script.name}",
                                 *(sys.argv[1:] if argv is None else argv)])

    def write(self, figures: list[dict], *, notes: str = "", details: dict | None = None,
              folder: Path = RESULTS) -> Path:
        record = {"schema": SCHEMA, "benchmark": self.benchmark,
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", self.started),
                  "commit": self.commit, "command": self.command, "machine": machine(),
                  "load_average": {"before": self.load_before, "after": list(os.getloadavg())},
                  "source": "measured", "figures": figures}
        record |= {"notes": notes} if notes else {}
        record |= {"details": details} if details is not None else {}
        return write(record, folder)


def table(title: str, columns: list[str], rows: list[list]) -> dict:
    return {"title": title, "columns": columns, "rows": rows}


def check(record: dict, where: str) -> dict:
    """`record` as the schema wants it, or a ValueError naming `where` and what is wrong."""
    missing = [key for key in REQUIRED if key not in record]
    if record.get("schema") != SCHEMA or missing:
        raise ValueError(f"{where}: not a benchmark result of schema {SCHEMA}"
                         + (f" (missing: {', '.join(missing)})" if missing else ""))
    for number, figure in enumerate(record["figures"], 1):
        width = len(figure["columns"])
        bad = [i for i, row in enumerate(figure["rows"], 1) if len(row) != width]
        if bad:
            raise ValueError(f"{where}: figure {number} ({figure.get('title', '')!r}): rows "
                             f"{bad} do not have the {width} columns {figure['columns']}")
    return record


def write(record: dict, folder: Path = RESULTS) -> Path:
    check(record, record.get("benchmark", "result"))
    stamp = record["date"].replace("-", "").replace(":", "")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record['benchmark']}-{stamp}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def latest(benchmark: str, folder: Path = RESULTS) -> dict:
    """The latest result of `benchmark` (by its date) in `folder`. Files of the name's
    pattern written in an older shape (no "schema") are left aside; none left is an error."""
    records = []
    for path in folder.glob(f"{benchmark}-*.json"):
        record = json.loads(path.read_text())
        if not isinstance(record, dict) or "schema" not in record:
            continue
        if record.get("benchmark") == benchmark:
            records.append(check(record, str(path)))
    if not records:
        raise ValueError(f"no result of benchmark {benchmark!r} in {folder} "
                         f"(run its script, which writes {benchmark}-<date>.json)")
    return max(records, key=lambda r: r["date"])


def _cell(value) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "-"}[value]
    if isinstance(value, (int, float)):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def markdown(record: dict) -> str:
    """A result as the docs show it: where it comes from, then each figure as a table."""
    load = record["load_average"]
    before = load.get("before") or []
    after = load.get("after") or []
    loads = " / ".join(f"{values[0]:.1f}" for values in (before, after) if values)
    m = record["machine"]
    lines = [f"*{record['benchmark']}*: `{record['command']}`, {record['date']}, commit "
             f"`{record['commit']}`, {m.get('cpus', '?')} CPUs"
             + (f", load average (1 min) {loads}" + (" before / after" if before and after
                                                       else "") if loads else "")
             + ("" if record["source"] == "measured" else f"; {record['source']}") + ".", ""]
    for figure in record["figures"]:
        if figure.get("title"):
            lines += [f"**{figure['title']}**", ""]
        numeric = [all(isinstance(row[i], (int, float)) and not isinstance(row[i], bool)
                       for row in figure["rows"] if row[i] is not None)
                   for i in range(len(figure["columns"]))]
        lines.append("| " + " | ".join(figure["columns"]) + " |")
        lines.append("|" + "".join("---:|" if n else "---|" for n in numeric))
        lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in figure["rows"]]
        lines.append("")
    if record.get("notes"):
        lines += [record["notes"], ""]
    return "\n".join(lines)
