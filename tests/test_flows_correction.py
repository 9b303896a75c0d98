"""The flows correction (SPEC.md, Employment flows): invariants, and the weighted draws
against the exact distribution of the sequential one-unit-at-a-time procedure."""
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from pseo_das.tasks.employment_flows.flows_correction import correct_values


def _exponentials(seed: int):
    generator = np.random.default_rng(seed)
    return lambda n: generator.standard_exponential(n)


def _sequential_distribution(counts: tuple[int, ...], weights: tuple[Fraction, ...],
                             excess: int) -> dict[tuple[int, ...], Fraction]:
    """Exact law of the corrected counts under A.3.2: `excess` times, draw one of the
    still-positive flows with probability proportional to its weight and subtract 1."""
    if excess == 0:
        return {counts: Fraction(1)}
    alive = [i for i, c in enumerate(counts) if c > 0]
    total = sum(weights[i] for i in alive)
    law: dict[tuple[int, ...], Fraction] = {}
    for i in alive:
        after = tuple(c - (j == i) for j, c in enumerate(counts))
        for outcome, p in _sequential_distribution(after, weights, excess - 1).items():
            law[outcome] = law.get(outcome, 0) + p * weights[i] / total
    return law


def _chi_square_p(noisy_row, weights, assumed_weights, n_cells=20_000, seed=7) -> float:
    """p-value of the corrected rows drawn with `weights` against the exact law under
    `assumed_weights`."""
    noisy = np.tile(np.array(noisy_row, dtype=np.int64), (n_cells, 1))
    log_w = np.tile(np.log(np.array(weights, dtype=float)), (n_cells, 1))
    corrected, _ = correct_values(noisy, log_w, _exponentials(seed))
    clipped = tuple(max(c, 0) for c in noisy_row)
    excess = sum(clipped) - sum(noisy_row)
    law = _sequential_distribution(clipped, tuple(Fraction(w) for w in assumed_weights), excess)
    outcomes = list(law)
    index = {o: k for k, o in enumerate(outcomes)}
    observed = np.bincount([index[tuple(r)] for r in corrected.tolist()], minlength=len(outcomes))
    expected = np.array([float(law[o]) for o in outcomes]) * n_cells
    assert observed.sum() == n_cells  # every corrected row is a possible outcome
    return stats.chisquare(observed, expected).pvalue


@pytest.mark.parametrize("noisy_row, weights", [
    ((1, 2, 3, -3), (3, 1, Fraction(1, 2), 1)),        # flows run out during the draws
    ((4, 0, 1, 2, -2, -1), (1, 5, 2, Fraction(1, 4), 1, 1)),
])
def test_weighted_draws_follow_the_sequential_procedure(noisy_row, weights):
    """Chi-square against the exact law (enumerated with fractions) at a fixed seed."""
    assert _chi_square_p(noisy_row, weights, weights) > 1e-3


def test_the_draw_test_can_fail():
    """Equal weights instead of the real ones are rejected by the same test."""
    noisy_row, weights = (1, 2, 3, -3), (3, 1, Fraction(1, 2), 1)
    assert _chi_square_p(noisy_row, weights, (1, 1, 1, 1)) < 1e-6


def test_invariants_on_random_noisy_flows():
    generator = np.random.default_rng(11)
    true = generator.poisson(0.3, size=(2_000, 40)) * (generator.random((2_000, 40)) < 0.2)
    noisy = true + generator.geometric(0.6, true.shape) - generator.geometric(0.6, true.shape)
    log_w = np.log(generator.uniform(0.01, 10.0, size=noisy.shape))
    corrected, summary = correct_values(noisy, log_w, _exponentials(3))
    total = noisy.sum(axis=1)
    assert (corrected >= 0).all()
    assert (corrected <= np.maximum(noisy, 0)).all()
    assert (corrected.sum(axis=1) == np.maximum(total, 0)).all()
    assert (corrected[total < 0] == 0).all()
    assert summary["cells_with_negative_total"] == int((total < 0).sum()) > 0
    assert summary["negative_flows_set_to_zero"] == int((noisy < 0).sum())
    assert summary["units_removed"] == int((np.maximum(noisy, 0).sum(axis=1) - total)[total >= 0].sum())


def test_same_draws_same_correction():
    noisy = np.array([[3, -1, 2, 0, -2], [5, 1, -4, 1, 1]], dtype=np.int64)
    log_w = np.zeros_like(noisy, dtype=float)
    first, _ = correct_values(noisy, log_w, _exponentials(5))
    second, _ = correct_values(noisy, log_w, _exponentials(5))
    assert (first == second).all()


def test_block_size_does_not_change_the_correction():
    """A national table is corrected a block of origin cells at a time, consuming one
    stream in cell order: any block size gives the same flows, statistics and ledger entry."""
    import pandas as pd

    from pseo_das.tasks.codes.destinations import N_DESTINATIONS
    from pseo_das.tasks.employment_flows.flows_correction import correct_table, industry_flows
    from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows
    from pseo_das.tasks.inputs.reference_inputs import default_reference_dir, load_reference_inputs

    generator = np.random.default_rng(5)
    n_cells = 37
    true = generator.poisson(0.05, size=(n_cells, N_DESTINATIONS))
    noisy = true + generator.geometric(0.6, true.shape) - generator.geometric(0.6, true.shape)
    cells = pd.DataFrame({"institution": [f"0000000{i % 3}" for i in range(n_cells)],
                          "inst_state": ["08", "48", "26"] * 12 + ["08"], "degree_level": "05",
                          "cipcode": [("11", "14", "52")[i % 3] for i in range(n_cells)],
                          "grad_cohort": 2010, "grad_cohort_years": 1, "noise_terms": 1})
    total = true.sum(axis=1) + generator.integers(-2, 3, n_cells)
    table = NoisyFlows("flows.I.cip2.y1", "2", 1, cells, noisy, ("flows.I.cip2.y1",),
                       ("ab" * 32,), total=total)
    reference = load_reference_inputs(default_reference_dir())
    indflow = industry_flows([table])
    whole, whole_stats, whole_entries = correct_table(table, reference, indflow, 3e-6,
                                                      block_cells=n_cells)
    assert whole_stats["units_removed"] > 1000 and whole_stats["cells_corrected"] == n_cells
    for block in (1, 5, 16):
        blocked, stats, entries = correct_table(table, reference, indflow, 3e-6, block_cells=block)
        assert np.array_equal(blocked.corrected, whole.corrected)
        assert stats == whole_stats and entries == whole_entries
    assert (whole.corrected.sum(axis=1) == np.maximum(total, 0)).all()
