"""The accuracy study end to end: its cells match the release's, and the flow runs under
prefect_test_harness (session fixture) on a small grid and writes every output."""
import json
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from pseo_das.flows.accuracy_study import accuracy_study
from pseo_das.cli import parser
from pseo_das.config import load_config
from pseo_das.tasks.inputs.cells import cell_frame, cohort_attributes
from pseo_das.tasks.earnings.histograms import earnings_records, true_histograms
from pseo_das.tasks.inputs.ingest import read_inputs
from pseo_das.tasks.study.study_bins import log_normal_bins
from pseo_das.tasks.study.study_sample import study_sample
from rendered_html import markdown_problems

pytestmark = pytest.mark.slow  # system tests: the study's flow end to end (make test-fast leaves them out)


def test_study_cells_and_histograms_are_the_release_cells(synthetic_dir):
    cfg = load_config()
    inputs = read_inputs(synthetic_dir, cfg.cells.first_cohort_year, cfg.cells.last_earnings_year)
    sample = study_sample(inputs, cfg)
    counts = sample.true_histograms(log_normal_bins(20))
    frame = cell_frame(cohort_attributes(inputs.graduates, cfg.cells), "4")
    keys = ["institution", "degree_level", "cipcode", "grad_cohort"]
    for years_after in cfg.cells.years_after:
        records = earnings_records(inputs, years_after, cfg.earnings.bin_edges, cfg.earnings.sample_floor)
        cells, release_counts = true_histograms(frame, records, cfg.cells.last_earnings_year,
                                                cfg.earnings.n_bins)
        kept = release_counts.sum(axis=1) > 0
        mine = (sample.cells["years_after"] == years_after).to_numpy()
        np.testing.assert_array_equal(counts[mine], release_counts[kept])
        pd.testing.assert_frame_equal(
            sample.cells.loc[mine, keys].reset_index(drop=True).astype(str),
            cells.loc[kept, keys].reset_index(drop=True).astype(str))
    assert (sample.sizes == counts.sum(axis=1)).all()
    assert (sample.cells["graduates_with_earnings"] == sample.sizes).all()
    # True percentiles: the inverted empirical CDF of each cell's earnings.
    truth = sample.true_percentiles((25, 50, 75))
    for i in np.flatnonzero(sample.sizes > 0)[::97]:
        values = sample.earnings[sample.offsets[i]:sample.offsets[i + 1]]
        assert (np.diff(values) >= 0).all()
        np.testing.assert_array_equal(truth[i], np.percentile(values, [25, 50, 75],
                                                              method="inverted_cdf"))


def test_quick_study_runs_end_to_end(synthetic_dir, tmp_path):
    out = tmp_path / "study"
    started = time.perf_counter()
    result = accuracy_study(synthetic_dir, out, bin_counts=[10, 20], epsilons=[0.5, 2.0], draws=2)
    assert time.perf_counter() - started < 60
    for name in ("relative_accuracy.csv", "l1_error.csv", "cells.csv", "findings.csv",
                 "study.json", "accuracy_report.md", "accuracy_report.html"):
        assert (out / name).stat().st_size > 0, name
    pngs = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert len(pngs) == 7 and all((out / "figures" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
                                  for p in pngs)
    html = (out / "accuracy_report.html").read_text()
    assert all(f"figures/{p}" in html for p in pngs)
    assert markdown_problems((out / "accuracy_report.md").read_text(), html) == []

    accuracy = pd.read_csv(out / "relative_accuracy.csv")
    assert list(accuracy.columns) == ["method", "bins", "epsilon", "stratum", "percentile", "cells",
                                      "values", "undefined_share", "mean_relative_accuracy",
                                      "median_relative_accuracy", "mean_abs_error"]
    strata = accuracy["stratum"].nunique()
    # (2 bin counts x 2 histogram methods + 2 smooth-sensitivity variants) x 2 epsilons x 3 percentiles
    assert len(accuracy) == (2 * 2 + 2) * 2 * 3 * strata
    assert set(accuracy["method"]) == {"log_normal", "even", "smooth_sensitivity",
                                       "smooth_sensitivity_unsplit"}
    assert accuracy.loc[accuracy["method"].str.startswith("smooth"), "bins"].isna().all()
    assert accuracy.loc[accuracy["method"].str.startswith("smooth"), "undefined_share"].eq(0).all()
    hist = accuracy[accuracy["method"].isin(["log_normal", "even"])]
    assert hist["mean_relative_accuracy"].le(1).all()
    l1 = pd.read_csv(out / "l1_error.csv")
    assert len(l1) == (2 * 2 + 2) * 2 * strata
    cells = pd.read_csv(out / "cells.csv", dtype={"institution": str, "cipcode": str})
    assert cells["graduates_with_earnings"].min() >= 1
    assert {"true_p25", "true_p50", "true_p75"} <= set(cells.columns)
    every = accuracy[accuracy["stratum"] == "all cells"]
    assert every["cells"].eq(len(cells)).all()
    study = json.loads((out / "study.json").read_text())
    assert study["grid"]["draws"] == 2 and study["cells"] == len(cells)
    assert len(result.findings) >= 4
    assert pd.read_csv(out / "findings.csv")["verdict"].isin(
        ["reproduced", "partly reproduced", "not reproduced"]).all()


def test_evaluate_command_line_and_lazy_prefect_import():
    args = parser().parse_args(["evaluate", "--data", "d", "--out", "o", "--quick"])
    assert (args.data, args.out, args.quick, args.seed) == ("d", "o", True, None)
    code = "import sys, pseo_das.cli; print('prefect' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_evaluate_refuses_data_without_the_synthetic_mark(synthetic_dir, tmp_path, capsys):
    """The study writes true per-cell values: a folder whose graduates.parquet lacks the
    mark `pseo-das synth` writes (here the same data rewritten, as confidential data would
    be) is refused before anything is read or written, unless the user says it is synthetic."""
    from pseo_das.cli import main
    from pseo_das.synth import is_synthetic

    assert is_synthetic(synthetic_dir)
    copied = tmp_path / "copied"
    copied.mkdir()
    for name in ("graduates", "outcomes"):
        pd.read_parquet(synthetic_dir / f"{name}.parquet").to_parquet(copied / f"{name}.parquet")
    assert not is_synthetic(copied) and not is_synthetic(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["evaluate", "--data", str(copied), "--out", str(tmp_path / "study"), "--quick"])
    assert stop.value.code == 2
    assert "not synthetic data written by `pseo-das synth`" in capsys.readouterr().err
    assert not (tmp_path / "study").exists()
    args = parser().parse_args(["evaluate", "--data", "d", "--out", "o",
                                "--i-know-this-is-synthetic"])
    assert args.i_know_this_is_synthetic
