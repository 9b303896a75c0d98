"""Benchmark of `pseo-das release` against the plain-NumPy baseline (baseline_numpy.py).

    python benchmarks/bench_release.py [--sizes tiny,1m,10m,50m,100m] [--engines local,dask] [--repeat N]

For each size, the synthetic input is built once with `pseo-das synth` and cached in
benchmarks/results/data/<size>/. Each measurement is a fresh child process: wall time is
time.perf_counter() around it, peak memory is the ru_maxrss that os.wait4 returns for it
(the largest resident set of the child and of its own reaped children, e.g. the
temporary Prefect server; a maximum, not a sum), and its CPU seconds are its user + system
time and its reaped children's; by step, the release and its children are sampled every
RSS_EVERY_S (RSS, and CPU so far). Each release writes into a fresh
temporary folder; all releases of a session share one MLflow SQLite store, as scheduled
releases do. One warm-up release runs first, so that one-time set-up (Prefect's database
migrations, creating the MLflow store) and cold file caches are not counted. Medians
over --repeat runs are reported.

fixed cost = release wall time on tiny (target < 15 s); marginal cost = wall(size) -
wall(tiny) for the release and the baseline; ratio = release marginal / baseline
marginal (target <= 3). National-scale targets (issue 14): 50 million outcome rows in under
60 s with peak RSS under 3 GB, 100 million under 120 s, peak RSS at 10, 50 and 100 million
within 20% of each other, the earnings path (the steps of EARNINGS_PATH_STEPS: counting,
noise, reading and recasting the stored histograms, derived levels, percentiles) within 3x
of the baseline's whole process at 10 million. The aggregation step ("validate and count
the inputs") is also reported in outcome rows per second, beside the baseline's marginal
rate. With --engines local,dask every size is released by both engines (dask: a 2-worker
LocalCluster). Results: benchmarks/results/release-<date>.json (result_file.py; a national
universe: release-national-<date>.json), rendered in docs/develop/benchmarks.md; the log of
each size's last release: benchmarks/results/logs/<size>-<engine>-release.log.

    python benchmarks/bench_release.py --national [--sizes 10m,100m] [--repeat N]

the national universe (issue 35): `pseo-das synth --institutions 2000` at each size
(default 10m and 100m outcome rows), whole release and NumPy baseline, results in
benchmarks/results/release-national-<date>.json (wall, peak RSS, commit, date, load
average; result_file.py). Targets: under 120 s and under 3 GB peak at each size, peaks within 20%
of each other (flat: memory by blocks of origin cells, not cells x destinations).

    python benchmarks/bench_release.py --fixed-cost [--repeat N]

times only the tiny release (2,000 graduates), whole process, (a) when it must start its own
Prefect server and (b) with a server kept running by `pseo-das server start` (its start-up
timed apart), beside a bare `import prefect, mlflow, pandas, pandera`; the validated
reference inputs are cached (one warm-up release fills the cache). Targets (issue 35): under
5 s with a server running, under 10 s without. Results:
benchmarks/results/fixed-cost-<date>.json, rendered in docs/operate/prefect-server.md.
"""
from __future__ import annotations

import argparse
import bisect
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import psutil
import pyarrow.parquet as pq

from release_sizes import MB, file_sizes, summary as folder_summary
from result_file import Run, table

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
BIN = Path(sys.executable).parent
SIZES = {"tiny": 2_000, "1m": 425_000, "10m": 4_250_000,   # graduates (~2.35 outcome rows each)
         "50m": 21_250_000, "100m": 42_500_000}
COUNT_STEP = "validate and count the inputs"
SYNTH_SEED = 20240101
DEMO_INSTITUTIONS = 40
RELEASE_SEED = "5eed" * 16
FIXED_COST_TARGET_S = 15.0
NATIONAL_INSTITUTIONS = 2000
NATIONAL_SIZES = "10m,100m"
NATIONAL_TARGETS = {"wall_s": 120.0, "peak_mb": 3072.0, "peak_spread": 0.2}
# A Prefect console log line: "18:21:36.042 | INFO    | Task run 'validate inputs-9f4' - ..."
# Prefect quotes a run's name with ' (or with " when the name holds a ').
LOG_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d(?:\.\d+)?) \| \w+\s*\| (Task|Flow) run "
                      r"(?:'(.+?)'|\"(.+?)\") - (.*)$")


def seconds_of_day(epoch: float) -> float:
    local = time.localtime(epoch)
    return local.tm_hour * 3600 + local.tm_min * 60 + local.tm_sec + epoch % 1


def with_seed_key(env: dict[str, str], folder: Path) -> dict[str, str]:
    """`env` with a new seed key in `folder` unless PSEO_DAS_SEED_KEY names one (releases
    seal their seeds with the agency's key)."""
    if "PSEO_DAS_SEED_KEY" in env:
        return env
    subprocess.run([str(BIN / "pseo-das"), "key", "new", f"{folder}/seed.key"], check=True,
                   stdout=subprocess.DEVNULL)
    return env | {"PSEO_DAS_SEED_KEY": f"{folder}/seed.key"}


RSS_EVERY_S = 0.2   # how often `measure` samples the RSS and CPU of the child and its children
BUSY_MIN_S = 1.0    # the shortest step whose cores busy are reported (5 samples or more)


def measure(command: list[str], log: Path, env: dict[str, str] | None = None,
            rss: bool = False) -> dict:
    """Run one child process, output to `log`; its wall seconds, peak RSS (MB), CPU seconds
    (user + system, its reaped children's included) and start; with `rss`, also `rss`:
    [seconds from the start, MB, CPU s so far] of the child and its children every
    RSS_EVERY_S (psutil; `release_step_peaks` gives each step's highest RSS,
    `release_step_cpu` its CPU)."""
    samples: list[list[float]] = []
    with open(log, "wb") as out:
        started_epoch, started = time.time(), time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        sampler = threading.Thread(target=sample_usage, args=(child, started, samples),
                                   daemon=True) if rss else None
        if sampler is not None:
            sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        if sampler is not None:
            sampler.join()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({child.returncode}):\n"
                         + log.read_text(errors="replace")[-3000:])
    return {"wall_s": wall, "peak_mb": usage.ru_maxrss / 1024,
            "cpu_s": usage.ru_utime + usage.ru_stime, "started": started_epoch,
            **({"rss": samples} if rss else {})}


def sample_usage(child: subprocess.Popen, started: float, samples: list[list[float]]) -> None:
    """Append [seconds since `started`, MB, CPU s] of `child` and its children until it
    exits: their RSS now, and the CPU seconds they have used so far (a child that has ended
    counted with its last reading)."""
    cpu: dict[int, float] = {}
    try:
        process = psutil.Process(child.pid)
        while process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
            mb = 0.0
            for one in [process, *process.children(recursive=True)]:
                try:
                    mb += one.memory_info().rss / 2 ** 20
                    times = one.cpu_times()
                    cpu[one.pid] = times.user + times.system
                except psutil.Error:   # a child that ended between the listing and the reading
                    pass
            samples.append([round(time.perf_counter() - started, 2), round(mb),
                            round(sum(cpu.values()), 2)])
            time.sleep(RSS_EVERY_S)
    except psutil.Error:   # the child ended
        pass


def step_marks(log_text: str, started: float, wall: float) -> list[tuple[float, str]]:
    """The ends of a release's steps, (seconds from its start, step), from the timestamps
    of the Prefect log lines.

    Each interval between two marks goes to the step that ends it: the flow's start
    (process start, imports, Prefect server), the "validating inputs" line (flow set-up:
    MLflow store and run), a sub-flow's start (its set-up), each task's "Finished" line
    (that task), the flow's end, and
    the process exit (shutdown: draining Prefect's workers, stopping the server).
    """
    marks = []
    for line in log_text.splitlines():
        match = LOG_LINE.match(line)
        if not match:
            continue
        hours, minutes, seconds, kind, name, other_name, message = match.groups()
        name = name or other_name
        offset = (int(hours) * 3600 + int(minutes) * 60 + float(seconds)
                  - seconds_of_day(started)) % 86400
        if kind == "Flow" and message.startswith("Beginning flow run"):
            marks.append((offset, "start-up (imports, Prefect server)"))
        elif kind == "Flow" and message.startswith("Beginning subflow run"):
            marks.append((offset, "sub-flow set-up"))
        elif kind == "Task" and message.startswith("validating"):
            marks.append((offset, "flow set-up (MLflow store and run)"))
        elif message.startswith("Finished in state"):
            marks.append((offset, name.rsplit("-", 1)[0] if kind == "Task" else "flow end"))
    marks.append((wall, "shutdown (drain Prefect workers, stop server)"))
    return marks


def release_steps(log_text: str, started: float, wall: float) -> dict[str, float]:
    """Seconds per release step (`step_marks`: each interval between two marks goes to the
    step that ends it)."""
    steps, previous = defaultdict(float), 0.0
    for offset, label in step_marks(log_text, started, wall):
        steps[label] += max(offset - previous, 0.0)
        previous = max(offset, previous)
    return dict(steps)


def release_step_peaks(log_text: str, started: float, wall: float,
                       rss: list[list[float]]) -> dict[str, float]:
    """The highest RSS sample (MB, `measure`'s `rss`) in each release step's intervals
    (`step_marks`); a step with no sample in its intervals is left out."""
    peaks: dict[str, float] = {}
    previous = 0.0
    for offset, label in step_marks(log_text, started, wall):
        inside = [mb for at, mb, *_ in rss if previous <= at <= offset]
        if inside:
            peaks[label] = max(peaks.get(label, 0.0), max(inside))
        previous = max(offset, previous)
    return peaks


def release_step_cpu(log_text: str, started: float, wall: float,
                     samples: list[list[float]]) -> dict[str, float]:
    """CPU seconds of the release and its children in each step's intervals (`step_marks`),
    from `measure`'s samples (each interval: the CPU used by the last sample before its end
    less that by the last sample before its start)."""
    times = [at for at, *_ in samples]

    def used(at: float) -> float:
        k = bisect.bisect_right(times, at)
        return samples[k - 1][2] if k else 0.0
    steps: dict[str, float] = defaultdict(float)
    previous = 0.0
    for offset, label in step_marks(log_text, started, wall):
        steps[label] += max(used(offset) - used(previous), 0.0)
        previous = max(offset, previous)
    return dict(steps)


def dataset(size: str, institutions: int = DEMO_INSTITUTIONS) -> tuple[Path, int]:
    """The cached input of `size` (built with `pseo-das synth` if missing) and its outcome
    rows: the demo universe, or a national one of `institutions` institutions."""
    national = institutions != DEMO_INSTITUTIONS
    data = RESULTS / "data" / (f"{size}-i{institutions}" if national else size)
    graduates = data / "graduates.parquet"
    if not graduates.exists() or pq.ParquetFile(graduates).metadata.num_rows != SIZES[size]:
        print(f"building the {size} data set ({SIZES[size]:,} graduates"
              + (f", {institutions:,} institutions" if national else "") + ") ...", flush=True)
        subprocess.run([str(BIN / "pseo-das"), "synth", "--out", str(data), "--graduates",
                        str(SIZES[size]), "--seed", str(SYNTH_SEED),
                        "--institutions", str(institutions)], check=True,
                       stdout=subprocess.DEVNULL)
    return data, pq.ParquetFile(data / "outcomes.parquet").metadata.num_rows


def run_release(data: Path, log: Path, label: str, tracking_uri: str,
                engine: str = "local", env: dict[str, str] | None = None) -> dict:
    """One release into a fresh temporary OUT and a fresh privacy store (so that every run
    measures everything), audited in the session's MLflow store; `output_mb`: the release
    folder's size (release_sizes.py: a file hard-linked under two names counted once)."""
    with tempfile.TemporaryDirectory(prefix="pseo-bench-") as tmp:
        run = measure([str(BIN / "pseo-das"), "release", "--data", str(data),
                       "--out", f"{tmp}/out", "--seed", RELEASE_SEED, "--release-id", label,
                       "--tracking-uri", tracking_uri, "--store", f"{tmp}/store",
                       "--init-store", "--engine", engine], log, env, rss=True)
        out = Path(tmp) / "out"
        run["output_mb"] = folder_summary(file_sizes(out))[1]["bytes"] / MB \
            if out.exists() else None
    text, started = log.read_text(errors="replace"), run.pop("started")
    run["steps"] = release_steps(text, started, run["wall_s"])
    samples = run.pop("rss")
    run["step_peaks_mb"] = release_step_peaks(text, started, run["wall_s"], samples)
    run["step_cpu_s"] = release_step_cpu(text, started, run["wall_s"], samples)
    return run


def run_baseline(data: Path, log: Path) -> dict:
    run = measure([sys.executable, str(HERE / "baseline_numpy.py"), str(data)], log)
    del run["started"]
    return run


def summarize(runs: list[dict]) -> dict:
    """Medians of wall time, peak memory and CPU, the raw runs, and the median run's steps
    (their times, peak RSS and CPU)."""
    wall = statistics.median(r["wall_s"] for r in runs)
    summary = {"wall_s": wall, "peak_mb": statistics.median(r["peak_mb"] for r in runs),
               "cpu_s": statistics.median(r["cpu_s"] for r in runs), "runs": runs}
    if all(r.get("output_mb") is not None for r in runs):
        summary["output_mb"] = statistics.median(r["output_mb"] for r in runs)
    if "steps" in runs[0]:
        median_run = min(runs, key=lambda r: abs(r["wall_s"] - wall))
        summary["steps"] = median_run["steps"]
        summary["step_peaks_mb"] = median_run["step_peaks_mb"]
        summary["step_cpu_s"] = median_run["step_cpu_s"]
    return summary


def bench_size(size: str, repeat: int, logs: Path, tracking_uri: str,
               engines: list[str], institutions: int, env: dict[str, str]) -> dict:
    data, n_rows = dataset(size, institutions)
    print(f"measuring {size} ({n_rows:,} outcome rows), {repeat} run(s) each ...", flush=True)
    releases = {engine: summarize([run_release(data, logs / f"{size}-{engine}-release.log",
                                               f"bench-{size}-{engine}", tracking_uri, engine,
                                               env)
                                   for _ in range(repeat)])
                for engine in engines}
    baseline = summarize([run_baseline(data, logs / f"{size}-baseline.log") for _ in range(repeat)])
    return {"graduates": SIZES[size], "outcome_rows": n_rows, "repeat": repeat,
            "release": releases[engines[0]], "releases": releases, "baseline": baseline}


# The employment-flows steps: reported on their own, and left out of the comparison with
# the baseline, which computes only the earnings tables.
FLOWS_STEPS = ("load reference inputs", "measure employment flows",
               "read the flows measurements from the store", "derive employment flows",
               "correct employment flows", "build public flows tables", "write the flows files")
# The earnings path of issue 14's target (ingest, validation, histograms, noise,
# percentiles): the steps that do the baseline's work, the derived levels and the CIP
# recast included. The counting pass also counts the flows (one pass over the outcomes),
# so the earnings path carries that too.
EARNINGS_PATH_STEPS = ("validate and count the inputs", "measure earnings histograms",
                       "read the earnings measurements from the store",
                       "derive earnings histograms", "build public earnings histograms",
                       "build public earnings tables")


def add_marginals(rows: dict[str, dict]) -> None:
    """Marginal cost over tiny, for the release (without its flows steps) and the baseline,
    and their ratio; and the flows steps' own time."""
    for row in rows.values():
        steps = row["release"]["steps"]
        row["flows_s"] = sum(steps.get(name, 0.0) for name in FLOWS_STEPS)
    tiny = rows["tiny"]
    for row in rows.values():
        row["release_marginal_s"] = ((row["release"]["wall_s"] - row["flows_s"])
                                     - (tiny["release"]["wall_s"] - tiny["flows_s"]))
        row["baseline_marginal_s"] = row["baseline"]["wall_s"] - tiny["baseline"]["wall_s"]
        row["ratio"] = (row["release_marginal_s"] / row["baseline_marginal_s"]
                        if row is not tiny and row["baseline_marginal_s"] > 0 else None)


def print_report(rows: dict[str, dict]) -> None:
    print("\n| size | outcome rows | engine | release wall s | release peak MB | output MB "
          "| flows steps s "
          "| counting step s | counting rows/s | baseline wall s | baseline peak MB "
          "| baseline marginal rows/s | release marginal s (without flows) | ratio |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, r in rows.items():
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        base_rate = (r["outcome_rows"] / r["baseline_marginal_s"]
                     if r["baseline_marginal_s"] > 0 and size != "tiny" else None)
        for engine, release in r["releases"].items():
            count_s = release["steps"].get(COUNT_STEP, 0.0)
            flows_s = sum(release["steps"].get(name, 0.0) for name in FLOWS_STEPS)
            print(f"| {size} | {r['outcome_rows']:,} | {engine} | {release['wall_s']:.1f} "
                  f"| {release['peak_mb']:.0f} | {release.get('output_mb') or 0:.0f} "
                  f"| {flows_s:.1f} | {count_s:.1f} "
                  f"| {r['outcome_rows'] / count_s if count_s else 0:,.0f} "
                  f"| {r['baseline']['wall_s']:.2f} | {r['baseline']['peak_mb']:.0f} "
                  f"| {'-' if base_rate is None else f'{base_rate:,.0f}'} "
                  f"| {r['release_marginal_s']:.1f} | {ratio} |")
    fixed = rows["tiny"]["release"]["wall_s"]
    print(f"\nfixed cost (release wall on tiny): {fixed:.1f} s, target < {FIXED_COST_TARGET_S:g} s: "
          + ("met" if fixed < FIXED_COST_TARGET_S else "MISSED"))
    for size, r in rows.items():
        if r["ratio"] is not None:
            print(f"{size}: the release's marginal cost without the flows steps (files, "
                  f"documents and checks included) is {r['ratio']:.2f} x the baseline's "
                  "(for reference; the target is the earnings path's, below)")
    for line in national_targets(rows):
        print(line)
    print("\nwhere the release's time goes (s, median run; from Prefect log timestamps):")
    for size, r in rows.items():
        for engine, release in r["releases"].items():
            steps = ", ".join(f"{name} {s:.1f}" for name, s in release["steps"].items())
            print(f"  {size} {engine}: {steps}")
    print("\nits CPU (s, median run; the release and its children):")
    for size, r in rows.items():
        for engine, release in r["releases"].items():
            steps = ", ".join(f"{name} {s:.1f}" for name, s in release["step_cpu_s"].items())
            print(f"  {size} {engine}: {release['cpu_s']:.1f} in all; {steps}")
    print(f"\npeak RSS by step (MB, median run; the release and its children every "
          f"{RSS_EVERY_S:g} s):")
    for size, r in rows.items():
        for engine, release in r["releases"].items():
            peaks = ", ".join(f"{name} {mb:,.0f}" for name, mb in release["step_peaks_mb"].items())
            print(f"  {size} {engine}: {peaks}")


def step_cpu_figure(rows: dict[str, dict]) -> dict:
    """The median runs' CPU seconds by step (the first engine's), a column per size, with
    the cores they kept busy (CPU s / wall s) at the largest size for the steps of
    BUSY_MIN_S or more (a shorter one's CPU is that of the sample intervals it overlaps);
    steps as `step_peaks_figure`."""
    sizes, largest = list(rows), list(rows.values())[-1]["release"]
    steps = list(dict.fromkeys(name for r in reversed(rows.values())
                               for name in r["release"]["step_cpu_s"]))

    def busy(name: str) -> float | None:
        wall = largest["steps"].get(name, 0.0)
        return round(largest["step_cpu_s"].get(name, 0.0) / wall, 2) if wall >= BUSY_MIN_S else None
    return table(f"CPU s by step (median run; the release and its children, sampled every "
                 f"{RSS_EVERY_S:g} s), and the cores busy at {sizes[-1]}",
                 ["step", *sizes, f"cores busy at {sizes[-1]}"],
                 [[name, *(round(rows[size]["release"]["step_cpu_s"].get(name, 0.0), 1)
                           for size in sizes), busy(name)] for name in steps])


def step_peaks_figure(rows: dict[str, dict]) -> dict:
    """The median runs' peak RSS by step (the first engine's), a column per size; the
    steps in the largest size's order (a small release's short steps have no sample)."""
    sizes = list(rows)
    steps = list(dict.fromkeys(name for r in reversed(rows.values())
                               for name in r["release"]["step_peaks_mb"]))
    return table(f"Peak RSS by step (MB, median run; the release and its children every "
                 f"{RSS_EVERY_S:g} s)", ["step", *sizes],
                 [[name, *(rows[size]["release"]["step_peaks_mb"].get(name) for size in sizes)]
                  for name in steps])


def national_targets(rows: dict[str, dict]) -> list[str]:
    """Issue 14's targets, for the sizes measured (in-process engine)."""
    lines = []
    wall = {s: r["release"]["wall_s"] for s, r in rows.items()}
    peak = {s: r["release"]["peak_mb"] for s, r in rows.items()}
    if "50m" in rows:
        lines.append(f"50m: {wall['50m']:.1f} s (target < 60 s: {'met' if wall['50m'] < 60 else 'MISSED'}), "
                     f"peak {peak['50m']:.0f} MB (target < 3,072 MB: "
                     f"{'met' if peak['50m'] < 3072 else 'MISSED'})")
    if "100m" in rows:
        lines.append(f"100m: {wall['100m']:.1f} s (target < 120 s: "
                     f"{'met' if wall['100m'] < 120 else 'MISSED'})")
    flat = [peak[s] for s in ("10m", "50m", "100m") if s in peak]
    if len(flat) > 1:
        spread = max(flat) / min(flat) - 1
        lines.append(f"peak RSS at 10m/50m/100m: {', '.join(f'{p:.0f}' for p in flat)} MB, spread "
                     f"{spread:.0%} (target within 20%: {'met' if spread <= 0.2 else 'MISSED'})")
    if "10m" in rows:
        r = rows["10m"]
        earnings_path = sum(r["release"]["steps"].get(name, 0.0) for name in EARNINGS_PATH_STEPS)
        times = earnings_path / r["baseline"]["wall_s"]
        lines.append(f"10m: earnings path ({', '.join(EARNINGS_PATH_STEPS)}) {earnings_path:.1f} s "
                     f"= {times:.1f} x the baseline's whole process {r['baseline']['wall_s']:.2f} s "
                     f"(target <= 3: {'met' if times <= 3 else 'MISSED'}); the rest of the release "
                     f"wall ({r['release']['wall_s'] - earnings_path:.1f} s) is the flows steps "
                     f"({r['flows_s']:.1f} s), writing and checking the files, the documents and "
                     "the orchestration (tiny's wall is the fixed cost)")
    return lines


def national_lines(rows: dict[str, dict]) -> list[str]:
    """Issue 35's national-universe targets, for the sizes measured (in-process engine)."""
    lines, peaks = [], []
    for size, r in rows.items():
        if size == "tiny":
            continue
        wall, peak = r["release"]["wall_s"], r["release"]["peak_mb"]
        peaks.append(peak)
        lines.append(f"national {size}: {wall:.1f} s (target < {NATIONAL_TARGETS['wall_s']:g} s: "
                     f"{'met' if wall < NATIONAL_TARGETS['wall_s'] else 'MISSED'}), peak "
                     f"{peak:.0f} MB (target < {NATIONAL_TARGETS['peak_mb']:,.0f} MB: "
                     f"{'met' if peak < NATIONAL_TARGETS['peak_mb'] else 'MISSED'})")
    if len(peaks) > 1:
        spread = max(peaks) / min(peaks) - 1
        lines.append(f"national peaks within {spread:.0%} of each other (target "
                     f"{NATIONAL_TARGETS['peak_spread']:.0%}: "
                     f"{'met' if spread <= NATIONAL_TARGETS['peak_spread'] else 'MISSED'})")
    return lines


FIXED_COST_TARGETS_S = {"with_server": 5.0, "without_server": 10.0}


def bench_fixed_cost(repeat: int, logs: Path) -> dict:
    """The tiny release's whole process with and without a kept Prefect server (module
    docstring); medians over `repeat` runs each, the server's start-up timed once."""
    tiny, _ = dataset("tiny")
    with tempfile.TemporaryDirectory(prefix="pseo-bench-fixed-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env |= {"PSEO_DAS_CACHE_DIR": f"{tmp}/cache", "PSEO_DAS_SERVER_HOME": f"{tmp}/server"}
        env = with_seed_key(env, Path(tmp))
        tracking_uri = f"sqlite:///{tmp}/mlflow.db"
        imports = summarize([measure([sys.executable, "-c",
                                      "import prefect, mlflow, pandas, pandera"],
                                     logs / "fixed-imports.log") for _ in range(repeat)])
        print("warm-up: one tiny release (fills the reference cache; not counted) ...",
              flush=True)
        run_release(tiny, logs / "fixed-warm-up.log", "fixed-warm-up", tracking_uri, env=env)
        without = summarize([run_release(tiny, logs / "fixed-without-server.log",
                                         f"fixed-without-{n}", tracking_uri, env=env)
                             for n in range(repeat)])
        server_start = measure([str(BIN / "pseo-das"), "server", "start"],
                               logs / "fixed-server-start.log", env)
        try:
            run_release(tiny, logs / "fixed-warm-up-server.log", "fixed-warm-up-server",
                        tracking_uri, env=env)   # the new server's database, first writes
            with_server = summarize([run_release(tiny, logs / "fixed-with-server.log",
                                                 f"fixed-with-{n}", tracking_uri, env=env)
                                     for n in range(repeat)])
        finally:
            subprocess.run([str(BIN / "pseo-das"), "server", "stop"], env=env,
                           stdout=subprocess.DEVNULL)
    for row in (imports, without, with_server):
        for run in row["runs"]:
            run.pop("started", None)
    return {"imports_s": imports["wall_s"], "server_start_s": server_start["wall_s"],
            "without_server": without, "with_server": with_server}


def fixed_cost_figures(record: dict) -> list[dict]:
    """The fixed-cost run as the docs show it: the medians, then the median runs' steps."""
    without, with_server = record["without_server"], record["with_server"]
    runs = lambda row: ", ".join(f"{r['wall_s']:.1f}" for r in row["runs"])   # noqa: E731
    steps = list(dict.fromkeys([*without["steps"], *with_server["steps"]]))
    return [table(f"Tiny release, whole process, median of {len(without['runs'])} runs",
                  ["imports s", "server start s", "own server s (target < 10)",
                   "server running s (target < 5)", "runs, own server", "runs, server running"],
                  [[round(record["imports_s"], 1), round(record["server_start_s"], 1),
                    round(without["wall_s"], 1), round(with_server["wall_s"], 1),
                    runs(without), runs(with_server)]]),
            table("Where the median run's time went (s, from the Prefect log timestamps)",
                  ["step", "own server", "server running"],
                  [[step, round(without["steps"].get(step, 0.0), 1),
                    round(with_server["steps"].get(step, 0.0), 1)] for step in steps])]


def fixed_cost_main(repeat: int) -> None:
    logs = RESULTS / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    run = Run("fixed-cost")
    record = bench_fixed_cost(repeat, logs)
    path = run.write(fixed_cost_figures(record), details=record)
    for key, target in FIXED_COST_TARGETS_S.items():
        wall = record[key]["wall_s"]
        print(f"{key.replace('_', ' ')}: {wall:.1f} s, target < {target:g} s: "
              + ("met" if wall < target else "MISSED"))
    print(f"results: {path}")


def release_figures(rows: dict[str, dict]) -> list[dict]:
    """The release benchmark as the docs show it: per size and engine, then the targets."""
    lines = []
    for size, r in rows.items():
        for engine, release in r["releases"].items():
            count_s = release["steps"].get(COUNT_STEP, 0.0)
            lines.append([size, r["outcome_rows"], engine, round(release["wall_s"], 1),
                          round(release["cpu_s"], 1), round(release["peak_mb"]),
                          None if release.get("output_mb") is None else round(release["output_mb"]),
                          round(sum(release["steps"].get(n, 0.0) for n in FLOWS_STEPS), 1),
                          round(count_s, 1),
                          round(r["outcome_rows"] / count_s) if count_s and size != "tiny" else None,
                          round(r["baseline"]["wall_s"], 2), round(r["baseline"]["peak_mb"])])
    fixed = rows["tiny"]["release"]["wall_s"]
    targets = [f"fixed cost (release wall on tiny): {fixed:.1f} s, target < "
               f"{FIXED_COST_TARGET_S:g} s: {'met' if fixed < FIXED_COST_TARGET_S else 'MISSED'}",
               *national_targets(rows)]
    return [table("Release and baseline, medians",
                  ["size", "outcome rows", "engine", "release s", "release CPU s",
                   "release peak MB", "release output MB",
                   "flows steps s", "counting step s", "counting rows/s", "baseline s",
                   "baseline peak MB"], lines),
            table("Targets (issue 14), as the script prints them", ["target"],
                  [[line] for line in targets]),
            step_peaks_figure(rows), step_cpu_figure(rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=None,
                        help="comma-separated: tiny, 1m, 10m, 50m, 100m")
    parser.add_argument("--engines", default="local", help="comma-separated: local, dask")
    parser.add_argument("--repeat", type=int, help="runs per size (default: 3 for tiny and 1m, 1 otherwise)")
    parser.add_argument("--institutions", type=int, default=DEMO_INSTITUTIONS,
                        help="synthetic universe: 40 (default) the demo one; any other number a "
                             "national one of that many institutions (`pseo-das synth --institutions`)")
    parser.add_argument("--national", action="store_true",
                        help=f"the national universe ({NATIONAL_INSTITUTIONS:,} institutions; sizes "
                             f"{NATIONAL_SIZES} unless --sizes): results/release-national-<date>.json")
    parser.add_argument("--fixed-cost", action="store_true", help="only the tiny release, with "
                        "and without a kept Prefect server (results/fixed-cost-<date>.json)")
    args = parser.parse_args()
    if args.fixed_cost:
        fixed_cost_main(args.repeat or 3)
        return
    if args.national:
        args.institutions = NATIONAL_INSTITUTIONS
    sizes = ["tiny"] + [s for s in (args.sizes or (NATIONAL_SIZES if args.national
                                                    else "tiny,1m,10m")).split(",")
                        if s and s != "tiny"]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; choose from {', '.join(SIZES)}")
    logs = RESULTS / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    run = Run("release" if args.institutions == DEMO_INSTITUTIONS else "release-national")
    tiny, _ = dataset("tiny", args.institutions)
    with tempfile.TemporaryDirectory(prefix="pseo-bench-audit-") as audit:
        tracking_uri = f"sqlite:///{audit}/mlflow.db"
        env = with_seed_key(dict(os.environ), Path(audit))
        print("warm-up: one release and one baseline run on tiny (not counted) ...", flush=True)
        run_release(tiny, logs / "warm-up-release.log", "bench-warm-up", tracking_uri, env=env)
        run_baseline(tiny, logs / "warm-up-baseline.log")
        engines = [e for e in args.engines.split(",") if e]
        rows = {size: bench_size(size, args.repeat or (3 if size in ("tiny", "1m") else 1), logs,
                                 tracking_uri, engines, args.institutions, env)
                for size in sizes}
    add_marginals(rows)
    print_report(rows)
    figures = release_figures(rows)
    if args.national:
        print("\n".join(["", *national_lines(rows)]))
        figures.append(table("National universe targets (issue 35)", ["target"],
                             [[line] for line in national_lines(rows)]))
    record = run.write(figures, details={"institutions": args.institutions, "results": rows})
    print(f"\nresults written to {record}")


if __name__ == "__main__":
    main()
