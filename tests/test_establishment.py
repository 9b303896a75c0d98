"""Employer-side protection (Haney et al. 2017): feasibility, closed forms, the samplers at
fixed seeds (bounds derived from the distributions), and the ledger entry."""
import math

import numpy as np
import pandas as pd
import pytest
from randomgen import ChaCha
from scipy import integrate, stats

from pseo_das.tasks.privacy.establishment import (EmployerProtection, FlowsMechanism,
                                                  InfeasibleParameters, PrivacyNotion,
                                                  employer_epsilon, expected_absolute_error,
                                                  log_laplace_lambda, log_laplace_mean,
                                                  log_laplace_mse, smooth_gamma_min_epsilon,
                                                  smooth_laplace_min_epsilon, smooth_sensitivity)
from pseo_das.tasks.privacy.statement import Mechanism, employer_statement, geometric_statement
from pseo_das.tasks.privacy.employer_side import (employer_protected_values,
                                                  measure_with_employer_protection,
                                                  sample_inverse_quartic)
from pseo_das.tasks.privacy.geometric import measure_with_geometric_noise
from pseo_das.tasks.privacy.ledger import PrivacyLedger
from pseo_das.tasks.privacy.streams import stream_key

SEED = bytes(range(32))
LOG, GAMMA, SLAP = (FlowsMechanism.LOG_LAPLACE, FlowsMechanism.SMOOTH_GAMMA,
                    FlowsMechanism.SMOOTH_LAPLACE)


def seeded_generator(label: str) -> np.random.Generator:
    """A seeded ChaCha20 generator for the samplers' statistical tests (the mechanism layer
    hands out no generator): the stream a measurement `label` of SEED would use."""
    return np.random.Generator(ChaCha(key=int.from_bytes(stream_key(SEED, label), "little"),
                                      counter=0, rounds=20))


def quartic_density(z):
    return math.sqrt(2) / math.pi / (1 + z ** 4)


def quartic_cdf(z: np.ndarray) -> np.ndarray:
    """Closed form of the CDF of (sqrt 2/pi)/(1 + z^4) (partial fractions)."""
    t, r2 = np.abs(z), math.sqrt(2)
    g = (np.log((t * t + r2 * t + 1) / (t * t - r2 * t + 1))
         + 2 * np.arctan(r2 * t + 1) + 2 * np.arctan(r2 * t - 1)) / (4 * r2)
    return 0.5 + np.sign(z) * g / (math.pi / r2)


def test_smooth_gamma_minimum_epsilon_and_its_boundary():
    expected = {0.01: 0.040, 0.05: 0.195, 0.1: 0.381, 0.15: 0.559, 0.2: 0.729}
    for alpha, low in expected.items():
        assert round(smooth_gamma_min_epsilon(alpha), 3) == low
        EmployerProtection(GAMMA, alpha, smooth_gamma_min_epsilon(alpha) * (1 + 1e-12)).check()
        with pytest.raises(InfeasibleParameters, match=r"1 \+ alpha <= e\^\(epsilon/4\)"):
            EmployerProtection(GAMMA, alpha, smooth_gamma_min_epsilon(alpha) * 0.999).check()
    # the condition itself: 1 + alpha <= e^(epsilon/4)
    assert 1 + 0.2 <= math.exp(0.73 / 4) and 1 + 0.2 > math.exp(0.72 / 4)


def test_smooth_laplace_takes_the_safer_ln_2_over_delta_and_table_2_is_reproduced():
    # Table 2 of the paper, ln(1/delta): 2.77 at delta 5e-4, alpha 0.2 (it prints 2.13)
    assert round(smooth_laplace_min_epsilon(0.2, 5e-4, paper_form=True), 2) == 2.77
    safer = smooth_laplace_min_epsilon(0.2, 5e-4)
    assert round(safer, 2) == 3.02 and safer == pytest.approx(2 * math.log(4000) * math.log(1.2))
    # between the two forms: accepted by the paper's, refused here
    with pytest.raises(InfeasibleParameters, match=r"2 ln\(2/delta\) ln\(1 \+ alpha\) = 3.02"):
        EmployerProtection(SLAP, 0.2, 2.9, 5e-4).check()
    EmployerProtection(SLAP, 0.2, 3.03, 5e-4).check()
    assert 1 + 0.2 <= math.exp(3.03 / (2 * math.log(2 / 5e-4)))


def test_log_laplace_refuses_an_infinite_mean_and_warns_of_an_infinite_variance():
    assert log_laplace_lambda(0.1, 2) == pytest.approx(0.0953, abs=1e-4)
    assert EmployerProtection(LOG, 0.1, 2).check() == []
    lam_half = 4 * math.log(1.1)           # epsilon at which lambda = 1/2
    warnings = EmployerProtection(LOG, 0.1, lam_half * 0.99).check()
    assert len(warnings) == 1 and "infinite variance" in warnings[0]
    with pytest.raises(InfeasibleParameters, match="infinite mean"):
        EmployerProtection(LOG, 0.1, 2 * math.log(1.1) * 0.999).check()   # lambda just over 1
    assert log_laplace_mean(10, 0.1, 2 * math.log(1.1) * 0.999) == math.inf


@pytest.mark.parametrize("protection, reason", [
    (EmployerProtection(GAMMA, 0.0, 1.0), "alpha = 0.0 must be"),
    (EmployerProtection(GAMMA, -0.1, 1.0), "alpha = -0.1 must be"),
    (EmployerProtection(LOG, 0.1, float("inf")), "epsilon = inf must be"),
    (EmployerProtection(GAMMA, 0.1, 1.0, delta=1e-6), "only smooth-laplace takes a delta"),
    (EmployerProtection(SLAP, 0.1, 4.0, delta=0.0), "delta = 0.0 must lie strictly"),
    (EmployerProtection(SLAP, 0.1, 4.0, delta=1.0), "delta = 1.0 must lie strictly"),
    (EmployerProtection(GAMMA, 0.1, 1.0, unbiased=True), "unbiasing is for log-laplace only"),
])
def test_wrong_parameters_are_refused_with_the_reason(protection, reason):
    with pytest.raises(InfeasibleParameters, match=reason):
        protection.check()
    # ... and no measurement can state them, so no noise is drawn for them
    with pytest.raises(InfeasibleParameters):
        employer_statement("t", "p", "m", protection, 2, PrivacyNotion.WEAK)


def test_smooth_sensitivity_is_alpha_times_the_largest_employer_at_least_one():
    np.testing.assert_allclose(smooth_sensitivity(0.1, np.array([0, 5, 10, 11, 200])),
                               [1, 1, 1, 1.1, 20])


def test_the_inverse_quartic_sampler_follows_its_density_on_a_release_stream():
    n = 400_000
    z = sample_inverse_quartic(seeded_generator("quartic-gof"), (n,))
    # Kolmogorov-Smirnov against the closed-form CDF (fixed seed: a deterministic p-value)
    statistic, p_value = stats.kstest(z, quartic_cdf)
    assert p_value > 1e-3, (statistic, p_value)
    # E|z| = 1/sqrt 2, Var|z| = 1 - 1/2: within 5 standard errors
    assert abs(np.abs(z).mean() - 1 / math.sqrt(2)) < 5 * math.sqrt(0.5 / n)
    # Variance 1: the integral of z^2 (sqrt 2/pi)/(1 + z^4) is 1 (the paper's 2.2 is the
    # unnormalised one). The fourth moment is infinite, so the sample variance has no CLT:
    # check the truncated second moment (|z| <= 20) against its integral instead.
    assert integrate.quad(lambda t: t * t * quartic_density(t), -np.inf, np.inf)[0] == \
        pytest.approx(1.0, abs=1e-8)
    m2 = 2 * integrate.quad(lambda t: t * t * quartic_density(t), 0, 20)[0]
    m4 = 2 * integrate.quad(lambda t: t ** 4 * quartic_density(t), 0, 20)[0]
    kept = np.where(np.abs(z) <= 20, z * z, 0.0)
    assert abs(kept.mean() - m2) < 5 * math.sqrt((m4 - m2 * m2) / n)
    assert m2 > 0.95   # the tail beyond 20 holds under 5% of the variance
    # a wrong law (standard Cauchy, or a unit normal: same variance) is rejected
    assert stats.kstest(seeded_generator("c").standard_cauchy(n), quartic_cdf).pvalue < 1e-6
    assert stats.kstest(seeded_generator("n").standard_normal(n), quartic_cdf).pvalue < 1e-6


def test_log_laplace_mean_and_relative_mse_match_the_closed_form():
    # epsilon 2, alpha 0.1, n 10: lambda 0.0953, mean 10.183, relative MSE 0.0775
    n_true, alpha, epsilon, n = 10, 0.1, 2.0, 400_000
    assert log_laplace_mean(n_true, alpha, epsilon) == pytest.approx(10.183, abs=5e-4)
    assert log_laplace_mse(n_true, alpha, epsilon) / n_true ** 2 == pytest.approx(0.0775, abs=5e-5)
    protection = EmployerProtection(LOG, alpha, epsilon)
    values = employer_protected_values(seeded_generator("log-laplace-mean"),
                                       np.full(n, n_true), np.zeros(n), protection)
    lam = log_laplace_lambda(alpha, epsilon)
    var = (n_true + 1 / alpha) ** 2 * (1 / (1 - 4 * lam * lam) - 1 / (1 - lam * lam) ** 2)
    se = math.sqrt(var / n)
    # E[n~] + 1/alpha = (n + 1/alpha) / (1 - lambda^2)
    assert abs(values.mean() + 1 / alpha - (n_true + 1 / alpha) / (1 - lam * lam)) < 5 * se
    assert abs(((values - n_true) ** 2).mean() / n_true ** 2 - 0.0775) < 0.0775 * 0.05
    # a wrong epsilon (1 instead of 2) predicts a mean 0.57 higher: 200 standard errors off
    assert abs(values.mean() - log_laplace_mean(n_true, alpha, 1.0)) > 50 * se
    # unbiasing: (n~ + 1/alpha)(1 - lambda^2) - 1/alpha has mean n before the clamp at 0
    unbiased = employer_protected_values(seeded_generator("log-laplace-mean"),
                                         np.full(n, n_true), np.zeros(n),
                                         EmployerProtection(LOG, alpha, epsilon, unbiased=True))
    assert unbiased.min() >= 0
    assert abs(unbiased.mean() - n_true) < 5 * se


@pytest.mark.parametrize("mechanism", [GAMMA, SLAP])
def test_smooth_mechanisms_have_the_expected_absolute_error(mechanism):
    n, alpha, epsilon = 200_000, 0.1, 2.0
    largest = np.where(np.arange(n) % 2 == 0, 50, 3)      # S* = 5 and S* = 1
    protection = EmployerProtection(mechanism, alpha, epsilon,
                                    delta=1e-3 if mechanism is SLAP else 0.0)
    errors = employer_protected_values(seeded_generator(f"smooth-{mechanism}"),
                                       np.full(n, 100), largest, protection) - 100
    for s_star, rows in ((5.0, errors[::2]), (1.0, errors[1::2])):
        scale = (16 if mechanism is GAMMA else 2) * s_star / epsilon
        mean_abs = expected_absolute_error(mechanism, s_star, epsilon)
        # E|err| = 11.31 S*/epsilon (Smooth Gamma), 2 S*/epsilon (Smooth Laplace)
        assert mean_abs == pytest.approx(scale * (1 / math.sqrt(2) if mechanism is GAMMA else 1))
        var_abs = scale ** 2 * (1 if mechanism is GAMMA else 2) - mean_abs ** 2
        assert abs(np.abs(rows).mean() - mean_abs) < 5 * math.sqrt(var_abs / len(rows))
        if mechanism is SLAP:   # Laplace: variance 2 scale^2, fourth moment 24 scale^4
            assert abs(rows.var() - 2 * scale ** 2) < 5 * math.sqrt(20 * scale ** 4 / len(rows))
    if mechanism is GAMMA:
        assert expected_absolute_error(GAMMA, 1.0, 1.0) == pytest.approx(11.31, abs=5e-3)
    # a wrong x_v (the sensitivity ignored: S* = 1 everywhere) is far off
    assert abs(np.abs(errors[::2]).mean() - expected_absolute_error(mechanism, 1.0, epsilon)) > \
        0.5 * expected_absolute_error(mechanism, 1.0, epsilon)


def test_measurement_is_seeded_rounded_and_comes_with_its_ledger_entry():
    counts = np.array([[0, 3, 40], [7, 0, 1]], np.int64)
    largest = np.array([[0, 2, 30], [7, 0, 1]])
    protection = EmployerProtection(GAMMA, 0.1, 1.0)
    cells = pd.DataFrame(index=range(2))
    def measured(stream_id):
        statement = employer_statement("flows.I.cip2.y1", "employment flows", stream_id,
                                       protection, 3, PrivacyNotion.WEAK)
        return measure_with_employer_protection(SEED, statement, cells, counts, largest)
    first, again, other = measured("m1"), measured("m1"), measured("m2")
    assert first.values.dtype == np.int64 and first.values.shape == counts.shape
    np.testing.assert_array_equal(first.values, again.values)
    assert not np.array_equal(first.values, other.values)
    entry = first.entry
    assert (entry.alpha, entry.delta, entry.employer_notion, entry.employer_epsilon) == \
        ("0.1", 0, "weak", "2")   # 2 graduate-attribute cells x epsilon 1
    assert entry.epsilon == 1 and "smooth gamma" in entry.mechanism
    assert SEED.hex() not in entry.noise_stream
    geometric = measure_with_geometric_noise(
        SEED, geometric_statement("g", "earnings", "g", 1.0, 3), cells, counts).entry
    with_employers = PrivacyLedger.of(10, [geometric, entry]).to_frame()
    assert list(with_employers.columns[-4:]) == ["alpha", "delta", "employer_notion",
                                                 "employer_epsilon"]
    only_geometric = PrivacyLedger.of(10, [geometric]).to_frame()
    assert "alpha" not in only_geometric.columns and geometric.mechanism == Mechanism.GEOMETRIC
    assert employer_epsilon(PrivacyNotion.STRONG, 1.5, 1000) == 1.5
    assert with_employers.set_index("tabulation_id")["delta"].to_dict() == {"g": "",
                                                                          "flows.I.cip2.y1": "0"}


def test_whole_graduates_rounds_halves_up_and_never_overflows():
    from pseo_das.tasks.privacy.employer_side import whole_graduates
    np.testing.assert_array_equal(whole_graduates(np.array([-1.5, -0.5, 0.49, 0.5, 2.5, 1e300])),
                                  [-1, 0, 0, 1, 3, 2 ** 62])
