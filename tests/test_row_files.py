"""Flows tables kept in files and processed a block of origin cells at a time
(`row_files`, issue 35): every blockwise result equals the whole-table one."""
import os

import numpy as np
import pandas as pd
import pytest

from pseo_das.tasks.codes.destinations import N_DESTINATIONS
from pseo_das.tasks.inputs import row_files
from pseo_das.tasks.employment_flows.division_flows import origin_tables
from pseo_das.tasks.inputs.row_files import (RowSink, SpilledRows, rows_in_order, spilled,
                                             sum_rows)
from pseo_das.tasks.employment_flows.flows_correction import correct_table, industry_flows
from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows, derive_flows
from pseo_das.tasks.inputs.cells import coarser_cells, institution_blocks, sum_to_coarser
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir, load_reference_inputs

# eight institutions in three states, the states' institutions not adjacent in code order
STATE_OF = {"00000011": "08", "00000012": "48", "00000013": "08", "00000014": "26",
            "00000015": "48", "00000016": "08", "00000017": "26", "00000018": "48"}


def _cells(seed: int = 3) -> pd.DataFrame:
    generator = np.random.default_rng(seed)
    rows = [(inst, degree, cip, cohort)
            for inst in STATE_OF for degree in ("03", "05") for cip in ("11", "14", "52")
            for cohort in (2004, 2007, 2010) if generator.random() < 0.7]
    cells = pd.DataFrame(rows, columns=["institution", "degree_level", "cipcode", "grad_cohort"])
    cells.insert(1, "inst_state", cells["institution"].map(STATE_OF))
    cells = cells.assign(grad_cohort_years=3, noise_terms=1)
    return cells.astype({c: "category" for c in ("institution", "inst_state", "degree_level",
                                                   "cipcode")})   # as read from the store


def _table(spill: bool, seed: int = 3) -> NoisyFlows:
    cells = _cells(seed)
    generator = np.random.default_rng(seed)
    true = generator.poisson(0.05, size=(len(cells), N_DESTINATIONS))
    noisy = (true + generator.geometric(0.6, true.shape)
             - generator.geometric(0.6, true.shape)).astype(np.int32)
    total = true.sum(axis=1) + generator.integers(-2, 3, len(cells))
    return NoisyFlows("flows.I.cip2.y1", "2", 1, cells, spilled(noisy) if spill else noisy,
                      ("flows.I.cip2.y1",), ("ab" * 32,), total=total)


@pytest.fixture(autouse=True)
def small_reads(monkeypatch):
    monkeypatch.setattr(row_files, "READ_ROWS", 7)   # many spans in a small table


def test_a_spilled_table_reads_like_the_array():
    values = np.arange(53 * 5, dtype=np.int32).reshape(53, 5) - 100
    rows = spilled(values)
    assert isinstance(rows, SpilledRows) and rows.shape == values.shape and len(rows) == 53
    assert rows.dtype == np.int32 and rows.size == values.size
    mask = np.random.default_rng(1).random(53) < 0.4
    keys = [slice(None), slice(3, 40), slice(50, 80), slice(10, 10), slice(2, 30, 4),
            np.array([40, 3, 3, 52, 0, -1]), np.array([], dtype=np.int64), mask,
            (np.array([5, 44]), 2), (slice(8, 20), slice(1, 3)), (mask, 4),
            np.arange(7, 30), np.array([-3, -2, -1]), np.array([3, 5, 4, 6]), np.array([9])]
    for key in keys:
        assert np.array_equal(rows[key], values[key]), key
    assert np.array_equal(np.asarray(rows), values)
    with pytest.raises(IndexError):
        rows[np.array([53])]


def test_a_sink_builds_the_same_table_in_memory_and_in_a_file():
    values = np.random.default_rng(2).integers(-5, 5, size=(30, 4))
    sinks = [RowSink(4, np.int64, spill) for spill in (False, True)]
    for sink in sinks:
        for start in range(0, 30, 8):
            sink.append(values[start:start + 8])
    in_memory, in_file = (sink.result() for sink in sinks)
    assert isinstance(in_memory, np.ndarray) and isinstance(in_file, SpilledRows)
    assert np.array_equal(in_memory, values) and np.array_equal(np.asarray(in_file), values)


@pytest.mark.parametrize("spill", [False, True])
def test_rows_of_several_tables_are_put_in_order_block_by_block(spill):
    """A table read from several stored measurements: each one's rows (some of them), in
    the order of their cells; any block size gives the rows the concatenation gives."""
    generator = np.random.default_rng(4)
    first, second = generator.integers(-9, 9, (23, 3)), generator.integers(-9, 9, (17, 3))
    keep = np.flatnonzero(generator.random(17) < 0.6)
    expected_parts = np.concatenate([first, second[keep]])
    order = generator.permutation(len(expected_parts))
    for block_rows in (1, 5, 100):
        values = rows_in_order([(spilled(first), None), (second, keep)], order, 3, np.int32,
                               spill, block_rows)
        assert isinstance(values, SpilledRows) == spill
        assert np.array_equal(np.asarray(values), expected_parts[order])
        assert np.asarray(values).dtype == np.int32
    alone = spilled(first.astype(np.int32))
    assert rows_in_order([(alone, None)], np.arange(23), 3, np.int32, True) is alone


def test_a_spilled_file_goes_with_its_table():
    rows = spilled(np.ones((4, 3), np.int32))
    path = rows.path
    assert path.is_file()
    del rows
    assert not path.exists()


@pytest.mark.parametrize("inst_level, all_cohorts", [("I", True), ("S", False), ("S", True)])
@pytest.mark.parametrize("spill", [False, True])
def test_blockwise_sums_are_the_whole_table_sums(inst_level, all_cohorts, spill):
    """Blocks of whole institutions whose boundaries fall inside states: the state cells
    (summed over institutions) are added up over the blocks."""
    table = _table(spill)
    blocks = institution_blocks(table.cells, 9)
    states = [set(table.cells["inst_state"].iloc[b].astype(str)) for b in blocks]
    assert len(blocks) > 3 and sum("08" in s for s in states) > 1   # a state over blocks
    cells, group = coarser_cells(table.cells, inst_level, "2", "2", all_cohorts)
    whole_cells, whole = sum_to_coarser(table.cells, np.asarray(table.noisy), inst_level, "2",
                                        "2", all_cohorts)
    summed = sum_rows(table.noisy, group, len(cells), blocks)
    assert isinstance(summed, SpilledRows) == spill
    assert cells.equals(whole_cells)
    assert np.array_equal(np.asarray(summed), whole) and np.asarray(summed).dtype == np.int32


def test_sums_of_a_state_in_one_block_each_would_miss_its_other_blocks():
    """The test above can fail: taking each block's state sums as final loses rows."""
    table = _table(False)
    blocks = institution_blocks(table.cells, 9)
    cells, group = coarser_cells(table.cells, "S", "2", "2")
    per_block = sum(len(np.unique(group[b])) for b in blocks)
    assert per_block > len(cells)    # state cells that several blocks add to


@pytest.mark.parametrize("level", ["A"])
def test_a_derived_level_is_the_same_from_a_file(level):
    in_memory, entries = derive_flows(_table(False), level)
    in_file, file_entries = derive_flows(_table(True), level)
    assert isinstance(in_file.noisy, SpilledRows) and entries == file_entries
    assert in_memory.cells.equals(in_file.cells)
    assert np.array_equal(in_memory.noisy, np.asarray(in_file.noisy))
    assert np.array_equal(in_memory.total, in_file.total)


def test_correction_and_origin_tables_are_the_same_from_a_file():
    reference = load_reference_inputs(default_reference_dir())
    results = []
    for spill in (False, True):
        table = _table(spill)
        corrected, stats, entries = correct_table(table, reference, industry_flows([table]),
                                                  3e-6, block_cells=10)
        assert isinstance(corrected.corrected, SpilledRows) == spill
        suppressed = np.zeros((len(table.cells), 9), bool)
        suppressed[::4, 3] = True
        results.append((corrected, stats, entries, origin_tables(corrected, suppressed)))
    (memory, stats, entries, origins), (in_file, file_stats, file_entries, file_origins) = results
    assert stats == file_stats and entries == file_entries and stats["units_removed"] > 0
    assert np.array_equal(memory.corrected, np.asarray(in_file.corrected))
    assert [o.level for o in origins] == [o.level for o in file_origins]
    for mine, theirs in zip(origins, file_origins):
        assert mine.cells.equals(theirs.cells)
        assert np.array_equal(np.asarray(mine.corrected), np.asarray(theirs.corrected))
        assert np.array_equal(mine.suppressed, theirs.suppressed)


def test_a_stored_measurement_decodes_into_a_file_as_it_reads_into_memory(monkeypatch):
    from pseo_das.tasks.privacy import store
    monkeypatch.setattr(store, "MEASUREMENT_READ_ROWS", 4)     # several batches
    cells = _cells()[["institution", "inst_state", "degree_level", "cipcode", "grad_cohort",
                      "grad_cohort_years"]].astype(str).astype({"grad_cohort": int,
                                                                "grad_cohort_years": int})
    values = np.random.default_rng(6).integers(-3, 900, size=(len(cells), 11))
    data = store.measurement_bytes(cells, values)
    read_cells, in_memory = store.read_measurement(data, np.int32)
    file_cells, in_file = store.read_measurement(data, np.int32, RowSink(11, np.int32, True))
    assert isinstance(in_file, SpilledRows) and in_memory.dtype == np.int32
    assert read_cells.equals(file_cells)
    assert np.array_equal(np.asarray(in_file), values) and np.array_equal(in_memory, values)


def test_a_table_without_cells_is_one_empty_block():
    """A release whose cells of a level are all withheld (the frame check's `withhold`) has
    an empty flows table: one empty block, not an error (tests/test_frame_check_release)."""
    empty = pd.DataFrame({"institution": pd.Series([], dtype=str)})
    assert institution_blocks(empty, 9) == [slice(0, 0)]


def test_spill_folders_of_processes_that_are_gone_are_removed(tmp_path):
    """A release killed outright (SIGKILL) leaves its spill folder: the next one removes it,
    and keeps those of running processes and folders not named by a process."""
    import subprocess
    import sys

    from pseo_das.tasks.inputs.row_files import SPILL_PREFIX, remove_orphaned_spill_dirs
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    folders = {name: tmp_path / f"{SPILL_PREFIX}{name}" for name in
               (f"{gone}-abc", f"{os.getpid()}-def", "xyz")}
    for folder in folders.values():
        (folder / "sub").mkdir(parents=True)
    remove_orphaned_spill_dirs(tmp_path)
    assert [n for n, f in folders.items() if f.exists()] == [f"{os.getpid()}-def", "xyz"]


def _resident_mb() -> float:
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1]) / 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux: VmRSS")
def test_mapped_zeros_give_their_pages_back_and_keep_what_was_written():
    """MappedZeros: zeros at first, what was written read back after its pages were given
    back (the file keeps them), and the process's resident memory falls by the pages
    written when they are given back."""
    from pseo_das.tasks.inputs.row_files import MappedZeros
    mapped = MappedZeros((2048, 3, 4096), np.int32)          # 96 MiB
    values = mapped.array
    assert values.shape == (2048, 3, 4096) and not values[::97].any()
    before = _resident_mb()
    values[:] = np.arange(4096, dtype=np.int32)
    values[5, 1, 7] = -5
    written = _resident_mb()
    mapped.release()
    released = _resident_mb()
    assert written - before > 80 and written - released > 80
    assert values[5, 1, 7] == -5 and values[2047, 2, 4095] == 4095
    assert int(values[:, :, 9].sum()) == 9 * 2048 * 3


@pytest.mark.parametrize("cells_n, width, kind", [(0, 3, np.int64), (5, 3, np.int64),
                                                  (2 * 1024 + 37, 1021, np.int64),
                                                  (1024 + 3, 4, np.float64)])
def test_a_measurement_written_in_pieces_has_the_bytes_of_the_whole_array(monkeypatch, cells_n,
                                                                         width, kind):
    """measurement_bytes hands the writer MEASUREMENT_WRITE_ROWS cells at a time (a multiple
    of its 1,024-value write batch): the bytes of the whole array written at once, as the
    store's measurements were written before (their hashes are in every store's chain)."""
    import pyarrow as pa
    from pseo_das.tasks.privacy import store
    monkeypatch.setattr(store, "MEASUREMENT_WRITE_ROWS", 1024)     # several pieces
    rng = np.random.default_rng(9)
    cells = pd.DataFrame({"institution": [f"{i % 7:08d}" for i in range(cells_n)],
                          "degree_level": "05", "cipcode": "11", "grad_cohort": 2010,
                          "grad_cohort_years": 3})
    values = np.zeros((cells_n, width), kind)           # mostly zero, as flows: pages differ
    values[rng.random(values.shape) < 0.05] = 1
    values += rng.integers(-3, 50, size=values.shape) * (rng.random(values.shape) < 0.1)
    if kind == np.float64:
        values = values + rng.random(values.shape)
    whole = {c: pa.array(cells[c].astype(str).to_numpy(dtype=object), pa.string())
             if c in store.TEXT_COLUMNS else pa.array(cells[c].to_numpy(dtype=np.int64))
             for c in store.MEASURED_CELL_COLUMNS if c in cells.columns}
    whole["noisy"] = pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), width)
    data = store.measurement_bytes(cells, values)
    assert data == store.table_bytes(pa.table(whole))
    assert np.array_equal(store.read_measurement(data)[1].reshape(cells_n, width), values)


@pytest.mark.parametrize("sparse", [False, True])
def test_a_measurement_drawn_into_a_file_is_the_one_drawn_whole_and_kept_by_row_groups(
        monkeypatch, sparse):
    """A national flows measurement is drawn a block of cells at a time into a file
    (`measure_with_geometric_noise(..., sink)`) and stored a row group at a time
    (`measurement_row_groups`): the values of the draw of the whole array (true counts
    dense or as their non-zero entries), read back whole; one row group is the bytes of
    the whole table."""
    import io
    import pyarrow.parquet as pq
    from fractions import Fraction
    from pseo_das.tasks.inputs.sparse_counts import SparseCounts
    from pseo_das.tasks.privacy import geometric, store
    from pseo_das.tasks.privacy.statement import geometric_statement
    monkeypatch.setattr(geometric, "DRAW_BLOCK_ROWS", 7)
    cells = _cells()[["institution", "inst_state", "degree_level", "cipcode", "grad_cohort",
                      "grad_cohort_years"]].astype(str).astype({"grad_cohort": int,
                                                                "grad_cohort_years": int})
    width = 13
    dense = np.random.default_rng(2).integers(0, 4, size=(len(cells), width))
    dense[np.random.default_rng(3).random(dense.shape) < 0.7] = 0
    counts = SparseCounts.summed(len(cells), width, np.flatnonzero(dense),
                                 dense.reshape(-1)[np.flatnonzero(dense)]) if sparse else dense
    statement = geometric_statement("flows.I.cip4.y1", "employment flows", "m",
                                    Fraction(1, 2), width)
    whole = geometric.measure_with_geometric_noise(bytes(32), statement, cells, counts)
    drawn = geometric.measure_with_geometric_noise(bytes(32), statement, cells, counts,
                                                   sink=RowSink(width, np.int64, True))
    assert isinstance(drawn.values, SpilledRows) and drawn.entry == whole.entry
    assert np.array_equal(np.asarray(drawn.values), whole.values)
    assert len(cells) > 2 * 7 and (whole.values != dense).any()
    sink = io.BytesIO()
    store.write_parquet(store.measurement_row_groups(cells, drawn.values, 5), sink)
    data = sink.getvalue()
    assert pq.ParquetFile(io.BytesIO(data)).num_row_groups == -(-len(cells) // 5)
    read_cells, values = store.read_measurement(data)
    assert np.array_equal(values, whole.values)
    assert read_cells.equals(store.read_measurement(store.measurement_bytes(cells, whole.values))[0])
    one = io.BytesIO()
    store.write_parquet(store.measurement_row_groups(cells, drawn.values, len(cells)), one)
    assert one.getvalue() == store.measurement_bytes(cells, whole.values)
