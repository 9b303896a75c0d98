"""The demo release held, reviewed and published; released, checked and released again, as the
docs describe it: the figures of docs/review/drb-report.md, docs/reference/distribution.md
and docs/reference/outputs.md.

    .venv/bin/python benchmarks/bench_published_release.py [--limit-rows N]

On the default synthetic data (`pseo-das synth`, 200,000 graduates; cached by
bench_cell_statistics.synthetic), into temporary folders, each command as a user runs it in a
fresh process, timed with its peak memory (release_runs.py):

  release --hold-for-review (a new store), review approve, publish; the published folder's
  size                                                (results/review-publish-<date>.json)
  the release as `make release` makes it (another new store), then of it:
  validate-layout OUT/public; all/pseoe_all.xlsx written again from the published
  pseoe_all (write_release_workbook, in this process)   (results/output-checks-<date>.json)
  frictionless validate of all/datapackage.json (every row, or the first --limit-rows)
                                                 (results/frictionless-validation-<date>.json)
  its sizes (release_sizes.py)                          (results/release-sizes-<date>.json)
  a second release of the same data, store and parent folder under a new release id
  (nothing spent; identical files hard-linked)          (results/release-rerun-<date>.json)
"""
from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench_cell_statistics import synthetic
from bench_release import BIN, measure
from release_runs import LOGS, SEED, pseo_das, release, session_env
from release_sizes import file_sizes, summary
from release_sizes import record as record_sizes
from result_file import Run, table

MB = 1e6
FIRST, SECOND = "20261125T000000Z", "20261126T000000Z"


def cpu_seconds() -> float:
    """User + system seconds of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command_row(label: str, run: dict, cpu: float | None = None) -> list:
    return [label, round(run["wall_s"], 1), None if cpu is None else round(cpu, 1),
            round(run["peak_mb"])]


COMMAND_COLUMNS = ["command", "wall s", "CPU s (user + sys)", "peak MB"]


def timed(args: list[str], log: str, env: dict[str, str] | None) -> tuple[dict, float]:
    """`pseo-das ARGS`: its run (wall s, peak MB) and its CPU seconds."""
    before = cpu_seconds()
    run = pseo_das(args, log, env)
    return run, cpu_seconds() - before


def review_and_publish(data: Path, parent: Path, store: Path, env: dict[str, str]) -> list:
    """The release held, approved and published into `parent` from a new `store`: the three
    commands' rows, then the published folder's size."""
    held, held_cpu = timed(["release", "--data", str(data), "--out", str(parent / FIRST),
                            "--seed", SEED, "--release-id", FIRST, "--store", str(store),
                            "--init-store", "--tracking-uri", f"sqlite:///{parent}/mlflow.db",
                            "--hold-for-review"], "review-held", env)
    approve, approve_cpu = timed(["review", "approve", FIRST, "--by", "DRB chair",
                                  "--clearance", "CBDRB-FY27-042", "--store", str(store)],
                                 "review-approve", env)
    publish, publish_cpu = timed(["publish", FIRST, "--out", str(parent / FIRST), "--store",
                                  str(store)], "review-publish", env)
    _, whole = summary(file_sizes(parent / FIRST))
    return [command_row("`release --hold-for-review` (new store)", held, held_cpu),
            command_row("`review approve`", approve, approve_cpu),
            command_row("`publish`", publish, publish_cpu)], \
        [[whole["files"], whole["distinct"], round(whole["bytes"] / MB, 1)]]


def workbook_row(public: Path, work: Path) -> list:
    """all/pseoe_all.xlsx written again from the published pseoe_all, in a copy of all/."""
    from pseo_das.tasks.publication.labelled_workbook import write_release_workbook
    (work / "all").mkdir(parents=True)
    for path in (public / "all").glob("pseoe_all.csv*"):
        shutil.copy(path, work / "all" / path.name)
    started = time.perf_counter()
    written = write_release_workbook(work, FIRST)
    seconds = time.perf_counter() - started
    same = written.read_bytes() == (public / "all" / written.name).read_bytes()
    rows = pq.read_metadata(public / "all" / "parquet" / "pseoe_all.parquet").num_rows
    return ["`all/pseoe_all.xlsx` written again from the published `pseoe_all`", rows,
            round(seconds, 1), round(written.stat().st_size / MB, 1), same]


def frictionless(public: Path, limit_rows: int | None) -> list:
    command = [str(BIN / "frictionless"), "validate",
               *(["--limit-rows", str(limit_rows)] if limit_rows else []),
               str(public / "all" / "datapackage.json")]
    before = cpu_seconds()
    run = measure(command, LOGS / "frictionless.log")
    cpu = cpu_seconds() - before
    report = (LOGS / "frictionless.log").read_text(errors="replace")
    valid = "VALID" in report and "INVALID" not in report
    label = "`frictionless validate " + (f"--limit-rows {limit_rows} " if limit_rows else "") \
        + "OUT/public/all/datapackage.json`" + ("" if limit_rows else " (every row)")
    return [label, round(run["wall_s"], 1), round(cpu, 1), round(run["peak_mb"]), valid]


def rerun_row(data: Path, parent: Path, store: Path, env: dict[str, str]) -> list:
    """A second release of the same data, store and parent: its time and what it adds on
    disk (its files not hard-linked to the first's)."""
    second = release(data, parent / SECOND, store, SECOND, env)
    first_inodes = {(s.st_dev, s.st_ino) for p in (parent / FIRST).rglob("*") if p.is_file()
                    for s in [p.stat()]}
    files = [(p, p.stat()) for p in (parent / SECOND).rglob("*") if p.is_file()]
    own = {(s.st_dev, s.st_ino): (p, s.st_size) for p, s in files
           if (s.st_dev, s.st_ino) not in first_inodes}
    largest = max(own.values(), key=lambda item: item[1])
    return [second["wall_s"], second["summary"]["new_epsilon"], len(files),
            sum(1 for _, s in files if (s.st_dev, s.st_ino) in first_inodes),
            round(sum(size for _, size in own.values()) / MB, 2),
            f"`{largest[0].relative_to(parent / SECOND)}` ({largest[1] / MB:.2f} MB)"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-rows", type=int, help="frictionless: the first N rows of each "
                        "table only (default: every row)")
    args = parser.parse_args()
    data = synthetic()
    with tempfile.TemporaryDirectory(prefix="pseo-bench-published-") as name:
        env = session_env(Path(name))
        for folder in ("reviewed", "releases"):
            (Path(name) / folder).mkdir()
        review_run = Run("review-publish")
        commands, published = review_and_publish(data, Path(name) / "reviewed",
                                                 Path(name) / "review-store", env)
        path = review_run.write([
            table("Hold, approve, publish (the demo data)", COMMAND_COLUMNS, commands),
            table("The published folder", ["files", "distinct files", "MB"], published)])
        print(f"results: {path}")
        parent, store = Path(name) / "releases", Path(name) / "store"
        release(data, parent / FIRST, store, FIRST, env)         # as `make release` does
        public = parent / FIRST / "public"
        checks_run = Run("output-checks")
        layout, layout_cpu = timed(["validate-layout", str(public)], "validate-layout", env)
        checks = [table("Checks of the published demo release", COMMAND_COLUMNS,
                        [command_row("`validate-layout OUT/public`", layout, layout_cpu)]),
                  table("The labelled workbook", ["file", "rows", "seconds", "MB",
                                                  "same bytes as the release's"],
                        [workbook_row(public, Path(name) / "workbook")])]
        print(f"results: {checks_run.write(checks)}")
        validation_run = Run("frictionless-validation")
        validation = table("The demo release", [*COMMAND_COLUMNS, "valid"],
                           [frictionless(public, args.limit_rows)])
        print(f"results: {validation_run.write([validation])}")
        print(f"results: {record_sizes(parent / FIRST, Run('release-sizes'))}")
        rerun_run = Run("release-rerun")
        rerun = table(f"A second release (id {SECOND}) beside the first, same data and store",
                      ["wall s", "new epsilon", "files", "hard-linked to the first's",
                       "MB it adds", "the largest file it adds"],
                      [rerun_row(data, parent, store, env)])
    print(f"results: {rerun_run.write([rerun])}")


if __name__ == "__main__":
    main()
