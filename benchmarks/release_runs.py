"""Releases and other `pseo-das` commands run as a user runs them, for the benchmarks that
measure a documented sequence of commands (bench_employer_table.py, bench_cell_statistics.py,
bench_synth.py): each in a fresh process, timed with its peak memory by bench_release.measure,
its output in results/logs/.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from bench_release import BIN, RESULTS, measure, with_seed_key

SEED = "ab" * 32
LOGS = RESULTS / "logs"


def session_env(folder: Path) -> dict[str, str]:
    """The environment of a session's commands: the caller's, with a seed key of `folder`
    unless PSEO_DAS_SEED_KEY names one (releases seal their seeds with the agency's key)."""
    return with_seed_key(dict(os.environ), folder)


def pseo_das(args: list[str], log: str, env: dict[str, str] | None = None) -> dict:
    """`pseo-das ARGS` (failing is an error): wall seconds and peak MB."""
    LOGS.mkdir(parents=True, exist_ok=True)
    run = measure([str(BIN / "pseo-das"), *args], LOGS / f"{log}.log", env)
    return {"wall_s": run["wall_s"], "peak_mb": run["peak_mb"]}


def release(data: Path, out: Path, store: Path, release_id: str, env: dict[str, str],
            config: Path | None = None, *extra: str) -> dict:
    """One release of `data` into `out` and `store` (initialised when missing), audited in
    the MLflow store beside `out`: wall s, peak GB and its release_summary.json."""
    args = ["release", "--data", str(data), "--out", str(out), "--seed", SEED,
            "--release-id", release_id, "--store", str(store),
            "--tracking-uri", f"sqlite:///{out.parent}/mlflow.db", *extra]
    args += ["--config", str(config)] if config else []
    args += [] if store.exists() else ["--init-store"]
    run = pseo_das(args, f"release-{out.name}", env)
    return {"wall_s": round(run["wall_s"], 1), "peak_gb": round(run["peak_mb"] / 1024, 2),
            "summary": json.loads((out / "internal" / "release_summary.json").read_text())}
