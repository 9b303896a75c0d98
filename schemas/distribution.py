"""The public folder of a release as the Census Bureau distributes PSEO, and how to open its
tables whatever their compression.

lehd_csv_naming, Directory Paths: `SERVER/data/[PRODUCT]/[RELEASE]/[GEOHI]/{files}`, geohi
`all` ("Collection of all available states") or a state's lower-case postal code; the
schema's Metadata section: "The ALL directory consolidates the individual state files".
So a release's `public/` holds

* `all/`: the national tables `pseoe_all`, `pseof_all` (and pseo-das's extensions
  `pseoh_all`, `pseom_all`, `pseoemp_all`), `pseo_all_institutions.csv`,
  `pseo_all_partners.txt`, `version_pseo.txt`;
* `[st]/` for each state with institutions: `pseoe_[st]`, `pseof_[st]`,
  `pseo_[st]_institutions.csv`, `pseo_[st]_partners.txt`, `version_pseo.txt`;
* `release_notes.md` / `.html` beside the folders.

The data tables are gzipped as the site serves them (`pseoe_all.csv.gz`, what every
consumer's pipeline downloads), in deterministic bytes: compressed by ISA-L (python-isal, many
times faster than zlib) at GZIP_LEVEL, fed in blocks of GZIP_BLOCK_BYTES however the rows
arrive, header time 0, no file name in the header, so a rerun writes the same bytes (with the
same ISA-L build; readers need nothing but gzip). Plain CSV (`TableFormat.CSV`)
is the configuration's other choice (`[publication] format`). The metadata files are plain
text as on the site.

Readers name a table by its CSV name (`pseoe_all.csv`, `pseof_co.csv`) and call
`table_path` (the file in `all/` or the state's folder, `.csv.gz` or `.csv`, or in a flat
folder of downloads) and `open_table` (text, gunzipped when it is gzipped)."""
from __future__ import annotations

import gzip
import io
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor, wait
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TextIO

from isal import isal_zlib

from pseo_das.schemas.written_hashes import HashingFile

ALL_FOLDER = "all"
GZIP_SUFFIX = ".gz"
GZIP_LEVEL = 3            # ISA-L's levels are 0-3; 3 compresses best (docs/develop/performance.md)
GZIP_BLOCK_BYTES = 1 << 20   # the compressor is fed blocks of this size: bytes independent of the writes
GZIP_WBITS = 16 + 15      # a gzip stream (header time 0, no name), 32 KiB window


class TableFormat(StrEnum):
    """How the data tables are written (`[publication] format`)."""
    CSV_GZ = "csv.gz"     # as the Census Bureau distributes them
    CSV = "csv"           # plain CSV, for users who want it


def folder_of(name: str) -> str:
    """The folder of a public file by its name: `pseoe_all.csv`, `pseo_all_partners.txt` ->
    `all`; `pseof_co.csv`, `pseo_co_institutions.csv` -> `co` (the geohi after the type)."""
    parts = name.split(".")[0].split("_")
    if len(parts) < 2 or parts[0] == "version":
        raise ValueError(f"{name}: the name says no folder (version_pseo.txt is in every one)")
    return parts[1]


def published_name(name: str, table_format: TableFormat | str) -> str:
    """The file name of a data table (`pseoe_all.csv`) as written in `table_format`."""
    return name + GZIP_SUFFIX if TableFormat(table_format) is TableFormat.CSV_GZ else name


def published_table(public: Path, name: str, table_format: TableFormat | str) -> Path:
    """Where a release writes the data table `name` (its CSV name) in its public folder."""
    return Path(public) / folder_of(name) / published_name(name, table_format)


def table_path(public: Path, name: str, folder: str | None = None) -> Path:
    """The file of the public table or metadata file `name` (`pseoe_all.csv`,
    `pseof_co.csv`, `version_pseo.txt` with `folder`): in `public/<folder>/` (its folder,
    `folder_of`), or in `public/` itself (a folder of downloads, the `all/` folder given
    directly), gzipped (`name.gz`) or not. Raises FileNotFoundError naming where it looked."""
    public = Path(public)
    folders = [public / (folder or folder_of(name)), public]
    tried = [where / candidate for where in folders for candidate in (name + GZIP_SUFFIX, name)]
    for path in tried:
        if path.is_file():
            return path
    raise FileNotFoundError(f"{name}: not in {public} (looked for "
                            f"{', '.join(str(p.relative_to(public)) for p in tried)})")


def is_gzipped(path: Path) -> bool:
    return Path(path).name.endswith(GZIP_SUFFIX)


def open_bytes(path: Path) -> io.BufferedIOBase:
    """A public table's CSV bytes, gunzipped when it is gzipped."""
    return gzip.open(path, "rb") if is_gzipped(path) else open(path, "rb")


def open_table(path: Path) -> TextIO:
    """A public table as UTF-8 text, gunzipped when it is gzipped."""
    if is_gzipped(path):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


GZIP_BLOCKS_AHEAD = 8      # blocks a stream may have waiting for the compressing thread


class _DeterministicGzip(io.RawIOBase):
    """A gzip stream to a file it owns (hashed as written, written_hashes.py): ISA-L at
    GZIP_LEVEL, the text fed to it in blocks of GZIP_BLOCK_BYTES, so the bytes depend on
    the text only, not on how it was split into writes. The blocks are compressed and
    written in order by one thread shared by every stream (ISA-L lets go of the GIL:
    the writer goes on formatting rows meanwhile); a stream waits when it has
    GZIP_BLOCKS_AHEAD blocks waiting, and a failure there is raised by its next write or
    its close."""

    def __init__(self, path: Path):
        super().__init__()
        self._raw = HashingFile(path)
        self._compressor = isal_zlib.compressobj(GZIP_LEVEL, isal_zlib.DEFLATED, GZIP_WBITS)
        self._pending = bytearray()
        self._ahead: deque[Future] = deque()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._pending += data
        whole = len(self._pending) - len(self._pending) % GZIP_BLOCK_BYTES
        for start in range(0, whole, GZIP_BLOCK_BYTES):
            self._submit(bytes(memoryview(self._pending)[start:start + GZIP_BLOCK_BYTES]))
        del self._pending[:whole]
        return len(data)

    def _submit(self, block: bytes) -> None:
        while len(self._ahead) >= GZIP_BLOCKS_AHEAD or (self._ahead and self._ahead[0].done()):
            self._ahead.popleft().result()
        self._ahead.append(_compressing().submit(self._compress, block))

    def _compress(self, block: bytes) -> None:
        self._raw.write(self._compressor.compress(block))

    def close(self) -> None:
        if self.closed:
            return
        try:
            while self._ahead:
                self._ahead.popleft().result()
            if self._pending:
                self._raw.write(self._compressor.compress(bytes(self._pending)))
            self._raw.write(self._compressor.flush())
        finally:
            for waiting in self._ahead:     # after a failure: nothing more is written
                waiting.cancel()
            wait(self._ahead)
            self._raw.close()
            super().close()


@cache
def _compressing() -> ThreadPoolExecutor:
    """The thread that compresses every gzip stream's blocks (in the order submitted); a
    forked process makes its own (it has not its parent's thread)."""
    return ThreadPoolExecutor(1, thread_name_prefix="pseo-das-gzip")


os.register_at_fork(after_in_child=_compressing.cache_clear)


def open_output(path: Path) -> io.RawIOBase:
    """A binary file to write a public table to (hashed as written): gzipped (deterministic
    bytes) when its name ends in .gz, plain otherwise."""
    return _DeterministicGzip(path) if is_gzipped(path) else HashingFile(path)
