"""The employer-side table (optional, `[employer_table]`): every employed graduate by state x
NAICS sector of the job, per graduation cohort and years after, measured with an
employer-protecting mechanism ((alpha, epsilon) employer-employee privacy, Haney et al.
2017; tasks/privacy/establishment.py) and published as pseoemp_all.csv.

Budget: the release unit that grows over time is the graduation cohort, so each (cohort,
years after) is its own question of the privacy store, asked of every population
(institution x degree level) of that cohort observable that many years after. Its
measurement is charged its epsilon on each of those populations (each graduate of the
cohort is in one state x sector cell: parallel composition for graduates; the charge is to
every population because each population's graduates may be in any cell), and every later
release asking the same question reuses it at zero epsilon. The question names the
cohort's population set (its SHA-256): when a cohort gains a population (a new
institution), the question is another one, measured and charged again.

Employers: the cells of one cohort's table have only establishment attributes, so within a
cohort they compose in parallel for employers too; x_v is the largest number of the
cohort's graduates at one establishment of the state x sector (of the measured populations
only: the measurement depends on their graduates alone). The cohort itself is a graduate
attribute, so across the d cohorts of a years-after the employers get the paper's weak
notion, d x epsilon in the worst case (ledger: employer_notion "weak", employer_epsilon
d x epsilon). A table over all graduates at once would be strong (epsilon for employers),
but it depends on every population, so it would be measured anew, and charged to every
population, at each release that adds a cohort.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig
from pseo_das.schemas.cpi import CPI_U_SERIES
from pseo_das.tasks import progress, release_task
from pseo_das.tasks.codes.destinations import NONEMPLOYED
from pseo_das.tasks.privacy.establishment import MECHANISM_NAMES, PrivacyNotion
from pseo_das.tasks.privacy.employer_side import measure_with_employer_protection
from pseo_das.tasks.privacy.ledger import LedgerEntry, NoisyMeasurement, measured_entry
from pseo_das.tasks.privacy.streams import stream_sha256
from pseo_das.tasks.privacy.statement import employer_statement
from pseo_das.tasks.inputs.cells import observable_populations
from pseo_das.tasks.privacy.question import Question, stored_question
from pseo_das.tasks.privacy.store import (PrivacyStore, epsilon_text,
                                          populations_sha256)

if TYPE_CHECKING:
    from pseo_das.tasks.inputs.cells import CellFrame
    from pseo_das.tasks.inputs.true_counts import TrueCounts
    from pseo_das.tasks.privacy.question import PendingMeasurement

PRODUCT = "employer-side table"
TABULATION_PREFIX = "employer_table."
COMPOSITION = ("graduates: parallel across the cohorts and the state x sector cells (each "
               "graduate in one cohort and one cell); employers: (alpha, epsilon) per cohort, "
               "parallel across its state x sector cells (only establishment attributes), "
               "weak across the d cohorts (the cohort is a graduate attribute): d x epsilon "
               "in the worst case; sequential with every other tabulation")


def tabulation_id(grad_cohort: int, years_after: int) -> str:
    """The question of one cohort's table (a tabulation of the release plan)."""
    return f"{TABULATION_PREFIX}S.c{grad_cohort}.y{years_after}"


def ledger_tabulation_id(years_after: int) -> str:
    """The ledger entry of one years-after: every cohort's table (disjoint graduates)."""
    return f"{TABULATION_PREFIX}S.y{years_after}"


def is_table_tabulation(tabulation: pd.Series) -> np.ndarray:
    return tabulation.astype(str).str.startswith(TABULATION_PREFIX).to_numpy()


def employer_table_questions(cfg: ReleaseConfig, frames: dict[str, "CellFrame"]
                             ) -> list[Question]:
    """One question per (years after, cohort) with an observable population, in that
    order; none when the table is off. The populations' SHA-256 is part of the question."""
    if not cfg.employer_table.enabled:
        return []
    level = cfg.flows.measured_levels()[0]   # any level holds every graduate once
    protection = cfg.employer_table.protection()
    cohorts = cfg.cells.cohort_definition()
    common = {"table": "employed graduates by state x NAICS sector of the job",
              "sample_floor": cfg.earnings.sample_floor, "cohorts": cohorts,
              "dollars": f"{cfg.earnings.dollar_year} dollars (CPI-U {CPI_U_SERIES} annual "
                         "averages)",
              "mechanism": MECHANISM_NAMES[protection.mechanism],
              "flows_mechanism": protection.mechanism.value, "alpha": protection.alpha,
              "delta": protection.delta, "unbiased": protection.unbiased}
    questions = []
    for k in cfg.cells.years_after:
        populations = observable_populations(frames[level], k, cfg.cells.last_earnings_year)
        for cohort, members in populations.groupby("grad_cohort", sort=True):
            questions.append(Question(
                tabulation_id(int(cohort), k), PRODUCT, level, k,
                cfg.employer_table.epsilon, NONEMPLOYED,
                {**common, "grad_cohort": int(cohort),
                 "populations_sha256": populations_sha256(members)}))
    return questions


@release_task("measure the employer-side table")
def measure_employer_table(pending: dict[int, list["PendingMeasurement"]],
                           counts: "TrueCounts", cfg: ReleaseConfig) -> list[NoisyMeasurement]:
    """Noisy rows of the plan's pending cohort tables: per state x sector, the employed
    graduates of the measurement's populations, by its question's mechanism with x_v of
    those populations. Privacy cost: the question's epsilon (and delta) on each of its
    populations; for employers (alpha, epsilon) per cohort (module doc). True counts and
    x_v stay inside."""
    started = time.perf_counter()
    measured = []
    for years_after, mine in pending.items():
        for measurement in mine:
            question = measurement.question
            true_counts, largest = counts.employer_table(
                question.cip_level, years_after, cfg.cells.last_earnings_year,
                measurement.populations)
            cells = pd.DataFrame({"grad_cohort": [int(question.parameters["grad_cohort"])]})
            (statement,) = question.statements(measurement.measurement_id)
            measured.append(measure_with_employer_protection(
                measurement.seed.bits, statement, cells, true_counts[None, :],
                largest[None, :]))
            del true_counts, largest
    if measured:
        progress(f"measured the employer-side table: {len(measured)} cohort x years-after "
                 f"row(s) ({time.perf_counter() - started:.1f} s)")
    return measured


@dataclass(frozen=True)
class NoisyEmployerTable:
    """The release's employer-side table as measured: one row per (cohort, years after)."""
    rows: pd.DataFrame          # grad_cohort, years_after
    noisy: np.ndarray           # rows x state-x-sector cells (flow_counts order), int64
    entries: tuple[LedgerEntry, ...]
    mechanism: str              # the mechanism's name
    alpha: float
    epsilon: str                # exact, as in the ledger
    delta: float

    @property
    def drawn(self) -> int:
        return int(self.noisy.size)


def stored_employer_table(store_path: Path, plan: pd.DataFrame, cfg: ReleaseConfig
                          ) -> NoisyEmployerTable | None:
    """The employer-side table of a release from the measurements its plan names (None
    when the table is off), with one ledger entry per years after (d cohorts, possibly
    none yet). Reads no microdata. Privacy cost: none (spent when measured)."""
    if not cfg.employer_table.enabled:
        return None
    rows = plan[is_table_tabulation(plan["tabulation_id"])]
    protection = cfg.employer_table.protection()
    epsilon = cfg.employer_table.epsilon
    found, streams, measurements_of = [], {}, {}
    with PrivacyStore.open(store_path) as store:
        for tab, measurements in rows.groupby("tabulation_id", sort=True):
            if measurements["measurement_id"].nunique() != 1:
                raise ValueError(f"{tab}: a cohort's table comes from one measurement; the "
                                 "plan names several")
            measurement_id = measurements["measurement_id"].iloc[0]
            question = stored_question(store, measurement_id)
            (stated,) = question.statements(measurement_id)
            if question.epsilon != epsilon or question.protection() != protection or \
                    replace(stated, tabulation_id="", stream_id="") != employer_statement(
                        "", PRODUCT, "", protection, NONEMPLOYED, PrivacyNotion.WEAK):
                raise ValueError(f"{tab}: measurement {measurement_id} answers another "
                                 "question than the configuration's employer_table")
            _, noisy = store.measured_values(measurement_id)
            stored = store.measurement(measurement_id)
            seed = store.attempt(stored.attempt).seed.bits
            streams.setdefault(question.years_after, []).append(
                stream_sha256(seed, measurement_id))
            measurements_of.setdefault(question.years_after, []).append(measurement_id)
            found.append((int(question.parameters["grad_cohort"]), question.years_after,
                          noisy[0]))
    found.sort(key=lambda item: (item[1], item[0]))
    frame = pd.DataFrame([f[:2] for f in found], columns=["grad_cohort", "years_after"],
                         dtype=np.int64)
    noisy = (np.vstack([f[2] for f in found]) if found
             else np.zeros((0, NONEMPLOYED))).astype(np.int64)
    entries = []
    for k in cfg.cells.years_after:   # one statement per years after: its cohorts in parallel
        d = int((frame["years_after"] == k).sum())
        statement = employer_statement(ledger_tabulation_id(k), PRODUCT,
                                       ";".join(measurements_of.get(k, [])), protection,
                                       NONEMPLOYED, PrivacyNotion.WEAK)
        entries.append(measured_entry(statement, d, NONEMPLOYED, COMPOSITION,
                                      ";".join(streams.get(k, []))))
    progress(f"read the employer-side table from the privacy store: {len(frame)} cohort x "
             "years-after row(s)")
    return NoisyEmployerTable(frame, noisy, tuple(entries), MECHANISM_NAMES[protection.mechanism],
                              protection.alpha, epsilon_text(epsilon), protection.delta)
