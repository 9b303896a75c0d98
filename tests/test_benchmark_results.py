"""Benchmark result files (benchmarks/result_file.py) and the docs hook that renders them
(docs/hooks/benchmarks.py): a page's `<!-- bench: NAME -->` line becomes the latest result's
provenance line and tables; a bad file or a name without a result fails the docs build."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


result_file = load(ROOT / "benchmarks" / "result_file.py", "bench_result_file")
hook = load(ROOT / "docs" / "hooks" / "benchmarks.py", "bench_docs_hook")


def result(date: str, wall: float, **changes) -> dict:
    return {"schema": 1, "benchmark": "demo", "date": date, "commit": "abc1234",
            "command": ".venv/bin/python benchmarks/bench_demo.py --repeat 3",
            "machine": {"cpus": 2, "python": "3.11.7", "platform": "Linux"},
            "load_average": {"before": [1.25, 1.0, 0.9], "after": [2.0, 1.1, 0.9]},
            "source": "measured",
            "figures": [result_file.table("Start-up", ["command", "wall s", "rows"],
                                          [["--help", wall, 1234567], ["store show", None, 2]])]
            } | changes


def test_the_hook_renders_the_latest_result_as_a_table(tmp_path):
    result_file.write(result("2026-11-25T08:00:00Z", 9.99), tmp_path)
    result_file.write(result("2026-11-26T13:40:08Z", 0.05, notes="Read it so."), tmp_path)
    page = "# Page\n\nBefore.\n\n<!-- bench: demo -->\n\nAfter.\n"
    text = hook.render(page, "develop/page.md", tmp_path)
    assert "<!-- bench" not in text and text.startswith("# Page\n\nBefore.\n") and "After." in text
    assert ("`.venv/bin/python benchmarks/bench_demo.py --repeat 3`, 2026-11-26T13:40:08Z, "
            "commit `abc1234`, 2 CPUs, load average (1 min) 1.2 / 2.0 before / after.") in text
    assert "**Start-up**" in text and "Read it so." in text
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert table == ["| command | wall s | rows |", "|---|---:|---:|",
                     "| --help | 0.05 | 1,234,567 |", "| store show | - | 2 |"]
    assert "9.99" not in text                       # the older result is not the one shown


def test_a_transcribed_result_says_where_its_figures_come_from(tmp_path):
    source = "transcribed: the figures the README published in commit c8ecafa"
    result_file.write(result("2026-11-25T08:00:00Z", 1.0, source=source,
                             load_average={"before": [], "after": []}), tmp_path)
    text = hook.render("<!-- bench: demo -->", "p.md", tmp_path)
    assert f"commit `abc1234`, 2 CPUs; {source}." in text and "load average" not in text


def test_a_name_without_a_result_fails_naming_the_page(tmp_path):
    result_file.write(result("2026-11-25T08:00:00Z", 1.0), tmp_path)
    with pytest.raises(ValueError, match=r"develop/page.md: no result of benchmark 'other'"):
        hook.render("<!-- bench: other -->\n", "develop/page.md", tmp_path)


def test_a_malformed_result_is_refused(tmp_path):
    bad = result("2026-11-25T08:00:00Z", 1.0)
    bad["figures"][0]["rows"].append(["short row"])
    with pytest.raises(ValueError, match=r"rows \[3\] do not have the 3 columns"):
        result_file.write(bad, tmp_path)
    (tmp_path / "demo-20261125T080000Z.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="demo-20261125T080000Z.json"):
        hook.render("<!-- bench: demo -->", "p.md", tmp_path)
    missing = {k: v for k, v in result("2026-11-25T08:00:00Z", 1.0).items() if k != "commit"}
    with pytest.raises(ValueError, match="missing: commit"):
        result_file.check(missing, "x.json")


def test_a_run_records_its_start_commit_and_load(tmp_path):
    run = result_file.Run("demo", ["--repeat", "1"])
    path = run.write([result_file.table("t", ["a"], [[1]])], details={"raw": [1.0]},
                     folder=tmp_path)
    record = json.loads(path.read_text())
    assert path.name == f"demo-{record['date'].replace('-', '').replace(':', '')}.json"
    assert re.fullmatch(r"[0-9a-f]{7,}(\+changes)?", record["commit"])
    assert len(record["load_average"]["before"]) == 3 and record["details"] == {"raw": [1.0]}
    assert record["command"].endswith(" --repeat 1") and record["source"] == "measured"


def test_every_committed_result_and_every_docs_marker_hold():
    """The files in benchmarks/results/ follow the schema, and each marker in docs/ has one."""
    for path in sorted(result_file.RESULTS.glob("*.json")):
        record = json.loads(path.read_text())
        result_file.check(record, str(path))
        assert path.name.startswith(record["benchmark"] + "-")
    markers = {name for page in (ROOT / "docs").rglob("*.md")
               for name in hook.MARKER.findall(page.read_text())}
    assert markers >= {"release", "fixed-cost", "noise", "light-commands", "release-sizes",
                       "employer-table", "employer-study", "cell-statistics", "mos-accuracy",
                       "synth", "explorer", "review-publish", "output-checks",
                       "frictionless-validation", "release-rerun", "flows-study",
                       "prefect-database", "suite-timing", "verification-server"}
    for name in markers:
        assert result_file.latest(name)["benchmark"] == name


def test_release_sizes_records_the_folders_counting_a_hard_link_once(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))       # as a script finds result_file
    release_sizes = load(ROOT / "benchmarks" / "release_sizes.py", "bench_release_sizes")
    (tmp_path / "public" / "all").mkdir(parents=True)
    (tmp_path / "internal").mkdir()
    (tmp_path / "public" / "all" / "t.csv").write_bytes(b"x" * 3_000_000)
    (tmp_path / "internal" / "t.csv").hardlink_to(tmp_path / "public" / "all" / "t.csv")
    (tmp_path / "internal" / "notes.md").write_bytes(b"y" * 500_000)
    figure, = release_sizes.figures(*release_sizes.summary(release_sizes.file_sizes(tmp_path)))
    assert figure["rows"] == [
        ["internal/", 3_500_000, 3.5], ["public/", 3_000_000, 3.0],
        ["public/all/", 3_000_000, 3.0],
        ["whole folder (3 files, 2 distinct; 3.0 MB hard-linked, counted once)", 3_500_000, 3.5]]


SUITE_LOG = """\
.venv/bin/python -m pytest -n 2 --dist loadgroup
============================= slowest 30 durations =============================
153.29s setup    tests/test_audit_command.py::test_release_verifies_end_to_end@releases
97.38s call     tests/test_cip_recast_release.py::test_republish_recasts
0.51s teardown tests/test_x.py::test_y
================ 979 passed, 66 warnings in 1198.85s (0:19:58) =================
	Command being timed: "bash .ci/run"
	User time (seconds): 1988.74
	System time (seconds): 326.01
	Elapsed (wall clock) time (h:mm:ss or m:ss): 21:16.31
	Maximum resident set size (kbytes): 7231932
	Exit status: 0
"""


def test_suite_timing_reads_pytest_and_time_v_from_a_log(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))       # as a script finds result_file
    suite_timing = load(ROOT / "benchmarks" / "suite_timing.py", "bench_suite_timing")
    run = suite_timing.parse(SUITE_LOG, slowest=2)
    assert run == {"counts": {"passed": 979, "warnings": 66}, "pytest_s": 1198.85,
                   "wall_s": 1276.31, "user_s": 1988.74, "system_s": 326.01, "peak_gb": 7.23,
                   "exit_status": 0, "slowest": [
                       ["tests/test_audit_command.py::test_release_verifies_end_to_end@releases",
                        "setup", 153.29],
                       ["tests/test_cip_recast_release.py::test_republish_recasts", "call",
                        97.38]]}
    assert suite_timing.clock_seconds("1:02:03.5") == 3723.5
    record = suite_timing.record(run, date="2026-11-26T19:09:00Z", commit="310b2e5",
                                 command="CI=true /usr/bin/time -v bash .ci/run")
    assert result_file.check(record, "suite")["figures"][0]["rows"] == [
        ["979 passed, 66 warnings", "19 min 58 s", "21 min 16 s", 1988.74, 326.01, 7.23, 0]]
    cut = SUITE_LOG.replace("\tMaximum resident set size (kbytes): 7231932\n", "")
    with pytest.raises(suite_timing.LogError, match="no peak_kb"):
        suite_timing.parse(cut)
    log = tmp_path / "suite.log"
    log.write_text(SUITE_LOG.split("=====", 1)[0])          # pytest's part missing
    assert suite_timing.main([str(log), "--commit", "abc", "--command", "x"]) == 2


RELEASE_LOG = """\
10:00:02.000 | INFO    | Flow run 'calm-fox' - Beginning flow run 'calm-fox' for flow 'quarterly_release'
10:00:03.000 | INFO    | Task run 'validate and count the inputs-1a2' - validating the inputs
10:00:05.500 | INFO    | Task run 'validate and count the inputs-1a2' - Finished in state Completed()
10:00:06.000 | INFO    | Task run 'keep measurements in the privacy store-3b4' - Finished in state Completed()
10:00:09.000 | INFO    | Task run 'keep measurements in the privacy store-5c6' - Finished in state Completed()
10:00:10.000 | INFO    | Flow run 'calm-fox' - Finished in state Completed()
"""


def test_the_release_benchmark_gives_each_step_its_highest_rss_sample(monkeypatch):
    """bench_release.release_step_peaks: each RSS sample goes to the step whose interval
    holds it (the interval ends at the step's "Finished" line), a step run twice keeps its
    higher peak, and the step times are the same intervals'."""
    import datetime
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = load(ROOT / "benchmarks" / "bench_release.py", "bench_release_steps")
    started = datetime.datetime(2026, 11, 27, 10, 0, 0).timestamp()   # local, as the log
    rss = [[0.5, 100], [2.5, 900], [3.5, 400], [5.4, 700], [5.8, 2000], [7.0, 1500],
           [8.9, 300], [9.5, 250], [10.4, 120]]
    peaks = bench.release_step_peaks(RELEASE_LOG, started, 10.6, rss)
    assert peaks == {"start-up (imports, Prefect server)": 100,
                     "flow set-up (MLflow store and run)": 900,
                     "validate and count the inputs": 700,
                     "keep measurements in the privacy store": 2000, "flow end": 250,
                     "shutdown (drain Prefect workers, stop server)": 120}
    steps = bench.release_steps(RELEASE_LOG, started, 10.6)
    assert steps["keep measurements in the privacy store"] == pytest.approx(3.5)
    assert steps["validate and count the inputs"] == pytest.approx(2.5)


def test_the_release_benchmark_gives_each_step_the_cpu_used_in_its_intervals(monkeypatch):
    """bench_release.release_step_cpu: a step's CPU is what the process tree used between
    the last samples before its interval's start and end, summed over a step run twice;
    every CPU second sampled goes to exactly one step."""
    import datetime
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = load(ROOT / "benchmarks" / "bench_release.py", "bench_release_cpu")
    started = datetime.datetime(2026, 11, 27, 10, 0, 0).timestamp()   # local, as the log
    samples = [[0.5, 100, 0.4], [2.5, 900, 1.9], [3.5, 400, 2.6], [5.4, 700, 5.0],
               [5.8, 2000, 5.3], [7.0, 1500, 6.0], [8.9, 300, 9.1], [9.5, 250, 9.4],
               [10.4, 120, 9.5]]
    cpu = bench.release_step_cpu(RELEASE_LOG, started, 10.6, samples)
    assert cpu == pytest.approx({"start-up (imports, Prefect server)": 0.4,
                                 "flow set-up (MLflow store and run)": 1.5,
                                 "validate and count the inputs": 3.1,
                                 "keep measurements in the privacy store": 0.3 + 3.8,
                                 "flow end": 0.3,
                                 "shutdown (drain Prefect workers, stop server)": 0.1})
    assert sum(cpu.values()) == pytest.approx(samples[-1][2])
    assert bench.release_step_peaks(RELEASE_LOG, started, 10.6, samples)[
        "keep measurements in the privacy store"] == 2000


def test_the_release_benchmark_gives_the_median_output_size(monkeypatch):
    """bench_release.summarize: the release folder's size is the runs' median, and left out
    when a run has none (a failed release writes no folder)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = load(ROOT / "benchmarks" / "bench_release.py", "bench_release_output")
    runs = [{"wall_s": w, "peak_mb": 1.0, "cpu_s": 1.0, "output_mb": mb}
            for w, mb in ((3.0, 200.0), (1.0, 180.0), (2.0, 210.0))]
    assert bench.summarize(runs)["output_mb"] == 200.0
    runs[1]["output_mb"] = None
    assert "output_mb" not in bench.summarize(runs)
