"""Ordinary least squares in each group, and each group's indicator W_l (Barrientos et al.
2017, sections 3.1 and 3.2). Privacy cost: none by themselves; the indicators are
confidential and leave the server only as a noisy count (measure.py).

Design per group, from the group's own records only (so one graduate's records change one
group's indicator at most): an intercept; each numeric covariate as it is; for each
categorical covariate, one dummy per level present in the group except the reference level
(the query's, else the smallest level present in the group). A coefficient that the
group's data do not identify (its level absent or the reference, or its column in the span
of the others) makes that group's indicator 0: such groups count as "not in the interval".
"""
from __future__ import annotations

import time

import numpy as np
from threadpoolctl import threadpool_limits

from pseo_das.errors import PseoDasError
from pseo_das.tasks.verification.query import (INTERCEPT, NUMERIC, Outcome,
                                               RegressionQuery, Variable)
from pseo_das.tasks.verification.records import AnalysisRecords

NOT_ESTIMABLE = float("nan")


class QueryTimeout(PseoDasError, TimeoutError):
    """The query's time limit passed before its indicators were computed."""


def check_deadline(deadline: float | None) -> None:
    """Stop a computation whose time limit (a time.monotonic() value) has passed."""
    if deadline is not None and time.monotonic() > deadline:
        raise QueryTimeout("the query's time limit passed")


def selected_rows(records: AnalysisRecords, query: RegressionQuery) -> np.ndarray:
    """Boolean mask of the records in the query's subset (and with a defined outcome)."""
    keep = np.ones(len(records), dtype=bool)
    subset = query.subset
    for name in ("years_after", "degree_level", "institution", "inst_state", "cip2", "industry"):
        allowed = getattr(subset, name)
        if allowed is not None:
            column = records.columns[name]
            keep &= np.isin(column, np.array(allowed, dtype=column.dtype))
    year = records.columns[Variable.GRAD_YEAR.value]
    if subset.grad_year_min is not None:
        keep &= year >= subset.grad_year_min
    if subset.grad_year_max is not None:
        keep &= year <= subset.grad_year_max
    if query.outcome == Outcome.LOG_EARNINGS:
        keep &= records.earnings > 0
    elif query.outcome == Outcome.EARNINGS:
        keep &= np.isfinite(records.earnings)
    return keep


def outcome_values(records: AnalysisRecords, query: RegressionQuery, rows: np.ndarray) -> np.ndarray:
    earnings = records.earnings[rows]
    if query.outcome == Outcome.LOG_EARNINGS:
        return np.log(earnings)
    if query.outcome == Outcome.EARNINGS:
        return earnings
    return (np.nan_to_num(earnings, nan=0.0) > 0).astype(float)


def design(records: AnalysisRecords, query: RegressionQuery, rows: np.ndarray
           ) -> tuple[np.ndarray, list[str]]:
    """The design matrix of the records `rows` (indices) and its column names."""
    columns, names = [np.ones(len(rows))], [INTERCEPT]
    for variable in query.covariates:
        values = records.columns[variable.value][rows]
        if variable in NUMERIC:
            columns.append(values.astype(float))
            names.append(variable.value)
            continue
        levels = np.unique(values)
        reference = query.references.get(variable)
        if reference is None and len(levels):
            reference = levels[0]
        for level in levels:
            if level != reference:
                columns.append((values == level).astype(float))
                names.append(f"{variable.value}[{level}]")
    return np.column_stack(columns), names


def least_squares_coefficient(x: np.ndarray, y: np.ndarray, column: int) -> float:
    """The OLS estimate of coefficient `column`, or NaN when the data do not identify it
    (its unit vector is not in the row space of x). Minimum-norm solution by SVD."""
    n, p = x.shape
    if n == 0:
        return NOT_ESTIMABLE
    if n > p:   # x = QR, then the SVD of the small R: the same singular values and vectors
        q, r = np.linalg.qr(x)
        x, y = r, q.T @ y
    u, singular, vt = np.linalg.svd(x, full_matrices=False)
    tolerance = singular.max(initial=0.0) * max(n, p) * np.finfo(float).eps
    kept = singular > tolerance
    if abs(1.0 - float((vt[kept, column] ** 2).sum())) > 1e-8:
        # e_j is in the row space iff its projection on the kept right singular vectors is itself
        return NOT_ESTIMABLE
    beta_j = vt[kept, column] @ ((u[:, kept].T @ y) / singular[kept])
    return float(beta_j)


def group_estimate(records: AnalysisRecords, query: RegressionQuery, rows: np.ndarray) -> float:
    """The coefficient's estimate on the records `rows` (NaN when not identified)."""
    if len(rows) == 0:
        return NOT_ESTIMABLE
    x, names = design(records, query, rows)
    if query.coefficient not in names:
        return NOT_ESTIMABLE
    y = outcome_values(records, query, rows)
    return least_squares_coefficient(x, y, names.index(query.coefficient))


def ols_slope(t: np.ndarray, values: np.ndarray) -> float:
    """The slope of the OLS line through (t, values); NaN with fewer than two points."""
    if len(t) < 2 or np.ptp(t) == 0:
        return NOT_ESTIMABLE
    t = t.astype(float) - t.mean()
    return float((t * (values - values.mean())).sum() / (t * t).sum())


def group_trend_slopes(records: AnalysisRecords, query: RegressionQuery,
                       rows: np.ndarray, deadline: float | None = None) -> list[float]:
    """For each trend period: the slope over its cohorts of the coefficient estimated per
    cohort on the records `rows` (cohorts whose coefficient is not identified are left out)."""
    years = records.columns[Variable.GRAD_YEAR.value][rows]
    slopes = []
    for period in query.trend:
        points = []
        for year in range(period.first, period.last + 1):
            check_deadline(deadline)
            estimate = group_estimate(records, query, rows[years == year])
            if np.isfinite(estimate):
                points.append((year, estimate))
        t, b = (np.array(v, dtype=float) for v in zip(*points)) if points else (np.array([]), np.array([]))
        slopes.append(ols_slope(t, b))
    return slopes


def group_indicators(records: AnalysisRecords, query: RegressionQuery,
                     groups_of_records: np.ndarray, deadline: float | None = None) -> np.ndarray:
    """W_l for l = 0..M-1: 1 when group l's estimate lies in the interval (coefficient
    query) or every period's slope lies in its interval (trend query), else 0.
    Confidential: only their noisy sum may leave the server. QueryTimeout once `deadline`
    (time.monotonic()) has passed, checked before each fit."""
    mask = selected_rows(records, query)
    index = np.flatnonzero(mask)
    group = groups_of_records[index]
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(query.groups + 1))
    indicators = np.zeros(query.groups, dtype=np.int64)
    with threadpool_limits(1):   # many small fits: a multi-threaded BLAS only contends
        for g in range(query.groups):
            check_deadline(deadline)
            indicators[g] = _indicator(records, query, index[order[bounds[g]:bounds[g + 1]]],
                                       deadline)
    return indicators


def _indicator(records: AnalysisRecords, query: RegressionQuery, rows: np.ndarray,
               deadline: float | None) -> int:
    if query.trend is None:
        return int(query.interval.contains([group_estimate(records, query, rows)])[0])
    slopes = group_trend_slopes(records, query, rows, deadline)
    return int(all(bool(p.interval.contains([s])[0]) for p, s in zip(query.trend, slopes)))

