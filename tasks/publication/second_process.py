"""A second Python process for the release's self-contained, pure-Python work (the
labelled workbook: XlsxWriter formats every cell in Python). Threads share one
interpreter lock, so such work beside the release's own Python code only takes turns with
it; a process runs it on the other core.

The process is spawned (a new interpreter that imports what the function needs, about half
a CPU-second), never forked from the release, whose Prefect and Arrow threads may hold
locks at that moment. The function and its arguments must be importable and picklable
(paths, ids); its exception is raised again in the release."""
from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager


@contextmanager
def second_process() -> Iterator[Callable[..., Future]]:
    """`apart(function, *args)`: function(*args) in a second process (a Future); the
    process is stopped when the block ends, after the work handed to it has finished."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool.submit
