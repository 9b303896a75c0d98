"""Maximum observed sensitivity (Chetty and Friedman 2019): local sensitivities against brute
force, the paper's Figure 1, chi, the noise scale, the ledger's formal/non-formal split."""
import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pseo_das.tasks.earnings.mos import (chi_by_scope, mean_local_sensitivity, mos_dp_mean,
                                         mos_noise_scale, ols_local_sensitivity, ols_statistic,
                                         worst_case_chi)
from pseo_das.tasks.privacy.geometric import measure_with_geometric_noise
from pseo_das.tasks.privacy.laplace import laplace_noise, measure_with_laplace_noise
from pseo_das.tasks.privacy.ledger import FORMAL_NO, FORMAL_YES, PrivacyLedger
from pseo_das.tasks.privacy.statement import (MeasurementRefused, Mechanism, geometric_statement,
                                              laplace_statement)

SEED = bytes(range(32))


def brute_mean_sensitivity(values: np.ndarray, lower: float, upper: float,
                           grid: np.ndarray) -> float:
    """Recompute the mean after every removal and every addition on a grid of [L, U]."""
    mean = values.mean()
    removals = [abs(np.delete(values, i).mean() - mean) for i in range(len(values))]
    additions = [abs(np.append(values, x).mean() - mean) for x in grid]
    return max(removals + additions)


def test_mean_local_sensitivity_equals_brute_force_on_random_small_cells():
    rng = np.random.default_rng(15)
    lower, upper = 10_000.0, 614_597.0
    grid = np.concatenate([[lower, upper], rng.uniform(lower, upper, 200)])
    cells = [rng.uniform(lower, upper, size=rng.integers(2, 12)) for _ in range(300)]
    cells += [np.full(5, lower), np.full(3, upper), np.array([lower, upper])]
    closed = mean_local_sensitivity(np.array([len(c) for c in cells]),
                                    np.array([c.sum() for c in cells]),
                                    np.array([c.min() for c in cells]),
                                    np.array([c.max() for c in cells]), lower, upper)
    brute = np.array([brute_mean_sensitivity(c, lower, upper, grid) for c in cells])
    np.testing.assert_allclose(closed, brute, rtol=1e-9)
    # N x LS never exceeds the public worst case U - L (what mos-dp uses)
    n = np.array([len(c) for c in cells])
    assert (n * closed <= worst_case_chi(lower, upper) * (1 + 1e-12)).all()
    assert np.isinf(mean_local_sensitivity(np.array([1]), np.array([5.0]), np.array([5.0]),
                                           np.array([5.0]), 0, 10)).all()


def brute_ols_sensitivity(x, y, x_grid, y_bounds, at):
    """Refit by least squares (numpy.polyfit) after each removal and addition."""
    def theta(xs, ys):
        if np.ptp(xs) == 0:
            return np.inf
        slope, intercept = np.polyfit(xs, ys, 1)
        return slope if at is None else intercept + slope * at
    base = theta(x, y)
    changes = [abs(theta(np.delete(x, i), np.delete(y, i)) - base) for i in range(len(x))]
    changes += [abs(theta(np.append(x, gx), np.append(y, gy)) - base)
                for gx, gy in itertools.product(x_grid, y_bounds)]
    return max(changes)


@pytest.mark.parametrize("at", [None, 0.25, 5.0])
def test_ols_local_sensitivity_by_rank_one_updates_equals_refitting(at):
    rng = np.random.default_rng(42)
    for _ in range(150):
        n = int(rng.integers(4, 14))
        discrete = rng.random() < 0.5
        if discrete:       # a years-after regressor: 1 and 5 only
            x = rng.choice([1.0, 5.0], size=n)
            x[:2] = [1.0, 5.0]
            grid = np.array([1.0, 5.0])
        else:
            x = rng.uniform(0, 1, n)
            grid = np.linspace(0, 1, 21)
        y = rng.uniform(0, 1, n)
        closed, how = ols_local_sensitivity(x, y, grid, (0.0, 1.0), at)
        brute = brute_ols_sensitivity(x, y, grid, (0.0, 1.0), at)
        if np.isinf(brute):
            assert np.isinf(closed)
        else:
            assert closed == pytest.approx(brute, rel=1e-7, abs=1e-10)
            assert how[0] in ("add", "remove")


def figure_1_cell() -> tuple[np.ndarray, np.ndarray]:
    """A cell like the paper's Figure 1: 20 parent-child rank pairs whose OLS predicted
    value at the 25th percentile is .212 and rises to .349 when (0, 1) is added. The
    change from adding (x*, y*) is r (1/n + (x0 - xbar)(x* - xbar)/Sxx) / (1 + 1/n +
    (x* - xbar)^2/Sxx), r the residual of the added point, linear in the slope b once
    the intercept is .212 - .25 b: solved for b in closed form."""
    n, x0 = 20, 0.25
    x = np.linspace(0.15, 0.95, n)
    xbar, sxx = x.mean(), ((x - x.mean()) ** 2).sum()
    k = (1 / n + (x0 - xbar) * (0 - xbar) / sxx) / (1 + 1 / n + xbar ** 2 / sxx)
    b = (0.137 / k - (1 - 0.212)) / 0.25     # r = 1 - a = .788 + .25 b
    a = 0.212 - x0 * b
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.02, n)
    design = np.column_stack([np.ones(n), x])
    noise -= design @ np.linalg.lstsq(design, noise, rcond=None)[0]   # keeps the fit
    return x, a + b * x + noise


def test_figure_1_arithmetic_on_a_constructed_cell():
    x, y = figure_1_cell()
    assert len(x) == 20 and (0 <= y).all() and (y <= 1).all()
    assert ols_statistic(x, y, 0.25) == pytest.approx(0.212, abs=5e-4)
    assert ols_statistic(np.append(x, 0), np.append(y, 1), 0.25) == pytest.approx(0.349, abs=5e-4)
    sensitivity, how = ols_local_sensitivity(x, y, np.linspace(0, 1, 101), (0.0, 1.0), 0.25)
    assert round(sensitivity, 3) == 0.137
    assert how == ("add", 0.0, 1.0)      # the outlier of the paper's figure decides


def test_chi_is_the_largest_n_times_ls_of_each_scope_on_a_hand_built_release():
    # degree 05: cells {10, 20, 30} (N 3, mean 20, LS = max(|0-20|,|100-20|)/4 = 20 by
    # adding 100; removing 10 or 30 moves it 5) -> N LS 60; {50 x 10} (N 10, LS 50/11) ->
    # 45.45; degree 07: {0, 100} (N 2, mean 50, LS max(50/3, 50/1) = 50) -> 100.
    cells = [np.array([10., 20., 30.]), np.full(10, 50.), np.array([0., 100.])]
    degree = np.array(["05", "05", "07"])
    n = np.array([len(c) for c in cells])
    ls = mean_local_sensitivity(n, np.array([c.sum() for c in cells]),
                                np.array([c.min() for c in cells]),
                                np.array([c.max() for c in cells]), 0.0, 100.0)
    np.testing.assert_allclose(ls, [20.0, 50 / 11, 50.0])
    per_cell, groups = chi_by_scope(n, ls, degree)
    assert groups.to_dict() == pytest.approx({"05": 60.0, "07": 100.0})
    np.testing.assert_allclose(per_cell, [60.0, 60.0, 100.0])
    assert (per_cell / n >= ls).all()            # the envelope chi / N covers every cell
    np.testing.assert_allclose(mos_noise_scale(per_cell, n, 0.5), [40.0, 12.0, 100.0])
    with pytest.raises(ValueError, match="infinite"):
        chi_by_scope(np.array([1]), np.array([np.inf]), np.array(["05"]))


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_laplace_noise_has_scale_chi_over_epsilon_n(epsilon):
    """Goodness of fit of the standardized noise (noise / (chi / (epsilon N_g))) to the
    standard Laplace law at a fixed seed; the same test rejects a scale off by 10%."""
    rng = np.random.default_rng(3)
    n = rng.integers(3, 500, size=200_000)
    chi = 1234.5
    theta = rng.uniform(10_000, 90_000, size=len(n))
    scale = mos_noise_scale(np.full(len(n), chi), n, epsilon)
    statement = laplace_statement("mos.test", "test", f"gof-{epsilon}", epsilon, None, False)
    noisy, entry = measure_with_laplace_noise(SEED, statement, theta, scale, "test", chi)
    standardized = (noisy - theta) / scale
    assert stats.kstest(standardized, stats.laplace.cdf).pvalue > 1e-3
    assert stats.kstest(standardized / 1.1, stats.laplace.cdf).pvalue < 1e-6
    assert abs(standardized.mean()) < 5 * math.sqrt(2 / len(n))
    assert (entry.mechanism, entry.formal_guarantee, entry.n_cells, entry.sensitivity) == \
        (Mechanism.LAPLACE, FORMAL_NO, len(n), chi)
    # deterministic: the same stream gives the same draws; zero scale gives zero noise
    again, _ = measure_with_laplace_noise(SEED, statement, theta, scale, "test", chi)
    np.testing.assert_array_equal(noisy, again)
    np.testing.assert_array_equal(laplace_noise(SEED, "zero", np.zeros(4)), np.zeros(4))
    with pytest.raises(ValueError, match="finite and non-negative"):
        laplace_noise(SEED, "bad", np.array([1.0, -1.0]))


def test_the_ledger_marks_mos_as_not_formal_and_separates_the_total():
    mos_statement = laplace_statement("mos.I.cipA.mean_y1", "cell statistics", "m", "0.1",
                                      None, False)
    _, mos = measure_with_laplace_noise(SEED, mos_statement, np.zeros(3), np.ones(3), "c", 10.0)
    dp_statement = laplace_statement("mos.I.cipA.mean_y5", "cell statistics", "d", "0.1",
                                     10.0, True)
    _, dp = measure_with_laplace_noise(SEED, dp_statement, np.zeros(3), np.full(3, 100.0), "c")
    counts = measure_with_geometric_noise(
        SEED, geometric_statement("mos.I.cipA.mean_y1.count", "cs", "c", "0.1", 1),
        pd.DataFrame(index=range(3)), np.zeros((3, 1), np.int64)).entry
    ledger = PrivacyLedger.of(9, [mos, dp, counts])
    assert (mos.formal_guarantee, dp.formal_guarantee, counts.formal_guarantee) == \
        (FORMAL_NO, FORMAL_YES, FORMAL_YES)
    assert (mos.sensitivity, dp.sensitivity) == (10.0, 10.0)    # chi observed; U - L declared
    guarantee = ledger.guarantee()
    assert (guarantee.formal_epsilon, guarantee.non_formal_epsilon) == (Fraction(1, 5),
                                                                        Fraction(1, 10))
    statement = guarantee.graduates_sentence()
    assert "formal pure epsilon-DP 0.2" in statement and "NOT a formal" in statement
    assert "NOT pure epsilon-DP" in statement
    frame = ledger.to_frame()
    assert frame.set_index("tabulation_id")["formal_guarantee"].to_dict() == {
        "mos.I.cipA.mean_y1": "no", "mos.I.cipA.mean_y5": "yes", "mos.I.cipA.mean_y1.count": "yes"}
    assert PrivacyLedger.of(9, [dp, counts]).guarantee().pure
    with pytest.raises(MeasurementRefused, match="scales other than the declared"):  # 1 != 10/0.1
        measure_with_laplace_noise(SEED, dp_statement, np.zeros(3), np.ones(3), "c")


def test_mos_dp_mean_is_the_ratio_clipped_and_suppressed_under_the_minimum():
    means, published = mos_dp_mean(np.array([100.0, 1e9, 50.0, -1e9]),
                                   np.array([10.0, 3.0, 2.0, 5.0]), 10.0, 110.0, 3)
    np.testing.assert_allclose(means[[0, 1, 3]], [20.0, 110.0, 10.0])
    assert np.isnan(means[2]) and published.tolist() == [True, True, False, True]


def brute_force_moments(data_dir, cfg, cpi, lower, upper) -> pd.DataFrame:
    """Per (institution, degree, cohort) and statistic: n, sum, min, max, by whole-table
    pandas on the raw files (an independent route to the same numbers)."""
    from pseo_das.tasks.inputs.constant_dollars import deflated
    graduates = pd.read_parquet(data_dir / "graduates.parquet")
    outcomes = pd.read_parquet(data_dir / "outcomes.parquet")
    g = graduates.astype({"institution": str, "degree_level": str})
    window = g["degree_level"].map(cfg.cells.cohort_years).astype(int)
    g["grad_cohort"] = cfg.cells.first_cohort_year + (
        (g["grad_year"] - cfg.cells.first_cohort_year) // window) * window
    o = outcomes.merge(g[["person_id", "grad_year", "institution", "degree_level",
                          "grad_cohort"]], on="person_id")
    year = (o["grad_year"] + o["years_after"]).to_numpy(np.int64)
    earnings = deflated(o["earnings"].to_numpy(np.float64, na_value=np.nan), year, cpi,
                        cfg.earnings.dollar_year)
    o = o.assign(x=np.rint(np.clip(earnings, lower, upper) * 100) / 100)[
        earnings >= cfg.earnings.sample_floor]
    keys = ["institution", "degree_level", "grad_cohort"]
    parts = {f"mean_y{k}": o[o["years_after"] == k] for k in (1, 5, 10)}
    paired = parts["mean_y1"].merge(parts["mean_y5"][["person_id", "x"]], on="person_id",
                                    suffixes=("1", "5"))
    parts["growth_1_5"] = paired.assign(x=paired["x5"] - paired["x1"])
    return {name: part.groupby(keys)["x"].agg(["size", "sum", "min", "max"])
            for name, part in parts.items()}


def test_the_sufficient_statistics_pass_equals_a_whole_table_computation(synthetic_dir):
    from pseo_das.config import load_config
    from pseo_das.tasks.inputs.true_counts import read_cell_moments
    from pseo_das.tasks.inputs.cpi import read_cpi
    cfg, cpi = load_config(), read_cpi()
    lower, upper = 10_000.0, 150_000.0     # a low upper bound so that clamping happens
    moments = read_cell_moments(synthetic_dir, cfg, cpi, lower, upper, chunk_rows=7_000)
    expected = brute_force_moments(synthetic_dir, cfg, cpi, lower, upper)
    cells = moments.frame.cells
    index = pd.MultiIndex.from_arrays([cells["institution"].astype(str),
                                       cells["degree_level"].astype(str),
                                       cells["grad_cohort"].astype(np.int64)])
    assert index.is_unique and len(cells) > 100
    for statistic, m in moments.statistics.items():
        want = expected[statistic.value].reindex(index)
        np.testing.assert_array_equal(m.n, want["size"].fillna(0).to_numpy(np.int64))
        np.testing.assert_allclose(m.total, want["sum"].fillna(0).to_numpy(), rtol=1e-12)
        np.testing.assert_allclose(m.lowest, want["min"].to_numpy(), rtol=1e-12)
        np.testing.assert_allclose(m.highest, want["max"].to_numpy(), rtol=1e-12)
    growth = moments.statistics[list(moments.statistics)[-1]]
    assert growth.n.sum() > 1000 and (growth.highest[growth.n > 0] <= upper - lower).all()


def test_histogram_mean_uses_bin_midpoints_and_drops_negative_bins():
    from pseo_das.tasks.study.mos_accuracy import histogram_mean
    means, totals = histogram_mean(np.array([[2, 0, -1], [0, 0, 0], [1, 1, 2]]),
                                   np.array([10.0, 20.0, 40.0]))
    np.testing.assert_allclose(means[[0, 2]], [10.0, 27.5])
    assert np.isnan(means[1]) and totals.tolist() == [1, 0, 4]


def test_the_mos_accuracy_study_compares_the_three_ways_by_cell_size(synthetic_dir, tmp_path):
    from pseo_das.tasks.study.mos_accuracy import mos_accuracy_study
    result = mos_accuracy_study(synthetic_dir, tmp_path, epsilons=[0.5, 8.0], draws=3)
    table = result.table
    means = table[table["statistic"] == "mean_y1"]
    assert set(means["method"]) == {"mos", "mos-dp", "histogram", "histogram-as-published"}
    assert set(table.loc[table["statistic"] == "growth_1_5", "method"]) == {"mos", "mos-dp"}
    assert set(table["size_class"]) == {"3-9", "10-29", "30-99", "100-299", "300+"}
    # more epsilon, less error (mos and mos-dp are noise only; the histogram's mean also has
    # a binning error that no epsilon removes, so only its small cells are noise-dominated)
    for (statistic, method, size), rows in table.groupby(["statistic", "method", "size_class"]):
        if method in ("mos", "mos-dp") or (method == "histogram" and size in ("3-9", "10-29")):
            by_epsilon = rows.set_index("epsilon")["median_abs_error"]
            assert by_epsilon[8.0] < by_epsilon[0.5], (statistic, method, size)
    mos = table[(table["method"] == "mos") & (table["epsilon"] == 8.0)]
    for statistic, rows in mos.groupby("statistic"):
        errors = rows.set_index("size_class")["median_abs_error"]
        assert errors["300+"] < errors["3-9"], statistic
    assert (tmp_path / "mos_accuracy.csv").exists() and (tmp_path / "mos_accuracy_winners.csv").exists()
    assert len(result.winners) == table.groupby(["statistic", "epsilon", "size_class"]).ngroups
