"""Units of work of a release: plain functions on whole tables, each wrapped by a thin
Prefect task (`release_task`) where the flow calls it."""
from __future__ import annotations

import errno
import sys

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError
from prefect.logging import get_run_logger


def release_task(name: str):
    """A Prefect task that never caches (inputs are large, confidential tables)."""
    return task(name=name, cache_policy=NO_CACHE)


FILE_TASK_RETRIES = 2


# I/O errors that a retry a second later cannot cure: a full disk or quota, a read-only
# file system.
LASTING_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


def transient_io_error(task, task_run, state) -> bool:
    """Retry condition: an I/O error that may pass (not a missing or existing file)."""
    error = state.data
    return isinstance(error, OSError) and not isinstance(error, (
        FileNotFoundError, FileExistsError, PermissionError)) and error.errno not in LASTING_ERRNOS


def file_task(name: str):
    """A Prefect task that only reads or writes files and is safe to run again (writing the
    same content twice is a no-op): retried on a transient I/O error, never cached."""
    return task(name=name, cache_policy=NO_CACHE, retries=FILE_TASK_RETRIES,
                retry_delay_seconds=1, retry_condition_fn=transient_io_error)


def progress(message: str) -> None:
    """Progress output: the Prefect run log inside a run, stderr outside."""
    try:
        get_run_logger().info(message)
    except MissingContextError:
        print(message, file=sys.stderr, flush=True)
