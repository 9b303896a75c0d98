"""A question: what a measurement asks (product, tabulation, mechanism, epsilon, columns
and parameters), identified by its SHA-256. Two releases reuse each other's measurements only
when they ask the same question of the same population (institution x degree level x
graduation cohort). Privacy cost: none.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

from pseo_das.epsilon import epsilon_text
from pseo_das.tasks.privacy.establishment import EmployerProtection, FlowsMechanism, PrivacyNotion
from pseo_das.tasks.privacy.lifetime_budget import CohortDefinitionMissing, cohort_years
from pseo_das.tasks.privacy.statement import (Mechanism, PrivacyStatement, employer_statement,
                                              geometric_statement)
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.store import PrivacyStore, StoreError, question_sha256

# How a measured tabulation codes fields: each cell carries the CIP vintage of its
# graduates' codes (CIP-2010 before the switch year, CIP-2020 from it). Measurements of
# earlier versions coded every graduate in CIP-2010; both are recast to CIP-2020 when
# published, so either answers the same question and is reused.
CIP_CODING = "vintage of graduation, per cell"
# The question parameter of the contribution bound (only when above 1).
BOUND_PARAMETER = "max_degrees_per_person"
LEGACY_CIP_CODING = "2010"


@dataclass(frozen=True)
class Question:
    """One tabulation a release measures or reuses."""
    tabulation_id: str
    product: str
    cip_level: str
    years_after: int
    epsilon: Fraction
    columns: int
    parameters: dict

    def as_dict(self, cip_coding: str = CIP_CODING) -> dict:
        return {"tabulation_id": self.tabulation_id, "product": self.product,
                "inst_level": "I", "cip_level": self.cip_level, "cip_vintage": cip_coding,
                "years_after": self.years_after, "mechanism": Mechanism.GEOMETRIC,
                "epsilon": epsilon_text(self.epsilon), "columns": self.columns,
                **self.parameters}

    def protection(self) -> EmployerProtection | None:
        """The employer protection this question's measurement takes, or None."""
        if "flows_mechanism" not in self.parameters:
            return None
        return EmployerProtection(FlowsMechanism(self.parameters["flows_mechanism"]),
                                  float(self.parameters["alpha"]), float(self.epsilon),
                                  float(self.parameters["delta"]),
                                  bool(self.parameters["unbiased"]))

    def statements(self, measurement_id: str) -> tuple[PrivacyStatement, ...]:
        """What the measurement `measurement_id` of this question guarantees, one statement
        per noise stream: the same when it is measured and whenever it is read back from the
        store (both call this on the question). Counts of graduates, each in one cell:
        geometric noise, or an employer-protecting mechanism (its weak notion: the cells
        carry graduate attributes)."""
        protection = self.protection()
        if protection is None:
            return (geometric_statement(self.tabulation_id, self.product, measurement_id,
                                        self.epsilon, self.columns, self.sensitivity),)
        return (employer_statement(self.tabulation_id, self.product, measurement_id,
                                   protection, self.columns, PrivacyNotion.WEAK),)

    @property
    def sensitivity(self) -> int:
        """The contribution bound k of its counts (privacy.max_degrees_per_person): a
        parameter of the question only when above 1, so that questions asked before the
        bound existed keep their SHA-256."""
        return int(self.parameters.get(BOUND_PARAMETER, 1))

    @property
    def delta(self) -> Fraction:
        """The delta a measurement of this question spends on each of its populations."""
        return sum((s.delta for s in self.statements("")), Fraction(0))

    @property
    def sha256(self) -> str:
        """Identifies the question: two measurements answer the same one only if equal."""
        return question_sha256(self.as_dict())

    @property
    def answered_by(self) -> tuple[str, ...]:
        """The question SHA-256s whose measurements answer this one: its own, and the same
        question coded all in CIP-2010 (earlier versions), recast alike when published."""
        return (self.sha256, question_sha256(self.as_dict(LEGACY_CIP_CODING)))


@dataclass(frozen=True)
class PendingMeasurement:
    """A measurement of the plan whose noisy values are not stored yet."""
    measurement_id: str
    question: Question
    seed: ReleaseSeed             # the seed of the attempt that planned (and paid for) it
    populations: pd.DataFrame     # POPULATION_KEYS


def stored_question(store: PrivacyStore, measurement_id: str,
                    kinds: Mapping[str, type[Question]] = {}) -> Question:
    """The question a stored measurement answers, as recorded; `kinds`: the class of the
    questions of a product whose statements are not counts of graduates (product -> class)."""
    recorded = json.loads(store.table("SELECT question FROM measurements WHERE measurement_id = ?",
                                      (measurement_id,))["question"].iloc[0])
    return recorded_question(recorded, kinds)


def recorded_question(recorded: dict, kinds: Mapping[str, type[Question]] = {}) -> Question:
    """A question from its recorded dict (Question.as_dict); StoreError when the record is
    not one (a row written around the store's checks)."""
    fixed = {"tabulation_id", "product", "inst_level", "cip_level", "cip_vintage",
             "years_after", "mechanism", "epsilon", "columns"}
    # an employer-protecting mechanism's name is a parameter (Question.as_dict writes it
    # over the geometric default): kept, so that protection() and the SHA-256 round-trip
    try:
        kind = kinds.get(recorded["product"], Question)
        return kind(recorded["tabulation_id"], recorded["product"], recorded["cip_level"],
                    int(recorded["years_after"]), Fraction(recorded["epsilon"]),
                    int(recorded["columns"]), {k: v for k, v in recorded.items()
                                               if k not in fixed
                                               or (k == "mechanism" and v != Mechanism.GEOMETRIC)})
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise StoreError(f"a stored question is not a question ({type(exc).__name__}: {exc}): "
                         f"{json.dumps(recorded, sort_keys=True)[:200]}") from exc


def lifetime_spends(store: PrivacyStore) -> pd.DataFrame:
    """The store's spends (PrivacyStore.spends: every measurement's epsilon per population)
    with each measurement's delta and the length of its populations' cohort windows
    (`cohort_years`: the atoms it is charged to), derived from its recorded question,
    exactly. The store's schema records epsilon only; delta is a function of the question
    (0 for every pure mechanism). `degrees_per_person`: its question's contribution bound
    k."""
    spends = store.spends()
    recorded = store.table("SELECT measurement_id, question FROM measurements")
    questions = {m: recorded_question(json.loads(q))
                 for m, q in zip(recorded["measurement_id"], recorded["question"])}
    if spends.empty:
        return spends.assign(delta=pd.Series(dtype=object), cohort_years=pd.Series(dtype="int64"),
                             degrees_per_person=pd.Series(dtype="int64"))
    return spends.assign(delta=spends["measurement_id"].map({m: q.delta
                                                             for m, q in questions.items()}),
                         cohort_years=spend_windows(spends, questions),
                         degrees_per_person=spends["measurement_id"].map(
                             {m: q.sensitivity for m, q in questions.items()}))


def spend_windows(spends: pd.DataFrame, questions: Mapping[str, Question]) -> np.ndarray:
    """Per spend (measurement_id, degree_level): the length of its population's cohort
    window under its question's recorded cohort definition."""
    pairs = spends[["measurement_id", "degree_level"]].drop_duplicates()
    try:
        windows = {(m, d): cohort_years(questions[m].parameters, d)
                   for m, d in pairs.itertuples(index=False, name=None)}
    except CohortDefinitionMissing as exc:
        raise StoreError(f"a stored measurement cannot be charged to graduation years: {exc}") \
            from exc
    keys = zip(spends["measurement_id"], spends["degree_level"])
    return np.fromiter((windows[k] for k in keys), dtype=np.int64, count=len(spends))
