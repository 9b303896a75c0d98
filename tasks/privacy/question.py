"""A question: what a measurement asks (product, tabulation, mechanism, epsilon, columns
and parameters), identified by its SHA-256. Two releases reuse each other's measurements only
when they ask the same question of the same population (institution x degree level x
graduation cohort). Privacy cost: none.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction

import pandas as pd

from pseo_das.epsilon import epsilon_text
from pseo_das.tasks.privacy.establishment import EmployerProtection, FlowsMechanism
from pseo_das.tasks.privacy.mechanism import GEOMETRIC
from pseo_das.tasks.privacy.store import PrivacyStore, question_sha256

# How a measured tabulation codes fields: each cell carries the CIP vintage of its
# graduates' codes (CIP-2010 before the switch year, CIP-2020 from it). Measurements of
# earlier versions coded every graduate in CIP-2010; both are recast to CIP-2020 when
# published, so either answers the same question and is reused.
CIP_CODING = "vintage of graduation, per cell"
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
                "years_after": self.years_after, "mechanism": GEOMETRIC,
                "epsilon": epsilon_text(self.epsilon), "columns": self.columns,
                **self.parameters}

    def protection(self) -> EmployerProtection | None:
        """The employer protection this question's measurement takes, or None (geometric)."""
        name = self.parameters.get("mechanism")
        if name is None:
            return None
        return EmployerProtection(FlowsMechanism(self.parameters["flows_mechanism"]),
                                  float(self.parameters["alpha"]), float(self.epsilon),
                                  float(self.parameters["delta"]),
                                  bool(self.parameters["unbiased"]))

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
    seed_hex: str                 # the seed of the attempt that planned (and paid for) it
    populations: pd.DataFrame     # POPULATION_KEYS


def stored_question(store: PrivacyStore, measurement_id: str) -> Question:
    """The question a stored measurement answers, as recorded."""
    recorded = json.loads(store.table("SELECT question FROM measurements WHERE measurement_id = ?",
                                      (measurement_id,))["question"].iloc[0])
    fixed = {"tabulation_id", "product", "inst_level", "cip_level", "cip_vintage",
             "years_after", "mechanism", "epsilon", "columns"}
    # an employer-protecting mechanism's name is a parameter (Question.as_dict writes it
    # over the geometric default): kept, so that protection() and the SHA-256 round-trip
    return Question(recorded["tabulation_id"], recorded["product"], recorded["cip_level"],
                    int(recorded["years_after"]), Fraction(recorded["epsilon"]),
                    int(recorded["columns"]), {k: v for k, v in recorded.items() if k not in fixed
                                               or (k == "mechanism" and v != GEOMETRIC)})
