"""Commands that run no flow start without Prefect (and without MLflow unless they read
runs): checked in a fresh interpreter per command, the way a user starts them."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

SEED = "ab" * 32
PROBE = ("import sys\nfrom pseo_das.cli import main\ntry:\n    main(sys.argv[1:])\n"
         "except SystemExit:\n    pass\n"
         "print(' '.join(m for m in ('prefect', 'mlflow', 'pandera', 'pandas', 'dask') "
         "if m in sys.modules), file=sys.stderr)\n")


def loaded_by(args: list[str], cwd) -> set[str]:
    """The heavy packages `pseo-das ARGS` imported (stderr's last line of the probe), run
    with no Prefect server configured (`schedule` then prints what it needs instead of
    serving its deployment until interrupted)."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=env)
    assert "usage:" not in done.stderr, done.stderr       # the command itself ran
    return set(done.stderr.strip().splitlines()[-1].split()) if done.stderr.strip() else set()


@pytest.mark.parametrize("args, allowed", [
    (["--help"], set()),
    (["--version"], set()),
    (["key", "new", "k.key"], set()),
    (["noise-sample", "--epsilon", "1", "--count", "5", "--seed", SEED, "--out", "-"],
     set()),
    (["store", "init", "s"], {"pandas"}),
    (["validate-layout", "."], {"pandas"}),
])
def test_a_light_command_imports_no_orchestration(args, allowed, tmp_path):
    assert loaded_by(args, tmp_path) <= allowed


def test_the_probe_sees_an_import(tmp_path):
    """The negative control: a command that runs a flow does import Prefect."""
    assert "prefect" in loaded_by(["schedule", "--data", "d", "--releases", "r"], tmp_path)
