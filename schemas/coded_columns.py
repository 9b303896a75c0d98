"""A block of rows of a text table held as each column's distinct values and every row's
index into them (`CodedTable`), so that a rule about a column's values is evaluated once
per distinct value and spread to the rows with one NumPy take.

The official files' columns have few distinct values per block of rows (codes, flags,
small counts), so the layout check (`pseo_layout`) costs one dictionary encoding per
column (Arrow, C code, outside the GIL) and array takes, not a string operation per row
and rule."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

PAIR_TABLE_MAX = 1 << 16     # a rule over two columns tabulates all value pairs up to this many

ValuesTest = Callable[[pa.Array], pa.Array]     # text values -> boolean values
PairTest = Callable[[str, str], bool]


def is_in(codes) -> ValuesTest:
    """The test "the value is one of `codes`"."""
    value_set = pa.array(sorted(codes), pa.string())
    return lambda values: pc.is_in(values, value_set=value_set)


def full_match(pattern: str) -> ValuesTest:
    """The test "the whole value matches `pattern`" (a regular expression)."""
    return lambda values: pc.match_substring_regex(values, f"^(?:{pattern})$")


class CodedColumn:
    """A column as `values` (its distinct text values, an Arrow string array) and `index`
    (each row's position in `values`)."""
    __slots__ = ("values", "index")

    def __init__(self, values: pa.Array, index: np.ndarray):
        self.values, self.index = values, index

    @classmethod
    def encode(cls, column: pa.Array | pa.ChunkedArray) -> CodedColumn:
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if pa.types.is_dictionary(column.type) and not column.null_count:
            return cls._recode(column)
        coded = pc.dictionary_encode(column)
        return cls(coded.dictionary, coded.indices.to_numpy(zero_copy_only=False))

    @classmethod
    def _recode(cls, column: pa.DictionaryArray) -> CodedColumn:
        """A column already coded (`pseo_layout.text_column` of flags): the distinct values
        its rows hold, from its dictionary, without reading a string per row."""
        index = column.indices.to_numpy()
        held = np.flatnonzero(np.bincount(index, minlength=len(column.dictionary)))
        coded = pc.dictionary_encode(column.dictionary.take(held))
        position = np.zeros(len(column.dictionary), np.int64)
        position[held] = coded.indices.to_numpy()
        return cls(coded.dictionary, position[index])

    def __len__(self) -> int:
        return len(self.index)

    def where(self, test: ValuesTest) -> np.ndarray:
        """Each row's result of `test` (evaluated on the distinct values)."""
        passed = test(self.values).to_numpy(zero_copy_only=False).astype(bool)
        return passed[self.index]

    def isin(self, codes) -> np.ndarray:
        return self.where(is_in(codes))

    def eq(self, text: str) -> np.ndarray:
        return self.where(lambda values: pc.equal(values, text))

    def fullmatch(self, pattern: str) -> np.ndarray:
        return self.where(full_match(pattern))

    def pairs(self, other: CodedColumn, test: PairTest) -> np.ndarray:
        """Each row's `test(this value, other's value)`, evaluated once per pair of values:
        over every pair when there are few, else over the pairs the rows hold."""
        mine, theirs = self.values.to_pylist(), other.values.to_pylist()
        if len(mine) * len(theirs) <= PAIR_TABLE_MAX:
            table = np.array([[test(a, b) for b in theirs] for a in mine], dtype=bool)
            return table.reshape(len(mine), len(theirs))[self.index, other.index]
        pair = self.index.astype(np.int64) * len(theirs) + other.index
        held, row_pair = np.unique(pair, return_inverse=True)
        result = np.fromiter((test(mine[p // len(theirs)], theirs[p % len(theirs)]) for p in held),
                             dtype=bool, count=len(held))
        return result[row_pair]

    def text(self, row: int) -> str:
        return self.values[int(self.index[row])].as_py()

    def distinct(self) -> list[str]:
        """The values the rows hold."""
        return self.values.to_pylist()

    def hashes(self, key: str) -> np.ndarray:
        """A 64-bit hash of each row's value (pandas' hash of text, under `key`)."""
        return pd.util.hash_array(np.array(self.values.to_pylist(), dtype=object),
                                  hash_key=key)[self.index]


def coded_table(table: pa.Table) -> dict[str, CodedColumn]:
    """Every column of a table of text, coded; a repeated column name keeps its first column."""
    coded: dict[str, CodedColumn] = {}
    for name, column in zip(table.column_names, table.columns):
        coded.setdefault(name, CodedColumn.encode(column))
    return coded


def level_column(values: list[str], index: np.ndarray) -> CodedColumn:
    """A column taking `values[index]` in each row (index -1: the empty text)."""
    return CodedColumn(pa.array(values + [""], pa.string()),
                       np.where(index < 0, len(values), index))


def row_hashes(columns: list[CodedColumn], key: str) -> np.ndarray:
    """One 64-bit hash of each row's values of `columns`, combined as pandas combines the
    columns of a frame (`hash_pandas_object`)."""
    multiplier = np.uint64(1000003)
    out = np.full(len(columns[0]), 0x345678, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i, column in enumerate(columns):
            out ^= column.hashes(key)
            out *= multiplier
            multiplier += np.uint64(82520 + 2 * (len(columns) - i))
        out += np.uint64(97531)
    return out
