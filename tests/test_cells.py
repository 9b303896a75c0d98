"""Summing cells to coarser levels (the derived tables' arithmetic)."""
import numpy as np
import pandas as pd
import pytest


def test_sum_by_group_equals_a_groupby_sum():
    from pseo_das.tasks.inputs.cells import sum_by_group

    generator = np.random.default_rng(3)
    for dtype in (np.int32, np.int64):
        counts = generator.integers(-5, 50, size=(500, 37)).astype(dtype)
        group = generator.integers(0, 60, size=500)
        group = np.unique(group, return_inverse=True)[1]          # every group present
        expected = pd.DataFrame(counts).groupby(group).sum().to_numpy()
        summed = sum_by_group(counts, group, group.max() + 1)
        assert summed.dtype == dtype and np.array_equal(summed, expected)
        assert np.array_equal(sum_by_group(counts, np.sort(group), group.max() + 1),
                              pd.DataFrame(counts).groupby(np.sort(group)).sum().to_numpy())
    with pytest.raises(ValueError):
        sum_by_group(counts, group, group.max() + 2)
    assert sum_by_group(np.zeros((0, 4), np.int32), np.zeros(0, np.int64), 0).shape == (0, 4)
