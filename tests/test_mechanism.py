"""The geometric mechanism and the privacy ledger."""
import ast
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tasks.mechanism import (GEOMETRIC, PrivacyBudgetExceeded, PrivacyLedger,
                             add_geometric_noise, geometric_variance)

SEED = bytes(range(32))
ROOT = Path(__file__).resolve().parent.parent


def two_sided_geometric_pmf(k: np.ndarray, epsilon: float) -> np.ndarray:
    """P(X - Y = k) for X, Y i.i.d. geometric(p = 1 - e^-eps): (1-a)/(1+a) a^|k|."""
    a = math.exp(-epsilon)
    return (1 - a) / (1 + a) * a ** np.abs(k)


@pytest.mark.parametrize("epsilon", [0.25, 1.0, 2.0])
def test_noise_follows_the_exact_two_sided_geometric(epsilon):
    ledger = PrivacyLedger(epsilon_cap=10)
    n = 200_000
    noise = add_geometric_noise(ledger, SEED, f"gof-{epsilon}", "test", np.zeros((n, 1), np.int64),
                                epsilon).ravel()
    # Chi-square goodness of fit on the support, tails pooled so every expected count >= 20.
    k_max = 0
    while n * two_sided_geometric_pmf(np.array([k_max + 1]), epsilon)[0] >= 20:
        k_max += 1
    support = np.arange(-k_max, k_max + 1)
    expected = n * two_sided_geometric_pmf(support, epsilon)
    tail = n * two_sided_geometric_pmf(np.array([k_max + 1]), epsilon)[0] / (1 - math.exp(-epsilon))
    observed = np.array([(noise == k).sum() for k in support])
    observed = np.concatenate([[(noise < -k_max).sum()], observed, [(noise > k_max).sum()]])
    expected = np.concatenate([[tail], expected, [tail]])
    assert expected.sum() == pytest.approx(n)
    statistic, p_value = stats.chisquare(observed, expected)
    # Fixed seed: the p-value is deterministic; under the null it is uniform, so a wrong
    # distribution (e.g. p = 1 - 1/epsilon, or Laplace rounding) fails by orders of magnitude.
    assert p_value > 1e-3, (statistic, p_value)
    # Mean 0 and the analytic variance 2a/(1-a)^2, within 5 standard errors.
    var = geometric_variance(epsilon)
    assert abs(noise.mean()) < 5 * math.sqrt(var / n)
    a = math.exp(-epsilon)
    fourth = 2 * a * (1 + 10 * a + a * a) / (1 - a) ** 4  # E[N^4] of the two-sided geometric
    assert abs(noise.var() - var) < 5 * math.sqrt((fourth - var ** 2) / n)


def test_noise_is_added_to_every_entry_and_is_seeded_per_tabulation():
    ledger = PrivacyLedger(epsilon_cap=10)
    counts = np.zeros((1000, 21), np.int64)
    first = add_geometric_noise(ledger, SEED, "t1", "test", counts, 1.0)
    again = add_geometric_noise(PrivacyLedger(10), SEED, "t1", "test", counts, 1.0)
    other_id = add_geometric_noise(ledger, SEED, "t2", "test", counts, 1.0)
    other_seed = add_geometric_noise(PrivacyLedger(10), bytes(32), "t1", "test", counts, 1.0)
    assert first.shape == counts.shape and (first != 0).mean() > 0.3
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other_id)
    assert not np.array_equal(first, other_seed)


def test_every_draw_is_recorded_and_a_retry_does_not_spend_twice():
    ledger = PrivacyLedger(epsilon_cap=2.0)
    counts = np.ones((5, 21), np.int64)
    first = add_geometric_noise(ledger, SEED, "earnings.I.cip4.y1", "earnings", counts, 1.0)
    retry = add_geometric_noise(ledger, SEED, "earnings.I.cip4.y1", "earnings", counts, 1.0)
    np.testing.assert_array_equal(first, retry)  # same stream: a retry publishes the same noise
    assert ledger.total_epsilon == 1.0 and len(ledger.entries) == 1
    entry = ledger.entries[0]
    assert (entry.mechanism, entry.epsilon, entry.sensitivity, entry.n_cells, entry.n_bins) == \
        (GEOMETRIC, 1.0, 1, 5, 21)
    assert SEED.hex() not in entry.noise_stream


def test_budget_cap_stops_before_any_noise():
    ledger = PrivacyLedger(epsilon_cap=1.5)
    add_geometric_noise(ledger, SEED, "a", "earnings", np.zeros((2, 2), np.int64), 1.0)
    with pytest.raises(PrivacyBudgetExceeded, match="over the cap"):
        add_geometric_noise(ledger, SEED, "b", "earnings", np.zeros((2, 2), np.int64), 1.0)
    assert [e.tabulation_id for e in ledger.entries] == ["a"]
    with pytest.raises(PrivacyBudgetExceeded, match="other parameters"):
        add_geometric_noise(ledger, SEED, "a", "earnings", np.zeros((2, 2), np.int64), 0.5)


def _random_sources(path: Path) -> list[str]:
    """Names through which a module could draw random numbers."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in {"random", "secrets", "randomgen"}]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in {"random", "secrets", "randomgen"} or node.module == "numpy.random":
                found.append(node.module)
        elif isinstance(node, ast.Attribute) and node.attr in {"random", "default_rng", "Generator"}:
            found.append(ast.unparse(node))
    return found


def test_no_noise_can_be_drawn_outside_the_mechanism_layer():
    """Only tasks/mechanism.py may touch a random number generator, and it records a ledger
    entry before drawing (test above). Everything else gets noise only through it."""
    offenders = {}
    for folder in ("tasks", "flows", "reports", "schemas"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "mechanism.py" and folder == "tasks":
                continue
            sources = _random_sources(path)
            if sources:
                offenders[str(path.relative_to(ROOT))] = sources
    assert offenders == {}
    assert _random_sources(ROOT / "tasks" / "mechanism.py")  # the scan does see generators
