"""A verification query and its canonical form. Privacy cost: none.

A query names a linear regression on the graduates' outcome records (one row per graduate
and years after graduation, with the graduate's attributes), a coefficient, and either an
interval C for it (section 3.1) or periods of graduation cohorts with an interval for the
slope of the coefficient over each (section 3.2, one query, one epsilon). The canonical
form (sorted keys and lists, exact epsilon, the data version) identifies the query: the same
canonical form always gets the same stored answer at no new cost.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from enum import Enum
from fractions import Fraction
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pseo_das.epsilon import MIN_EPSILON, epsilon_text, exact_epsilon
from pseo_das.schemas.codes import DEGREE_LEVELS, NAICS_SECTORS, STATE_FIPS

DEFAULT_GROUPS = 50
MAX_GROUPS = 1000                      # M, the groups a query splits the graduates into
MAX_QUERY_EPSILON = Fraction(10)       # the least is the releases' MIN_EPSILON (0.001)
# An epsilon is written as a decimal (at most 20 digits each side of the point, an exponent
# of at most 3 digits) or a fraction p/q (at most 20 digits each): its exact value is then
# computed in microseconds. "1e-99999999" would ask for a 100-million-digit integer first.
EPSILON_TEXT = re.compile(r"([0-9]{1,20}(\.[0-9]{0,20})?|\.[0-9]{1,20})([eE][+-]?[0-9]{1,3})?"
                          r"|[0-9]{1,20}/[0-9]{1,20}")


class Outcome(str, Enum):
    LOG_EARNINGS = "log_earnings"   # ln(earnings), records with earnings > 0
    EARNINGS = "earnings"           # dollars, records with earnings (a job)
    EMPLOYED = "employed"           # 1 when the record has earnings > 0, else 0


class Variable(str, Enum):
    DEGREE_LEVEL = "degree_level"
    INSTITUTION = "institution"
    INST_STATE = "inst_state"
    CIP2 = "cip2"                   # the 2-digit CIP family of cipcode
    CIP4 = "cip4"                   # the 4-digit CIP series of cipcode
    EMP_STATE = "emp_state"
    INDUSTRY = "industry"
    GRAD_YEAR = "grad_year"
    YEARS_AFTER = "years_after"


CATEGORICAL = {Variable.DEGREE_LEVEL, Variable.INSTITUTION, Variable.INST_STATE, Variable.CIP2,
               Variable.CIP4, Variable.EMP_STATE, Variable.INDUSTRY}
NUMERIC = {Variable.GRAD_YEAR, Variable.YEARS_AFTER}
# The public code lists a level of these variables must come from.
CODE_LISTS = {Variable.DEGREE_LEVEL: tuple(DEGREE_LEVELS), Variable.INDUSTRY: NAICS_SECTORS,
              Variable.INST_STATE: STATE_FIPS, Variable.EMP_STATE: STATE_FIPS}
INTERCEPT = "intercept"


class Interval(BaseModel):
    """A closed interval; a missing bound is infinite: (-inf, upper], [lower, upper],
    [lower, inf)."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    lower: float | None = None
    upper: float | None = None

    @model_validator(mode="after")
    def _bounded(self) -> "Interval":
        if self.lower is None and self.upper is None:
            raise ValueError("an interval needs a lower or an upper bound (or both)")
        for bound in (self.lower, self.upper):
            if bound is not None and not math.isfinite(bound):
                raise ValueError("interval bounds must be finite numbers (leave one out for "
                                 "an infinite side)")
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ValueError(f"interval lower bound {self.lower} is above its upper bound "
                             f"{self.upper}")
        return self

    def contains(self, values):
        import numpy as np
        values = np.asarray(values, dtype=float)
        inside = np.isfinite(values)
        if self.lower is not None:
            inside &= values >= self.lower
        if self.upper is not None:
            inside &= values <= self.upper
        return inside

    def text(self) -> str:
        low = "(-inf" if self.lower is None else f"[{self.lower!r}"
        high = "inf)" if self.upper is None else f"{self.upper!r}]"
        return f"{low}, {high}"


class TrendPeriod(BaseModel):
    """Graduation cohorts first..last and the interval for the OLS slope of the
    coefficient on the cohort year over them."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    first: int
    last: int
    interval: Interval

    @model_validator(mode="after")
    def _two_years(self) -> "TrendPeriod":
        if self.last <= self.first:
            raise ValueError(f"trend period {self.first}-{self.last}: a slope needs at least "
                             "two cohorts (last > first)")
        return self


Year = Annotated[int, Field(ge=1000, le=9999)]         # a calendar year
YearsAfter = Annotated[int, Field(ge=0, le=100)]


class Subset(BaseModel):
    """Which outcome records enter the regression: each listed variable's allowed values
    (all when absent) and a range of graduation years."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    years_after: list[YearsAfter] | None = None
    degree_level: list[str] | None = None
    institution: list[str] | None = None
    inst_state: list[str] | None = None
    cip2: list[str] | None = None
    industry: list[str] | None = None
    grad_year_min: Year | None = None
    grad_year_max: Year | None = None


class RegressionQuery(BaseModel):
    """One verification query (see the module doc). `references` names the reference level
    of a categorical covariate (default: the smallest level present in each group)."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    outcome: Outcome
    covariates: list[Variable]
    coefficient: str
    interval: Interval | None = None
    trend: list[TrendPeriod] | None = None
    subset: Subset = Field(default_factory=Subset)
    references: dict[Variable, str] = Field(default_factory=dict)
    groups: int = Field(DEFAULT_GROUPS, ge=2, le=MAX_GROUPS)
    epsilon: str = "1"

    @field_validator("epsilon", mode="before")
    @classmethod
    def _exact(cls, value) -> str:
        text = str(value).strip() if isinstance(value, (str, int, float)) and \
            not isinstance(value, bool) else ""
        if not EPSILON_TEXT.fullmatch(text):
            raise ValueError(f"epsilon {str(value)[:40]!r} is not an exact number written as a "
                             "decimal or a fraction of at most 20 digits each (e.g. 1, 0.5, 1/3)")
        try:
            exact = exact_epsilon(text)
        except ZeroDivisionError as exc:
            raise ValueError(f"epsilon {text!r} divides by zero") from exc
        if not MIN_EPSILON <= exact <= MAX_QUERY_EPSILON:
            raise ValueError(f"epsilon {text!r} must be at least "
                             f"{epsilon_text(MIN_EPSILON)} and at most "
                             f"{epsilon_text(MAX_QUERY_EPSILON)}")
        return epsilon_text(exact)

    @model_validator(mode="after")
    def _consistent(self) -> "RegressionQuery":
        if len(set(self.covariates)) != len(self.covariates):
            raise ValueError("a covariate is listed twice")
        if (self.interval is None) == (self.trend is None):
            raise ValueError("give either an interval for the coefficient or trend periods, "
                             "not both and not neither")
        if self.trend is not None:
            if Variable.GRAD_YEAR in self.covariates:
                raise ValueError("a trend query fits the model per graduation cohort: "
                                 "grad_year cannot be a covariate")
            spans = sorted((p.first, p.last) for p in self.trend)
            if any(a[1] >= b[0] for a, b in zip(spans, spans[1:])):
                raise ValueError("trend periods overlap")
        for variable in self.references:
            if variable not in self.covariates or variable not in CATEGORICAL:
                raise ValueError(f"references: {variable.value} is not a categorical covariate")
        levels = list(self.references.items())
        if "[" in self.coefficient:
            variable, _, level = self.coefficient.rstrip("]").partition("[")
            if variable in {v.value for v in CODE_LISTS}:
                levels.append((Variable(variable), level))
        for variable, level in levels:
            if variable in CODE_LISTS and level not in CODE_LISTS[variable]:
                raise ValueError(f"{variable.value} level {level!r} is not in its code list "
                                 f"({', '.join(CODE_LISTS[variable])})")
        names = self.coefficient_names()
        if not self._names_coefficient(names):
            raise ValueError(f"coefficient {self.coefficient!r} is not a term of the model; "
                             f"terms: intercept, {', '.join(names)} (a categorical covariate's "
                             "level is written variable[level], e.g. degree_level[07])")
        return self

    def coefficient_names(self) -> list[str]:
        return [v.value if v in NUMERIC else f"{v.value}[LEVEL]" for v in self.covariates]

    def _names_coefficient(self, names: list[str]) -> bool:
        if self.coefficient == INTERCEPT or self.coefficient in {v.value for v in self.covariates
                                                                 if v in NUMERIC}:
            return True
        if "[" in self.coefficient and self.coefficient.endswith("]"):
            variable, level = self.coefficient[:-1].split("[", 1)
            return level != "" and variable in {v.value for v in self.covariates if v in CATEGORICAL}
        return False

    @property
    def exact_epsilon(self) -> Fraction:
        return exact_epsilon(self.epsilon)

    def canonical(self, data_version: str) -> dict:
        """The canonical form: everything that decides the answer, in one order."""
        body = self.model_dump(mode="json", exclude_none=True)
        subset = {k: sorted(v) if isinstance(v, list) else v for k, v in body["subset"].items()}
        body["subset"] = subset
        body["covariates"] = sorted(body["covariates"])
        if "trend" in body:
            body["trend"] = sorted(body["trend"], key=lambda p: (p["first"], p["last"]))
        return {"kind": "trend" if self.trend else "coefficient", "data_version": data_version,
                "method": "subsample-and-aggregate count + two-sided geometric noise (v1)",
                **body}


def canonical_text(canonical: dict) -> str:
    return json.dumps(canonical, sort_keys=True, separators=(",", ":"))


def query_sha256(canonical: dict) -> str:
    return hashlib.sha256(canonical_text(canonical).encode()).hexdigest()
