"""A second Python process for the release's self-contained, pure-Python work (the
labelled workbook: XlsxWriter formats every cell in Python). Threads share one
interpreter lock, so such work beside the release's own Python code only takes turns with
it; a process runs it on the other core.

The process is a new interpreter (`python -m pseo_das.tasks.publication.second_process
module:function ARG...`) that imports only what the function needs, about half a
CPU-second: never a fork of the release, whose Prefect and Arrow threads may hold locks at
that moment, and never multiprocessing's spawn, which imports the caller's main script
again (a script without a `__name__` guard would run its release a second time). The
function takes text arguments (paths, ids) and writes files; it reports nothing back but
its success. A failure is raised in the release as SecondProcessFailed with the end of the
process's error output; a release that fails itself stops the process first."""
from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pseo_das.errors import EXIT_CHECK_FAILED, PseoDasError

ERROR_TAIL_CHARS = 3000


class SecondProcessFailed(PseoDasError, RuntimeError):
    """The work handed to the second process failed (its message: the process's own): the
    release's files could not be written, so nothing is published."""

    exit_code = EXIT_CHECK_FAILED


class Apart:
    """One function call running in its own process; `result()` waits for it."""

    def __init__(self, function: Callable, *args: object):
        self.name = f"{function.__module__}:{function.__qualname__}"
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, self.name, *map(str, args)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        self._error: bytes | None = None   # its error output, once it has ended

    def result(self) -> None:
        if self._error is None:
            self._error = self._process.communicate()[1]
        if self._process.returncode != 0:
            raise SecondProcessFailed(
                f"{self.name} failed in the second process (exit {self._process.returncode}):"
                f"\n{self._error.decode(errors='replace')[-ERROR_TAIL_CHARS:]}")

    def stop(self) -> None:
        if self._error is None:
            self._process.kill()
            self._error = self._process.communicate()[1]


class Here:
    """A call too small to pay for a process of its own (a new interpreter importing pandas
    costs about 1.5 CPU s), made in this process when its result is first asked for: after
    the work it was meant to run beside. Its failure is raised as it is."""

    def __init__(self, function: Callable, *args: object):
        self._call: tuple[Callable, tuple] | None = (function, args)

    def result(self) -> None:
        if self._call is not None:
            function, args = self._call
            self._call = None
            function(*map(str, args))

    def stop(self) -> None:
        self._call = None


@contextmanager
def second_process() -> Iterator[Callable[..., Apart]]:
    """`apart(function, *args)`: function(*map(str, args)) in a process of its own. The
    calls have ended when the block does: waited for (a failure raised) when it ends
    normally, stopped when it raises."""
    started: list[Apart] = []

    def apart(function: Callable, *args: object) -> Apart:
        started.append(Apart(function, *args))
        return started[-1]
    try:
        yield apart
    except BaseException:
        for call in started:
            call.stop()
        raise
    for call in started:
        call.result()


def main(argv: list[str]) -> None:
    module, _, name = argv[0].partition(":")
    getattr(importlib.import_module(module), name)(*argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
