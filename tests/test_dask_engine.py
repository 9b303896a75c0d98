"""The Dask engine (tasks/inputs/dask_engine.py) on a real LocalCluster: exactly the
in-process engine's counts, hence byte-identical public files; bad or unsorted input is
refused before any noise."""
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import run_release
from test_ingest import valid_graduates, valid_outcomes
from test_true_counts import CFG, CPI, assert_same_counts, counts
from pseo_das.tasks.inputs.dask_engine import dask_counts
from pseo_das.tasks.inputs.ingest import InputValidationError

SEED = "e7" * 32


def partitioned(source: Path, folder: Path, parts: int = 3, row_group_size: int = 2_500) -> Path:
    """The data of `source` as graduates/ and outcomes/ folders of sorted part files with
    small row groups (so that the Dask engine makes several tasks)."""
    for name in ("graduates", "outcomes"):
        frame = pd.read_parquet(source / f"{name}.parquet")
        (folder / name).mkdir(parents=True)
        for k, rows in enumerate(np.array_split(np.arange(len(frame)), parts)):
            frame.iloc[rows].to_parquet(folder / name / f"part-{k}.parquet",
                                        row_group_size=row_group_size)
    return folder


@pytest.fixture(scope="module")
def dataset(synthetic_dir, tmp_path_factory) -> Path:
    return partitioned(synthetic_dir, tmp_path_factory.mktemp("dataset"))


@pytest.mark.slow  # a Dask LocalCluster (worker processes)
def test_the_engines_count_exactly_the_same(dataset):
    streamed = counts(dataset, 4_000)
    on_dask = dask_counts(dataset, CFG, None, CPI, chunk_rows=4_000)
    truth = {("frame", level): streamed.frames[level].cells for level in streamed.levels}
    for level in streamed.levels:
        for k in CFG.cells.years_after:
            if streamed.levels[level].histograms:
                truth["earnings", level, k] = streamed.histograms(level, k, 2022)
            if streamed.levels[level].employed:
                truth["flows", level, k] = streamed.flows(level, k, 2022)
    assert_same_counts(on_dask, truth)
    assert on_dask.fingerprints == streamed.fingerprints
    assert on_dask.rows == streamed.rows and on_dask.checks == streamed.checks


def test_unsorted_input_is_refused_by_the_dask_engine(synthetic_dir, tmp_path):
    frame = pd.read_parquet(synthetic_dir / "graduates.parquet")
    frame.iloc[::-1].to_parquet(tmp_path / "graduates.parquet", row_group_size=5_000)
    (tmp_path / "outcomes.parquet").write_bytes((synthetic_dir / "outcomes.parquet").read_bytes())
    with pytest.raises(InputValidationError, match=r"graduates.parquet is not sorted by person_id "
                       r"\(row group statistics.*use --engine local"):
        dask_counts(tmp_path, CFG, None, CPI)


@pytest.mark.slow  # a Dask LocalCluster (worker processes)
def test_bad_rows_found_by_workers_are_named(tmp_path):
    outcomes = valid_outcomes()
    outcomes.loc[6, "earnings"] = -3.0
    graduates = valid_graduates()
    graduates.to_parquet(tmp_path / "graduates.parquet", row_group_size=2)
    outcomes.assign(person_id=[1, 1, 1, 2, 3, 4, 99]).to_parquet(tmp_path / "outcomes.parquet",
                                                                 row_group_size=2)
    with pytest.raises(InputValidationError) as err:
        dask_counts(tmp_path, CFG, None, CPI, chunk_rows=2)
    message = str(err.value)
    assert "check greater_than_or_equal_to(0) failed, 1 bad row(s); e.g. row 6: -3.0" in message
    assert "column person_id: 1 outcome row(s) for a person not in graduates.parquet; e.g. row 6: 99" in message


def _digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_dask_and_local_releases_are_byte_identical(dataset, tmp_path, tracking_uri):
    """The same seed, a fresh store each: every published data file is identical (the
    release notes differ only by the engine line of the run's parameters: not published)."""
    published = {}
    for engine in ("local", "dask"):
        code = run_release(dataset, tmp_path / engine, SEED, tracking_uri,
                           extra=("--init-store", "--engine", engine, "--chunk-rows", "4000"),
                           store=tmp_path / f"store-{engine}")
        assert code == 0
        published[engine] = _digest(tmp_path / engine / "public")
    assert published["local"] == published["dask"]
    assert any(name.endswith("pseof_all.csv.gz") for name in published["dask"])


@pytest.mark.slow  # a Dask LocalCluster (worker processes)
def test_the_cell_statistics_moments_come_from_the_one_counting_pass_on_both_engines(dataset):
    """With mos.enabled the release's counting pass (either engine) also gives the cell
    statistics' moments: exactly those of the moments-only pass (itself tested against a
    whole-table computation in test_mos.py), so the microdata are read once."""
    from test_cell_statistics_store import CFG as MOS_CFG
    from pseo_das.tasks.inputs.true_counts import read_cell_moments, read_counts
    lower, upper = MOS_CFG.mos.bounds(MOS_CFG.earnings)
    alone = read_cell_moments(dataset, MOS_CFG, CPI, lower, upper, chunk_rows=6_000)
    for counted in (read_counts(dataset, MOS_CFG, None, CPI, 4_000),
                    dask_counts(dataset, MOS_CFG, None, CPI, chunk_rows=4_000)):
        assert counted.moments is not None and counted.levels   # moments beside the counts
        pd.testing.assert_frame_equal(counted.moments.frame.cells, alone.frame.cells)
        assert list(counted.moments.statistics) == list(alone.statistics)
        for statistic, moments in alone.statistics.items():
            for part in ("n", "total", "lowest", "highest"):
                np.testing.assert_array_equal(getattr(counted.moments.statistics[statistic], part),
                                              getattr(moments, part), err_msg=f"{statistic} {part}")
    assert read_counts(dataset, CFG, None, CPI).moments is None   # mos off: not counted
