"""The release process's malloc arenas (pseo_das/process_memory.py): with the limit, threads
that allocate at once share at most MALLOC_ARENAS arenas; without it each gets its own
(glibc), which kept 1.3 to 1.5 GB more in a national release's flows steps."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")

# 8 threads alive at once, each allocating (64 KiB: malloc, not Python's small-object pool),
# then glibc's own account of its arenas (malloc_info: one <heap nr=...> per arena)
ARENAS = """
import ctypes, sys, tempfile, threading
from pseo_das.process_memory import limit_malloc_arenas
if sys.argv[1] == "limit":
    assert limit_malloc_arenas()
ready = threading.Barrier(9)
def work():
    kept = [bytearray(65536) for _ in range(20)]
    ready.wait()
    ready.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for thread in threads:
    thread.start()
ready.wait()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile(suffix=".xml") as info:
    stream = libc.fopen(info.name.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(stream))
    libc.fclose(ctypes.c_void_p(stream))
    print(open(info.name).read().count("<heap nr="))
ready.wait()
for thread in threads:
    thread.join()
"""


def arenas(mode: str, env: dict | None = None) -> int:
    done = subprocess.run([sys.executable, "-c", ARENAS, mode], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_threads_share_at_most_two_arenas_with_the_limit_and_not_without():
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert arenas("limit", env) <= 2
    assert arenas("default", env) > 2          # the control: glibc's default gives more


def test_the_environment_decides_when_it_sets_the_limit(monkeypatch):
    from pseo_das.process_memory import limit_malloc_arenas
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False


# 300 MB of 1 KB blocks from glibc's heap (bytearray: malloc), all freed but the last, which
# keeps the heap's top in place; RSS (MB) before and after `release_unused_memory`, or after
# nothing (the control: glibc keeps the freed pages), or at the start of a release task's
# function (its Prefect task's `fn`: the wrappers a release task adds, without a flow run)
FREED = """
import sys
import pyarrow   # imported before the first reading, as a release has it
from pseo_das.process_memory import release_unused_memory
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 1e6
blocks = [bytearray(1000) for _ in range(300_000)]
last = blocks[-1]
del blocks
before = rss()
if sys.argv[1] == "release":
    release_unused_memory()
if sys.argv[1] == "task":
    from pseo_das.tasks import release_task
    print(before, release_task("probe")(rss).prefect_task.fn())
else:
    print(before, rss())
"""


def rss_around(mode: str) -> tuple[float, float]:
    done = subprocess.run([sys.executable, "-c", FREED, mode], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    before, after = map(float, done.stdout.split())
    return before, after


def test_freed_heap_memory_goes_back_to_the_system_when_released():
    before, after = rss_around("release")
    assert before - after > 200              # of the 300 MB freed
    before, after = rss_around("keep")
    assert before - after < 50               # the control: glibc keeps it by itself


def test_a_release_task_starts_once_the_freed_memory_is_given_back():
    before, at_start = rss_around("task")
    assert before - at_start > 200
