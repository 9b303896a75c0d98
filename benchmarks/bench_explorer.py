"""The release explorer (docs/review/explorer.md): its size, the time to write it and to open it.

    .venv/bin/python benchmarks/bench_explorer.py [RELEASE] [--opens 3]

RELEASE: a release folder (default: a release of the default synthetic data, `pseo-das
synth`, made by the script into a temporary folder). Measured: the sizes of
public/explorer/ (plotly.min.js, data/release.js, the unit files) and what
internal/explorer/ adds beyond hard links to it; `pseo-das explore RELEASE --board` as a
fresh process (wall, peak memory); opening public/explorer/index.html from disk in headless
chromium driven by Playwright (the test extra, pointed at the system's chromium) until the
page says it is ready (`body[data-ready]`), --opens times, with the main thread's busy and
script time (Chrome DevTools Protocol, Performance.getMetrics). Result:
results/explorer-<date>.json (result_file.py).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench_cell_statistics import synthetic
from release_runs import pseo_das, release, session_env
from result_file import Run, table

KB, MB = 1e3, 1e6
OWN_FILES = ("release.js", "board.js")          # data/ files that are not a unit's


def sizes(release_dir: Path) -> list[list]:
    public = release_dir / "public" / "explorer"
    files = [p for p in public.rglob("*") if p.is_file()]
    units = sorted(p.stat().st_size for p in (public / "data").iterdir()
                   if p.name not in OWN_FILES)
    internal = [p for p in (release_dir / "internal" / "explorer").rglob("*")
                if p.is_file() and p.stat().st_nlink == 1]
    return [["public/explorer (MB, files)", round(sum(p.stat().st_size for p in files) / MB, 1),
             len(files)],
            ["plotly.min.js (MB)", round((public / "plotly.min.js").stat().st_size / MB, 1), 1],
            ["data/release.js (KB)", round((public / "data" / "release.js").stat().st_size / KB),
             1],
            ["unit files: smallest (KB)", round(units[0] / KB), len(units)],
            ["unit files: median (MB)", round(statistics.median(units) / MB, 2), len(units)],
            ["unit files: largest (MB)", round(units[-1] / MB, 2), len(units)],
            ["internal/explorer beyond hard links to the public copy (KB)",
             round(sum(p.stat().st_size for p in internal) / KB), len(internal)]]


def opening(folder: Path, opens: int) -> list[dict]:
    """Each of `opens` fresh pages: seconds until ready, main thread busy and script s."""
    from playwright.sync_api import sync_playwright
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    runs = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True,
                                             args=["--no-sandbox"])
        for _ in range(opens):
            page = browser.new_page()
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            started = time.perf_counter()
            page.goto((folder / "index.html").as_uri())
            page.wait_for_selector("body[data-ready]", timeout=120_000)
            wall = time.perf_counter() - started
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            runs.append({"wall_s": round(wall, 2), "busy_s": round(metrics["TaskDuration"], 2),
                         "script_s": round(metrics["ScriptDuration"], 2)})
            page.close()
        browser.close()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", type=Path, nargs="?")
    parser.add_argument("--opens", type=int, default=3)
    args = parser.parse_args()
    run = Run("explorer")
    with tempfile.TemporaryDirectory(prefix="pseo-bench-explorer-") as name:
        tmp = Path(name)
        folder = args.release
        if folder is None:
            folder = tmp / "rel" / "demo"
            release(synthetic(), folder, tmp / "store", "demo", session_env(tmp))
        written = pseo_das(["explore", str(folder), "--out", str(tmp / "explorer"), "--board"],
                           "explore")
        measured_sizes = sizes(folder)
        opened = opening((folder / "public" / "explorer").resolve(), args.opens)
    figures = [
        table("Sizes", ["what", "size", "files"], measured_sizes),
        table("Writing and opening it",
              ["step", "wall s", "main thread busy s", "of which script s", "peak MB"],
              [["`pseo-das explore RELEASE --board`", round(written["wall_s"], 1), None, None,
                round(written["peak_mb"])],
               *[[f"opening public/explorer from disk (headless chromium), run {n}",
                  r["wall_s"], r["busy_s"], r["script_s"], None]
                 for n, r in enumerate(opened, 1)]])]
    path = run.write(figures, details={"release": str(args.release or "made by the script"),
                                       "opens": opened})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
