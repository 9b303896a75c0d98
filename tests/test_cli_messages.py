"""What the commands say: what this run spent, commands a reader can paste, refusals before
any slow start (Prefect, the verification server's data), and warnings where a setting
cannot do what it seems to."""
from __future__ import annotations

import socket
from pathlib import Path
import subprocess
import sys

import pytest

from pseo_das.cli import check_port_free, main, spending_sentence
from pseo_das.errors import PseoDasError
from pseo_das.tasks.privacy.store import init_store
from pseo_das.tasks.verification.ledger import init_ledger

SUMMARY = {"new_epsilon": "6", "new_measurements": 4665, "reused_measurements": 3110,
           "populations_measured": 700, "populations_reused": 0,
           "max_lifetime_epsilon": "6", "lifetime_epsilon_cap": "30"}


def test_a_run_that_measured_nothing_says_it_spent_nothing():
    """A rerun of a release id into another folder re-derives the files of an attempt
    measured earlier: the release's figures are not this run's spending."""
    said = spending_sentence(SUMMARY, new_spending=False)
    assert said.startswith("This run spent nothing") and "new epsilon 6 then" in said
    measured = spending_sentence(SUMMARY, new_spending=True)
    assert measured.startswith("This run spent a new epsilon of 6 (4,665 ")
    assert "3,110 earlier measurements reused" in measured
    assert "populations entirely from the store" not in measured   # none: not "for 0"
    reused = spending_sentence({**SUMMARY, "new_measurements": 0, "new_epsilon": "0",
                                "populations_reused": 831}, new_spending=True)
    assert reused.startswith("This run spent nothing: all 3,110 measurements")
    whole = spending_sentence({**SUMMARY, "populations_reused": 12}, new_spending=True)
    assert "12 populations entirely from the store" in whole


def test_republish_of_an_unknown_release_is_refused_before_prefect_starts(tmp_path):
    store = init_store(tmp_path / "store")
    code = ("import sys\nfrom pseo_das.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit as stop:\n    print('prefect' in sys.modules, stop.code)\n")
    done = subprocess.run([sys.executable, "-c", code, "republish", "--store", str(store),
                           "--release", "nosuch", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "2"]
    assert "release nosuch was never published" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_audit_with_a_data_folder_that_does_not_exist_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["audit", str(tmp_path), "--data", str(tmp_path / "nowhere")])
    assert stop.value.code == 2
    assert "no such folder" in capsys.readouterr().err


def test_a_port_in_use_is_refused_before_the_data_are_read():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PseoDasError, match=f"cannot serve on 127.0.0.1:{port}"):
            check_port_free("127.0.0.1", port)
    check_port_free("127.0.0.1", port)    # free again once the other socket is closed


def test_an_analyst_budget_above_the_global_budget_is_warned_about(tmp_path, capsys):
    store = init_store(tmp_path / "store")
    init_ledger(store, "10", "test")
    for name, budget in (("ada", "5"), ("bob", "20")):
        with pytest.raises(SystemExit) as stop:
            main(["verify-server", "add-analyst", name, "--budget", budget, "--store",
                  str(store)])
        assert stop.value.code == 0
        err = capsys.readouterr().err
        assert ("above the global budget 10" in err) == (name == "bob")


def test_store_hints_name_options_the_store_command_has(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["store", "show", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "pseo-das store ACTION DIR" in err


@pytest.mark.slow
def test_a_refused_release_prints_its_reason_without_prefect_errors(tmp_path):
    """The refusal is said once, by the CLI: no Prefect ERROR or WARNING line, no
    traceback (`--debug` keeps them)."""
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "graduates.csv").write_text("x\n")
    pseo_das = str(Path(sys.executable).with_name("pseo-das"))
    common = ["release", "--data", str(tmp_path / "bad"), "--out", str(tmp_path / "out"),
              "--store", str(tmp_path / "store"), "--init-store",
              "--tracking-uri", f"sqlite:///{tmp_path / 'audit' / 'mlflow.db'}"]
    done = subprocess.run([pseo_das, *common], capture_output=True, text=True, timeout=600)
    said = done.stdout + done.stderr
    assert done.returncode == 2 and "no outcomes.parquet, outcomes.csv or outcomes/" in said
    assert not [line for line in said.splitlines() if "| ERROR " in line or "| WARNING " in line]
    assert "Traceback" not in said
    debug = subprocess.run([pseo_das, *common, "--debug"], capture_output=True, text=True,
                           timeout=600)
    assert "| ERROR " in debug.stdout + debug.stderr     # the negative control


def test_the_events_workers_drain_notice_is_dropped_unless_debug():
    """Prefect's "Still processing items" WARNING (its events worker slow to drain at exit,
    as on a loaded machine: seen once in this module's refused release) is dropped once
    the CLI hides the refusals it reports; with --debug (no class hidden) it stays."""
    import logging
    from pseo_das.tasks import _WithoutDrainNotice, _WithoutTraceback
    notice = logging.LogRecord("EventsWorker", logging.WARNING, __file__, 1,
                               "Still processing items: %s items remaining...", (6,), None)
    other = logging.LogRecord("EventsWorker", logging.WARNING, __file__, 1, "another", (), None)
    runs = _WithoutTraceback()
    assert _WithoutDrainNotice(runs).filter(notice)                  # --debug: kept
    runs.expected += (PseoDasError,)
    assert not _WithoutDrainNotice(runs).filter(notice)
    assert _WithoutDrainNotice(runs).filter(other)
