"""The first-bin percentile rule against hand-worked examples."""
import numpy as np
import pytest

from pseo_das.config import load_config
from pseo_das.tasks.earnings.percentiles import protected_percentiles, round_dollars

LOWER = np.array([0, 10, 20, 30])
UPPER = np.array([10, 20, 30, 100])  # last bin: interpolation bound 100


def pct(counts, percentiles=(25, 50, 75)):
    return protected_percentiles(np.array([counts]), LOWER, UPPER, percentiles)[0]


def test_uniform_counts():
    # T = 40, C = 10, 20, 30, 40: the 50th is at 20 = C(1), so J = 1 and the value is its top.
    assert pct([10, 10, 10, 10]).tolist() == [10.0, 20.0, 30.0]


def test_interpolation_inside_a_bin():
    # T = 20, C = 4, 10, 18, 20. p25: 5 -> J=1: 10 + 10*(5-4)/6; p50: 10 -> J=1: 20;
    # p75: 15 -> J=2: 20 + 10*(15-10)/8.
    np.testing.assert_allclose(pct([4, 6, 8, 2]), [10 + 10 / 6, 20.0, 20 + 50 / 8])


def test_negative_bin_takes_first_crossing():
    # C = 10, 0, 10, 20 (T = 20): p25 needs 5; bin 1 reaches it first (C(0)=10),
    # even though C falls below 5 again at bin 2 and crosses again at bin 3.
    assert pct([10, -10, 10, 10], (25,))[0] == pytest.approx(0 + 10 * 5 / 10)
    # p50 needs 10: again bin 1 (C(0) = 10 >= 10).
    assert pct([10, -10, 10, 10], (50,))[0] == pytest.approx(10.0)
    # p75 needs 15: first C >= 15 is bin 4 (C = 20), C(J-1) = 10, q = 10.
    assert pct([10, -10, 10, 10], (75,))[0] == pytest.approx(30 + 70 * 5 / 10)


def test_negative_bin_before_the_percentile():
    # q = 5, -2, 7, 10; T = 20, C = 5, 3, 10, 20. p50 needs 10: J = 3rd bin,
    # C(J-1) = 3, q_J = 7: 20 + 10 * (10 - 3) / 7 = 30.
    assert pct([5, -2, 7, 10], (50,))[0] == pytest.approx(30.0)


def test_percentile_in_last_bin_uses_interpolation_bound():
    # q = 1, 1, 0, 10; T = 12. p75 needs 9: J = last bin, C(J-1) = 2:
    # 30 + (100 - 30) * (9 - 2) / 10 = 79.
    assert pct([1, 1, 0, 10], (75,))[0] == pytest.approx(79.0)


def test_boundary_is_exact():
    # Y/100 * T equals C(J) exactly: J is that bin (<=), not the next one.
    counts = np.array([[25, 75, 0, 0], [7, 0, 21, 0]])
    values = protected_percentiles(counts, LOWER, UPPER, (25,))
    # row 1: needs 25, C(0) = 25 -> top of bin 1; row 2: T = 28 needs 7, C(0) = 7 -> 10.
    assert values[:, 0].tolist() == [10.0, 10.0]


def test_non_positive_total_gives_no_value():
    values = protected_percentiles(np.array([[0, 0, 0, 0], [3, -5, 1, 0]]), LOWER, UPPER, (50,))
    assert np.isnan(values).all()


def test_pseo_bins_hand_worked():
    # Production bins; q = 3 in bin 1, 5 in bin 2, 2 in bin 3, 0 elsewhere: T = 10.
    cfg = load_config().earnings
    counts = np.zeros((1, cfg.n_bins), dtype=np.int64)
    counts[0, :3] = [3, 5, 2]
    value = protected_percentiles(counts, np.array(cfg.bin_edges), np.array(cfg.bin_upper), (25, 50, 75))[0]
    # p25: 2.5 -> bin 1: 10000 + 7403 * 2.5/3 = 16169.17
    # p50: 5 -> bin 2: 17403 + 5473 * (5-3)/5 = 19592.2
    # p75: 7.5 -> bin 2: 17403 + 5473 * 4.5/5 = 22328.7
    np.testing.assert_allclose(value, [16169.1667, 19592.2, 22328.7], atol=1e-3)
    assert round_dollars(value).tolist() == [16169.0, 19592.0, 22329.0]


def test_rounding_halves_up():
    assert round_dollars(np.array([0.5, 1.5, 2.49, 2.5])).tolist() == [1.0, 2.0, 2.0, 3.0]


def test_each_row_is_the_same_computed_in_blocks_of_rows(monkeypatch):
    """Rows are computed a block at a time (a national table's histograms): each row's
    percentiles are the same, bit for bit, in any block, as computed alone, for noisy rows
    with negative counts and totals (NaN) and counts in a narrow integer type."""
    from pseo_das.tasks.earnings import percentiles
    counts = np.random.default_rng(7).integers(-6, 8, size=(50, 4)).astype(np.int8)
    alone = np.array([protected_percentiles(row[None], LOWER, UPPER, (10, 50, 90))[0]
                      for row in counts])
    assert np.isnan(alone).any() and not np.isnan(alone).all()
    monkeypatch.setattr(percentiles, "PERCENTILE_BLOCK_ROWS", 7)
    np.testing.assert_array_equal(protected_percentiles(counts, LOWER, UPPER, (10, 50, 90)), alone)
