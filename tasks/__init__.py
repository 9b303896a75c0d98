"""Units of work of a release: plain functions on whole tables, each wrapped by a thin
Prefect task (`release_task`, `file_task`) where the flow calls it.

Defining a task imports nothing of Prefect: the Prefect task is made on its first use.
So a module that computes (percentiles, mechanisms, the store, ...) imports without
Prefect's 1,100 modules, also when it sits beside a task or imports a module that
defines one.

Release tasks and flows (`release_flow`) never persist their results (tables of the
microdata) and `withhold` from Prefect the message of an error that may quote a record
(pseo_das/errors.py); the CLI prints it on the operator's terminal."""
from __future__ import annotations

import errno
import functools
import inspect
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from pseo_das.errors import is_withheld, withhold
from pseo_das.process_memory import release_unused_memory


class DeferredTask:
    """A Prefect task made on first use. Calling it, `.submit`, `.name`, `.retries` and the
    other attributes act on the Prefect task (the same one every time); `.fn` is the plain
    function (no Prefect) and `.with_options` gives another deferred task."""

    _making = threading.RLock()   # one Prefect task per definition, whatever the threads

    def __init__(self, fn: Callable, make: Callable[[], Any]):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self._make = make
        self._task = None

    @property
    def prefect_task(self):
        with self._making:
            if self._task is None:
                self._task = self._make()
        return self._task

    def __call__(self, *args, **kwargs):
        return self.prefect_task(*args, **kwargs)

    def with_options(self, **changes) -> DeferredTask:
        return DeferredTask(self.fn, lambda: self.prefect_task.with_options(**changes))

    def __getattr__(self, name: str):
        if name.startswith("_"):   # not yet initialised (copy, pickle): nothing to forward
            raise AttributeError(name)
        return getattr(self.prefect_task, name)


def withholding_records(fn: Callable) -> Callable:
    """`fn`, its errors `withhold`-en before Prefect records them."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            shown = withhold(exc)
            if shown is exc:
                raise
            raise shown from None
    # Prefect reads the parameters' types from the signature and resolves them in the
    # wrapper's module: give it them resolved
    try:
        run.__signature__ = inspect.signature(fn, eval_str=True)  # type: ignore[attr-defined]
    except NameError:     # a type imported for type checkers only: left as text
        run.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return run


def giving_back_memory_first(fn: Callable) -> Callable:
    """`fn`, run once the process has given back the memory that the steps before it freed
    (`release_unused_memory`): glibc keeps freed heap pages in the RSS, and the next step's
    large arrays are mapped apart from them. At the start of "build public earnings tables"
    of a 10m national release: 2,470 -> 1,987 MB."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        release_unused_memory()
        return fn(*args, **kwargs)
    return run


class _WithoutTraceback(logging.Filter):
    """Log records of Prefect's flow and task runs keep their message but lose the
    traceback when the exception is withheld (the errors chained to it may quote records;
    the CLI's --debug prints it on the terminal) or one of `expected` (bad input, a refused
    budget, a failed check: the CLI says what is wrong; a traceback would only bury it)."""

    def __init__(self) -> None:
        super().__init__()
        self.expected: tuple[type[BaseException], ...] = ()

    def filter(self, record: logging.LogRecord) -> bool:
        if _about_own_hook(record):
            return False
        error = record.exc_info[1] if record.exc_info else None
        if record.levelno >= logging.WARNING and self._about_expected(record, error):
            return False     # a refusal: the CLI says it once, without Prefect's ERROR lines
        if error is not None and (isinstance(error, self.expected) or is_withheld(error)):
            record.exc_info, record.exc_text = None, None
        return True

    def _about_expected(self, record: logging.LogRecord, error: BaseException | None) -> bool:
        """A warning or error of a run that failed with an expected exception: the record
        carries it, or names its class ("... encountered an exception StoreError: ...")."""
        if not self.expected:
            return False
        if error is not None:
            return isinstance(error, self.expected)
        message = record.getMessage()
        return any(f"exception {name}" in message or f"exception: {name}" in message
                   for name in _class_names(self.expected))


_RUN_LOGS = _WithoutTraceback()


class _WithoutDrainNotice(logging.Filter):
    """Prefect's "Still processing items: N items remaining..." (a WARNING of its events
    worker, logger `EventsWorker`, when sending its last events to the server takes a while
    at exit, as on a loaded machine): Prefect's own bookkeeping, not the release's. Dropped
    once `runs` hides the refusals the CLI reports (not with --debug)."""

    def __init__(self, runs: _WithoutTraceback) -> None:
        super().__init__()
        self.runs = runs

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.runs.expected
                    and record.getMessage().startswith("Still processing items"))


_DRAIN_NOTICE = _WithoutDrainNotice(_RUN_LOGS)


def _class_names(classes: tuple[type[BaseException], ...]) -> set[str]:
    """The names of `classes` and of every subclass of them."""
    names, todo = set(), list(classes)
    while todo:
        cls = todo.pop()
        if cls.__name__ not in names:
            names.add(cls.__name__)
            todo.extend(cls.__subclasses__())
    return names


def hide_tracebacks_of(*expected: type[BaseException]) -> None:
    """Prefect's run logs show no traceback of a withheld error, and no warning or error
    line at all about an exception of these classes (the refusals the CLI reports itself;
    `--debug` does not call this), nor Prefect's lines about running `forget_result`,
    nor, once there are such classes, the events worker's drain notice
    (`_WithoutDrainNotice`)."""
    _RUN_LOGS.expected += expected
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        if _RUN_LOGS not in logging.getLogger(name).filters:
            logging.getLogger(name).addFilter(_RUN_LOGS)
    if _DRAIN_NOTICE not in logging.getLogger("EventsWorker").filters:
        logging.getLogger("EventsWorker").addFilter(_DRAIN_NOTICE)


def forget_result(task, task_run, state) -> None:
    """A completed task run's state lets go of its result once the run ends (Prefect's
    on-completion hook): the caller has the result (release tasks are called, never
    submitted: a future would read its result from this state). Prefect's events worker,
    started inside the first task run of a process (the commands' flows send no heartbeat
    that would start it before), keeps a copy of that run's context, and with it the run
    and its final state, for the rest of the process: a release held its public reference
    inputs (the IPEDS awards among them) through every step."""
    state.data = None


def _about_own_hook(record: logging.LogRecord) -> bool:
    """Prefect's two INFO lines around every run of `forget_result` (not the release's; an
    error in it is kept)."""
    return record.levelno < logging.WARNING and \
        f"hook '{forget_result.__name__}'" in record.getMessage().lower()


def _deferred_task(**options) -> Callable[[Callable], DeferredTask]:
    def deferred(fn: Callable) -> DeferredTask:
        def make():
            from prefect import task
            from prefect.cache_policies import NO_CACHE
            hide_tracebacks_of()
            return task(withholding_records(giving_back_memory_first(fn)), cache_policy=NO_CACHE,
                        persist_result=False, on_completion=[forget_result], **options)
        return DeferredTask(fn, make)
    return deferred


def release_flow(name: str, **options) -> Callable[[Callable], Any]:
    """A Prefect flow of a release: its result never persisted, its errors withheld."""
    def make(fn: Callable):
        from prefect import flow
        hide_tracebacks_of()
        return flow(name=name, persist_result=False, **options)(withholding_records(fn))
    return make


def release_task(name: str) -> Callable[[Callable], DeferredTask]:
    """A Prefect task that never caches (inputs are large, confidential tables)."""
    return _deferred_task(name=name)


FILE_TASK_RETRIES = 2


# I/O errors that a retry a second later cannot cure: a full disk or quota, a read-only
# file system.
LASTING_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


def transient_io_error(task, task_run, state) -> bool:
    """Retry condition: an I/O error that may pass (not a missing or existing file)."""
    error = state.data
    return isinstance(error, OSError) and not isinstance(error, (
        FileNotFoundError, FileExistsError, PermissionError)) and error.errno not in LASTING_ERRNOS


def file_task(name: str) -> Callable[[Callable], DeferredTask]:
    """A Prefect task that only reads or writes files and is safe to run again (writing the
    same content twice is a no-op): retried on a transient I/O error, never cached."""
    return _deferred_task(name=name, retries=FILE_TASK_RETRIES, retry_delay_seconds=1,
                          retry_condition_fn=transient_io_error)


def progress(message: str) -> None:
    """Progress output: the Prefect run log inside a run, stderr outside (a process that has
    not imported Prefect runs no flow: Prefect is not imported to find that out)."""
    if "prefect" in sys.modules:
        from prefect.exceptions import MissingContextError
        from prefect.logging import get_run_logger
        try:
            get_run_logger().info(message)
            return
        except MissingContextError:
            pass
    print(message, file=sys.stderr, flush=True)
