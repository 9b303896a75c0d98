"""Earnings in constant dollars (technical appendix A.2; SPEC "Dollars"). Privacy cost:
none (a public, per-year rescaling of each record before any tabulation).

Each outcome's annual earnings are for calendar year grad_year + years_after; they are
deflated to the dollars of `dollar_year` (the year of the floor and the bins, 2016) with the
CPI-U annual averages: earnings x CPI(dollar_year) / CPI(earnings year). Published
percentiles are converted from those dollars to the publication year's by the public
factor CPI(publication year) / CPI(dollar_year), as post-processing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from pseo_das.tasks import progress, release_task
from pseo_das.tasks.inputs.cpi import ConsumerPrices
from pseo_das.tasks.inputs.ingest import ValidatedInputs


@dataclass(frozen=True)
class DollarYears:
    """The two dollar years of a release and the CPI-U values that link them (exact text,
    as published by BLS), kept in the publication record."""
    dollar_year: int
    publication_year: int
    cpi: dict[str, str]           # year -> CPI-U annual average

    @property
    def factor(self) -> Fraction:
        """Publication-year dollars per dollar of `dollar_year`, exactly."""
        return Fraction(self.cpi[str(self.publication_year)]) / \
            Fraction(self.cpi[str(self.dollar_year)])

    def as_dict(self) -> dict:
        return {"dollar_year": self.dollar_year, "publication_year": self.publication_year,
                "cpi": dict(self.cpi)}


def dollar_years(cpi: ConsumerPrices, dollar_year: int, publication_year: int) -> DollarYears:
    return DollarYears(dollar_year, publication_year,
                       {str(y): str(cpi.value(y)) for y in sorted({dollar_year, publication_year})})


def earnings_years(inputs: ValidatedInputs) -> np.ndarray:
    """The calendar year of each outcome's earnings: its graduate's grad_year + years_after."""
    grad_year = inputs.graduates["grad_year"].to_numpy(dtype=np.int64)[inputs.graduate_row]
    return grad_year + inputs.outcomes["years_after"].to_numpy(dtype=np.int64)


def distinct_years(year: np.ndarray) -> np.ndarray:
    """The distinct calendar years present, sorted (counted over their range: no sort)."""
    if len(year) == 0:
        return np.zeros(0, np.int64)
    first = int(year.min())
    return first + np.flatnonzero(np.bincount(year - first))


def deflated(earnings: np.ndarray, year: np.ndarray, cpi: ConsumerPrices,
             dollar_year: int) -> np.ndarray:
    """Earnings of calendar years `year` in dollars of `dollar_year` (NaN stays NaN).
    Years the CPI file lacks are refused (InputValidationError)."""
    present = distinct_years(year)
    cpi.require(list(present) + [dollar_year])
    base = float(cpi.value(dollar_year))
    factor_by_year = np.zeros(int(present.max()) + 1)
    factor_by_year[present] = [base / float(cpi.value(int(y))) for y in present]
    return earnings * factor_by_year[year]


@release_task("deflate earnings to constant dollars")
def in_constant_dollars(inputs: ValidatedInputs, cpi: ConsumerPrices,
                        dollar_year: int) -> ValidatedInputs:
    """The inputs with every outcome's earnings in dollars of `dollar_year` (missing
    earnings stay missing). Years the CPI file lacks are refused before any noise."""
    started = time.perf_counter()
    year = earnings_years(inputs)
    if len(year) == 0:
        return inputs
    present = np.unique(year)
    earnings = inputs.outcomes["earnings"].to_numpy(dtype=np.float64, na_value=np.nan)
    outcomes = inputs.outcomes.assign(earnings=deflated(earnings, year, cpi, dollar_year))
    progress(f"earnings deflated to {dollar_year} dollars with the CPI-U annual averages of "
             f"{present.min()}-{present.max()} ({time.perf_counter() - started:.1f} s)")
    return replace(inputs, outcomes=outcomes)
