"""The official layout checked on the tables as a release writes them (CodeTableWriter with
a TableCheck, schemas/pseo_layout.py): typed tables (integers, nulls) are checked as the
text the file holds; a table breaking a rule is refused with the message `pseo-das
validate-layout` gives for the file written from it; a valid one passes."""
from __future__ import annotations

import gzip

import pandas as pd
import pyarrow as pa
import pytest

from pseo_das.schemas.pseo_layout import Product, TableCheck, as_text, check_file
from pseo_das.tasks.publication.assemble import official_layout_check
from pseo_das.tasks.inputs.cells import CIP_2020
from pseo_das.tasks.publication.release_files import write_code_table
from tests.test_layout_validator import PSEOE, PSEOF, write_valid_folder

BLOCK_ROWS = 17


def typed(frame: pd.DataFrame) -> pd.DataFrame:
    """The text table with its integer columns as integers (empty: null), as a release
    holds them before writing."""
    out = frame.copy()
    for column in out.columns:
        if column.startswith("y") and column != "ind_level":
            out[column] = pd.array(pd.to_numeric(out[column].replace("", None)), dtype="Int64")
    return out


def write_checked(frame: pd.DataFrame, path, product: Product) -> TableCheck:
    """`frame` written in blocks to `path` through the in-stream check."""
    check = TableCheck(path.name, product, list(frame.columns))
    table = pa.Table.from_pandas(frame, preserve_index=False)
    blocks = (table.slice(start, BLOCK_ROWS) for start in range(0, table.num_rows, BLOCK_ROWS))
    write_code_table(blocks, path, list(frame.columns), check)
    return check


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    return write_valid_folder(tmp_path_factory.mktemp("valid") / "public")


def test_the_text_checked_is_the_text_written(tmp_path):
    """Integers, nulls, floats and dictionary-coded text: as_text gives the CSV's fields."""
    table = pa.table({"a": pa.array([1, None, -30], pa.int64()),
                      "b": pa.array([2.0, 1.5, None]),
                      "c": pa.array(["08", "", "11.07"]).dictionary_encode(),
                      "d": pa.array(["x", None, "z"])})
    path = tmp_path / "t.csv.gz"
    write_code_table(table, path)
    written = pd.read_csv(path, dtype=str, keep_default_na=False)
    pd.testing.assert_frame_equal(as_text(table), written, check_dtype=False)
    assert gzip.decompress(path.read_bytes()).decode().splitlines()[2] == ",1.5,,"


def test_a_valid_release_table_passes_in_stream(valid, tmp_path):
    checks = [write_checked(typed(pd.read_csv(valid / name, dtype=str, keep_default_na=False)),
                            tmp_path / f"{name}.gz", product)
              for name, product in [(PSEOE, Product.PSEOE), (PSEOF, Product.PSEOF)]]
    result = official_layout_check(tmp_path, checks, CIP_2020)
    assert result["result"] == "passed (pseoe_all.csv.gz 48 rows, pseof_all.csv.gz 128 rows)"
    for check in checks:
        assert check_file(tmp_path / check.name, check.name.split("_")[0]) == (check.rows, [])


@pytest.mark.parametrize("column, where, value, rule", [
    ("geography", lambda f: f["geo_level"] == "D", "01", "division"),
    ("y1_grads_emp", lambda f: f["status_y1_grads_emp"] == "1", None,
     "a value where the flag publishes one"),
    ("agg_level_pseo", lambda f: f.index == 5, "999", "label_agg_level_pseo"),
])
def test_a_table_breaking_a_rule_is_refused_in_stream_as_validate_layout_refuses_its_file(
        valid, tmp_path, capsys, column, where, value, rule):
    """Negative control: the problems found as the table is written are those validate-layout
    finds in the file written from it, with the same message; the release check fails."""
    frame = typed(pd.read_csv(valid / PSEOF, dtype=str, keep_default_na=False))
    rows = frame.index[where(frame)][:3]
    frame[column] = frame[column].astype(object)
    frame.loc[rows, column] = value
    if column.startswith("y"):
        frame[column] = pd.array(frame[column], dtype="Int64")
    public = tmp_path / "public"
    (public / "all").mkdir(parents=True)
    (public / "all" / f"{PSEOE}.gz").write_bytes(gzip.compress((valid / PSEOE).read_bytes()))
    check = write_checked(frame, public / "all" / f"{PSEOF}.gz", Product.PSEOF)
    problems = check.problems()
    assert problems and any(rule in p.rule for p in problems), problems
    assert list(map(str, problems)) == list(map(str, check_file(public / "all" / f"{PSEOF}.gz",
                                                                Product.PSEOF)[1]))
    from pseo_das.cli import main
    with pytest.raises(SystemExit) as stop:
        main(["validate-layout", str(public)])
    out = capsys.readouterr().out
    assert stop.value.code == 1 and all(str(p) in out for p in problems)
    result = official_layout_check(public, [check], CIP_2020)["result"]
    assert result == f"FAILED ({len(problems)} problems; first: {problems[0]})"


def test_text_column_is_the_text_arrow_writes():
    """text_column (what the writer writes and the check reads) is Arrow's text of each value,
    null as empty: int8 flags looked up by their byte (any value, nulls, slices, chunks) and
    every other type cast."""
    from pseo_das.schemas.pseo_layout import text_column
    flags = pa.array(list(range(-128, 128)) + [None, 5, -1], pa.int8())
    counts = pa.array([0, 7, None, 12345678901], pa.int64())
    for column in (flags, flags.slice(3, 200), pa.chunked_array([flags.slice(250), flags[:9]]),
                   counts, pa.chunked_array([counts, counts.slice(2)])):
        assert text_column(column).to_pylist() == [
            "" if v is None else str(v) for v in column.to_pylist()]
