"""The state copies of pseof_all are cut from pseof_all's CSV text (row_offsets,
rows_text): each state's file is byte for byte the file written from its rows alone."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from pseo_das.tasks.publication.release_files import (CodeTableWriter, csv_text, row_offsets,
                                                      rows_text, write_code_table)

PER_CELL = 3
# the cells' states, chunk by chunk: "17" holds the last cell of each chunk (its last row
# ends the text), "48" has a file but no row, "06" alternates with the others
CHUNKS = [["06", "06", "17", "06", "17", "17"], ["17", "06", "06", "17"], ["06", "17"]]
STATES = ("06", "17", "48")


def chunk_table(n_cells: int, first: int) -> pa.Table:
    """Rows of uneven lengths: codes, numbers, empty values (nulls)."""
    rows = n_cells * PER_CELL
    n = np.arange(first, first + rows)
    return pa.Table.from_pandas(pd.DataFrame({
        "institution": [f"{i % 7:0{1 + i % 5}d}" for i in n],
        "y1_grads_emp": pd.array([None if i % 4 == 0 else i * 37 for i in n], dtype="Int64"),
        "status_y1_grads_emp": np.where(n % 4 == 0, -1, 1).astype(np.int8)}), preserve_index=False)


@pytest.mark.parametrize("path_name", ["pseof_st.csv.gz", "pseof_st.csv"])
def test_a_states_rows_cut_from_the_text_are_the_file_of_its_rows_alone(tmp_path, path_name):
    chunks, first = [], 0
    for states in CHUNKS:
        chunks.append((chunk_table(len(states), first), np.array(states)))
        first += len(states) * PER_CELL
    columns = chunks[0][0].column_names
    with CodeTableWriter(tmp_path / "all.csv", columns) as whole:
        cut = {st: CodeTableWriter(tmp_path / f"cut_{st}_{path_name}", columns) for st in STATES}
        for table, cell_state in chunks:
            text = whole.write(table)
            offsets = row_offsets(text, table.num_rows)
            assert offsets[-1] == len(text) and np.frombuffer(text, np.uint8)[-1] == ord("\n")
            for st, writer in cut.items():
                mine = cell_state == st
                writer.write_text(rows_text(text, offsets[::PER_CELL], mine),
                                  int(mine.sum()) * PER_CELL)
        for writer in cut.values():
            writer.close()
    for st in STATES:
        rows = [table.take(np.flatnonzero(np.repeat(cell_state == st, PER_CELL)))
                for table, cell_state in chunks]
        alone = tmp_path / f"alone_{st}_{path_name}"
        assert write_code_table(pa.concat_tables(rows), alone) == cut[st].rows
        assert (tmp_path / f"cut_{st}_{path_name}").read_bytes() == alone.read_bytes(), st
    assert cut["48"].rows == 0 and cut["17"].rows == 6 * PER_CELL


def test_rows_text_keeps_single_lines_and_runs():
    """One bool per line: isolated lines, runs, the first and the last line."""
    table = chunk_table(4, 0)            # 12 lines
    text = csv_text(table)
    lines = bytes(text).splitlines(keepends=True)
    offsets = row_offsets(text, table.num_rows)
    for keep in ([1, 0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1], [0] * 11 + [1], [1] + [0] * 11,
                 [1] * 12, [0] * 12):
        keep = np.array(keep, bool)
        assert rows_text(text, offsets, keep) == b"".join(np.array(lines, object)[keep])


def test_row_offsets_refuse_text_that_is_not_the_rows():
    text = csv_text(chunk_table(2, 0))
    with pytest.raises(ValueError, match="not the 5 rows"):
        row_offsets(text, 5)
    with pytest.raises(ValueError, match="complete lines"):
        row_offsets(bytes(text)[:-1], 6)         # the last line cut short
    assert row_offsets(b"", 0).tolist() == [0]
