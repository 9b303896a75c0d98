"""The verification measure of Barrientos et al. (2017): the posterior in closed form, the
person-level groups, the per-group regressions and the noisy count."""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError
from scipy import stats

from pseo_das.tasks.privacy.geometric import discrete_laplace_noise
from pseo_das.tasks.verification.estimates import (QueryTimeout, group_estimate,
                                                   group_indicators, least_squares_coefficient,
                                                   ols_slope, selected_rows)
from pseo_das.tasks.verification.groups import group_key, person_groups, person_hashes
from pseo_das.tasks.verification.measure import measurement_id, noisy_count, verify
from pseo_das.tasks.verification.posterior import cdf, count_weights, posterior
from pseo_das.tasks.verification.query import RegressionQuery, query_sha256
from pseo_das.tasks.verification.records import load_records, records_from_frames

SEED = bytes(range(32))


@pytest.mark.parametrize("released, expected", [(21, .420), (38, .761), (45, .901), (49, .983)])
def test_posterior_modes_of_the_paper_at_m50_epsilon1(released, expected):
    # the seed's modes, given to three decimals: within 0.001 of them
    assert posterior(released, 50, 1).mode == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize("released, expected", [(-5, 0.0), (0, 0.0), (50, 1.0), (57, 1.0)])
def test_counts_at_or_beyond_the_ends_put_the_mode_at_the_end(released, expected):
    assert posterior(released, 50, 1).mode == pytest.approx(expected, abs=1e-6)


def brute_force_density(released: int, groups: int, epsilon: float, r: np.ndarray) -> np.ndarray:
    """p(r | R) by the definition: Beta(1,1) prior x sum_s Binomial(s; M, r) P(noise = R - s),
    normalised by numerical integration (Simpson) over r."""
    s = np.arange(groups + 1)[:, None]
    q = math.exp(-epsilon)
    noise = (1 - q) / (1 + q) * q ** np.abs(released - s)
    unnormalised = (stats.binom.pmf(s, groups, r[None, :]) * noise).sum(axis=0)
    from scipy.integrate import simpson
    return unnormalised / simpson(unnormalised, x=r)


@pytest.mark.parametrize("released, groups, epsilon", [(21, 50, 1.0), (3, 20, 0.3), (-2, 10, 2.0),
                                                       (33, 30, 0.5)])
def test_closed_form_posterior_equals_brute_force_integration(released, groups, epsilon):
    r = np.linspace(0, 1, 20001)
    answer = posterior(released, groups, epsilon)
    exact = brute_force_density(released, groups, epsilon, r)
    weights = count_weights(released, groups, epsilon)
    from pseo_das.tasks.verification.posterior import log_density
    assert np.allclose(np.exp(log_density(r, weights)), exact, rtol=1e-6, atol=1e-6 * exact.max())
    from scipy.integrate import simpson
    assert answer.mean == pytest.approx(simpson(r * exact, x=r), abs=1e-7)
    half = r <= 0.5
    assert answer.prob_above_half == pytest.approx(1 - simpson(exact[half], x=r[half]), abs=1e-6)
    low, high = answer.interval_95
    assert cdf(low, weights)[0] == pytest.approx(0.025, abs=1e-9)
    assert cdf(high, weights)[0] == pytest.approx(0.975, abs=1e-9)
    assert r[np.argmax(exact)] == pytest.approx(answer.mode, abs=1e-4)


def test_closed_form_posterior_matches_simulation_of_the_model_and_rejects_a_wrong_epsilon():
    """r ~ U(0, 1), S ~ Binomial(M, r), R = S + noise drawn by the mechanism layer; the r's
    of the draws with R = 21 follow the posterior (Kolmogorov-Smirnov at a fixed seed), and
    the posterior computed with a wrong epsilon is rejected by the same test."""
    rng = np.random.default_rng(11)
    m, epsilon, n = 50, 1.0, 2_000_000
    r = rng.random(n)
    s = rng.binomial(m, r)
    released = s + discrete_laplace_noise(SEED, "posterior-simulation", epsilon, (n,))
    kept = r[released == 21]
    assert len(kept) > 20_000
    weights = count_weights(21, m, epsilon)
    assert stats.kstest(kept, lambda x: cdf(x, weights)).pvalue > 1e-3
    wrong = count_weights(21, m, 0.5)
    assert stats.kstest(kept, lambda x: cdf(x, wrong)).pvalue < 1e-6


def test_groups_are_stable_disjoint_per_person_and_balanced():
    ids = np.repeat(np.arange(1, 20001, dtype=np.int64), 3)          # 3 records per person
    key = group_key(SEED)
    hashes = person_hashes(ids, key)
    groups = person_groups(hashes, 50)
    per_person = pd.DataFrame({"id": ids, "g": groups}).groupby("id")["g"].nunique()
    assert (per_person == 1).all()                                   # one group per person
    shuffled = np.random.default_rng(1).permutation(ids)
    again = dict(zip(shuffled, person_groups(person_hashes(shuffled, key), 50)))
    assert all(again[i] == g for i, g in zip(ids[::97], groups[::97]))  # stable, any order
    sizes = np.bincount(groups[::3], minlength=50)
    assert stats.chisquare(sizes).pvalue > 1e-3                      # balanced
    other = person_groups(person_hashes(ids, group_key(bytes(32))), 50)
    assert (other != groups).mean() > 0.9                            # keyed


def test_least_squares_matches_numpy_and_detects_what_the_data_cannot_identify():
    rng = np.random.default_rng(5)
    x = np.column_stack([np.ones(200), rng.normal(size=(200, 3))])
    y = x @ [1.0, 2.0, -0.5, 0.25] + rng.normal(size=200)
    reference = np.linalg.lstsq(x, y, rcond=None)[0]
    for j in range(4):
        assert least_squares_coefficient(x, y, j) == pytest.approx(reference[j], rel=1e-10)
    collinear = np.column_stack([x, x[:, 1] + x[:, 2]])
    assert math.isnan(least_squares_coefficient(collinear, y, 1))
    assert math.isnan(least_squares_coefficient(collinear, y, 4))
    assert least_squares_coefficient(collinear, y, 3) == pytest.approx(reference[3], rel=1e-8)
    assert math.isnan(least_squares_coefficient(x[:2], y[:2], 1))     # fewer rows than terms


def toy_records(slope_by_year: dict[int, float], persons: int = 6000, seed: int = 3):
    """Graduates whose log earnings are 10 + b_t x master's + noise, b_t given per cohort."""
    rng = np.random.default_rng(seed)
    years = np.array(sorted(slope_by_year))
    graduates = pd.DataFrame({
        "person_id": np.arange(1, persons + 1, dtype=np.int64),
        "institution": "00100100", "inst_state": "01",
        "degree_level": np.where(rng.random(persons) < 0.5, "07", "05"),
        "cipcode": "11.0101", "grad_year": rng.choice(years, persons)})
    effect = graduates["grad_year"].map(slope_by_year) * (graduates["degree_level"] == "07")
    outcomes = pd.DataFrame({
        "person_id": np.repeat(graduates["person_id"], 2), "years_after": np.tile([1, 5], persons),
        "earnings": np.exp(10 + np.repeat(effect, 2).to_numpy() + rng.normal(0, .02, 2 * persons)),
        "emp_state": "01", "industry": "54"})
    return records_from_frames(graduates, outcomes, "toy")


def test_a_coefficient_and_a_trend_are_counted_in_every_group_when_the_data_say_so():
    records = toy_records({2010 + k: 0.02 * k for k in range(6)})
    hashes = person_hashes(records.person_id, group_key(SEED))
    query = RegressionQuery(outcome="log_earnings", covariates=["degree_level"],
                            references={"degree_level": "05"}, coefficient="degree_level[07]",
                            interval={"lower": 0.0}, groups=20)
    assert group_indicators(records, query, person_groups(hashes, 20)).sum() == 20
    below = query.model_copy(update={"interval": query.interval.model_copy(
        update={"lower": None, "upper": 0.0})})
    assert group_indicators(records, below, person_groups(hashes, 20)).sum() == 0
    rising = RegressionQuery(outcome="log_earnings", covariates=["degree_level"],
                             references={"degree_level": "05"}, coefficient="degree_level[07]",
                             trend=[{"first": 2010, "last": 2012, "interval": {"lower": 0.0}},
                                    {"first": 2013, "last": 2015, "interval": {"lower": 0.0}}],
                             groups=20)
    assert group_indicators(records, rising, person_groups(hashes, 20)).sum() == 20
    one_wrong = rising.model_copy(update={"trend": [rising.trend[0], rising.trend[1].model_copy(
        update={"interval": rising.trend[1].interval.model_copy(update={"lower": None,
                                                                         "upper": 0.0})})]})
    assert group_indicators(records, one_wrong, person_groups(hashes, 20)).sum() == 0
    assert ols_slope(np.array([1, 2, 3]), np.array([2.0, 4.0, 6.0])) == pytest.approx(2.0)


def test_a_computation_past_its_deadline_stops_before_any_noise():
    records = toy_records({2010 + k: 0.02 * k for k in range(6)})
    hashes = person_hashes(records.person_id, group_key(SEED))
    model = dict(outcome="log_earnings", covariates=["degree_level"],
                 coefficient="degree_level[07]", groups=20)
    for asked in (RegressionQuery(**model, interval={"lower": 0.0}), RegressionQuery(
            **model, trend=[{"first": 2010, "last": 2015, "interval": {"lower": 0.0}}])):
        with pytest.raises(QueryTimeout):
            noisy_count(records, hashes, asked, "0" * 64, SEED, time.monotonic() - 1)
        released, _ = noisy_count(records, hashes, asked, "0" * 64, SEED, time.monotonic() + 60)
        assert released == noisy_count(records, hashes, asked, "0" * 64, SEED)[0]


def test_one_graduate_changes_the_count_by_at_most_one(synthetic_dir):
    records = load_records(synthetic_dir, 2001, 2022)
    query = RegressionQuery(outcome="log_earnings", covariates=["degree_level", "grad_year"],
                            references={"degree_level": "05"}, coefficient="grad_year",
                            interval={"lower": 0.0}, subset={"years_after": [5]}, groups=50)
    hashes = person_hashes(records.person_id, group_key(SEED))
    full = group_indicators(records, query, person_groups(hashes, 50))
    rows = np.flatnonzero(selected_rows(records, query))
    for person in np.unique(records.person_id[rows])[:40:4]:
        keep = records.person_id != person
        without = type(records)(records.person_id[keep], {k: v[keep] for k, v in records.columns.items()},
                                records.earnings[keep], records.data_version)
        changed = group_indicators(without, query, person_groups(hashes[keep], 50))
        assert np.abs(changed - full).sum() <= 1


def test_the_released_count_is_the_true_count_plus_the_mechanism_layers_noise(synthetic_dir):
    records = load_records(synthetic_dir, 2001, 2022)
    hashes = person_hashes(records.person_id, group_key(SEED))
    query = RegressionQuery(outcome="log_earnings", covariates=["degree_level", "cip2"],
                            references={"degree_level": "05"}, coefficient="degree_level[07]",
                            interval={"lower": 0.0}, subset={"years_after": [5]}, epsilon="1/2")
    sha = query_sha256(query.canonical(records.data_version))
    true_count = int(group_indicators(records, query, person_groups(hashes, 50)).sum())
    released, entry = noisy_count(records, hashes, query, sha, SEED)
    noise = discrete_laplace_noise(SEED, measurement_id(sha), "1/2", (1,))[0]
    assert released == true_count + noise
    assert (entry.epsilon, entry.sensitivity, entry.product) == (0.5, 1, "verification")
    answer = verify(records, hashes, query, sha, SEED)
    assert answer.released_count == released                          # same query, same answer
    rows = np.flatnonzero(selected_rows(records, query))
    assert group_estimate(records, query, rows) > 0                   # master's earn more here


def test_queries_are_validated_and_their_canonical_form_ignores_order():
    base = dict(outcome="log_earnings", covariates=["degree_level", "grad_year"],
                coefficient="degree_level[07]", interval={"upper": -0.01})
    a = RegressionQuery(**base, epsilon="0.5")
    b = RegressionQuery(**{**base, "covariates": ["grad_year", "degree_level"]}, epsilon="1/2")
    assert query_sha256(a.canonical("v1")) == query_sha256(b.canonical("v1"))
    assert query_sha256(a.canonical("v1")) != query_sha256(a.canonical("v2"))  # data version
    for bad in [dict(base, coefficient="cip2[11]"), dict(base, trend=[]),
                {k: v for k, v in base.items() if k != "interval"},
                dict(base, interval={}), dict(base, epsilon="0"), dict(base, epsilon="11"),
                dict(base, epsilon="1/1001"), dict(base, epsilon="1e-99999999"),
                dict(base, epsilon="1e-400"), dict(base, epsilon="5e-324"),
                dict(base, epsilon=5e-324), dict(base, epsilon="1/0"), dict(base, epsilon="١"),
                dict(base, groups=1), dict(base, interval={"lower": 1, "upper": 0}),
                dict(base, coefficient="degree_level[7]"),                 # not a degree code
                dict(base, references={"degree_level": "99"})]:
        with pytest.raises(ValidationError):
            RegressionQuery(**bad)
