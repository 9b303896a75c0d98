"""The geometric mechanism and the privacy ledger."""
import ast
import importlib
import inspect
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pseo_das.tasks.privacy.geometric import (discrete_laplace_noise, geometric_variance,
                                              measure_with_geometric_noise)
from pseo_das.tasks.privacy.ledger import LedgerEntry, PrivacyBudgetExceeded, PrivacyLedger
from pseo_das.tasks.privacy.post_processing import (post_processing_exponentials,
                                                    post_processing_split_blocks)
from pseo_das.tasks.privacy.statement import Mechanism, geometric_statement


def add_geometric_noise(seed: bytes, stream_id: str, counts: np.ndarray, epsilon: float,
                        product: str = "test") -> tuple[np.ndarray, LedgerEntry]:
    statement = geometric_statement(stream_id, product, stream_id, epsilon, counts.shape[1])
    measured = measure_with_geometric_noise(seed, statement,
                                            pd.DataFrame(index=range(len(counts))), counts)
    return measured.values, measured.entry


def post_processing_split(stream_seed: bytes, step_id: str, product: str, n_cells: int,
                          n_bins: int, derived_from: str, counts: np.ndarray,
                          shares: np.ndarray) -> tuple[np.ndarray, LedgerEntry]:
    """`post_processing_split_blocks` in one piece: the (n, k) parts and the ledger entry."""
    blocks, entry = post_processing_split_blocks(stream_seed, step_id, product, n_cells, n_bins,
                                                 derived_from, counts, shares)
    parts = [part for _, part in blocks]
    return (np.concatenate(parts) if parts else np.zeros(np.shape(shares), dtype=np.int64)), entry


SEED = bytes(range(32))
ROOT = Path(__file__).resolve().parent.parent


def two_sided_geometric_pmf(k: np.ndarray, epsilon: float) -> np.ndarray:
    """P(X - Y = k) for X, Y i.i.d. geometric(p = 1 - e^-eps): (1-a)/(1+a) a^|k|."""
    a = math.exp(-epsilon)
    return (1 - a) / (1 + a) * a ** np.abs(k)


def geometric_fit(noise: np.ndarray, epsilon: float) -> tuple[float, float]:
    """Chi-square goodness of fit of `noise` to the two-sided geometric law at `epsilon`, on
    the support, tails pooled so every expected count >= 20: (statistic, p-value)."""
    n = len(noise)
    k_max = 0
    while n * two_sided_geometric_pmf(np.array([k_max + 1]), epsilon)[0] >= 20:
        k_max += 1
    support = np.arange(-k_max, k_max + 1)
    expected = n * two_sided_geometric_pmf(support, epsilon)
    tail = n * two_sided_geometric_pmf(np.array([k_max + 1]), epsilon)[0] / (1 - math.exp(-epsilon))
    clipped = np.clip(noise, -k_max - 1, k_max + 1) + k_max + 1
    observed = np.bincount(clipped, minlength=2 * k_max + 3)
    expected = np.concatenate([[tail], expected, [tail]])
    assert expected.sum() == pytest.approx(n)
    statistic, p_value = stats.chisquare(observed, expected)
    return float(statistic), float(p_value)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 1.5, 3.0])
def test_noise_follows_the_exact_two_sided_geometric(epsilon):
    n = 10_000_000
    noise = discrete_laplace_noise(SEED, f"gof-{epsilon}", epsilon, (n,))
    statistic, p_value = geometric_fit(noise, epsilon)
    # Fixed seed: the p-value is deterministic; under the null it is uniform, so a wrong
    # distribution (e.g. p = 1 - 1/epsilon, or Laplace rounding) fails by orders of magnitude.
    assert p_value > 1e-3, (statistic, p_value)
    # Negative control: the same test rejects the same draws as the law of an epsilon 2%
    # off, either way (the test has the power to see a wrong epsilon).
    for wrong in (epsilon * 0.98, epsilon * 1.02):
        assert geometric_fit(noise, wrong)[1] < 1e-6, wrong
    # Mean 0 and the analytic variance 2a/(1-a)^2, within 5 standard errors.
    var = geometric_variance(epsilon)
    assert abs(noise.mean()) < 5 * math.sqrt(var / n)
    a = math.exp(-epsilon)
    fourth = 2 * a * (1 + 10 * a + a * a) / (1 - a) ** 4  # E[N^4] of the two-sided geometric
    assert abs(noise.var() - var) < 5 * math.sqrt((fourth - var ** 2) / n)


def test_noise_is_added_to_every_entry_and_is_seeded_per_measurement():
    counts = np.zeros((1000, 21), np.int64)
    first, _ = add_geometric_noise(SEED, "t1", counts, 1.0)
    again, _ = add_geometric_noise(SEED, "t1", counts, 1.0)
    other_id, _ = add_geometric_noise(SEED, "t2", counts, 1.0)
    other_seed, _ = add_geometric_noise(bytes(32), "t1", counts, 1.0)
    assert first.shape == counts.shape and (first != 0).mean() > 0.3
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other_id)
    assert not np.array_equal(first, other_seed)


def test_every_draw_comes_with_its_ledger_entry_and_a_retry_does_not_spend_twice():
    counts = np.ones((5, 21), np.int64)
    first, entry = add_geometric_noise(SEED, "earnings.I.cip4.y1", counts, 1.0, "earnings")
    retry, entry_again = add_geometric_noise(SEED, "earnings.I.cip4.y1", counts, 1.0, "earnings")
    np.testing.assert_array_equal(first, retry)  # same stream: a retry publishes the same noise
    ledger = PrivacyLedger.of(2.0, [entry, entry_again])
    assert ledger.total_epsilon == 1.0 and len(ledger.entries) == 1
    assert (entry.mechanism, entry.epsilon, entry.sensitivity, entry.n_cells, entry.n_bins) == \
        (Mechanism.GEOMETRIC, 1.0, 1, 5, 21)
    assert SEED.hex() not in entry.noise_stream


def test_the_release_ledger_refuses_more_than_its_cap():
    a = add_geometric_noise(SEED, "a", np.zeros((2, 2), np.int64), 1.0, "earnings")[1]
    b = add_geometric_noise(SEED, "b", np.zeros((2, 2), np.int64), 1.0, "earnings")[1]
    with pytest.raises(PrivacyBudgetExceeded, match="over the cap"):
        PrivacyLedger.of(1.5, [a, b])
    a_changed = add_geometric_noise(SEED, "a", np.zeros((2, 2), np.int64), 0.5, "earnings")[1]
    with pytest.raises(PrivacyBudgetExceeded, match="other parameters"):
        PrivacyLedger.of(10, [a, a_changed])


def _random_sources(path: Path) -> list[str]:
    """Names through which a module could draw random numbers."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in {"random", "secrets", "randomgen"}]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in {"random", "secrets", "randomgen"} or node.module == "numpy.random":
                found.append(node.module)
            found += [a.name for a in node.names if a.name == "NoiseStream"]
        elif isinstance(node, ast.Attribute) and node.attr in {"random", "default_rng", "Generator"}:
            found.append(ast.unparse(node))
    return found


RANDOMNESS_ALLOWED = {
    "tasks/privacy/streams.py": "stream derivation: keys every release stream (draws only)",
    "tasks/privacy/geometric.py": "the exact geometric mechanism: noise with its ledger entry",
    "tasks/privacy/employer_side.py": "the employer-side mechanisms: noise with its ledger entry",
    "tasks/privacy/laplace.py": "the floating-point Laplace mechanism: noise with its entry",
    "tasks/privacy/post_processing.py": "randomized post-processing draws, with their entry",
    "tasks/study/simulation_noise.py": "the accuracy study's simulation noise (never on confidential data)",
    "pseo_das/synth.py": "the synthetic confidential data set (demo and tests; no release noise)",
    "pseo_das/synth_employers.py": "the synthetic data set's employers (no release noise)",
    "pseo_das/synth_jobs.py": "the synthetic data set's degrees and jobs (no release noise)",
}


def test_no_noise_can_be_drawn_outside_the_mechanism_layer():
    """Only the mechanism modules of the privacy core may key a random number generator or
    draw from a release stream (NoiseStream), and they return a ledger entry with every
    draw (test above); the accuracy study's simulation module is the one other place.
    Nothing else is exempt."""
    offenders = {}
    for folder in ("pseo_das", "tasks", "flows", "reports", "schemas"):
        for path in (ROOT / folder).rglob("*.py"):
            name = str(path.relative_to(ROOT))
            sources = _random_sources(path)
            if sources and name not in RANDOMNESS_ALLOWED:
                offenders[name] = sources
    assert offenders == {}
    for name in RANDOMNESS_ALLOWED:  # the scan does see generators
        assert _random_sources(ROOT / name), name


PRIVACY_CORE = ("streams", "ledger", "statement", "geometric", "employer_side", "laplace",
                "post_processing", "discrete_laplace", "establishment")


def test_no_public_function_of_the_privacy_core_hands_out_a_raw_generator():
    """Public functions and methods return draws, never a generator or bit generator; the
    post-processing draw function is a stream's, not a numpy Generator's bound method."""
    handing_out = []
    for name in PRIVACY_CORE:
        module = importlib.import_module(f"pseo_das.tasks.privacy.{name}")
        owned = [(n, f) for n, f in vars(module).items()
                 if getattr(f, "__module__", None) == module.__name__ and not n.startswith("_")]
        callables = [(n, f) for n, f in owned if inspect.isfunction(f)]
        callables += [(f"{n}.{m}", g) for n, f in owned if inspect.isclass(f)
                      for m, g in vars(f).items()
                      if inspect.isfunction(g) and not m.startswith("_")]
        for qualified, function in callables:
            returned = str(inspect.signature(function).return_annotation)
            if re.search(r"Generator|ChaCha|BitGenerator|Draws", returned):
                handing_out.append(f"{name}.{qualified} -> {returned}")
    assert handing_out == []
    draw, _ = post_processing_exponentials(SEED, "s", "p", 1, 1, "")
    assert not isinstance(getattr(draw, "__self__", None),
                          (np.random.Generator, np.random.BitGenerator))


def test_noise_sample_writes_exactly_the_release_noise(tmp_path, capsys):
    from pseo_das.cli import main
    seed = "c3" * 32
    out = tmp_path / "noise.npy"
    for target in (str(out), "-"):
        with pytest.raises(SystemExit) as stop:
            main(["noise-sample", "--epsilon", "3/2", "--count", "5000", "--seed", seed,
                  "--tabulation", "earnings.I.cip4.y1@R1/1", "--out", target])
        assert stop.value.code == 0
    printed = np.array(capsys.readouterr().out.split(), dtype=np.int64)
    statement = geometric_statement("t", "test", "earnings.I.cip4.y1@R1/1", "1.5", 1)
    release = measure_with_geometric_noise(bytes.fromhex(seed), statement,
                                           pd.DataFrame(index=range(5000)),
                                           np.zeros((5000, 1), np.int64)).values.ravel()
    np.testing.assert_array_equal(np.load(out), release)
    np.testing.assert_array_equal(printed, release)
    assert np.load(out).dtype == np.int64 and (release != 0).any()


def test_the_recast_split_keeps_totals_and_signs_and_follows_the_multinomial_law():
    rng = np.random.default_rng(3)
    counts = rng.integers(-40, 60, size=5000)
    shares = np.tile([0.5, 0.3, 0.2, 0.0], (5000, 1))
    parts, entry = post_processing_split(SEED, "recast.cip4.y1", "earnings", 5000, 1,
                                         "earnings.I.cip4.y1", counts, shares)
    np.testing.assert_array_equal(parts.sum(axis=1), counts)          # totals preserved
    assert ((parts * np.sign(counts)[:, None]) >= 0).all()            # signs kept
    assert (parts[:, 3] == 0).all() and entry.epsilon == 0            # no share, no units
    again, _ = post_processing_split(SEED, "recast.cip4.y1", "earnings", 5000, 1,
                                     "earnings.I.cip4.y1", counts, shares)
    np.testing.assert_array_equal(parts, again)                       # a recorded stream
    # the split of 10 units, over many draws, against Multinomial(10; 0.5, 0.3, 0.2)
    many = np.full(20_000, 10)
    split, _ = post_processing_split(SEED, "gof", "t", 1, 1, "", many,
                                     np.tile([0.5, 0.3, 0.2], (20_000, 1)))
    first = np.bincount(split[:, 0], minlength=11)
    expected = 20_000 * stats.binom.pmf(np.arange(11), 10, 0.5)       # its first margin
    keep = expected >= 20
    observed = np.append(first[keep], first[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert abs(split[:, 1].mean() - 3.0) < 5 * np.sqrt(10 * 0.3 * 0.7 / 20_000)


def test_the_recast_split_in_blocks_draws_what_one_split_draws():
    """A split done a block of counts at a time (bounded memory), each cell's shares serving
    its `repeat` bins, gives the same parts as one split of every count with the shares
    repeated: one stream, consumed count by count."""
    rng = np.random.default_rng(4)
    cells, bins = 300, 7
    counts = rng.integers(-5, 9, size=cells * bins)
    counts[rng.random(cells * bins) < 0.3] = 0
    shares = rng.dirichlet(np.ones(3), size=cells)
    whole, _ = post_processing_split(SEED, "recast.cip2.y5", "flows", cells, bins, "x",
                                     counts, np.repeat(shares, bins, axis=0))
    for block in (1, 5, 64, 10_000):
        blocks, entry = post_processing_split_blocks(SEED, "recast.cip2.y5", "flows", cells, bins,
                                                     "x", counts, shares, repeat=bins, block=block)
        firsts, parts = zip(*blocks)
        assert firsts[0] == 0 and entry.epsilon == 0
        np.testing.assert_array_equal(np.concatenate(parts), whole)
    with pytest.raises(ValueError, match="counts for"):
        post_processing_split_blocks(SEED, "s", "p", 1, 1, "", counts, shares, repeat=bins + 1)


def test_a_zero_count_draws_nothing_from_the_split_stream():
    """The split draws for every count of a block, zeros included: a count of 0 takes no
    draw, so the parts are those of the non-zero counts split alone (as the split drew
    before it skipped nothing), with the shares' zero slots and a single-share row too."""
    rng = np.random.default_rng(5)
    counts = rng.integers(-6, 9, size=4000)
    counts[rng.random(4000) < 0.4] = 0
    shares = rng.dirichlet(np.ones(3), size=4000)
    shares[::7] = [1.0, 0.0, 0.0]                        # a direct move in a wider block
    shares[1::7] = [0.0, 0.6, 0.4]
    parts, _ = post_processing_split(SEED, "recast.cip2.y1", "flows", 4000, 1, "x", counts,
                                     shares)
    moving = counts != 0
    alone, _ = post_processing_split(SEED, "recast.cip2.y1", "flows", int(moving.sum()), 1, "x",
                                     counts[moving], shares[moving])
    assert (parts[~moving] == 0).all()
    np.testing.assert_array_equal(parts[moving], alone)
