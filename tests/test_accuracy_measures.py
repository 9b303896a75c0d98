"""Relative accuracy, L1 error, cell-size strata and their summaries on tiny fixed examples;
the expected accuracy estimated from published noisy histograms."""
import time

import numpy as np
import pandas as pd
import pytest

from pseo_das.config import load_config
from pseo_das.tasks.study.accuracy import (ALL_CELLS, PUBLISHABLE, STRATA, cell_size_stratum,
                            expected_accuracy_from_noisy_histograms, l1_error_sum,
                            relative_accuracy, stand_in_histograms, summarise_l1,
                            summarise_percentiles)

SEED = bytes(range(32))


def test_relative_accuracy_and_l1_error():
    true = np.array([40_000.0, 50_000.0, 80_000.0])
    protected = np.array([44_000.0, 45_000.0, np.nan])
    np.testing.assert_allclose(relative_accuracy(protected, true), [0.9, 0.9, np.nan])
    assert relative_accuracy(np.array([0.0]), np.array([30_000.0]))[0] == 0  # output 0 -> 0
    assert relative_accuracy(np.array([90_000.0]), np.array([30_000.0]))[0] == -1
    assert l1_error_sum(np.array([44_000.0, 45_000.0, 81_000.0]), true) == 10_000
    assert np.isnan(l1_error_sum(protected, true))


def test_cell_size_strata_follow_the_authors_code():
    sizes = np.array([-3, 0, 29, 30, 49, 50, 79, 80, 99, 100, 199, 200, 299, 300, 5000])
    got = list(cell_size_stratum(sizes))
    assert got == ["under 30"] * 3 + ["30-49"] * 2 + ["50-79"] * 2 + ["80-99"] * 2 + \
        ["100-199"] * 2 + ["200-299"] * 2 + ["300 and over"] * 2
    assert list(cell_size_stratum(sizes).categories) == list(STRATA)


def test_summaries_by_stratum_on_a_tiny_example():
    # Three cells (sizes 10, 10, 40), one percentile, two draws.
    strata = cell_size_stratum(np.array([10, 10, 40]))
    true = np.array([[100.0], [200.0], [50.0]])
    protected = np.array([[[110.0], [200.0], [40.0]],     # accuracies 0.9, 1.0, 0.8
                          [[np.nan], [150.0], [55.0]]])   # undefined, 0.75, 0.9
    out = summarise_percentiles(protected, true, strata, (50,)).set_index("stratum")
    assert list(out.index) == ["under 30", "30-49", PUBLISHABLE, ALL_CELLS]
    small = out.loc["under 30"]
    assert (small["cells"], small["values"]) == (2, 3)
    assert small["undefined_share"] == pytest.approx(0.25)
    assert small["mean_relative_accuracy"] == pytest.approx((0.9 + 1.0 + 0.75) / 3)
    assert small["median_relative_accuracy"] == pytest.approx(0.9)
    assert small["mean_abs_error"] == pytest.approx((10 + 0 + 50) / 3)
    big = out.loc["30-49"]
    assert big["mean_relative_accuracy"] == pytest.approx(0.85)
    assert out.loc[PUBLISHABLE, "mean_relative_accuracy"] == pytest.approx(0.85)
    every = out.loc[ALL_CELLS]
    assert (every["cells"], every["values"]) == (3, 5)
    assert every["mean_relative_accuracy"] == pytest.approx((0.9 + 1 + 0.8 + 0.75 + 0.9) / 5)
    assert every["median_relative_accuracy"] == pytest.approx(0.9)

    l1 = summarise_l1(np.concatenate([protected, protected], axis=2),
                      np.concatenate([true, true], axis=1), strata).set_index("stratum")
    assert l1.loc["under 30", "mean_l1_error_sum"] == pytest.approx((20 + 0 + 100) / 3)
    assert l1.loc["30-49", "median_l1_error_sum"] == pytest.approx((20 + 10) / 2)


def _published_like_histograms(cells: int) -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(3))
    sizes = np.exp(rng.uniform(np.log(5), np.log(2000), cells)).astype(int)
    shares = rng.dirichlet(np.ones(21) * 3, size=cells)
    true = np.array([rng.multinomial(n, p) for n, p in zip(sizes, shares)])
    return true + rng.integers(-2, 3, size=true.shape)


def test_expected_accuracy_from_noisy_histograms_is_fast_and_sensible():
    earnings = load_config().earnings
    noisy = _published_like_histograms(20_000)
    lower, upper = np.array(earnings.bin_edges), np.array(earnings.bin_upper)
    started = time.perf_counter()
    out = expected_accuracy_from_noisy_histograms(noisy, lower, upper, (25, 50, 75), 1.0, 20, SEED)
    assert time.perf_counter() - started < 10
    assert list(out.columns) == ["stratum", "percentile", "cells", "values", "undefined_share",
                                 "mean_relative_accuracy", "median_relative_accuracy",
                                 "mean_abs_error"]
    by = out.set_index(["stratum", "percentile"])
    with_truth = stand_in_histograms(noisy, 1.0).sum(axis=1) > 0   # bins of 1 or less: empty
    expected_cells = pd.Series(list(cell_size_stratum(noisy[with_truth].sum(axis=1)))).value_counts()
    for stratum, n in expected_cells.items():
        assert by.loc[(stratum, 50), "cells"] == n
    assert by.loc[(ALL_CELLS, 50), "cells"] == with_truth.sum() > 19_900
    # Accuracy grows with cell size, and large cells are very accurate at epsilon 1.
    means = [by.loc[(s, 50), "mean_relative_accuracy"] for s in STRATA]
    assert means[-1] > 0.98 and means[0] < means[-1]
    again = expected_accuracy_from_noisy_histograms(noisy, lower, upper, (25, 50, 75), 1.0, 20, SEED)
    pd.testing.assert_frame_equal(out, again)


def test_expected_accuracy_without_noise_is_exact_and_skips_empty_cells():
    earnings = load_config().earnings
    lower, upper = np.array(earnings.bin_edges), np.array(earnings.bin_upper)
    noisy = np.zeros((3, 21), dtype=np.int64)
    noisy[0, 5] = 40
    noisy[1, [2, 9]] = [-3, 1]  # stand-in truth: one graduate in bin 9
    noisy[2, 4] = -2            # nothing positive: no stand-in truth, left out
    # epsilon 60: the geometric noise is 0 with probability 1 - 2e-26.
    out = expected_accuracy_from_noisy_histograms(noisy, lower, upper, (50,), 60.0, 3, SEED,
                                                  noise_only=True)
    every = out.set_index("stratum").loc[ALL_CELLS]
    assert every["cells"] == 2 and every["undefined_share"] == 0
    # Rounding to whole dollars is the only error left.
    assert every["mean_relative_accuracy"] == pytest.approx(1, abs=1e-5)
    assert out.set_index("stratum").loc["30-49", "cells"] == 1
    # With the interpolation error: the true median is somewhere in its bin, so the error is
    # at most the bin's width (40 values in bin 5; one value in bin 9).
    out = expected_accuracy_from_noisy_histograms(noisy, lower, upper, (50,), 60.0, 50, SEED)
    errors = out.set_index("stratum")
    width = lambda j: upper[j] - lower[j]
    assert 0 < errors.loc["30-49", "mean_abs_error"] < width(5) / 4
    assert 0 < errors.loc["under 30", "mean_abs_error"] < width(9)


def test_a_release_with_more_cells_than_the_cap_is_simulated_on_a_sample(monkeypatch):
    """Above ACCURACY_MAX_CELLS published measured cells, the expected accuracy is
    simulated on a random sample of them of about that size (binomial: within 5 standard
    deviations), the same sample for the same measurements; the report counts every
    published cell. At or under the cap, every cell is simulated."""
    from pseo_das.tasks.earnings.noisy_histograms import NoisyHistograms
    from pseo_das.tasks.study import accuracy
    cfg = load_config()
    n_bins = cfg.earnings.n_bins
    counts = np.random.default_rng(5).integers(0, 9, size=(3000, n_bins))   # totals 30+
    small = np.zeros((500, n_bins), np.int64)                                 # not published
    table = NoisyHistograms("t", "I", "4", 1, pd.DataFrame(index=range(3500)),
                            np.concatenate([counts, small]), ("t",))
    whole = accuracy.release_accuracy(cfg, [table])
    assert whole["cells"] == whole["simulated_cells"] == 3000
    monkeypatch.setattr(accuracy, "ACCURACY_MAX_CELLS", 1000)
    sampled = accuracy.release_accuracy(cfg, [table])
    p = 1000 / 3000
    assert sampled["cells"] == 3000
    assert abs(sampled["simulated_cells"] - 1000) < 5 * (3000 * p * (1 - p)) ** 0.5
    simulated = sum(row["cells"] for row in sampled["rows"] if row["percentile"] == 50
                    and row["stratum"] in STRATA)
    assert simulated == sampled["simulated_cells"]
    assert accuracy.release_accuracy(cfg, [table]) == sampled
    assert sampled["rows"] != whole["rows"]
