"""The cell keys of a file's rows, kept in temporary files while the file is checked block
by block, and the rows whose key an earlier row has: the official layout check's
one-row-per-cell rule (schemas/pseo_layout.py).

A row's key is 96 bits of hashes of its identifiers: a 64-bit hash and 32 bits of a
second, independent one. Rows count as the same cell when both agree; a false match among
the 64.6 million rows of a national pseof_all has a chance of about rows^2 / 2^97,
2.6e-14. Those 64.6 million keys are 775 MB: they go to temporary files (the system's
temporary folder, `TMPDIR`; deleted when closed, or when the process ends however it
ends), not the process's memory, and are read back a part at a time.
"""
from __future__ import annotations

import tempfile
from collections.abc import Iterator

import numpy as np

# the first hashes are also kept in this many parts by their top bits, and the values
# that repeat are found one part at a time (a national pseof_all's part: about 65 MB)
TIE_SEARCH_PARTS = 8
READ_KEYS = 1 << 22   # keys read back at a time when finding the rows that hold a repeat


class CellKeys:
    """The keys of consecutive rows, added block by block (`add`), in temporary files:
    the first hashes in row order and again by part of their range, the second hashes in
    row order. `repeated_rows()` gives the rows whose key an earlier row has. A context
    manager (or `close()`): closing deletes the files."""

    def __init__(self, parts: int = TIE_SEARCH_PARTS):
        if parts < 2 or parts & (parts - 1):
            raise ValueError(f"parts must be a power of two of at least 2, not {parts}")
        self.rows = 0
        self._shift = np.uint64(64 - (parts - 1).bit_length())
        self._first, self._second = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self._parts = [tempfile.TemporaryFile() for _ in range(parts)]

    def add(self, first: np.ndarray, second: np.ndarray) -> None:
        """The keys of the next rows: their first hashes (uint64) and second (uint32)."""
        first = np.ascontiguousarray(first, np.uint64)
        second = np.ascontiguousarray(second, np.uint32)
        if len(first) != len(second):
            raise ValueError(f"{len(first)} first hashes, {len(second)} second hashes")
        first.tofile(self._first)
        second.tofile(self._second)
        part = first >> self._shift
        for number, out in enumerate(self._parts):
            first[part == number].tofile(out)
        self.rows += len(first)

    def tied(self) -> np.ndarray:
        """The first hashes more than one row has, sorted: each part read, sorted in place
        (a plain sort: a third of an argsort's time) and searched in turn."""
        tied = []
        for part in self._parts:
            values = _read_all(part, np.uint64)
            values.sort()
            tied.append(np.unique(values[1:][values[1:] == values[:-1]]))
        return np.concatenate(tied)

    def blocks(self, read: int = READ_KEYS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The keys in row order, `read` rows at a time: (first hashes, second hashes)."""
        for file in (self._first, self._second):
            file.flush()
            file.seek(0)
        for _ in range(0, self.rows, read):
            first = np.fromfile(self._first, np.uint64, read)
            yield first, np.fromfile(self._second, np.uint32, len(first))

    def repeated_rows(self, read: int = READ_KEYS) -> np.ndarray:
        """Rows whose key an earlier row has, in order. The first hashes that repeat
        (`tied`) give the candidates; only the rows holding one are sorted by both hashes,
        then by row."""
        tied = self.tied()
        if not len(tied):
            return np.zeros(0, np.int64)
        found, firsts, seconds, offset = [], [], [], 0   # the rows holding a repeated first hash
        for first, second in self.blocks(read):
            mine = np.flatnonzero(tied[np.minimum(np.searchsorted(tied, first), len(tied) - 1)]
                                  == first)
            found.append(mine + offset)
            firsts.append(first[mine])
            seconds.append(second[mine])
            offset += len(first)
        rows, first, second = (np.concatenate(x) for x in (found, firsts, seconds))
        by_keys = np.lexsort((second, first))   # by the first hash, then the second, then by row
        later, earlier = by_keys[1:], by_keys[:-1]
        same = (first[later] == first[earlier]) & (second[later] == second[earlier])
        return np.sort(rows[later[same]])

    def close(self) -> None:
        for file in (self._first, self._second, *self._parts):
            file.close()

    def __enter__(self) -> "CellKeys":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_all(file, dtype) -> np.ndarray:
    file.flush()
    file.seek(0)
    return np.fromfile(file, dtype)
