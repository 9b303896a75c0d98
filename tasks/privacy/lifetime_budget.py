"""The lifetime budget's unit is the graduate: each measurement is charged to *atoms*,
institution x degree level x graduation year, which no configuration can regroup (a
graduate is in exactly one atom, whatever the cohort windows, first cohort year, CIP levels
or bins of a release). A measurement of a population (institution x degree level x cohort
window) charges its epsilon and delta to every graduation year of the window its question
recorded; the lifetime cap is checked on atoms, so a release that realigns the cohorts
(new windows over graduates already measured) is charged where its windows overlap the
old ones. Reuse stays on questions and populations (tasks/measurements/release_plan.py).
Privacy cost: none (bookkeeping). All sums and maxima are exact.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

from pseo_das.errors import PseoDasError
from pseo_das.schemas.cells import POPULATION_KEYS

ATOM_KEYS = ["institution", "degree_level", "grad_year"]
POPULATION_ATOM_KEYS = POPULATION_KEYS + ["grad_year"]   # an atom and the population it is of
SPENT = (("epsilon", ("before", "this_release", "after")),
         ("delta", ("delta_before", "delta_this_release", "delta_after")))
SPENT_COLUMNS = [column for _, names in SPENT for column in names]


class CohortDefinitionMissing(PseoDasError, ValueError):
    """A question that records no cohort definition: its atoms cannot be named."""


def cohort_years(parameters: dict, degree_level: str) -> int:
    """The length of the cohort windows of `degree_level` under the cohort definition a
    question recorded (its `cohorts` parameter)."""
    try:
        cohorts = parameters["cohorts"]
        years = cohorts.get("cohort_years_by_degree", {}).get(
            str(degree_level), cohorts["default_cohort_years"])
    except (KeyError, AttributeError, TypeError) as exc:
        raise CohortDefinitionMissing(f"the question records no cohort definition "
                                      f"(cohorts.default_cohort_years): {exc}") from exc
    if not isinstance(years, int) or not 1 <= years <= 10:
        raise CohortDefinitionMissing(f"the question records cohort windows of {years!r} years")
    return years


def atoms(spends: pd.DataFrame) -> pd.DataFrame:
    """Each row of `spends` (POPULATION_KEYS, cohort_years, anything else) once per
    graduation year of its population's window (ATOM_KEYS added; row order kept)."""
    windows = spends["cohort_years"].to_numpy(dtype=np.int64)
    repeated = spends.iloc[np.repeat(np.arange(len(spends)), windows)].reset_index(drop=True)
    starts = np.repeat(np.cumsum(windows) - windows, windows)
    repeated["grad_year"] = (repeated["grad_cohort"].to_numpy(dtype=np.int64)
                             + np.arange(len(repeated), dtype=np.int64) - starts)
    return repeated


class ExactScale:
    """Exact fractions as integers over one common denominator, so that they are summed and
    compared as int64 (or as Python integers when int64 could overflow)."""

    def __init__(self, values: Iterable[Fraction]):
        self.denominator = math.lcm(1, *{Fraction(v).denominator for v in values})

    def scaled(self, column: pd.Series) -> pd.Series:
        codes, distinct = pd.factorize(column, sort=False)
        numerators = [int(Fraction(v) * self.denominator) for v in distinct]
        if numerators and max(map(abs, numerators)) * max(len(column), 1) >= 2 ** 62:
            table = np.array(numerators, dtype=object)       # exact, slower
        else:
            table = np.array(numerators, dtype=np.int64)
        return pd.Series(table[codes] if len(codes) else table[:0], index=column.index)

    def fraction(self, column: pd.Series) -> pd.Series:
        return column.map(lambda n: Fraction(int(n), self.denominator))


def atom_spends(spends: pd.DataFrame, scale: ExactScale, names: tuple[str, str]
                ) -> pd.DataFrame:
    """Per atom: the scaled sums of epsilon and delta of `spends` (named `names`)."""
    expanded = atoms(spends)
    summed = pd.DataFrame({key: expanded[key] for key in ATOM_KEYS})
    for (value, _), name in zip(SPENT, names):
        summed[name] = scale.scaled(expanded[value])
    return summed.groupby(ATOM_KEYS, sort=False).sum().reset_index()


@dataclass(frozen=True)
class LifetimeBudget:
    """The lifetime budget of a plan's atoms: epsilon and delta spent before a release, in
    it and after, per atom (the SPENT columns, integers over `scale`'s denominator)."""
    atoms: pd.DataFrame            # POPULATION_ATOM_KEYS + SPENT columns (scaled)
    scale: ExactScale

    def _exact(self, table: pd.DataFrame) -> pd.DataFrame:
        exact = table.copy()
        for column in SPENT_COLUMNS:
            exact[column] = self.scale.fraction(table[column])
        return exact

    def populations(self) -> pd.DataFrame:
        """Per population (sorted): the largest figures of its atoms (its most charged
        graduation year). When every atom of a population carries the same spends (a store
        measured under one cohort definition), these are the population's own sums."""
        if self.atoms.empty:
            return pd.DataFrame(columns=POPULATION_KEYS + SPENT_COLUMNS)
        largest = self.atoms.groupby(POPULATION_KEYS, sort=True)[SPENT_COLUMNS].max()
        return self._exact(largest.reset_index()[POPULATION_KEYS + SPENT_COLUMNS])

    def atoms_over(self, cap: Fraction, column: str = "after") -> pd.DataFrame:
        """The atoms whose lifetime epsilon (`column` "delta_after": delta) after the release
        exceeds `cap` (exact)."""
        limit = cap * self.scale.denominator       # compared exactly: after > cap
        over = self.atoms[self.atoms[column].map(lambda n: n > limit).to_numpy(dtype=bool)]
        return self._exact(over.reset_index(drop=True))


def lifetime_budget(population_atoms: pd.DataFrame, before: pd.DataFrame | None,
                    this: pd.DataFrame | None) -> LifetimeBudget:
    """The lifetime budget of the atoms of `population_atoms` (POPULATION_ATOM_KEYS)
    from the spends before a release and in it (POPULATION_KEYS, cohort_years, epsilon,
    delta)."""
    frames = [f for f in (before, this) if f is not None and not f.empty]
    scale = ExactScale(v for f in frames for value, _ in SPENT for v in f[value].unique())
    table = population_atoms[POPULATION_ATOM_KEYS]
    for index, spends in enumerate((before, this)):
        names = (SPENT[0][1][index], SPENT[1][1][index])
        if spends is None or spends.empty:
            table = table.assign(**{name: 0 for name in names})
            continue
        table = table.merge(atom_spends(spends, scale, names), on=ATOM_KEYS, how="left")
        for name in names:
            table[name] = table[name].fillna(0)
            if table[name].dtype != object:
                table[name] = table[name].astype(np.int64)
    for _, (was, now, after) in SPENT:
        table[after] = table[was] + table[now]
    return LifetimeBudget(table, scale)


@dataclass(frozen=True)
class PersonBound:
    """What one graduate counted with up to `k` degree records can have paid over every
    measurement of a store: at most the sum over their (at most k) atoms, so at most the
    sum of the k most charged atoms; and at most the sum over every measurement, each
    counted once. The smaller of the two, for epsilon and for delta apart (exact)."""
    epsilon: Fraction
    delta: Fraction
    top_atoms: pd.DataFrame        # ATOM_KEYS, epsilon: the k most charged atoms
    every_measurement: Fraction    # epsilon of every measurement, each once


def person_worst_case(spends: pd.DataFrame, k: int) -> PersonBound:
    """The bound for `spends` (POPULATION_KEYS, measurement_id, epsilon, delta,
    cohort_years: every spend of a store and of the release about to be recorded). With
    k = 1 it is the largest atom's spend, which the atom check already caps. A graduate's
    k records are the earliest k (tasks/inputs/degree_records.py), the same in every
    release, so the atoms they are charged to are at most k over their lifetime."""
    if spends.empty:
        return PersonBound(Fraction(0), Fraction(0),
                           pd.DataFrame(columns=ATOM_KEYS + ["epsilon"]), Fraction(0))
    scale = ExactScale(v for value, _ in SPENT for v in spends[value].unique())
    per_atom = atom_spends(spends, scale, ("epsilon", "delta"))
    once = spends.drop_duplicates("measurement_id")
    totals = {value: sum(map(Fraction, once[value]), Fraction(0)) for value, _ in SPENT}
    bounds = {}
    for value, _ in SPENT:
        largest = heapq.nlargest(k, per_atom[value])
        bounds[value] = min(Fraction(int(sum(largest)), scale.denominator), totals[value])
    top = per_atom.sort_values("epsilon", ascending=False, kind="stable").head(k)
    top = top[ATOM_KEYS].assign(epsilon=scale.fraction(top["epsilon"]).to_numpy())
    return PersonBound(bounds["epsilon"], bounds["delta"], top.reset_index(drop=True),
                       totals["epsilon"])
