"""Modules that compute import without Prefect; a task defined with `release_task` or
`file_task` becomes its Prefect task (name, retries, no cache) on first use."""
from __future__ import annotations

import json
import subprocess
import sys

from pseo_das.tasks import (FILE_TASK_RETRIES, DeferredTask, file_task, release_task,
                            transient_io_error)

# Pure computation, and modules that define tasks beside their pure functions.
COMPUTING_MODULES = [
    "pseo_das.tasks.earnings.percentiles", "pseo_das.tasks.earnings.histograms",
    "pseo_das.tasks.earnings.noisy_histograms", "pseo_das.tasks.privacy.streams",
    "pseo_das.tasks.privacy.ledger", "pseo_das.tasks.privacy.geometric",
    "pseo_das.tasks.privacy.employer_side", "pseo_das.tasks.privacy.laplace",
    "pseo_das.tasks.privacy.post_processing",
    "pseo_das.tasks.privacy.discrete_laplace", "pseo_das.tasks.privacy.establishment",
    "pseo_das.tasks.privacy.store", "pseo_das.tasks.privacy.store_integrity",
    "pseo_das.tasks.inputs.cells", "pseo_das.tasks.inputs.ingest",
    "pseo_das.tasks.employment_flows.flows_correction", "pseo_das.tasks.cip_recast.recast",
    "pseo_das.tasks.publication.assemble", "pseo_das.config", "pseo_das.errors",
]


def prefect_modules_after_importing(modules: list[str]) -> list[str]:
    """The prefect modules a fresh interpreter holds after importing `modules`."""
    probe = ("import importlib, json, sys\n"
             f"for name in {modules!r}:\n    importlib.import_module(name)\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'prefect')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def test_computing_modules_import_without_prefect():
    assert prefect_modules_after_importing(COMPUTING_MODULES) == []


def test_the_probe_sees_prefect_where_a_flow_is_defined():
    assert "prefect" in prefect_modules_after_importing(["pseo_das.flows.quarterly_release"])


def double(x: int) -> int:
    return 2 * x


def test_a_file_task_becomes_its_prefect_task_on_first_use():
    from prefect.cache_policies import NO_CACHE
    from prefect.tasks import Task

    defined = file_task("double a number")(double)
    assert isinstance(defined, DeferredTask) and defined.fn is double
    assert defined.__name__ == "double" and defined.fn(2) == 4
    made = defined.prefect_task
    assert isinstance(made, Task) and defined.prefect_task is made
    assert (made.name, made.retries, made.retry_delay_seconds) == ("double a number",
                                                                    FILE_TASK_RETRIES, 1)
    assert made.retry_condition_fn is transient_io_error and made.cache_policy is NO_CACHE
    assert (defined.name, defined.retries) == ("double a number", FILE_TASK_RETRIES)
    renamed = defined.with_options(name="double again")
    assert (renamed.name, renamed.retries, renamed.fn) == ("double again", FILE_TASK_RETRIES,
                                                           double)


def test_a_release_task_runs_as_a_prefect_task_in_a_flow():
    from prefect import flow
    from prefect.context import TaskRunContext

    @release_task("name the running task")
    def running_task_name() -> str:
        return TaskRunContext.get().task.name

    @flow
    def a_flow() -> str:
        return running_task_name()

    assert running_task_name.retries == 0
    assert a_flow() == "name the running task"


FORGETTING_FLOW = """
import gc, time, weakref
from pseo_das.tasks import release_flow, release_task

class Result:
    pass

@release_task("make a result")
def make():
    return Result()

@release_flow("forgetting results")
def forgetting():
    made = make()
    ref = weakref.ref(made)
    del made
    for _ in range(100):    # Prefect's threads may still be sending the run's last state
        gc.collect()
        if ref() is None:
            return True
        time.sleep(0.1)
    return False

from pseo_das.prefect_runtime import prefect_api
with prefect_api() as ready:   # as the commands run their flows (no heartbeats)
    ready()
    print(forgetting())
"""


def test_a_task_run_does_not_keep_its_result():
    """The caller drops a task's result and it is gone: Prefect's events worker, started
    in the first task run of a process when no heartbeat has started it before (the
    commands' runs have none), keeps that run's context (and its final state) for the rest
    of the process; `forget_result` empties the state (Prefect's threads may hold it for a
    moment while they send it). A fresh interpreter: its first task run is the test's."""
    done = subprocess.run([sys.executable, "-c", FORGETTING_FLOW], capture_output=True,
                          text=True, check=True, timeout=300)
    assert done.stdout.split()[-1] == "True", done.stdout[-2000:] + done.stderr[-2000:]
    assert "forget_result" not in done.stdout + done.stderr     # its hook lines filtered
