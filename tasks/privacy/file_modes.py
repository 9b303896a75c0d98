"""Files holding seeds or confidential values (the privacy store's index and objects, the
verification ledger, the MLflow tracking database) are created readable by their owner only:
0600 for files, 0700 for folders, whatever the umask. `exposures` names those that are
wider (a store copied or created by an earlier version). Privacy cost: none."""
from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700


def private_folder(path: Path) -> Path:
    """Create `path` (and its parents) if missing; the folder itself is made 0700."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_FOLDER)
    return path


def private_file(path: Path) -> Path:
    os.chmod(path, PRIVATE_FILE)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to a new file `path` created 0600 (never readable by others, not even
    for a moment)."""
    with open_private(path) as handle:
        handle.write(data)


def open_private(path: Path) -> BinaryIO:
    """A new file `path`, created 0600, open for writing bytes."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb")


def exposures(paths: Iterable[Path]) -> list[str]:
    """The paths readable or writable by users other than the owner, one line each."""
    found = []
    for path in paths:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            wanted = PRIVATE_FOLDER if path.is_dir() else PRIVATE_FILE
            found.append(f"{path}: mode {mode:04o}, readable by other users (should be "
                         f"{wanted:04o}: `chmod {wanted:o} {path}`)")
    return found
