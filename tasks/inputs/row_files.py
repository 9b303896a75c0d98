"""Tables of rows (a national release's flows: origin cells x 1,021 destinations) kept
in files between the stages of post-processing, and read a block of rows at a time
(issue 35): a national release's flows tables are gigabytes each, and every stage (the
recast, correction, sums, checks, files) works on a block of origin cells at a time, so
none holds a whole table.

`SpilledRows` is a 2-D array in a file of the spill folder (the system's temporary
folder, `TMPDIR`; deleted when the array is no longer referenced, and at exit): indexed
like an array by rows (a slice, integer rows or a boolean mask, with a column index after
it), it reads only the rows asked for. `RowSink` builds a table block by block, in memory
(for an in-memory source: small tables and tests) or in a file. `sum_rows` sums rows
into coarser cells block by block; `rows_in_order` puts the rows of several tables in
order block by block. Privacy cost: none (storage and sums).
"""
from __future__ import annotations

import atexit
import mmap
import os
import shutil
import tempfile
import weakref
from pathlib import Path

import numpy as np

from pseo_das.tasks.inputs.cells import sum_by_group

READ_ROWS = 8192     # rows read at a time when gathering scattered rows
SPILL_PREFIX = "pseo-das-rows-"
_spill_dir: Path | None = None


def spill_dir() -> Path:
    """This process's spill folder (created on first use, removed at exit), named after
    the process id; the spill folders of processes that are gone are removed first (a
    release killed outright runs no exit hook)."""
    global _spill_dir
    if _spill_dir is None:
        remove_orphaned_spill_dirs(Path(tempfile.gettempdir()))
        _spill_dir = Path(tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-"))
        atexit.register(shutil.rmtree, _spill_dir, True)
    return _spill_dir


def remove_orphaned_spill_dirs(folder: Path) -> None:
    """The spill folders in `folder` whose process no longer runs, removed (a folder whose
    name holds no process id, or whose process runs or belongs to another user, is kept)."""
    for spill in folder.glob(f"{SPILL_PREFIX}*"):
        pid = spill.name.removeprefix(SPILL_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(spill, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SpilledRows:
    """A rows x columns integer array held in a file, read by rows (see the module)."""

    def __init__(self, path: Path, n_rows: int, n_columns: int, dtype) -> None:
        self.path = Path(path)
        self.shape = (int(n_rows), int(n_columns))
        self.dtype = np.dtype(dtype)
        weakref.finalize(self, _remove, str(self.path))

    ndim = 2

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    def __len__(self) -> int:
        return self.shape[0]

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows start to stop (a new array)."""
        start, stop = max(0, start), min(stop, self.shape[0])
        n = max(stop - start, 0)
        if n == 0:
            return np.zeros((0, self.shape[1]), self.dtype)
        return np.fromfile(self.path, self.dtype, count=n * self.shape[1],
                           offset=start * self.shape[1] * self.dtype.itemsize
                           ).reshape(n, self.shape[1])

    def __getitem__(self, key) -> np.ndarray:
        rows, columns = key if isinstance(key, tuple) else (key, slice(None))
        if isinstance(rows, slice):
            start, stop, step = rows.indices(self.shape[0])
            block = self.rows(start, stop)[::step] if step > 0 else \
                self.take(np.arange(start, stop, step))
        else:
            rows = np.asarray(rows)
            block = self.take(np.flatnonzero(rows) if rows.dtype == bool else rows)
        return block if columns == slice(None) else block[:, columns]

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The given rows, in their order (any order, repeats allowed), reading only the
        spans of READ_ROWS rows that hold some of them."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if len(rows) and (rows.min() < -self.shape[0] or rows.max() >= self.shape[0]):
            raise IndexError(f"row index out of range for {self.shape[0]} rows")
        rows = np.where(rows < 0, rows + self.shape[0], rows)
        if len(rows) > 1 and rows[-1] - rows[0] == len(rows) - 1 and (np.diff(rows) == 1).all():
            return self.rows(int(rows[0]), int(rows[-1]) + 1)    # consecutive: read as they are
        out = np.empty((len(rows), self.shape[1]), self.dtype)
        if not len(rows):
            return out
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        span = ordered // READ_ROWS
        bounds = np.flatnonzero(np.r_[True, span[1:] != span[:-1], True])
        for a, b in zip(bounds[:-1], bounds[1:]):
            first, last = int(ordered[a]), int(ordered[b - 1])
            out[order[a:b]] = self.rows(first, last + 1)[ordered[a:b] - first]
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """The whole table (small tables only: a national one is gigabytes)."""
        whole = self.rows(0, self.shape[0])
        return whole if dtype is None else whole.astype(dtype)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


class RowSink:
    """A table built block by block, in row order: in memory (`spill` False) or in a file
    of the spill folder; `result()` is an ndarray or a `SpilledRows`."""

    def __init__(self, n_columns: int, dtype, spill: bool) -> None:
        self.n_columns, self.dtype = int(n_columns), np.dtype(dtype)
        self.n_rows = 0
        self._blocks: list[np.ndarray] = []      # in memory (no file)
        self._file = None
        if spill:
            handle, name = tempfile.mkstemp(suffix=".rows", dir=spill_dir())
            self._file = os.fdopen(handle, "wb")
            self._path = Path(name)

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype).reshape(-1, self.n_columns)
        self.n_rows += len(block)
        if self._file is None:
            self._blocks.append(block)
        else:
            block.tofile(self._file)

    def result(self):
        if self._file is None:
            return (np.concatenate(self._blocks) if self._blocks
                    else np.zeros((0, self.n_columns), self.dtype))
        self._file.close()
        return SpilledRows(self._path, self.n_rows, self.n_columns, self.dtype)


class MappedZeros:
    """An integer array of zeros (`array`) over a file of the spill folder mapped into
    memory (a shared mapping of a sparse file, unlinked at once: the system deletes it
    when the mapping goes, however the process ends), written and read like any array.
    `release()` gives the process's pages of it back to the system: the file keeps what
    was written (the page cache, written to disk as the system needs the memory), and the
    process holds only the pages it touches after. For a large array written and read a
    few rows at a time over a long step (the explorer's flows of a national release)."""

    def __init__(self, shape: tuple[int, ...], dtype) -> None:
        dtype = np.dtype(dtype)
        count = int(np.prod(shape))
        handle, name = tempfile.mkstemp(suffix=".mapped", dir=spill_dir())
        try:
            os.ftruncate(handle, max(count * dtype.itemsize, 1))
            self._map = mmap.mmap(handle, max(count * dtype.itemsize, 1))
        finally:
            os.close(handle)
            os.remove(name)
        self.array = np.frombuffer(self._map, dtype, count).reshape(shape)

    def release(self) -> None:
        """The pages touched so far given back (Linux; elsewhere the system's own policy)."""
        if hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED)


def is_spilled(values) -> bool:
    return isinstance(values, SpilledRows)


def sink_like(values, n_columns: int | None = None, dtype=None) -> RowSink:
    """A sink for a table derived from `values`: in a file when `values` is in one."""
    return RowSink(values.shape[1] if n_columns is None else n_columns,
                   values.dtype if dtype is None else dtype, is_spilled(values))


def spilled(values: np.ndarray, block_rows: int = 65536) -> SpilledRows:
    """`values` (rows x columns) written to the spill folder: the caller drops its array."""
    sink = RowSink(values.shape[1], values.dtype, spill=True)
    for start in range(0, len(values), block_rows):
        sink.append(values[start:start + block_rows])
    return sink.result()


def row_blocks(n_rows: int, block_rows: int) -> list[slice]:
    """Consecutive row ranges of at most block_rows rows (one, empty, for no rows)."""
    return [slice(start, start + block_rows)
            for start in range(0, max(n_rows, 1), block_rows)]


def sum_rows(values, group: np.ndarray, n_groups: int, blocks: list[slice],
             spill: bool | None = None):
    """Rows of `values` summed by `group` (each row's coarser cell, 0 to n_groups - 1,
    every group present), in group order, one block of rows (`blocks`, in order) at a
    time: as `cells.sum_by_group` of the whole table. When no group spans two blocks and
    the blocks' groups follow each other (coarser cells of the same institution, blocks
    of whole institutions), each block's sums are final and go to a sink (in a file when
    `values` is in one, or `spill`); otherwise (state cells summed over institutions)
    every block's sums are added into one array of the coarser cells (in memory: the
    coarser cells are few). Privacy cost: none (a sum)."""
    spill = is_spilled(values) if spill is None else spill
    ranges = [(int(group[b].min()), int(group[b].max())) for b in blocks if len(group[b])]
    follow = all(hi + 1 == lo for (_, hi), (lo, _) in zip(ranges, ranges[1:]))
    if follow:
        sink = RowSink(values.shape[1], values.dtype, spill)
        for block in blocks:
            mine = group[block]
            if len(mine):
                sink.append(sum_by_group(values[block], mine - mine.min(),
                                         int(mine.max() - mine.min()) + 1))
        return sink.result()
    out = np.zeros((n_groups, values.shape[1]), values.dtype)
    for block in blocks:
        present, local = np.unique(group[block], return_inverse=True)
        if len(present):
            out[present] += sum_by_group(values[block], local.reshape(-1), len(present))
    return spilled(out) if spill else out


def rows_in_order(parts: list[tuple], order: np.ndarray, n_columns: int, dtype,
                  spill: bool, block_rows: int = 65536):
    """The rows of several tables, one after the other, in `order` (row numbers in that
    concatenation), block by block into a sink (a file with `spill`): a table read from
    several stored measurements, each whole table never held twice. `parts`: (values,
    its rows to take, None: all) per table; values an array or a `SpilledRows`."""
    sizes = [len(values) if rows is None else len(rows) for values, rows in parts]
    offsets = np.cumsum([0] + sizes)
    if len(parts) == 1 and parts[0][1] is None and (order == np.arange(len(order))).all():
        values = parts[0][0]
        if is_spilled(values) == spill and values.dtype == np.dtype(dtype):
            return values
        if not spill:
            return np.asarray(values).astype(dtype, copy=False)
    sink = RowSink(n_columns, dtype, spill)
    for start in range(0, len(order), block_rows):
        wanted = order[start:start + block_rows]
        part = np.searchsorted(offsets, wanted, side="right") - 1
        out = np.empty((len(wanted), n_columns), sink.dtype)
        for p in np.unique(part).tolist():
            values, rows = parts[p]
            local = wanted[part == p] - offsets[p]
            out[part == p] = values[local if rows is None else rows[local]]
        sink.append(out)
    return sink.result()
