"""The coded columns the layout check evaluates its rules on: every result equals the same
rule evaluated row by row."""
import numpy as np
import pyarrow as pa

from pseo_das.schemas import coded_columns
from pseo_das.schemas.coded_columns import CodedColumn, level_column, row_hashes

RNG = np.random.default_rng(20261126)


def _column(values: list[str]) -> CodedColumn:
    return CodedColumn.encode(pa.chunked_array([values[:3], values[3:]], pa.string()))


def test_a_rule_on_distinct_values_is_the_rule_on_every_row():
    values = [str(v) for v in RNG.integers(0, 30, 500)] + ["", "007", "-4"]
    column = _column(values)
    assert [column.text(r) for r in range(len(values))] == values
    assert (column.fullmatch(r"0|[1-9][0-9]*") == [v.isdigit() and (v == "0" or v[0] != "0")
                                                   for v in values]).all()
    assert (column.isin({"3", "007"}) == [v in {"3", "007"} for v in values]).all()
    assert (column.eq("") == [v == "" for v in values]).all()


def test_a_rule_on_two_columns_is_the_rule_on_every_row_pair():
    """Both ways of evaluating it: a table of every pair of values, and (above
    PAIR_TABLE_MAX pairs) the pairs the rows hold."""
    years = [str(v) for v in RNG.integers(0, 400, 3_000)]
    degrees = [str(v) for v in RNG.integers(0, 400, 3_000)]
    want = np.array([y != d for y, d in zip(years, degrees)])
    small = _column(years[:40]).pairs(_column(degrees[:40]), str.__ne__)
    assert (small == want[:40]).all()
    a, b = _column(years), _column(degrees)
    assert len(a.distinct()) * len(b.distinct()) > coded_columns.PAIR_TABLE_MAX
    assert (a.pairs(b, str.__ne__) == want).all()


def test_level_attributes_spread_by_row_and_unknown_is_empty():
    column = level_column(["I", "S"], np.array([1, -1, 0, 1]))
    assert [column.text(r) for r in range(4)] == ["S", "", "I", "S"]


def test_row_hashes_agree_exactly_on_equal_rows_across_blocks():
    """Blocks code their values differently; a row's hash depends on its values only, and
    changes with any one of them (or with the order of two)."""
    first = [_column(["a", "b", "c", "a"]), _column(["1", "2", "3", "1"])]
    second = [_column(["c", "a", "b", "z"]), _column(["3", "1", "1", "1"])]
    one, two = row_hashes(first, "pseo-das-cells-1"), row_hashes(second, "pseo-das-cells-1")
    assert one[0] == one[3] == two[1] and one[2] == two[0]
    assert len({*one[:3], two[2], two[3]}) == 5
    swapped = row_hashes([_column(["1"]), _column(["a"])], "pseo-das-cells-1")
    assert swapped[0] != one[0]
    assert row_hashes(first, "pseo-das-cells-2")[0] != one[0]


def test_a_coded_column_is_read_as_its_text():
    """A dictionary column (the text of int8 flags, `pseo_layout.text_column`) is coded from
    its dictionary: each row's text and the distinct values held are those of its text."""
    from pseo_das.schemas.pseo_layout import text_column
    flags = pa.array(RNG.choice([-1, 1, 5], 300), pa.int8())
    coded = text_column(pa.chunked_array([flags[:100], flags[100:]]))
    assert pa.types.is_dictionary(coded.type)
    values = [str(v) for v in flags.to_pylist()]
    column = CodedColumn.encode(coded)
    assert [column.text(r) for r in range(len(values))] == values
    assert sorted(column.distinct()) == sorted(set(values))
    assert (column.isin({"5"}) == [v == "5" for v in values]).all()
    assert (row_hashes([column], "0123456789abcdef") == row_hashes([_column(values)], "0123456789abcdef")).all()
