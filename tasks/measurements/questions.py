"""The privacy statements of stored measurements, read back for the ledger: derived from
each measurement's recorded question by the same function the measuring task used
(`Question.statements`), so that ledger.csv, the documents and the audit state what the
mechanism was calibrated for. Privacy cost: none.
"""
from __future__ import annotations

from dataclasses import replace

from pseo_das.tasks.earnings.cell_statistics_plan import PRODUCT as CELL_STATISTICS_PRODUCT
from pseo_das.tasks.earnings.cell_statistics_plan import CellStatisticsQuestion
from pseo_das.tasks.privacy.question import Question, stored_question
from pseo_das.tasks.privacy.statement import PrivacyStatement
from pseo_das.tasks.privacy.store import PrivacyStore

# The questions whose statements are not counts of graduates, by product.
QUESTION_KINDS: dict[str, type[Question]] = {CELL_STATISTICS_PRODUCT: CellStatisticsQuestion}


def measured_statements(store: PrivacyStore, measurement_id: str) -> tuple[PrivacyStatement, ...]:
    """What a stored measurement guarantees: its recorded question's statements."""
    return stored_question(store, measurement_id, QUESTION_KINDS).statements(measurement_id)


def read_statements(store: PrivacyStore, question: Question, measurement_ids: list[str]
                    ) -> tuple[PrivacyStatement, ...]:
    """The statements of a release's tabulation read from its stored measurements (one per
    noise stream of the question, the measurements' streams joined): each measurement must
    state what the release's question states (ValueError otherwise); with none, the
    question's own."""
    if not measurement_ids:
        return question.statements("")
    found = [measured_statements(store, m) for m in measurement_ids]
    for measurement_id, stated in zip(measurement_ids, found):
        if stated != question.statements(measurement_id):
            raise ValueError(f"{question.tabulation_id}: the stored measurement {measurement_id} "
                             "states another guarantee than the release's question")
    return tuple(replace(first, stream_id=";".join(s[i].stream_id for s in found))
                 for i, first in enumerate(found[0]))
