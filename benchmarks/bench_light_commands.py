"""How fast the commands that run no flow start: wall time of each as a fresh process.

    python benchmarks/bench_light_commands.py [--repeat N]

Each command runs --repeat times (default 5) in a fresh temporary folder; the median wall
time is reported beside two baselines measured in the same run: a bare interpreter
(`python -c pass`) and `import pandas` (what a command that reads a table cannot avoid).
Target (issue 36): every light command under 2 s on the 2-core machine. Also timed: a
release refused for its configuration (`percentiles = [10, 50, 90]`, exit 2), which is
refused before it starts Prefect, opens MLflow or touches the store. For each command
the 3 slowest imports of one `python -X importtime` run are listed as evidence of what
its time is spent on. Results: benchmarks/results/light-commands-<date>.json (the schema of
result_file.py), rendered in docs/develop/benchmarks.md.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from result_file import Run, table

SEED = "ab" * 32
CLI = "from pseo_das.cli import main; main()"
COMMANDS = {
    "--help": ["--help"],
    "--version": ["--version"],
    "key new": ["key", "new", "{tmp}/k.key"],
    "noise-sample": ["noise-sample", "--epsilon", "1", "--count", "1000", "--seed", SEED,
                     "--out", "-"],
    "store init": ["store", "init", "{tmp}/store"],
    "store show": ["store", "show", "{tmp}/store"],
    "validate-layout": ["validate-layout", "{tmp}"],
    # refused before Prefect, MLflow or the store (exit 2): docs/operate/troubleshooting.md
    "release, refused configuration": ["release", "--data", "{tmp}", "--out", "{tmp}/out",
                                       "--config", "{tmp}/p.toml"],
}
REFUSED_TOML = "[earnings]\npercentiles = [10, 50, 90]\n"
BASELINES = {"python -c pass": "pass", "import pandas": "import pandas"}


def timed(argv: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def slowest_imports(argv: list[str], cwd: str, n: int = 3) -> list[str]:
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], cwd=cwd,
                          capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.removeprefix("import time:").split("|")
            if cumulative.strip().isdigit() and name.startswith(" ") and not name.startswith("  "):
                rows.append((int(cumulative), name.strip()))     # top-level imports only
    return [f"{name} {us / 1e6:.2f} s" for us, name in sorted(rows, reverse=True)[:n]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    run = Run("light-commands")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "p.toml").write_text(REFUSED_TOML)
        for name, code in BASELINES.items():
            argv = [sys.executable, "-c", code]
            results[name] = {"median_s": statistics.median(timed(argv, tmp)
                                                           for _ in range(args.repeat))}
        for name, command in COMMANDS.items():
            argv = [sys.executable, "-c", CLI, *[part.format(tmp=tmp) for part in command]]
            times = []
            for _ in range(args.repeat):
                if name == "store init":
                    subprocess.run(["rm", "-rf", f"{tmp}/store"])
                if name == "key new":
                    Path(f"{tmp}/k.key").unlink(missing_ok=True)
                times.append(timed(argv, tmp))
            results[name] = {"median_s": statistics.median(times),
                             "slowest_imports": slowest_imports(argv, tmp)}
    for name, result in results.items():
        verdict = "" if name in BASELINES else ("  ok" if result["median_s"] < 2 else "  OVER 2 s")
        print(f"{name:18s} {result['median_s']:6.2f} s{verdict}  "
              + ", ".join(result.get("slowest_imports", [])))
    rows = [[name, round(result["median_s"], 2),
             "-" if name in BASELINES else ("yes" if result["median_s"] < 2 else "NO"),
             ", ".join(result.get("slowest_imports", [])) or "-"]
            for name, result in results.items()]
    path = run.write([table(f"Wall time as a fresh process, median of {args.repeat}",
                            ["command", "wall s", "under 2 s", "slowest top-level imports"],
                            rows)],
                     details={"repeat": args.repeat, "results": results})
    print(f"results: {path}")

if __name__ == "__main__":
    main()
