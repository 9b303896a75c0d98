"""The verification server's bounds: what one request may send and ask, how long it may take
and how often an analyst may ask. Privacy cost: none. Every bound is checked before any
charge, and on public values only (the query, the configuration's cohort years, the number of
records and of levels of each variable in the whole data), so a refusal says nothing about
the confidential subset a query selects.

The query's own bounds (epsilon, groups M) are in query.py, checked when the body is parsed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from pseo_das.tasks.verification.query import CATEGORICAL, NUMERIC, RegressionQuery
from pseo_das.tasks.verification.records import AnalysisRecords

MAX_BODY_BYTES = 64 * 1024          # a query is a few hundred bytes; larger bodies: HTTP 413
MAX_TERMS = 500                     # columns of the model (intercept, numeric, dummies)
MAX_GROUP_CELLS = 5_000_000         # rows of a group x terms: 40 MB of design matrix per fit
QUERY_SECONDS = 30.0                # answered or refused within (HTTP 503, nothing charged)
CONCURRENT_QUERIES = 2              # new measurements computed at once (the others wait)
RATE_LIMIT = "30/minute"            # authenticated requests per analyst (HTTP 429)


@dataclass(frozen=True)
class ServerLimits:
    """The operational limits (`pseo-das verify-server serve` options)."""
    query_seconds: float = QUERY_SECONDS
    concurrent_queries: int = CONCURRENT_QUERIES
    rate_limit: str = RATE_LIMIT
    max_body_bytes: int = MAX_BODY_BYTES


@dataclass(frozen=True)
class DataBounds:
    """What the server's data allow a query to touch, fixed when the server starts: the
    cohort years of the configuration, the number of records and each categorical
    variable's number of levels in the whole data."""
    first_year: int
    last_year: int
    records: int
    levels: dict[str, int]

    @classmethod
    def of(cls, records: AnalysisRecords, first_year: int, last_year: int) -> "DataBounds":
        return cls(first_year, last_year, len(records),
                   {v.value: len(pd.unique(records.columns[v.value])) for v in CATEGORICAL})

    def terms(self, query: RegressionQuery) -> int:
        """The most columns the query's model can have in any group."""
        return 1 + sum(1 if v in NUMERIC else max(self.levels[v.value] - 1, 0)
                       for v in query.covariates)

    def refusals(self, query: RegressionQuery) -> list[str]:
        """Why the query asks more than the server allows (empty: within the bounds)."""
        problems = [f"trend period {p.first}-{p.last} is outside the data's cohorts "
                    f"{self.first_year}-{self.last_year}" for p in query.trend or []
                    if p.first < self.first_year or p.last > self.last_year]
        terms = self.terms(query)
        if terms > MAX_TERMS:
            problems.append(f"the model has up to {terms} terms (covariates' levels in the "
                            f"data), more than the {MAX_TERMS} the server fits")
        rows = math.ceil(self.records / query.groups)
        if rows * terms > MAX_GROUP_CELLS:
            problems.append(f"a group's design matrix would be {rows:,} rows (of "
                            f"{self.records:,} records in {query.groups} groups) x {terms} terms, "
                            f"more than the {MAX_GROUP_CELLS:,} cells the server fits: ask with "
                            f"more groups or fewer covariates")
        return problems
