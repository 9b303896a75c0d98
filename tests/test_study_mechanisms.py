"""The accuracy study's mechanisms and bins: smooth sensitivity on hand-worked arrays, the
1/(1+y^4) sampler against its exact CDF, the histogram method, Log-Normal and Even bins."""
import math
import time

import numpy as np
import pytest
from scipy import integrate, stats

from pseo_das.config import load_config
from pseo_das.tasks.study.simulation_noise import sample_inverse_quartic, simulated_geometric_noise, simulation_generator
from pseo_das.tasks.earnings.percentiles import protected_percentiles
from pseo_das.tasks.study.study_bins import even_bins, log_normal_bins
from pseo_das.tasks.study.study_mechanisms import (histogram_percentiles, inverse_quartic_cdf, smooth_sensitivity,
                                    smooth_sensitivity_percentiles)
from pseo_das.tasks.study.study_sample import percentile_rank

SEED = bytes(range(32))


def one_cell(values, rank, beta, lower, upper):
    values = np.sort(np.asarray(values, dtype=float))
    return smooth_sensitivity(values, np.array([0, len(values)]), np.array([rank]), beta,
                              lower, upper)[0]


def smooth_sensitivity_by_definition(values, rank, beta, lower, upper):
    """Seed 000 eq. 4.6 literally: max over k = 0..n of exp(-k beta) times the max over
    t = 0..k+1 of x_{m+t} - x_{m+t-k-1}, x_i = lower for i < 1 and upper for i > n."""
    x = np.clip(np.sort(values), lower, upper)
    n = len(x)

    def at(i):
        return lower if i < 1 else upper if i > n else x[i - 1]
    return max(math.exp(-k * beta) * max(at(rank + t) - at(rank + t - k - 1) for t in range(k + 2))
               for k in range(n + 1))


def test_smooth_sensitivity_of_the_median_worked_by_hand():
    # x = (2, 3, 7) in [0, 10], median rank m = ceil(3 * 50 / 100) = 2, exp(-beta) = 1/2.
    # Padded: x0 = 0, x1 = 2, x2 = 3, x3 = 7, x4 = 10. Pairs (a, b), a <= 2 <= b, a < b,
    # value (x_b - x_a) / 2^(b - a - 1):
    by_hand = {(0, 2): 3 / 2, (0, 3): 7 / 4, (0, 4): 10 / 8, (1, 2): 1, (1, 3): 5 / 2,
               (1, 4): 8 / 4, (2, 3): 4, (2, 4): 7 / 2}
    assert percentile_rank(np.array([3]), 50)[0] == 2
    assert one_cell([7, 2, 3], 2, math.log(2), 0, 10) == pytest.approx(max(by_hand.values()))  # 4
    # A large beta leaves the local sensitivity max(x2 - x1, x3 - x2) = 4; beta = 0 the range.
    assert one_cell([2, 3, 7], 2, 50.0, 0, 10) == pytest.approx(4)
    assert one_cell([2, 3, 7], 2, 0.0, 0, 10) == pytest.approx(10)


def test_smooth_sensitivity_reaches_the_domain_bounds_when_values_tie():
    # x = (5, 5, 5) in [0, 10]: every gap inside the data is 0, so S* comes from the padding:
    # (x4 - x0) exp(-3 beta) = 10 * 0.9^3 beats 5 * 0.9 (pairs (0, 2) and (2, 4)).
    beta = -math.log(0.9)
    assert one_cell([5, 5, 5], 2, beta, 0, 10) == pytest.approx(10 * 0.9 ** 3)
    beta = math.log(2)  # now 5 / 2 beats 10 / 8
    assert one_cell([5, 5, 5], 2, beta, 0, 10) == pytest.approx(5 / 2)


def test_smooth_sensitivity_of_the_25th_percentile_worked_by_hand():
    # x = (1, 2, 4, 8) in [0, 16], m = ceil(4 * 25 / 100) = 1, exp(-beta) = 1/2.
    # a in {0, 1}, b in {1..5}: (0, b) all give 1; (1, 2) 1, (1, 3) 3/2, (1, 4) 7/4,
    # (1, 5) 15/8, the maximum.
    assert percentile_rank(np.array([4]), 25)[0] == 1
    assert one_cell([1, 2, 4, 8], 1, math.log(2), 0, 16) == pytest.approx(15 / 8)
    # Values above the upper bound are clipped to it: with 100 counted as 16, x4 = 16 and
    # (1, 4) gives (16 - 1) / 4 = 3.75, the maximum ((0, 4) gives 2, (1, 5) 15/8).
    assert one_cell([1, 2, 4, 100], 1, math.log(2), 0, 16) == pytest.approx(15 / 4)


def test_smooth_sensitivity_equals_the_definition_on_many_cells_at_once():
    rng = np.random.Generator(np.random.PCG64(5))
    sizes = rng.integers(1, 40, size=60)
    cells = [np.sort(np.round(np.exp(rng.normal(10.8, 0.9, n)))) for n in sizes]
    cells[0] = np.full(sizes[0], 20_000.0)  # ties
    values = np.concatenate(cells)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    for percentile in (25, 50, 75):
        ranks = percentile_rank(sizes, percentile)
        for beta in (0.002, 0.05, 0.4, 3.0):
            fast = smooth_sensitivity(values, offsets, ranks, beta, 10_000, 614_597)
            slow = [smooth_sensitivity_by_definition(c, m, beta, 10_000, 614_597)
                    for c, m in zip(cells, ranks)]
            np.testing.assert_allclose(fast, slow, rtol=1e-12)


def test_smooth_sensitivity_is_not_quadratic():
    n = 300_000  # O(n^2) would be 9e10 pair evaluations
    values = np.sort(np.exp(np.random.Generator(np.random.PCG64(1)).normal(11, 0.75, n)))
    started = time.perf_counter()
    s = smooth_sensitivity(values, np.array([0, n]), percentile_rank(np.array([n]), 50), 0.001)
    assert time.perf_counter() - started < 5
    assert s[0] > 0


def test_inverse_quartic_cdf_is_the_integral_of_the_density():
    density = lambda y: math.sqrt(2) / math.pi / (1 + y ** 4)  # noqa: E731
    for y in (-30.0, -2.0, -0.7, 0.0, 0.3, 1.0, 1.7, 9.0):
        expected = integrate.quad(density, -np.inf, y, epsabs=1e-13)[0]
        assert inverse_quartic_cdf(np.array([y]))[0] == pytest.approx(expected, abs=1e-10)


def test_inverse_quartic_sampler_follows_its_exact_cdf():
    n = 200_000
    draws = sample_inverse_quartic(simulation_generator(SEED, "quartic-test"), (n,))
    assert draws.shape == (n,) and np.isfinite(draws).all()
    result = stats.kstest(draws, inverse_quartic_cdf)
    # Fixed seed: deterministic. DKW: P(D > d) <= 2 exp(-2 n d^2); d for probability 1e-3.
    bound = math.sqrt(math.log(2 / 1e-3) / (2 * n))
    assert result.statistic < bound, (result.statistic, bound)
    assert result.pvalue > 1e-3
    # The test has power: the Cauchy proposal itself is rejected by far.
    cauchy = stats.cauchy.rvs(size=n, random_state=1)
    assert stats.kstest(cauchy, inverse_quartic_cdf).statistic > 5 * bound
    # E|eta| = (integral of |y|/(1+y^4)) / (pi/sqrt 2) = (pi/2) / (pi/sqrt 2) = 1/sqrt 2;
    # Var|eta| is finite (E y^2 = 1), so 6 standard errors bound the sample mean.
    assert abs(np.abs(draws).mean() - 1 / math.sqrt(2)) < 6 * math.sqrt((1 - 0.5) / n)
    again = sample_inverse_quartic(simulation_generator(SEED, "quartic-test"), (n,))
    np.testing.assert_array_equal(draws, again)


def test_smooth_sensitivity_percentiles_scale_the_noise_by_16_over_epsilon():
    eta = np.array([[1.0, -2.0]])
    out = smooth_sensitivity_percentiles(np.array([50_000.0, 60_000.0]), np.array([100.0, 10.0]),
                                         eta, epsilon_per_percentile=0.5)
    np.testing.assert_allclose(out, [[50_000 + 100 * 32, 60_000 - 2 * 10 * 32]])


def test_histogram_method_adds_the_noise_and_uses_the_release_rule():
    bins = log_normal_bins(20)
    rng = np.random.Generator(np.random.PCG64(2))
    true = rng.integers(0, 9, size=(50, bins.n_bins))
    noise = simulated_geometric_noise(simulation_generator(SEED, "hist"), 1.0, (3, 50, bins.n_bins))
    out = histogram_percentiles(true[None], noise, bins.lower, bins.upper, (25, 50, 75))
    assert out.shape == (3, 50, 3)
    for d in range(3):
        expected = protected_percentiles(true + noise[d], bins.lower, bins.upper, (25, 50, 75))
        np.testing.assert_array_equal(out[d], expected)


def test_log_normal_bins_at_20_are_the_production_table():
    earnings = load_config().earnings
    bins = log_normal_bins(20)
    assert bins.n_bins == 21
    assert bins.lower.tolist() == list(earnings.bin_edges)
    assert bins.upper.tolist() == list(earnings.bin_edges[1:]) + [earnings.top_bin_upper]


@pytest.mark.parametrize("k", range(10, 31))
def test_log_normal_bins_for_every_bin_count(k):
    bins = log_normal_bins(k)
    assert bins.n_bins == k + 1 and bins.lower[0] == 10_000
    assert (np.diff(bins.lower) > 0).all() and (bins.upper > bins.lower).all()
    # The top bin opens at the 0.975 quantile and interpolates to the 0.999 quantile,
    # whatever k: Table 1's 262,475 and 614,597.
    assert (bins.lower[-1], bins.upper[-1]) == (262_475, 614_597)
    if k % 2 == 0:  # the quantile 1/2 is an edge: exp(mu)
        assert bins.lower[k // 2] == round(math.exp(11.00255))


def test_even_bins():
    bins = even_bins(10)
    assert bins.n_bins == 11
    assert bins.lower.tolist() == [10_000 + 29_000 * i for i in range(10)] + [300_000]
    assert bins.upper.tolist() == [10_000 + 29_000 * i for i in range(1, 11)] + [500_000]
    assert bins.bin_of(np.array([10_000, 38_999.99, 39_000, 299_999.0, 300_000, 2e6])).tolist() == \
        [0, 0, 1, 9, 10, 10]
    thirty = even_bins(30)
    assert thirty.n_bins == 31 and thirty.lower[-1] == 300_000
    np.testing.assert_allclose(np.diff(thirty.lower), 290_000 / 30)
