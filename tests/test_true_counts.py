"""Streaming aggregation (tasks/inputs/true_counts.py): the counts a release measures,
read in chunks, equal the whole-file counts exactly, whatever the chunk size, the order of
the rows or the split into part files; every input rule still holds across chunks."""
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from test_ingest import (GRADUATE_VIOLATIONS, OUTCOME_VIOLATIONS, valid_graduates,
                         valid_outcomes, write)
from pseo_das.config import load_config
from pseo_das.tasks.earnings.histograms import earnings_records, true_histograms
from pseo_das.tasks.employment_flows.flow_counts import graduate_destinations, true_flows
from pseo_das.tasks.inputs.cells import cell_frame, cohort_attributes
from pseo_das.tasks.inputs.constant_dollars import in_constant_dollars
from pseo_das.tasks.inputs.cpi import find_cpi, read_cpi
from pseo_das.tasks.inputs.ingest import InputValidationError, read_inputs
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir
from pseo_das.tasks.inputs.true_counts import TrueCounts, read_counts

CFG = load_config()
CPI = read_cpi(find_cpi(default_reference_dir()))


def counts(data: Path, chunk_rows: int = 1_000_000) -> TrueCounts:
    return read_counts(data, CFG, None, CPI, chunk_rows)


@pytest.fixture(scope="module")
def whole_file_truth(synthetic_dir):
    """The tests' data counted whole, in memory, the way the accuracy studies count it."""
    inputs = in_constant_dollars.fn(read_inputs(synthetic_dir, CFG.cells.first_cohort_year,
                                                CFG.cells.last_earnings_year),
                                    CPI, CFG.earnings.dollar_year)
    attributes = cohort_attributes(inputs.graduates, CFG.cells, CFG.cip.switch_year)
    truth = {}
    for level in ("2", "4"):
        frame = cell_frame(attributes, level)
        for k in CFG.cells.years_after:
            records = earnings_records(inputs, k, CFG.earnings.bin_edges, CFG.earnings.sample_floor)
            truth["earnings", level, k] = true_histograms(frame, records, CFG.cells.last_earnings_year,
                                                          CFG.earnings.n_bins)
            destination = graduate_destinations(inputs, k, CFG.earnings.sample_floor)
            truth["flows", level, k] = true_flows(frame, destination, k, CFG.cells.last_earnings_year)
        truth["frame", level] = frame.cells
    return truth


def assert_same_counts(streamed: TrueCounts, truth: dict) -> None:
    earnings_levels, flows_levels = CFG.privacy.measured_levels(), CFG.flows.measured_levels()
    assert set(streamed.levels) == set(earnings_levels) | set(flows_levels)
    for level in streamed.levels:
        pd.testing.assert_frame_equal(streamed.frames[level].cells, truth["frame", level])
        for k in CFG.cells.years_after:
            for product, get, measured in (("earnings", streamed.histograms, earnings_levels),
                                           ("flows", streamed.flows, flows_levels)):
                if level not in measured:
                    continue
                cells, values = get(level, k, CFG.cells.last_earnings_year)
                true_cells, true_values = truth[product, level, k]
                pd.testing.assert_frame_equal(cells, true_cells)
                assert values.dtype == np.int64
                np.testing.assert_array_equal(values, true_values, err_msg=f"{product} {level} y{k}")


@pytest.mark.parametrize("chunk_rows", [1_000_000, 7_777, 1_000])
def test_chunked_counts_equal_whole_file_counts(synthetic_dir, whole_file_truth, chunk_rows):
    """1,000-row chunks cut through cells (and through a person's outcome rows); the
    counts are the same integers."""
    streamed = counts(synthetic_dir, chunk_rows)
    assert_same_counts(streamed, whole_file_truth)
    assert streamed.rows["graduates"] == pq.ParquetFile(synthetic_dir / "graduates.parquet").metadata.num_rows
    flows, truth = streamed.flows("2", 1, 2022)[1], whole_file_truth["flows", "2", 1][1]
    assert flows[:, -1].sum() == truth[:, -1].sum() > 0   # the non-employed, derived


def test_histograms_widen_before_they_could_overflow(synthetic_dir, whole_file_truth,
                                                    monkeypatch):
    """A level's running histograms are int32 while the records added could not overflow
    a bin, int64 once they could: the same counts either way (here the limit is made small,
    so that the switch comes between chunks)."""
    from pseo_das.tasks.inputs import true_counts
    narrow = counts(synthetic_dir, 1_000)
    assert {a.dtype for c in narrow.levels.values() for a in c.histograms.values()} == \
        {np.dtype(np.int32)}
    monkeypatch.setattr(true_counts, "NARROW_HISTOGRAM_RECORDS", 3_000)
    widened = counts(synthetic_dir, 1_000)
    assert_same_counts(widened, whole_file_truth)
    assert {a.dtype for c in widened.levels.values() for a in c.histograms.values()} == \
        {np.dtype(np.int64)}


def test_unsorted_inputs_are_counted_through_partitions(synthetic_dir, whole_file_truth, tmp_path):
    rng = np.random.default_rng(3)
    for name in ("graduates", "outcomes"):
        frame = pd.read_parquet(synthetic_dir / f"{name}.parquet")
        frame.iloc[rng.permutation(len(frame))].to_parquet(tmp_path / f"{name}.parquet",
                                                           row_group_size=4_000)
    notes = []
    import pseo_das.tasks.inputs.true_counts as module
    original, module.progress = module.progress, notes.append
    try:
        streamed = counts(tmp_path, 5_000)
    finally:
        module.progress = original
    assert any("not sorted by person_id" in n and "partitions on disk" in n for n in notes)
    assert_same_counts(streamed, whole_file_truth)


def test_partitioned_dataset_folders(synthetic_dir, whole_file_truth, tmp_path):
    """graduates/ and outcomes/ as folders of part files: the same counts; the fingerprints
    name every part file."""
    for name in ("graduates", "outcomes"):
        frame = pd.read_parquet(synthetic_dir / f"{name}.parquet")
        (tmp_path / name).mkdir()
        for k, part in enumerate(np.array_split(np.arange(len(frame)), 4)):
            frame.iloc[part].to_parquet(tmp_path / name / f"part-{k}.parquet")
    streamed = counts(tmp_path, 3_000)
    assert_same_counts(streamed, whole_file_truth)
    assert sorted(streamed.fingerprints) == [f"{n}/part-{k}.parquet" for n in ("graduates", "outcomes")
                                             for k in range(4)]


# -- input rules across chunks ------------------------------------------------------------

@pytest.mark.parametrize("label,mutate,column,check,n_bad", GRADUATE_VIOLATIONS,
                         ids=[v[0] for v in GRADUATE_VIOLATIONS])
def test_graduate_violations_are_named_when_streamed(tmp_path, label, mutate, column, check, n_bad):
    write(tmp_path, mutate(valid_graduates()), valid_outcomes())
    with pytest.raises(InputValidationError) as err:
        counts(tmp_path)
    line = next(l for l in str(err.value).splitlines() if f"column {column}" in l)
    assert "graduates.parquet" in str(err.value)
    assert check in line and f"{n_bad} bad row(s)" in line and "row " in line


@pytest.mark.parametrize("label,mutate,column,check,n_bad", OUTCOME_VIOLATIONS,
                         ids=[v[0] for v in OUTCOME_VIOLATIONS])
def test_outcome_violations_are_named_when_streamed(tmp_path, label, mutate, column, check, n_bad):
    write(tmp_path, valid_graduates(), mutate(valid_outcomes()))
    with pytest.raises(InputValidationError) as err:
        counts(tmp_path, chunk_rows=2)
    line = next(l for l in str(err.value).splitlines() if f"column {column}" in l)
    assert "outcomes.parquet" in str(err.value)
    assert check in line and f"{n_bad} bad row(s)" in line


def test_rules_that_span_chunks(tmp_path):
    """One row per chunk: a duplicated graduate, an institution in two states and unknown
    persons are still found, each naming its rows."""
    graduates = valid_graduates().assign(person_id=[1, 2, 2, 4, 5, 6])
    graduates.loc[5, "inst_state"] = "26"
    outcomes = valid_outcomes().assign(person_id=[1, 1, 1, 2, 3, 4, 77])
    write(tmp_path, graduates, outcomes)
    with pytest.raises(InputValidationError) as err:
        counts(tmp_path, chunk_rows=1)
    message = str(err.value)
    assert "column person_id: check unique failed, 2 bad row(s) (in different chunks); e.g. row 1, row 2" in message
    assert ("column institution, inst_state: check one_inst_state_per_institution failed, 2 bad "
            "row(s) (in different chunks); e.g. row 3, row 5") in message
    assert ("column person_id: 2 outcome row(s) for a person not in graduates.parquet; e.g. "
            "row 4: 3, row 6: 77") in message   # person 3 became 2


def test_a_bad_row_in_the_last_chunk_of_a_big_file(synthetic_dir, tmp_path):
    """The last outcome row of the tests' data made negative: refused after every chunk
    was read, naming that row."""
    outcomes = pd.read_parquet(synthetic_dir / "outcomes.parquet")
    last = len(outcomes) - 1
    outcomes.loc[last, "earnings"] = -1.0
    outcomes.to_parquet(tmp_path / "outcomes.parquet", row_group_size=10_000)
    (tmp_path / "graduates.parquet").write_bytes((synthetic_dir / "graduates.parquet").read_bytes())
    with pytest.raises(InputValidationError) as err:
        counts(tmp_path, chunk_rows=5_000)
    assert f"check greater_than_or_equal_to(0) failed, 1 bad row(s); e.g. row {last}: -1.0" in str(err.value)


def test_a_bad_row_of_a_part_file_is_named_by_its_file(tmp_path):
    (tmp_path / "outcomes").mkdir()
    outcomes = valid_outcomes()
    outcomes.iloc[:4].to_parquet(tmp_path / "outcomes" / "part-0.parquet")
    outcomes.iloc[4:].assign(industry=["62", "99", "72"]).to_parquet(tmp_path / "outcomes" / "part-1.parquet")
    valid_graduates().to_parquet(tmp_path / "graduates.parquet")
    with pytest.raises(InputValidationError, match=r"outcomes: input rejected.*\n.*column industry: "
                       r"check isin.*1 bad row\(s\); e.g. row 5 \(part-1.parquet row 1\): '99'"):
        counts(tmp_path)
