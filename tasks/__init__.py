"""Units of work of a release: plain functions on whole tables, each wrapped by a thin
Prefect task (`release_task`) where the flow calls it."""
from __future__ import annotations

import sys

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError
from prefect.logging import get_run_logger


def release_task(name: str):
    """A Prefect task that never caches (inputs are large, confidential tables)."""
    return task(name=name, cache_policy=NO_CACHE)


def progress(message: str) -> None:
    """Progress output: the Prefect run log inside a run, stderr outside."""
    try:
        get_run_logger().info(message)
    except MissingContextError:
        print(message, file=sys.stderr, flush=True)
