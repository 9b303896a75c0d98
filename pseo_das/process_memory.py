"""What the release process's memory holds beyond its data: glibc's malloc arenas and the
freed memory they keep, and the buffers Arrow's memory pool keeps for reuse. Privacy cost:
none."""
from __future__ import annotations

import ctypes
import os

M_ARENA_MAX = -8        # glibc <malloc.h>: mallopt parameter, the most arenas malloc makes
MALLOC_ARENAS = 2


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """At most `arenas` malloc arenas for the threads of this process (glibc's mallopt
    M_ARENA_MAX; by default a thread that allocates gets an arena of its own, up to 8 per
    core, and each arena keeps what was freed in it). A national release builds and frees
    large blocks in threads beside the main one (the earnings accuracy simulation beside
    the flows): with the default, the flows steps held 1.3 to 1.5 GB more
    (docs/develop/performance.md). MALLOC_ARENA_MAX in the environment, when set, decides
    instead. Returns whether the limit was set here (False: set by the environment, or not
    glibc)."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):    # not glibc (macOS, musl): its own allocator's rules
        return False
    return mallopt(M_ARENA_MAX, arenas) == 1


def release_arrow_memory() -> None:
    """Give back to the system what Arrow's memory pool keeps of the buffers it freed
    (mimalloc holds them for reuse: 0.8 GB after encoding one national flows table to
    Parquet), so the numpy arrays of the next table do not come on top of it."""
    import pyarrow as pa
    pa.default_memory_pool().release_unused()


def release_unused_memory() -> None:
    """`release_arrow_memory`, and glibc's heap gives back its free pages (malloc_trim; at
    the first flows measurement of a 10m national release 1,447 -> 1,070 MB RSS, 0.07 s):
    between steps, so that the large numpy arrays of the next one, which malloc maps apart,
    do not come on top of them."""
    release_arrow_memory()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):    # not glibc: its own allocator's rules
        pass
