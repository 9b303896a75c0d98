"""The optional cell statistics product (pseom_all.csv, issue 15) in real releases: refused
without the acknowledgement, published with honest documentation when enabled, republished
from the store alone; and the measuring task's noise on a hand-built release."""
import json
from fractions import Fraction

import mlflow
import numpy as np
import pandas as pd
import pytest

from conftest import SEED_A, public_table, run_release, store_beside, without_extras
from pseo_das.config import ConfigError, ReleaseConfig, load_config
from pseo_das.tasks.earnings.cell_statistics import measure_statistic
from pseo_das.tasks.earnings.cell_statistics_plan import cell_statistics_questions
from pseo_das.tasks.earnings.mos import mean_local_sensitivity
from pseo_das.tasks.inputs.cell_moments import CellMoments, CellStatistic, StatisticMoments
from pseo_das.tasks.inputs.cells import CellFrame
from pseo_das.tasks.privacy.laplace import laplace_noise

MOS = "[mos]\nenabled = true\nacknowledge_not_formally_dp = true\nepsilon = 0.125\n"


def configured(text: str, tmp_path) -> ReleaseConfig:
    path = tmp_path / "mos.toml"
    path.write_text(text)
    return load_config(path)


def test_enabling_mos_without_the_acknowledgement_is_refused_before_anything(
        synthetic_dir, tmp_path, tracking_uri, capsys):
    with pytest.raises(ConfigError, match="acknowledge_not_formally_dp"):
        configured("[mos]\nenabled = true\n", tmp_path)
    config = tmp_path / "no-ack.toml"
    config.write_text("[mos]\nenabled = true\n")
    store = tmp_path / "store"
    code = run_release(synthetic_dir, tmp_path / "r", SEED_A, tracking_uri,
                       extra=("--config", str(config), "--init-store"), store=store)
    assert code == 2
    assert "NOT a formal differential-privacy guarantee" in capsys.readouterr().err
    assert not (tmp_path / "r").exists() and not store.exists()   # nothing created or spent
    # the formal variant needs no acknowledgement; the budget counts 2 x epsilon per statistic
    cfg = configured('[mos]\nenabled = true\nvariant = "mos-dp"\nepsilon = 0.125\n', tmp_path)
    assert cfg.planned_total_epsilon() == Fraction(15, 2) + 8 * Fraction(1, 8)
    with pytest.raises(ConfigError, match="exceeds privacy.epsilon_cap"):
        configured('[mos]\nenabled = true\nvariant = "mos-dp"\nepsilon = 0.25\n', tmp_path)
    # a configuration without the product dumps as before (same SHA-256 as earlier versions)
    assert "mos" not in load_config().model_dump(mode="json")


def hand_built_moments() -> CellMoments:
    """Six cells of one cohort (degree 05 x 4, 03 x 2) with known moments."""
    cells = pd.DataFrame({
        "institution": pd.Categorical(["00000001"] * 6), "inst_state": pd.Categorical(["08"] * 6),
        "degree_level": pd.Categorical(["03", "03", "05", "05", "05", "05"]),
        "cipcode": pd.Categorical(["00"] * 6), "grad_cohort": [2001, 2006, 2001, 2004, 2007, 2010],
        "grad_cohort_years": [5, 5, 3, 3, 3, 3],
        "cip_vintage": pd.Categorical(["2020"] * 6, categories=["2010", "2020"])})
    n = np.array([2, 40, 3, 10, 400, 0])
    mean = np.array([20_000., 30_000., 50_000., 40_000., 45_000., np.nan])
    lowest = np.array([15_000., 12_000., 40_000., 20_000., 10_000., np.nan])
    highest = np.array([25_000., 90_000., 60_000., 70_000., 200_000., np.nan])
    moment = StatisticMoments(n, np.nan_to_num(mean * n), lowest, highest)
    return CellMoments(CellFrame("A", cells, None), {CellStatistic.MEAN_Y1: moment},
                       10_000.0, 614_597.0)


def test_the_mos_release_of_a_hand_built_table_adds_laplace_chi_over_epsilon_n(tmp_path):
    cfg = configured(MOS, tmp_path)
    moments = hand_built_moments()
    m = moments.statistics[CellStatistic.MEAN_Y1]
    question = next(q for q in cell_statistics_questions(cfg) if q.tabulation_id.endswith("y1"))
    table, entries, chi = measure_statistic(moments, question, bytes(32),
                                            "mos.I.cipA.mean_y1@R", cfg.cells.last_earnings_year)
    eligible = m.n >= 3
    ls = mean_local_sensitivity(m.n[eligible], m.total[eligible], m.lowest[eligible],
                                m.highest[eligible], 10_000.0, 614_597.0)
    by_degree = pd.Series(m.n[eligible] * ls).groupby(
        moments.frame.cells["degree_level"].astype(str)[eligible].to_numpy()).max()
    assert chi == pytest.approx(by_degree.to_dict())
    expected_chi = by_degree.reindex(moments.frame.cells["degree_level"].astype(str)[eligible])
    scale = expected_chi.to_numpy() / (0.125 * m.n[eligible])
    unit = laplace_noise(bytes(32), "mos.I.cipA.mean_y1@R", np.ones(eligible.sum()))
    theta = m.total[eligible] / m.n[eligible]
    np.testing.assert_allclose(table["value"].to_numpy()[eligible], theta + unit * scale)
    assert table["published"].tolist() == eligible.tolist()
    assert table["value"][~eligible].isna().all()           # N < 3: nothing released
    assert np.isfinite(table["noisy_count"]).all()           # every frame cell gets a count
    values, counts = entries
    assert (values.formal_guarantee, counts.formal_guarantee) == ("no", "yes")
    assert values.epsilon == counts.epsilon == Fraction(1, 8)
    assert (values.n_cells, counts.n_cells) == (eligible.sum(), 6)


@pytest.fixture(scope="module")
def mos_release(small_synthetic_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("mos-release")
    uri = f"sqlite:///{root / 'audit' / 'mlflow.db'}"
    assert run_release(small_synthetic_dir, root / "r", SEED_A, uri, "MOS1",
                       extra=without_extras(root / "mos.toml", MOS)) == 0
    return root, uri


@pytest.mark.slow
def test_a_release_with_mos_publishes_pseom_with_honest_documentation(mos_release):
    root, uri = mos_release
    internal, public = root / "r" / "internal", root / "r" / "public"
    pseom = pd.read_csv(public_table(root / "r", "pseom_all.csv"), dtype=str)
    pseoe = pd.read_csv(public_table(root / "r", "pseoe_all.csv"), dtype=str, nrows=1)
    identifiers = list(pseoe.columns[:12])
    assert list(pseom.columns[:12]) == identifiers
    assert (pseom["cip_level"] == "A").all() and (pseom["inst_level"] == "I").all()
    for s in ("mean_y1", "mean_y5", "mean_y10", "growth_1_5"):
        status = pseom[f"status_{s}"].astype(int)
        # the small data set publishes 41 to 74 of its 114 cells per statistic
        assert set(status) <= {1, 5, -1} and (status == 1).sum() > 30
        assert pseom.loc[status != 1, s].isna().all() and pseom.loc[status == 1, s].notna().all()
        assert pseom.loc[status == 1, f"{s}_chi"].notna().all()
    ledger = pd.read_csv(internal / "ledger.csv", dtype=str).set_index("tabulation_id")
    assert ledger.loc["mos.I.cipA.mean_y1", "formal_guarantee"] == "no"
    assert ledger.loc["mos.I.cipA.mean_y1.count", "formal_guarantee"] == "yes"
    assert ledger.loc["earnings.I.cip4.y1", "formal_guarantee"] == "yes"
    statement = "formal pure epsilon-DP 8, plus epsilon 0.5 spent by maximum observed"
    notes = (public / "release_notes.md").read_text()
    drb = (internal / "drb_report.md").read_text()
    for document in (notes, drb):
        assert "NOT formally differentially private" in document and statement in document
        assert "chi by degree level" in document
    summary = json.loads((internal / "release_summary.json").read_text())["cell_statistics"]
    assert summary["ledger_epsilon"] == "1" and summary["formal_guarantee"] is False
    assert summary["new_epsilon"] == "1" and summary["reused_measurements"] == 0
    run_id = next(line.split("`")[1] for line in drb.splitlines()
                  if line.startswith("| MLflow run id"))
    params = mlflow.MlflowClient(uri).get_run(run_id).data.params
    assert params["cell_statistics.formal_guarantee"].startswith("NO")
    assert (params["ledger_epsilon.formal"], params["ledger_epsilon.non_formal"]) == ("8", "0.5")
    chi = {k: float(v) for k, v in params.items() if k.startswith("cell_statistics.chi.mean_y1.")}
    assert chi and all(v > 0 for v in chi.values())


@pytest.mark.slow
def test_republish_rebuilds_pseom_from_the_store_alone(mos_release, tmp_path):
    from pseo_das.cli import main
    root, uri = mos_release
    with pytest.raises(SystemExit) as stop:
        main(["republish", "--store", str(store_beside(uri)), "--release", "MOS1",
              "--out", str(tmp_path / "again")])
    assert stop.value.code == 0
    for name in ("public/all/pseom_all.csv.gz", "internal/ledger.csv", "public/release_notes.md"):
        assert (tmp_path / "again" / name).read_bytes() == (root / "r" / name).read_bytes(), name


@pytest.mark.slow
def test_the_audit_checks_and_replays_a_release_with_mos(mos_release, small_synthetic_dir,
                                                         tmp_path, capsys):
    """`pseo-das audit` knows the cell statistics' epsilon (mos.epsilon per measurement) and
    replays pseom_all.csv byte for byte from the recorded seed (the same Laplace stream)."""
    from pseo_das.cli import main
    root, uri = mos_release
    with pytest.raises(SystemExit) as stop:
        main(["audit", str(root / "r"), "--tracking-uri", uri,
              "--data", str(small_synthetic_dir),
              "--report", str(tmp_path / "report")])
    printed = capsys.readouterr().out
    assert stop.value.code == 0, printed
    assert "8 cell statistics (MOS) x 0.125" in printed
    assert "PASS: all 5 checks passed" in printed


@pytest.mark.slow
def test_a_second_release_reuses_the_stored_cell_statistics_at_zero_epsilon(
        mos_release, small_synthetic_dir, capsys):
    """The cell statistics are durable measurements of the privacy store: a later release
    with the same data and configuration spends nothing on them and publishes the same
    pseom_all.csv byte for byte (and the store still verifies)."""
    from pseo_das.cli import main
    root, uri = mos_release
    capsys.readouterr()
    assert run_release(small_synthetic_dir, root / "r2", None, uri, "MOS2",
                       extra=("--config", str(root / "mos.toml")),
                       store=store_beside(uri)) == 0
    said = capsys.readouterr().out
    for name in ("public/all/pseom_all.csv.gz", "public/all/pseoe_all.csv.gz"):
        assert (root / "r2" / name).read_bytes() == (root / "r" / name).read_bytes(), name
    summary = json.loads((root / "r2" / "internal" / "release_summary.json").read_text())
    cells = summary["cell_statistics"]
    assert summary["new_epsilon"] == "0" and summary["new_measurements"] == 0
    assert (cells["new_epsilon"], cells["new_measurements"], cells["ledger_epsilon"]) == \
        ("0", 0, "1")
    assert cells["reused_measurements"] > 0
    assert (f"new epsilon 0 (0 statistic x population units measured, "
            f"{cells['reused_measurements']:,} reused at zero epsilon)") in said
    first = pd.read_csv(root / "r" / "internal" / "ledger.csv", dtype=str)
    second = pd.read_csv(root / "r2" / "internal" / "ledger.csv", dtype=str)
    pd.testing.assert_frame_equal(first, second)    # the same measurements, the same entries
    with pytest.raises(SystemExit) as stop:
        main(["store", "verify", str(store_beside(uri))])
    assert stop.value.code == 0
    with pytest.raises(SystemExit) as stop:
        main(["store", "show", str(store_beside(uri))])
    shown = capsys.readouterr().out
    assert "mos.I.cipA.mean_y1@MOS1/1: epsilon 0.25 on" in shown and "NOT formally DP" in shown
    assert "mos.I.cipA.mean_y1@MOS2" not in shown
