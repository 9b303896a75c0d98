"""The cell statistics (pseom_all.csv) as questions of the release plan: one question per
statistic, so that each population is measured once per question, the stored noisy values
are reused by every later release at zero epsilon, and the spending counts against the
privacy store's lifetime cap per population (docs/method/cell-statistics.md).
Privacy cost: none (bookkeeping).

A question holds everything that changes the stored answer: the statistic, the variant
(mos / mos-dp), the epsilon of the values and of the counts, the public bounds [L, U] of
one observation, the minimum count, the scope of chi (mos only: mos-dp's noise does not
depend on it), the earnings floor, the cohort definition and the constant dollars. A
different setting is a different question, measured anew. Its epsilon is the spend on
each population it covers: the values' epsilon plus the counts' (2 x mos.epsilon).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from pseo_das.config import ReleaseConfig
from pseo_das.epsilon import epsilon_text
from pseo_das.schemas.cpi import CPI_U_SERIES
from pseo_das.tasks.earnings.mos import MosVariant
from pseo_das.tasks.inputs.cell_moments import CELL_STATISTICS_CIP_LEVEL, CellStatistic, cell_statistics
from pseo_das.tasks.privacy.question import CIP_CODING, Question
from pseo_das.tasks.privacy.statement import (PrivacyStatement, geometric_statement,
                                              laplace_statement)

PRODUCT = "cell statistics (MOS)"
# The stored values of a measurement, one row per observable cell of its populations.
STORED_COLUMNS = ("noisy_count", "value", "chi", "published")
MECHANISMS = {
    MosVariant.MOS.value: "maximum observed sensitivity: value + Laplace(chi / (epsilon N)), "
                          "chi = max N x LS over the cells measured together (NOT formally DP); "
                          "count + two-sided geometric",
    MosVariant.MOS_DP.value: "mos-dp: sum of (x - L) + Laplace((U - L) / epsilon), count + "
                             "two-sided geometric (epsilon-DP)"}


def tabulation_id(statistic: CellStatistic, counts: bool = False) -> str:
    return f"mos.I.cip{CELL_STATISTICS_CIP_LEVEL}.{statistic.value}" + (".count" if counts else "")


def count_stream_id(measurement_id: str, statistic: CellStatistic) -> str:
    """The noise stream of a measurement's counts: its id with the counts' tabulation id
    (`mos.I.cipA.mean_y1.count@R/1` for the measurement `mos.I.cipA.mean_y1@R/1`)."""
    values = tabulation_id(statistic)
    if not measurement_id.startswith(values):
        raise ValueError(f"{measurement_id} is not a measurement of {values}")
    return tabulation_id(statistic, counts=True) + measurement_id[len(values):]


def statistic_domain(statistic: CellStatistic, lower: float, upper: float) -> tuple[float, float]:
    """The public domain of one observation: [lower, upper] for a mean, [lower - upper,
    upper - lower] for a graduate's growth y5 - y1."""
    return (lower - upper, upper - lower) if statistic.is_growth else (lower, upper)


@dataclass(frozen=True)
class CellStatisticsQuestion(Question):
    """A cell statistic's question: its mechanism is MOS or mos-dp, never an employer
    protection."""

    def as_dict(self, cip_coding: str = CIP_CODING) -> dict:
        return {**super().as_dict(cip_coding), "mechanism": MECHANISMS[self.parameters["variant"]]}

    def protection(self) -> None:
        return None

    def statements(self, measurement_id: str) -> tuple[PrivacyStatement, ...]:
        """The values' statement (continuous Laplace: under mos a scale taken from the data,
        NOT formal; under mos-dp calibrated to the public width U - L, formal) and the
        counts' (geometric), each at the values' epsilon (the question's is their sum)."""
        settings = StatisticSettings.of(self)
        lower, upper = statistic_domain(settings.statistic, settings.lower, settings.upper)
        values = laplace_statement(tabulation_id(settings.statistic), self.product,
                                   measurement_id, settings.epsilon,
                                   upper - lower if settings.formal else None, settings.formal)
        counts = geometric_statement(tabulation_id(settings.statistic, counts=True),
                                     self.product,
                                     count_stream_id(measurement_id, settings.statistic)
                                     if measurement_id else "", settings.epsilon, 1)
        return values, counts


@dataclass(frozen=True)
class StatisticSettings:
    """What a measurement of one statistic needs, read from its recorded question."""
    statistic: CellStatistic
    variant: MosVariant
    epsilon: Fraction           # of the values, and again of the counts
    lower: float                # the public bounds of one graduate's earnings
    upper: float
    min_count: int
    chi_scope: str              # "" for mos-dp (its noise does not depend on a chi)

    @classmethod
    def of(cls, question: Question) -> "StatisticSettings":
        p = question.parameters
        return cls(CellStatistic(p["statistic"]), MosVariant(p["variant"]),
                   Fraction(p["value_epsilon"]), float(p["lower"]), float(p["upper"]),
                   int(p["min_count"]), p.get("chi_scope", ""))

    @property
    def formal(self) -> bool:
        return self.variant == MosVariant.MOS_DP


def cell_statistics_questions(cfg: ReleaseConfig) -> list[CellStatisticsQuestion]:
    """The questions of the cell statistics a configuration publishes (none when the product
    is off), in publication order."""
    if not cfg.mos.enabled:
        return []
    settings = cfg.mos
    epsilon = settings.epsilon
    lower, upper = settings.bounds(cfg.earnings)
    cohorts = cfg.cells.cohort_definition()
    common = {"variant": settings.variant, "value_epsilon": epsilon_text(epsilon),
              "count_epsilon": epsilon_text(epsilon), "lower": lower, "upper": upper,
              "min_count": settings.min_count, "sample_floor": cfg.earnings.sample_floor,
              "cohorts": cohorts,
              "dollars": f"{cfg.earnings.dollar_year} dollars (CPI-U {CPI_U_SERIES} annual "
                         "averages)",
              "formal_guarantee": "yes" if settings.variant == MosVariant.MOS_DP else
              "no: the values use maximum observed sensitivity (chi published without noise); "
              "the counts are formal"}
    if settings.variant == MosVariant.MOS:
        common["chi_scope"] = settings.chi_scope
    return [CellStatisticsQuestion(tabulation_id(s), PRODUCT, CELL_STATISTICS_CIP_LEVEL,
                                   s.years_after, 2 * epsilon, len(STORED_COLUMNS),
                                   {"statistic": s.value, **common})
            for s in cell_statistics(cfg.cells.years_after)]
