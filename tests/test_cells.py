"""Summing cells to coarser levels (the derived tables' arithmetic)."""
import numpy as np
import pandas as pd
import pytest


def test_sum_by_group_equals_a_groupby_sum():
    from pseo_das.tasks.inputs.cells import sum_by_group

    generator = np.random.default_rng(3)
    # groups of a few rows, and groups larger than SUMMED_WHOLE_ROWS (summed alone)
    for dtype, n_groups in ((np.int32, 60), (np.int64, 60), (np.int32, 7), (np.int64, 3)):
        counts = generator.integers(-5, 50, size=(500, 37)).astype(dtype)
        group = generator.integers(0, n_groups, size=500)
        group = np.unique(group, return_inverse=True)[1]          # every group present
        expected = pd.DataFrame(counts).groupby(group).sum().to_numpy().astype(dtype)
        summed = sum_by_group(counts, group, group.max() + 1)
        assert summed.dtype == dtype and np.array_equal(summed, expected)
        assert np.array_equal(sum_by_group(counts, np.sort(group), group.max() + 1),
                              pd.DataFrame(counts).groupby(np.sort(group)).sum().to_numpy()
                              .astype(dtype))
        assert np.array_equal(sum_by_group(counts[:, 0], group, group.max() + 1), expected[:, 0])
    with pytest.raises(TypeError):
        sum_by_group(counts.astype(float), group, group.max() + 1)
    with pytest.raises(ValueError):
        sum_by_group(counts, group, group.max() + 2)
    assert sum_by_group(np.zeros((0, 4), np.int32), np.zeros(0, np.int64), 0).shape == (0, 4)
