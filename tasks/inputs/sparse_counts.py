"""Counts of cells x columns held as their non-zero entries: the true employment flows
(a national universe has 170,000 origin cells x 1,021 destinations per years-after, and
at most one employed destination per graduate: fewer than 1 entry in 100 is not zero).
Privacy cost: none (true counts; they go only to the mechanism layer)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SparseCounts:
    """A cells x `width` array of counts as its non-zero entries: `flat` (row * width +
    column, ascending, distinct) and `count` (int64)."""
    n_rows: int
    width: int
    flat: np.ndarray
    count: np.ndarray

    @classmethod
    def summed(cls, n_rows: int, width: int, flat: np.ndarray, count: np.ndarray
               ) -> SparseCounts:
        """The counts of entries `flat` (any order, repeats added up)."""
        flat, count = np.asarray(flat, np.int64), np.asarray(count, np.int64)
        order = np.argsort(flat, kind="stable")
        flat, count = flat[order], count[order]
        starts = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]]) if len(flat) else order
        count = np.add.reduceat(count, starts) if len(flat) else count
        kept = count != 0
        return cls(n_rows, width, flat[starts][kept], count[kept])

    def added(self, n_rows: int, flat: np.ndarray, count: np.ndarray) -> SparseCounts:
        """These counts (as `n_rows` rows, at least as many) plus those of entries `flat`
        (any order, repeats added up). Only the new entries are sorted, then merged into
        these, which are in order already (a national table's running totals, 9 million
        entries at 100m, are not sorted again at every batch of chunks)."""
        new = SparseCounts.summed(n_rows, self.width, flat, count)
        at = np.searchsorted(self.flat, new.flat)
        there = at < len(self.flat)
        there[there] = self.flat[at[there]] == new.flat[there]
        total = self.count.copy()
        total[at[there]] += new.count[there]
        fresh = ~there
        flat = np.insert(self.flat, at[fresh], new.flat[fresh])
        count = np.insert(total, at[fresh], new.count[fresh])
        kept = count != 0
        return SparseCounts(n_rows, self.width, flat, count) if kept.all() else \
            SparseCounts(n_rows, self.width, flat[kept], count[kept])

    @property
    def shape(self) -> tuple[int, int]:
        return self.n_rows, self.width

    def __getitem__(self, rows: np.ndarray) -> SparseCounts:
        """The rows `rows` (a boolean mask, or distinct row positions in any order), in
        that order."""
        rows = np.asarray(rows)
        rows = np.flatnonzero(rows) if rows.dtype == bool else rows.astype(np.int64)
        new = np.full(self.n_rows, -1, np.int64)
        new[rows] = np.arange(len(rows))
        flat = new[self.flat // self.width]
        kept = flat >= 0
        whole = bool(kept.all())   # every row kept (a reordering): no copies of the kept
        flat, count = (flat, self.count) if whole else (flat[kept], self.count[kept])
        flat *= self.width
        flat += self.flat % self.width if whole else self.flat[kept] % self.width
        order = np.argsort(flat, kind="stable")
        return SparseCounts(len(rows), self.width, flat[order], count[order])

    def toarray(self) -> np.ndarray:
        """The counts as a dense int64 array, zeros included."""
        dense = np.zeros(self.n_rows * self.width, np.int64)
        dense[self.flat] = self.count
        return dense.reshape(self.shape)
