"""The true flows held as their non-zero entries (tasks/inputs/sparse_counts.py) are the
dense counts: summed repeats, rows by mask and by position (the counting pass's running
sums over many chunks: tests/test_true_counts.py, 1,000-row chunks against whole-file
counts)."""
import numpy as np

from pseo_das.tasks.inputs.sparse_counts import SparseCounts


def test_repeats_are_added_up_and_rows_taken_as_dense_indexing_takes_them():
    rng = np.random.default_rng(3)
    n, width = 50, 7
    flat = rng.integers(0, n * width, size=400)
    count = rng.integers(-2, 4, size=400)
    dense = np.bincount(flat, weights=count, minlength=n * width).astype(np.int64).reshape(n, width)
    sparse = SparseCounts.summed(n, width, flat, count)
    assert np.array_equal(sparse.toarray(), dense)
    assert (sparse.count != 0).all() and (np.diff(sparse.flat) > 0).all()
    mask = rng.random(n) < 0.4
    order = rng.permutation(n)
    assert np.array_equal(sparse[mask].toarray(), dense[mask])
    assert np.array_equal(sparse[order].toarray(), dense[order])
    assert np.array_equal(sparse[order[:9]].toarray(), dense[order[:9]])
    empty = SparseCounts.summed(3, width, np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert np.array_equal(empty.toarray(), np.zeros((3, width), np.int64))
    assert empty[np.array([2, 0])].shape == (2, width)


def test_entries_added_to_sorted_counts_are_their_dense_sum():
    """`added` merges new entries into counts already summed (the counting pass's running
    totals): entries already there, new ones before, between and after them, repeats,
    sums that cancel to zero, more rows, and nothing on either side."""
    rng = np.random.default_rng(5)
    width = 6
    for n_before, n_after, size in [(30, 30, 200), (20, 45, 300), (10, 10, 0), (0, 8, 50)]:
        flat = rng.integers(0, max(n_before, 1) * width, size=size) if n_before else \
            np.zeros(0, np.int64)
        count = rng.integers(-2, 4, size=len(flat))
        before = SparseCounts.summed(n_before, width, flat, count)
        more = rng.integers(0, n_after * width, size=size)
        more_count = rng.integers(-3, 4, size=size)
        if len(before.flat):   # some sums cancel the counts there to zero
            more[:5], more_count[:5] = before.flat[:5], -before.count[:5]
        added = before.added(n_after, more, more_count)
        dense = np.zeros(n_after * width, np.int64)
        dense[before.flat] += before.count
        np.add.at(dense, more, more_count)
        assert np.array_equal(added.toarray(), dense.reshape(n_after, width))
        assert (added.count != 0).all() and (np.diff(added.flat) > 0).all()
        assert added.shape == (n_after, width)


def test_the_noise_added_to_the_entries_is_the_noise_added_to_the_dense_counts():
    """The geometric mechanism takes the true flows as their non-zero entries: the same
    noisy values as from the dense array, same stream and statement."""
    from pseo_das.tasks.privacy.geometric import measure_with_geometric_noise
    from pseo_das.tasks.privacy.statement import geometric_statement
    rng = np.random.default_rng(9)
    n, width = 40, 11
    sparse = SparseCounts.summed(n, width, rng.integers(0, n * width, 60), rng.integers(1, 5, 60))
    statement = geometric_statement("t", "test", "flows.I.cip2.y1@R1/1", "1", width)
    seed = bytes(range(32))
    from_dense = measure_with_geometric_noise(seed, statement, None, sparse.toarray())
    from_entries = measure_with_geometric_noise(seed, statement, None, sparse)
    assert from_entries.values.dtype == np.int64
    assert np.array_equal(from_entries.values, from_dense.values)
    assert from_entries.entry == from_dense.entry
