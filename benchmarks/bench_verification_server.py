"""The verification server's response times and liveness (docs/method/verification.md, "Limits" of the
verification server).

    python benchmarks/bench_verification_server.py [--data DIR] [--no-synthesize] [SERVE OPTIONS]

On DIR (default: the default synthetic data, `pseo-das synth`, cached by
bench_cell_statistics.synthetic), first times `pseo-das synthesize --data DIR --out NEW` as a
user runs it (wall, peak memory; release_runs.py) unless --no-synthesize. Then creates a
privacy store, a seed key (unless PSEO_DAS_SEED_KEY names one), the ledger and an analyst in a
temporary folder, starts `pseo-das verify-server` on the data (options after --data go to `serve`, e.g. --query-seconds 5),
then sends queries one at a time: for each, the status, its wall time, and the longest
`GET /` of a thread that fetches the home page every 50 ms meanwhile. Prints the server's
start time and resident memory. Results: benchmarks/results/verification-server-<date>.json
(result_file.py), rendered in docs/method/verification.md.
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

from bench_cell_statistics import synthetic
from release_runs import pseo_das, session_env
from result_file import Run, table

CLI = str(Path(sys.executable).with_name("pseo-das"))
PORT = 8799
BASE = f"http://127.0.0.1:{PORT}"
ALL_COVARIATES = ["degree_level", "cip4", "institution", "emp_state", "industry", "inst_state",
                  "cip2", "years_after"]
TREND = {"interval": None, "trend": [{"first": 2001, "last": 2011, "interval": {"lower": -1}},
                                     {"first": 2012, "last": 2022, "interval": {"lower": -1}}]}


def query(**changes) -> dict:
    return {"outcome": "log_earnings", "covariates": ["degree_level", "cip2", "grad_year"],
            "references": {"degree_level": "05"}, "coefficient": "degree_level[07]",
            "interval": {"lower": 0.2}, "subset": {"years_after": [5]}, "groups": 50,
            "epsilon": "1", **changes}


QUERIES = [
    ("coefficient, M = 50", query()),
    ("another coefficient, M = 50", query(interval={"lower": 0.25})),
    ("the first again (stored)", query()),
    ('"epsilon": "1e-99999999"', query(epsilon="1e-99999999")),
    ("trend period -2e9 to 2e9", query(covariates=["degree_level"], interval=None, trend=[
        {"first": -2_000_000_000, "last": 2_000_000_000, "interval": {"lower": 0}}])),
    ("coefficient, M = 1000", query(groups=1000, interval={"lower": 0.21})),
    ("trend 2 x 11 cohorts, M = 1000", query(**TREND, covariates=["degree_level", "cip2"],
                                             groups=1000)),
    ("eight covariates, all records, M = 100", query(covariates=ALL_COVARIATES, subset={},
                                                     groups=100)),
]


def timed(body: dict, headers: dict) -> tuple[httpx.Response, float, float]:
    """The response, its wall time and the longest GET / meanwhile."""
    probes, done = [0.0], threading.Event()

    def probe():
        while not done.is_set():
            started = time.monotonic()
            httpx.get(f"{BASE}/", timeout=60)
            probes.append(time.monotonic() - started)
            time.sleep(0.05)
    thread = threading.Thread(target=probe)
    thread.start()
    started = time.monotonic()
    response = httpx.post(f"{BASE}/verify", json=body, headers=headers, timeout=600)
    wall = time.monotonic() - started
    done.set()
    thread.join()
    return response, wall, max(probes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="the inputs the server reads (default: "
                        "the default synthetic data)")
    parser.add_argument("--no-synthesize", action="store_true", help="do not time synthesize")
    args, serve_options = parser.parse_known_args()
    bench, rows, figures = Run("verification-server"), [], []
    data = args.data or synthetic()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        if not args.no_synthesize:
            made = pseo_das(["synthesize", "--data", str(data), "--out", str(root / "synthetic")],
                            "synthesize")
            print(f"synthesize {made['wall_s']:.1f} s, peak {made['peak_mb']:.0f} MB")
            figures.append(table("`pseo-das synthesize` of the data", ["wall s", "peak GB"],
                                 [[round(made["wall_s"], 1), round(made["peak_mb"] / 1024, 2)]]))
        run = [CLI, "verify-server", "--store", str(root / "store"), "--by", "bench"]
        env = session_env(root)                     # the ledger seals its seed with the key
        subprocess.run([CLI, "store", "init", str(root / "store")], check=True,
                       capture_output=True, env=env)
        subprocess.run(run[:2] + ["init"] + run[2:] + ["--global-budget", "100"], check=True,
                       capture_output=True, env=env)
        token = subprocess.run(run[:2] + ["add-analyst", "bench"] + run[2:] + ["--budget", "100"],
                               check=True, capture_output=True, text=True,
                               env=env).stdout.split()[-1]
        started = time.monotonic()
        server = subprocess.Popen(run[:2] + ["--data", str(data), "--port", str(PORT),
                                             "--store", str(root / "store"), "--tracking-uri",
                                             f"sqlite:///{root / 'mlflow.db'}", *serve_options],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            while True:
                if server.poll() is not None:
                    raise SystemExit(f"the server exited ({server.returncode}) before answering")
                try:
                    if httpx.get(f"{BASE}/", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            process = psutil.Process(server.pid)
            start_s, start_mb = time.monotonic() - started, process.memory_info().rss >> 20
            print(f"server start {start_s:.1f} s, {start_mb} MB")
            headers = {"Authorization": f"Bearer {token}"}
            for label, body in QUERIES:
                response, wall, probe = timed(body, headers)
                print(f"{label}: HTTP {response.status_code} in {wall:.2f} s, longest GET / "
                      f"meanwhile {probe:.3f} s")
                rows.append([label, response.status_code, round(wall, 2), round(probe, 2)])
            process.cpu_percent()
            time.sleep(1)
            cpu, end_mb = process.cpu_percent(), process.memory_info().rss >> 20
            print(f"server CPU in the last second {cpu:.0f}%, {end_mb} MB")
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(60)
    path = bench.write(figures + [
        table("The server", ["start s", "resident MB after start", "CPU % the second after",
                             "resident MB at the end"],
              [[round(start_s, 1), start_mb, round(cpu), end_mb]]),
        table("Queries, one at a time", ["query", "HTTP status", "wall s",
                                         "longest GET / meanwhile s"], rows)])
    print(f"results: {path}")


if __name__ == "__main__":
    main()
