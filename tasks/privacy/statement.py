"""The privacy statement of a measurement, and the release's guarantee derived from them.

A question of the release plan (tasks/privacy/question.py) states, before any data is read,
what each of its measurements will guarantee: the mechanism, the exact epsilon and delta,
the sensitivity the noise is calibrated to, the values per cell, whom it protects (the
graduates; the employers' alpha and notion where an employer-protecting mechanism is
used), whether the guarantee is formal and whether the sampler is exact. The mechanisms
(geometric.py, employer_side.py, laplace.py) draw only what a statement allows
(`check_calibration`) and build the ledger entry from it; the store readers rebuild the
same statement from the stored question. Every summary of a release (documents,
release_summary.json, MLflow, the CLI, the audit) is `release_guarantee` of its statements.
Privacy cost: none.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

import numpy as np

from pseo_das.epsilon import epsilon_text, exact_epsilon
from pseo_das.errors import PseoDasError
from pseo_das.tasks.privacy.establishment import (MECHANISM_NAMES, EmployerProtection,
                                                  FlowsMechanism, PrivacyNotion,
                                                  employer_epsilon)


class Mechanism(StrEnum):
    """The mechanisms that measure (draw noise and spend epsilon), by their ledger name."""
    GEOMETRIC = "two-sided geometric"
    LAPLACE = "Laplace (continuous)"
    LOG_LAPLACE = MECHANISM_NAMES[FlowsMechanism.LOG_LAPLACE]
    SMOOTH_GAMMA = MECHANISM_NAMES[FlowsMechanism.SMOOTH_GAMMA]
    SMOOTH_LAPLACE = MECHANISM_NAMES[FlowsMechanism.SMOOTH_LAPLACE]

    @classmethod
    def protecting_employers(cls, mechanism: FlowsMechanism) -> "Mechanism":
        return cls(MECHANISM_NAMES[mechanism])


class Sampler(StrEnum):
    """How a mechanism's noise is drawn."""
    EXACT = "exact"                    # integers only, unbounded support: no delta lost
    FLOATING_POINT = "floating-point"  # doubles: the guarantee up to floating point (Mironov 2012)


GRADUATE = "graduate (all of their records)"


class MeasurementRefused(PseoDasError, ValueError):
    """An array the mechanism is not calibrated for: its statement declares another
    mechanism, sensitivity or shape. Nothing is drawn."""


@dataclass(frozen=True)
class EmployerGuarantee:
    """What an employer-protecting mechanism gives the employers: (alpha, epsilon[, delta])
    employer-employee privacy in `notion` (Haney et al. 2017; establishment.py)."""
    mechanism: FlowsMechanism
    alpha: float
    notion: PrivacyNotion
    unbiased: bool = False     # Log-Laplace only: a variant of the sampler, not of the guarantee

    def worst_case_epsilon(self, epsilon: Fraction, graduate_cells: int) -> float:
        """The employers' worst case over `graduate_cells` graduate-attribute cells: epsilon
        (strong notion), graduate_cells x epsilon (weak)."""
        return employer_epsilon(self.notion, float(epsilon), graduate_cells)


@dataclass(frozen=True)
class PrivacyStatement:
    """What one measurement guarantees, stated before it is drawn."""
    tabulation_id: str
    product: str
    stream_id: str                  # the noise stream (measurement id): never the key
    mechanism: Mechanism
    epsilon: Fraction               # exact
    delta: Fraction                 # exact; 0 for a pure mechanism
    sensitivity: int | float | None  # declared; None: taken from the data (MOS chi)
    columns: int                    # values per cell the noise is calibrated for
    formal: bool                    # False: no formal DP guarantee (maximum observed sensitivity)
    unit: str = GRADUATE
    employer: EmployerGuarantee | None = None

    def __post_init__(self) -> None:
        if self.epsilon <= 0 or self.delta < 0 or self.delta >= 1:
            raise ValueError(f"{self.tabulation_id}: epsilon {epsilon_text(self.epsilon)} and "
                             f"delta {epsilon_text(self.delta)} are not a privacy guarantee")
        if self.formal and self.sensitivity is None:
            raise ValueError(f"{self.tabulation_id}: a formal guarantee declares its sensitivity")

    @property
    def sampler(self) -> Sampler:
        return Sampler.EXACT if self.mechanism is Mechanism.GEOMETRIC else Sampler.FLOATING_POINT

    @property
    def pure(self) -> bool:
        """Pure epsilon-DP: formal, and delta 0."""
        return self.formal and self.delta == 0

    def check_calibration(self, mechanism: Mechanism, values: np.ndarray,
                          sensitivity: int | float | None) -> None:
        """Refuse (MeasurementRefused, nothing drawn) an array `mechanism` is not calibrated
        for under this statement: a statement of another mechanism, a declared sensitivity
        other than the one the noise is calibrated to, or values that are not cells x the
        statement's columns."""
        if self.mechanism is not mechanism:
            raise MeasurementRefused(f"{self.stream_id}: the statement declares "
                                     f"{self.mechanism}, this mechanism is {mechanism}")
        if self.sensitivity != sensitivity:
            raise MeasurementRefused(
                f"{self.stream_id}: the statement declares sensitivity "
                f"{self.sensitivity}, but {mechanism} noise is calibrated to sensitivity "
                f"{sensitivity}: refused, nothing drawn")
        shape = np.shape(values)
        if len(shape) != 2 or shape[1] != self.columns:
            raise MeasurementRefused(
                f"{self.stream_id}: an array of shape {shape}, but the statement declares "
                f"cells x {self.columns} values: refused, nothing drawn")

    def employer_guarantee(self) -> EmployerGuarantee:
        """What it gives the employers; refused for a mechanism that does not protect them."""
        if self.employer is None:
            raise ValueError(f"{self.tabulation_id}: {self.mechanism} does not protect employers")
        return self.employer

    def protection(self) -> EmployerProtection:
        """The employer-protecting mechanism's parameters (for its sampler)."""
        employer = self.employer_guarantee()
        return EmployerProtection(employer.mechanism, employer.alpha, float(self.epsilon),
                                  float(self.delta), employer.unbiased)


def exact_delta(value: float | str | Fraction) -> Fraction:
    """A delta as the exact decimal it was written as (1e-3 -> 1/1000)."""
    return Fraction(0) if value in (0, "0", "") else exact_epsilon(value)


def geometric_statement(tabulation_id: str, product: str, stream_id: str,
                        epsilon: float | str | Fraction, columns: int,
                        sensitivity: int = 1) -> PrivacyStatement:
    """Counts with two-sided geometric noise: pure epsilon-DP at `sensitivity` (a person in
    at most that many counts, each by one: the contribution bound), exact."""
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, int) or sensitivity < 1:
        raise ValueError(f"{tabulation_id}: the geometric counts' sensitivity is a whole "
                         f"number of at least 1, not {sensitivity!r}")
    return PrivacyStatement(tabulation_id, product, stream_id, Mechanism.GEOMETRIC,
                            exact_epsilon(epsilon), Fraction(0), sensitivity, columns, True)


def employer_statement(tabulation_id: str, product: str, stream_id: str,
                       protection: EmployerProtection, columns: int,
                       notion: PrivacyNotion) -> PrivacyStatement:
    """Counts by an employer-protecting mechanism: (epsilon, delta) for the graduates at
    sensitivity 1, (alpha, epsilon[, delta]) for the employers in `notion`; floating point.
    Parameters the mechanism cannot give are refused (InfeasibleParameters, with the reason)."""
    protection.check()
    return PrivacyStatement(
        tabulation_id, product, stream_id, Mechanism.protecting_employers(protection.mechanism),
        exact_epsilon(protection.epsilon), exact_delta(protection.delta), 1, columns, True,
        employer=EmployerGuarantee(protection.mechanism, protection.alpha, notion,
                                   protection.unbiased))


def laplace_statement(tabulation_id: str, product: str, stream_id: str,
                      epsilon: float | str | Fraction, sensitivity: float | None,
                      formal: bool) -> PrivacyStatement:
    """Real values with continuous Laplace noise (one value per cell); `sensitivity` None
    and `formal` False for maximum observed sensitivity (a scale taken from the data)."""
    return PrivacyStatement(tabulation_id, product, stream_id, Mechanism.LAPLACE,
                            exact_epsilon(epsilon), Fraction(0), sensitivity, 1, formal)


@dataclass(frozen=True)
class ReleaseGuarantee:
    """What a release's measurements guarantee together (sequential composition: epsilons
    and deltas add up), the formal and the non-formal parts apart."""
    formal_epsilon: Fraction
    formal_delta: Fraction
    non_formal_epsilon: Fraction
    non_formal_delta: Fraction
    exact: tuple[str, ...]            # tabulations whose noise is sampled exactly
    floating_point: tuple[str, ...]   # tabulations with floating-point samplers, and theirs
    floating_point_mechanisms: tuple[str, ...]
    non_formal: tuple[str, ...]       # tabulations without a formal guarantee
    employer_products: tuple[str, ...]   # products measured with employer protection
    graduate_products: tuple[str, ...]   # products measured for graduates only
    employers: tuple[str, ...] = field(default=())   # per protection: "alpha .., notion .."

    @property
    def epsilon(self) -> Fraction:
        return self.formal_epsilon + self.non_formal_epsilon

    @property
    def delta(self) -> Fraction:
        return self.formal_delta + self.non_formal_delta

    @property
    def pure(self) -> bool:
        """Pure epsilon-DP: every measurement formal and with delta 0."""
        return not self.non_formal and self.formal_delta == 0

    @property
    def all_exact(self) -> bool:
        return not self.floating_point

    def graduates_sentence(self) -> str:
        """The graduates' guarantee in one sentence."""
        if self.pure:
            return (f"pure epsilon-DP for each graduate: epsilon {epsilon_text(self.epsilon)} "
                    "in all, every measurement formal, delta 0")
        formal = (f"formal ({epsilon_text(self.formal_epsilon)}, "
                  f"{epsilon_text(self.formal_delta)})-DP" if self.formal_delta
                  else f"formal pure epsilon-DP {epsilon_text(self.formal_epsilon)}")
        text = (f"(epsilon, delta) = ({epsilon_text(self.epsilon)}, {epsilon_text(self.delta)}) "
                f"for each graduate, NOT pure epsilon-DP: {formal}")
        if self.non_formal:
            text += (f", plus epsilon {epsilon_text(self.non_formal_epsilon)} spent by maximum "
                     f"observed sensitivity (MOS: {', '.join(self.non_formal)}), which is NOT a "
                     "formal differential-privacy guarantee (its scale chi is published without "
                     "noise)")
        return text

    def sampling_sentence(self) -> str:
        """Which measurements are sampled exactly."""
        if self.all_exact:
            return ("every measurement's noise is sampled exactly (integer arithmetic, "
                    "unbounded support): no delta is lost to sampling")
        exact = (f"the two-sided geometric measurements ({len(self.exact)}) are sampled exactly "
                 "(integer arithmetic, unbounded support: no delta lost to sampling); "
                 if self.exact else "")
        return (exact + f"{len(self.floating_point)} measurement(s) use floating-point samplers "
                f"({', '.join(self.floating_point_mechanisms)}), whose guarantee holds up to "
                "the floating-point approximation of their noise (Mironov 2012), not exactly")

    def employers_sentence(self, files: Mapping[str, Iterable[str]]) -> str:
        """The employers' guarantee and the files it covers (`files`: product -> files)."""
        def named(products: tuple[str, ...]) -> str:
            return ", ".join(dict.fromkeys(f for p in products for f in files.get(p, (p,))))
        if not self.employer_products:
            return ("no employer protection: every file is measured for the graduates only "
                    f"({named(self.graduate_products)})")
        return (f"employers: {'; '.join(self.employers)}, covering {named(self.employer_products)}"
                f"; {named(self.graduate_products)} are measured for the graduates only and "
                "carry no employer guarantee")

    def summary(self, files: Mapping[str, Iterable[str]]) -> dict:
        """release_summary.json's `guarantee`: exact values as text, and the sentences."""
        return {"pure_epsilon_dp": self.pure, "epsilon": epsilon_text(self.epsilon),
                "delta": epsilon_text(self.delta),
                "formal_epsilon": epsilon_text(self.formal_epsilon),
                "formal_delta": epsilon_text(self.formal_delta),
                "non_formal_epsilon": epsilon_text(self.non_formal_epsilon),
                "sampled_exactly": self.all_exact,
                "floating_point_samplers": list(self.floating_point),
                "graduates": self.graduates_sentence(), "sampling": self.sampling_sentence(),
                "employers": self.employers_sentence(files)}


def release_guarantee(statements: Iterable[PrivacyStatement]) -> ReleaseGuarantee:
    """The guarantee of measurements that compose sequentially (each may touch the same
    graduate): epsilons and deltas add up, formal and non-formal apart. The one function
    every summary of a release is derived from."""
    statements = list(statements)
    formal = [s for s in statements if s.formal]
    other = [s for s in statements if not s.formal]
    floating = [s for s in statements if s.sampler is Sampler.FLOATING_POINT]
    employers = [s for s in statements if s.employer is not None]
    guarantees = [s.employer for s in statements if s.employer is not None]
    return ReleaseGuarantee(
        sum((s.epsilon for s in formal), Fraction(0)), sum((s.delta for s in formal), Fraction(0)),
        sum((s.epsilon for s in other), Fraction(0)), sum((s.delta for s in other), Fraction(0)),
        tuple(s.tabulation_id for s in statements if s.sampler is Sampler.EXACT),
        tuple(s.tabulation_id for s in floating),
        tuple(dict.fromkeys(str(s.mechanism) for s in floating)),
        tuple(s.tabulation_id for s in other),
        tuple(dict.fromkeys(s.product for s in employers)),
        tuple(dict.fromkeys(s.product for s in statements if s.employer is None
                            and s.product not in {e.product for e in employers})),
        tuple(dict.fromkeys(
            f"{e.mechanism.value} (alpha {e.alpha:g}, {e.notion.value} notion)"
            for e in guarantees)))
