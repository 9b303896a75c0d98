"""Text columns as integers: each row's value by its position among some values, several
such positions as one int64 key, and keys looked up in sorted keys. Large tables (millions
of IPEDS awards, published rows) are compared and grouped on these keys, each distinct
text hashed once, instead of grouping or merging their text row by row. Privacy cost:
none."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd


class Factorized:
    """A column as each row's position among its distinct values (`codes`, -1: missing)
    and those values (`values`, which may repeat after `mapped`)."""

    def __init__(self, codes: np.ndarray, values: pd.Index):
        self.codes, self.values = codes, values

    @classmethod
    def of(cls, column: pd.Series) -> Factorized:
        """A categorical column by its own codes; another factorized."""
        if isinstance(column.dtype, pd.CategoricalDtype):
            return cls(column.cat.codes.to_numpy().astype(np.int64),
                       pd.Index(column.cat.categories))
        codes, values = pd.factorize(column)
        return cls(codes, pd.Index(values))

    def mapped(self, function: Callable) -> Factorized:
        """Each row's `function(value)`, computed once per distinct value."""
        return Factorized(self.codes, pd.Index([function(v) for v in self.values]))

    def prefix(self, characters: int) -> Factorized:
        """Each row's first `characters` characters (a 4-digit code of a 6-digit one)."""
        return Factorized(self.codes, self.values.str[:characters])

    def positions(self, among: pd.Index) -> np.ndarray:
        """Each row's value's position in `among` (-1: not there, or missing), looked up once
        per distinct value."""
        return np.append(among.get_indexer(self.values), -1)[self.codes]

    def differs(self, other: Factorized) -> np.ndarray:
        """Per row: this column's value is not `other`'s."""
        among = self.values.append(other.values).unique()
        return self.positions(among) != other.positions(among)


def combined_keys(positions: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """One int64 per row of several columns' positions (each in [0, size)); -1 where one of
    them is -1 (unknown)."""
    known = np.logical_and.reduce([p >= 0 for p in positions])
    key = np.ravel_multi_index([np.where(known, p, 0) for p in positions],
                               [max(size, 1) for size in sizes])
    return np.where(known, key, -1)


def found_at(ordered: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Each key's position in the ascending keys `ordered`; -1 where it is not there (a
    negative key: unknown)."""
    at = np.searchsorted(ordered, keys)
    found = (keys >= 0) & (at < len(ordered))
    found[found] &= ordered[at[found]] == keys[found]
    return np.where(found, at, -1)
