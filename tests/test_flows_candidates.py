"""Candidate post-processings of the employment flows (issue 13): invariants, exact outputs
on hand-made arrays, the law of the weighted removal, and the segment-wise removal against
the former global-lexsort implementation, draw for draw."""
import math

import numpy as np
import pandas as pd
import pytest

from pseo_das.tasks.employment_flows.flows_candidates import (add_in_proportion,
                                                              appendix_correction,
                                                              employed_threshold,
                                                              largest_remainder, noise_threshold,
                                                              prior_shares, remove_units,
                                                              simplex_projection,
                                                              thresholded_correction,
                                                              with_nonemployed_weight)
from pseo_das.tasks.employment_flows.flows_correction import correct_values
from pseo_das.tasks.study.simulation_noise import exact_geometric_noise, simulation_generator

SEED = b"flows candidates tests"


def _exponentials(stream: str):
    return simulation_generator(SEED, stream).standard_exponential


def _lexsort_correct_values(noisy, log_w, exponentials):
    """The correction's removal as it was before the segment-wise selection (test oracle)."""
    clipped = np.maximum(noisy, 0)
    total = noisy.sum(axis=1)
    excess = np.where(total >= 0, clipped.sum(axis=1) - total, 0)
    corrected = np.where(total[:, None] >= 0, clipped, 0)
    rows, cols = np.nonzero((corrected > 0) & (excess[:, None] > 0))
    units = np.minimum(corrected[rows, cols], excess[rows])
    entry = np.repeat(np.arange(len(rows)), units)
    waits = pd.Series(exponentials(len(entry))).groupby(entry, sort=False).cumsum().to_numpy()
    clock = np.log(waits) - log_w[rows, cols][entry]
    unit_row = rows[entry]
    order = np.lexsort((clock, unit_row))
    first_of_row = np.searchsorted(unit_row[order], unit_row[order], side="left")
    rank = np.arange(len(order)) - first_of_row
    removed_units = order[rank < excess[unit_row[order]]]
    corrected[rows, cols] -= np.bincount(entry[removed_units], minlength=len(rows))
    return corrected


def _noisy_cells(n_cells: int, n_destinations: int, epsilon: float, stream: str):
    generator = simulation_generator(SEED, stream)
    true = np.zeros((n_cells, n_destinations), dtype=np.int64)
    true[:, -1] = generator.integers(0, 40, n_cells)
    true[:, 0] = generator.integers(0, 30, n_cells)
    true[:, 3] = generator.integers(0, 3, n_cells)
    noisy = true + exact_geometric_noise(SEED, stream, epsilon, true.shape)
    return noisy, generator.normal(size=true.shape)


@pytest.mark.parametrize("epsilon", [0.3, 1.5, 4.0])
def test_segment_wise_removal_is_the_lexsort_removal_draw_for_draw(epsilon):
    noisy, log_w = _noisy_cells(400, 60, epsilon, f"oracle/{epsilon}")
    noisy[5] = -3                      # a cell with a negative total
    noisy[6] = [4] + [0] * 59          # nothing to remove
    expected = _lexsort_correct_values(noisy, log_w, _exponentials("draws"))
    corrected, stats = correct_values(noisy, log_w, _exponentials("draws"))
    assert np.array_equal(corrected, expected)
    assert stats["units_removed"] > 0


def test_remove_units_takes_every_unit_when_the_excess_is_the_whole_row():
    flows = np.array([[2, 0, 3], [1, 1, 0]])
    out = remove_units(flows, np.array([5, 1]), np.zeros((2, 3)), _exponentials("whole"))
    assert out[0].tolist() == [0, 0, 0]
    assert out[1].sum() == 1 and out.min() >= 0


def test_the_removal_draws_flows_not_units_by_their_weights():
    """A.3.2 draws a flow (not a unit) with probability proportional to its weight. Flows
    [1, 5] with equal weights, two units removed: the single unit goes with probability
    1/2 + 1/2 x 1/2 = 3/4 (drawing units would give 1 - 5/6 x 4/5 = 1/3). Weights 3:1 and one
    unit removed from [4, 4]: the first flow loses it with probability 3/4."""
    n = 20_000
    bound = 5 * math.sqrt(0.75 * 0.25 / n)          # 5 binomial standard deviations
    out = remove_units(np.tile([1, 5], (n, 1)), np.full(n, 2), np.zeros((n, 2)),
                       _exponentials("flows not units"))
    assert abs((out[:, 0] == 0).mean() - 0.75) < bound
    log_w = np.tile(np.log([3.0, 1.0]), (n, 1))
    out = remove_units(np.tile([4, 4], (n, 1)), np.ones(n, dtype=np.int64), log_w,
                       _exponentials("weights"))
    assert abs((out[:, 0] == 3).mean() - 0.75) < bound


def _candidates(noisy, total, log_w):
    return {
        "appendix": appendix_correction(noisy, total, log_w, _exponentials("a")),
        "thresholded": thresholded_correction(noisy, total, log_w,
                                              employed_threshold(1.5, 1 / 1021, noisy.shape[1]),
                                              _exponentials("t")),
        "projection": simplex_projection(noisy, total, log_w),
    }


@pytest.mark.parametrize("shift", [0, 25, -10])
def test_every_candidate_is_non_negative_and_matches_its_total(shift):
    noisy, log_w = _noisy_cells(300, 40, 1.5, f"invariants/{shift}")
    total = noisy.sum(axis=1) + shift            # the noisy sum, or a measured total off it
    total[:3] = [0, -4, 1]
    noisy[7] = -1                                 # no positive flow at all
    total[7] = 6
    for name, out in _candidates(noisy, total, log_w).items():
        assert out.dtype == np.int64, name
        assert out.min() >= 0, name
        assert np.array_equal(out.sum(axis=1), np.maximum(total, 0)), name
        assert not out[:2].any(), name           # zero or negative target -> zero row


def test_appendix_correction_with_the_noisy_sum_is_the_release_correction():
    noisy, log_w = _noisy_cells(200, 30, 1.0, "release")
    expected, _ = correct_values(noisy, log_w, _exponentials("same"))
    out = appendix_correction(noisy, noisy.sum(axis=1), log_w, _exponentials("same"))
    assert np.array_equal(out, expected)


def test_exact_outputs_on_hand_made_cells():
    zero = np.zeros((1, 5))
    # Euclidean projection: theta = 1 -> [4, 0, 0, 0, 2]
    assert simplex_projection(np.array([[5, -2, 1, 0, 3]]), np.array([6]), zero).tolist() == \
        [[4, 0, 0, 0, 2]]
    # theta = 0.5 -> [2.5, 2.5, 0]: the tied half unit goes to the likelier destination
    assert simplex_projection(np.array([[3, 3, 0]]), np.array([5]),
                              np.array([[0.5, 0.1, 0.0]])).tolist() == [[2, 3, 0]]
    # a total above the flows: theta < 0 raises every destination above theta
    assert simplex_projection(np.array([[4, -3]]), np.array([6]), np.zeros((1, 2))).tolist() == \
        [[6, 0]]
    # a single positive flow loses the whole excess; a non-positive total empties the cell
    out = appendix_correction(np.array([[4, -1, 0], [3, -3, 0]]), np.array([3, 0]),
                              np.zeros((2, 3)), _exponentials("single"))
    assert out.tolist() == [[3, 0, 0], [0, 0, 0]]
    # thresholded at 3: [10, 0, 3, 0] then one unit added in proportion (10.77, 3.23)
    out = thresholded_correction(np.array([[10, 2, 3, -1]]), np.array([14]), np.zeros((1, 4)),
                                 3, _exponentials("threshold"))
    assert out.tolist() == [[11, 0, 3, 0]]


def test_largest_remainder_and_proportional_addition():
    shares = np.array([[1.0, 1.0, 1.0], [0.0, 2.0, 1.0]])
    log_w = np.array([[0.3, 0.1, 0.2], [0.0, 0.0, 0.0]])
    assert largest_remainder(shares, np.array([4, 4]), log_w).tolist() == [[1, 2, 1], [0, 3, 1]]
    # a cell without flows gets its units by the prior (likelier = smaller log w)
    out = add_in_proportion(np.array([[0, 0, 0], [2, 0, 1]]), np.array([3, 0]),
                            np.log([[1.0, 1.0, 1e6], [1.0, 1.0, 1.0]]))
    assert out.tolist() == [[2, 1, 0], [2, 0, 1]]   # equal remainders, equal priors: lower index


def test_prior_and_nonemployed_weight():
    log_w = np.log(np.array([[1.0, 4.0, 2.0]]))
    assert np.allclose(prior_shares(log_w), [[4 / 7, 1 / 7, 2 / 7]])
    reweighted = with_nonemployed_weight(log_w, 0.5)
    assert np.allclose(reweighted[:, :2], log_w[:, :2])
    assert math.isclose(reweighted[0, 2], math.log(0.5) + (math.log(1) + math.log(4)) / 2)


@pytest.mark.parametrize("epsilon,alpha,expected", [(1.5, 1 / 1021, 5), (1.5, 0.05, 2),
                                                    (0.5, 0.01, 9)])
def test_noise_threshold_is_the_smallest_with_tail_at_most_alpha(epsilon, alpha, expected):
    q = math.exp(-epsilon)
    tail = lambda t: q ** t / (1 + q)        # P(eta >= t)
    t = noise_threshold(epsilon, alpha)
    assert t == expected
    assert tail(t) <= alpha < tail(t - 1)
    assert employed_threshold(epsilon, alpha, 4).tolist() == [t, t, t, 1]


def test_a_true_zero_passes_the_threshold_as_rarely_as_alpha_says():
    epsilon, alpha, n = 1.5, 0.05, 200_000
    t = noise_threshold(epsilon, alpha)
    q = math.exp(-epsilon)
    p = q ** t / (1 + q)
    passed = (exact_geometric_noise(SEED, "zeros", epsilon, (n,)) >= t).mean()
    assert abs(passed - p) < 5 * math.sqrt(p * (1 - p) / n)
