"""SHA-256 of the files this process writes, computed from the bytes as they go to disk
(`HashingFile`), so that a release's manifest does not read its outputs again
(`file_sha256`). A recorded digest is used only while the file is as it was written (the
same device, inode, size and modification time); any other file is read and hashed."""
from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import BinaryIO

READ_BYTES = 1 << 22
_recorded: dict[str, tuple[tuple[int, int, int, int], str]] = {}   # path -> (stat, digest)


def _identity(stat: os.stat_result) -> tuple[int, int, int, int]:
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


class HashingFile(io.RawIOBase):
    """A new binary file at `path` whose bytes are hashed as they are written; its
    SHA-256 (`sha256`) is recorded when it is closed."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = Path(path)
        self._file = open(self.path, "wb")
        self._digest = hashlib.sha256()
        self.sha256: str | None = None

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._digest.update(data)
        return self._file.write(data)

    def tell(self) -> int:
        return self._file.tell()

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
            self.sha256 = self._digest.hexdigest()
            _recorded[str(self.path.resolve())] = (_identity(self.path.stat()), self.sha256)
        super().close()


def recorded_sha256(path: Path) -> str | None:
    """The SHA-256 recorded when this process wrote `path`, if the file is still as written."""
    path = Path(path).resolve()
    entry = _recorded.get(str(path))
    if entry is None:
        return None
    try:
        unchanged = _identity(path.stat()) == entry[0]
    except FileNotFoundError:
        unchanged = False
    return entry[1] if unchanged else None


def file_sha256(path: Path) -> str:
    """SHA-256 of the file's bytes: as recorded when written (`recorded_sha256`), else read."""
    found = recorded_sha256(path)
    return found if found is not None else read_sha256(path)


def read_sha256(path: Path) -> str:
    """SHA-256 of the file's bytes, read in blocks."""
    with open(path, "rb") as fh:
        return stream_sha256(fh)


def stream_sha256(stream: BinaryIO | io.BufferedIOBase) -> str:
    """SHA-256 of what a binary stream reads (a file, or a gzip file's decompressed bytes)."""
    digest = hashlib.sha256()
    for block in iter(lambda: stream.read(READ_BYTES), b""):
        digest.update(block)
    return digest.hexdigest()
