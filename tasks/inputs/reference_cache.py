"""Validated public reference inputs (CIP recast inputs, IPEDS completions, CPI-U, the flows'
J2J, QCEW and coverage files) kept by content, so that a release re-reads and re-validates
only the files that changed. Privacy cost: none (public files only; no microdata is ever
cached).

An entry is keyed by the SHA-256 of everything its loader's result depends on: the path,
size and content of every file it may read (a folder: every file under it), the loader's
arguments, the source of the code that reads and validates them (tasks/inputs,
tasks/cip_recast, tasks/codes, schemas) and the Python, pandas, numpy and pandera versions.
One byte changed anywhere gives another key: the files are read and validated again. A file
that fails validation is never cached (its error is raised on every run).

The cache folder is $PSEO_DAS_CACHE_DIR/reference, else $XDG_CACHE_HOME/pseo-das/reference
(default ~/.cache/pseo-das/reference), created private to the user (mode 0700): an entry is
a pickle, loaded only from there. Deleting the folder is always safe.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import TypeVar

from pseo_das.schemas.written_hashes import read_sha256

CACHE_ENV = "PSEO_DAS_CACHE_DIR"
FORMAT = 1   # bump when the layout of an entry changes
T = TypeVar("T")


def cache_root() -> Path:
    """pseo-das's cache folder: $PSEO_DAS_CACHE_DIR, else $XDG_CACHE_HOME/pseo-das (default
    ~/.cache/pseo-das). Everything in it can be made again: deleting it is always safe."""
    root = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME")
                                             or Path.home() / ".cache") / "pseo-das"
    return Path(root).expanduser()


def cache_dir() -> Path:
    return cache_root() / "reference"


def cached(kind: str, sources: Iterable[Path], params: dict, load: Callable[[], T]) -> T:
    """`load()`, or the result it gave before for the same `sources` (files or folders, as
    they are now), `params` (JSON-able) and code. A source that cannot be read is left to
    `load` (its error is the loader's)."""
    try:
        key = entry_key(kind, sources, params)
    except OSError:
        return load()
    entry = cache_dir() / f"{kind}-{key}.pickle"
    try:
        with open(entry, "rb") as fh:
            return pickle.load(fh)
    except Exception:   # absent, or unreadable (a damaged or foreign pickle raises many kinds)
        pass            # read the files again and replace it
    value = load()
    _write(entry, value)
    return value


def entry_key(kind: str, sources: Iterable[Path], params: dict) -> str:
    files = sorted({file for source in sources for file in _files(Path(source))})
    described = {"format": FORMAT, "kind": kind, "params": params, "code": code_digest(),
                 "versions": _versions(),
                 "files": [[str(f), f.stat().st_size, read_sha256(f)] for f in files]}
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()


def _files(source: Path) -> list[Path]:
    source = source.resolve()
    if source.is_dir():
        return [p for p in source.rglob("*") if p.is_file()]
    if not source.is_file():
        raise FileNotFoundError(source)
    return [source]


@cache
def code_digest() -> str:
    """SHA-256 of the source of the readers and validators of the reference inputs."""
    import pseo_das.schemas
    import pseo_das.tasks
    tasks = Path(pseo_das.tasks.__file__).parent
    folders = [tasks / "inputs", tasks / "cip_recast", tasks / "codes",
               Path(pseo_das.schemas.__file__).parent]
    digest = hashlib.sha256()
    for path in sorted(p for folder in folders for p in folder.rglob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _versions() -> dict[str, str]:
    import numpy
    import pandas
    import pandera
    return {"python": sys.version, "numpy": numpy.__version__, "pandas": pandas.__version__,
            "pandera": pandera.__version__}


def _write(entry: Path, value: object) -> None:
    """Written whole or not at all (a temporary file renamed), private to the user; a cache
    that cannot be written is only a cache."""
    temporary = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile(dir=entry.parent, delete=False,
                                         suffix=".tmp") as fh:
            temporary = Path(fh.name)
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, entry)
    except OSError:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
