"""The release's products as plug-ins of the measurement layer, and their registry.

A product (earnings histograms, employment flows with their origin counts, the
employer-side table, the cell statistics) declares what the planner, the measuring step
and the store readers need of it, so that none of them names a product:

  names       its ledger product name(s) (`Question.product` of its questions)
  enabled     whether a configuration publishes it
  questions   the tabulations it asks of the privacy store for a configuration, given the
              cell frames of the counting pass (in ledger order)
  measure     its pending measurements, from the one counting pass's `TrueCounts`
  read        its measurements of a release's plan, read back from the store

`PRODUCTS` is the registry, in ledger order: the release plan's questions are its
products' questions in this order, and the flow measures by one loop over it
(`measure_pending`). A new product is one more plug-in here. Privacy cost: none (the
plug-ins delegate to their products' tasks, which state theirs).
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pandas as pd

from pseo_das.config import FrameNotInIpeds, ReleaseConfig
from pseo_das.schemas.cpi import CPI_U_SERIES
from pseo_das.tasks.cip_recast.recast import RecastContext
from pseo_das.tasks.codes.destinations import N_DESTINATIONS
from pseo_das.tasks.earnings.cell_statistics import NoisyCellStatistics, measure_cell_statistics
from pseo_das.tasks.earnings.cell_statistics_plan import PRODUCT as CELL_STATISTICS_PRODUCT
from pseo_das.tasks.earnings.cell_statistics_plan import cell_statistics_questions
from pseo_das.tasks.earnings.noisy_histograms import PRODUCT as EARNINGS_PRODUCT
from pseo_das.tasks.earnings.noisy_histograms import measure_earnings
from pseo_das.tasks.earnings.noisy_histograms import tabulation_id as earnings_tabulation_id
from pseo_das.tasks.employment_flows.employer_table import PRODUCT as EMPLOYER_TABLE_PRODUCT
from pseo_das.tasks.employment_flows.employer_table import (NoisyEmployerTable,
                                                            employer_table_questions,
                                                            measure_employer_table,
                                                            stored_employer_table)
from pseo_das.tasks.employment_flows.noisy_flows import PRODUCT as FLOWS_PRODUCT
from pseo_das.tasks.employment_flows.noisy_flows import TOTAL_PRODUCT as FLOWS_TOTAL_PRODUCT
from pseo_das.tasks.employment_flows.noisy_flows import measure_flows, total_tabulation_id
from pseo_das.tasks.employment_flows.noisy_flows import tabulation_id as flows_tabulation_id
from pseo_das.tasks.inputs.cells import CellFrame
from pseo_das.tasks.inputs.true_counts import TrueCounts
from pseo_das.tasks.measurements.stored_cell_statistics import stored_cell_statistics
from pseo_das.tasks.measurements.stored_tables import StoredTables, stored_earnings, stored_flows
from pseo_das.tasks.privacy.establishment import MECHANISM_NAMES
from pseo_das.tasks.privacy.ledger import NoisyMeasurement
from pseo_das.tasks.privacy.question import BOUND_PARAMETER, PendingMeasurement, Question

FRAME_PARAMETER = "frame"
Pending = dict[int, list[PendingMeasurement]]   # years after (ascending) -> measurements
Read = TypeVar("Read", covariant=True)


@dataclass(frozen=True)
class StoreReading:
    """What a product reads its measurements back with: the store, the release's plan
    (tabulation_id, POPULATION_KEYS, measurement_id, new), its configuration and the CIP
    recast's context of each CIP level (None: the codes as measured)."""
    store_path: Path
    plan: pd.DataFrame
    cfg: ReleaseConfig
    recast: dict[str, RecastContext | None] | None = None


class Product(Protocol[Read]):
    """A product of the release, as the planner, the flow and the store readers see it."""

    @property
    def names(self) -> tuple[str, ...]:
        """Its ledger product names (`Question.product` of its questions)."""
        ...

    def enabled(self, cfg: ReleaseConfig) -> bool:
        """Whether the configuration publishes it."""
        ...

    def questions(self, cfg: ReleaseConfig, frames: Mapping[str, CellFrame]) -> list[Question]:
        """Its questions, in ledger order; `frames`: the counting pass's cell frames by CIP
        level (and by product name where a product counts its own cells)."""
        ...

    def measure(self, pending: Pending, counts: TrueCounts, cfg: ReleaseConfig
                ) -> Iterable[NoisyMeasurement]:
        """Its pending measurements, from the one counting pass's true counts."""
        ...

    def read(self, reading: StoreReading) -> Read:
        """Its measurements of a release's plan, read back from the privacy store."""
        ...


def _common_parameters(cfg: ReleaseConfig) -> dict:
    """What every graduate-count question of the earnings and the flows states: the sample
    floor, the cohort definition and the dollars."""
    cohorts = cfg.cells.cohort_definition()
    dollars = f"{cfg.earnings.dollar_year} dollars (CPI-U {CPI_U_SERIES} annual averages)"
    return {"sample_floor": cfg.earnings.sample_floor, "cohorts": cohorts, "dollars": dollars,
            **bound_parameter(cfg), **frame_parameter(cfg)}


def bound_parameter(cfg: ReleaseConfig) -> dict:
    """The contribution bound as a question parameter when above 1 (none at 1: the
    questions of releases before the bound existed keep their SHA-256): measurements are
    not reused across bounds."""
    k = cfg.privacy.max_degrees_per_person
    return {BOUND_PARAMETER: k} if k > 1 else {}


def frame_parameter(cfg: ReleaseConfig) -> dict:
    """The frame checked against IPEDS as a question parameter when its cells are withheld
    (tasks/inputs/frame_check.py): a measurement of a population taken on the whole frame
    (with "flag", or before the check existed) may hold cells IPEDS does not show, so it
    does not answer a release that withholds them. None with "flag": its questions keep
    their SHA-256."""
    withheld = cfg.cells.frame_not_in_ipeds == FrameNotInIpeds.WITHHOLD
    return {FRAME_PARAMETER: "cells shown by the IPEDS completions"} if withheld else {}


def earnings_questions(cfg: ReleaseConfig) -> list[Question]:
    """One institution-level histogram question per years after and measured CIP level."""
    common = _common_parameters(cfg)
    parameters = {"sample_floor": common["sample_floor"],
                  "bin_edges": list(cfg.earnings.bin_edges), "cohorts": common["cohorts"],
                  "dollars": common["dollars"], **bound_parameter(cfg), **frame_parameter(cfg)}
    return [Question(earnings_tabulation_id("I", level, k), EARNINGS_PRODUCT, level, k,
                     cfg.privacy.epsilon_per_tabulation, cfg.earnings.n_bins,
                     parameters)
            for k in cfg.cells.years_after for level in cfg.privacy.measured_levels()]


def flows_questions(cfg: ReleaseConfig) -> list[Question]:
    """The flows questions (per years after and measured CIP level), then their origin
    counts' (when flows.measures_total). An employer-protecting flows.mechanism is part of
    the flows' question: measurements are not reused across mechanisms."""
    totals = flows = _common_parameters(cfg)
    protection = cfg.flows.employer_protection()
    if protection is not None:
        flows = {**flows, "mechanism": MECHANISM_NAMES[protection.mechanism],
                 "flows_mechanism": protection.mechanism.value, "alpha": protection.alpha,
                 "delta": protection.delta, "unbiased": protection.unbiased}
    levels = cfg.flows.measured_levels()
    return ([Question(flows_tabulation_id(level, k), FLOWS_PRODUCT, level, k,
                      cfg.flows.epsilon_per_tabulation, N_DESTINATIONS, flows)
             for k in cfg.cells.years_after for level in levels]
            + [Question(total_tabulation_id(level, k), FLOWS_TOTAL_PRODUCT, level, k,
                        cfg.flows.total_epsilon_per_tabulation, 1, totals)
               for k in cfg.cells.years_after for level in levels if cfg.flows.measures_total])


class EarningsHistograms:
    """The institution-level earnings histograms (the other levels are derived from them)."""
    names = (EARNINGS_PRODUCT,)

    def enabled(self, cfg: ReleaseConfig) -> bool:
        return True

    def questions(self, cfg: ReleaseConfig, frames: Mapping[str, CellFrame]) -> list[Question]:
        return earnings_questions(cfg)

    def measure(self, pending: Pending, counts: TrueCounts, cfg: ReleaseConfig
                ) -> list[NoisyMeasurement]:
        return measure_earnings(pending, counts, cfg)

    def read(self, reading: StoreReading) -> StoredTables:
        return stored_earnings(reading.store_path, reading.plan, reading.recast,
                               earnings_questions(reading.cfg))


class EmploymentFlows:
    """The employment flows and their origin counts (read together: the counts join the
    flows of the same cells)."""
    names = (FLOWS_PRODUCT, FLOWS_TOTAL_PRODUCT)

    def enabled(self, cfg: ReleaseConfig) -> bool:
        return True

    def questions(self, cfg: ReleaseConfig, frames: Mapping[str, CellFrame]) -> list[Question]:
        return flows_questions(cfg)

    def measure(self, pending: Pending, counts: TrueCounts, cfg: ReleaseConfig
                ) -> Iterator[NoisyMeasurement]:
        """One years-after at a time: a national table is kept in the store before the
        next is drawn (`measure_pending`)."""
        for years_after, mine in pending.items():
            yield from measure_flows({years_after: mine}, counts, cfg)

    def read(self, reading: StoreReading) -> StoredTables:
        return stored_flows(reading.store_path, reading.plan, reading.recast,
                            flows_questions(reading.cfg), spill=True)


class EmployerTable:
    """The employer-side table (`[employer_table]`): one question per cohort and years after."""
    names = (EMPLOYER_TABLE_PRODUCT,)

    def enabled(self, cfg: ReleaseConfig) -> bool:
        return cfg.employer_table.enabled

    def questions(self, cfg: ReleaseConfig, frames: Mapping[str, CellFrame]) -> list[Question]:
        return employer_table_questions(cfg, dict(frames))

    def measure(self, pending: Pending, counts: TrueCounts, cfg: ReleaseConfig
                ) -> list[NoisyMeasurement]:
        return measure_employer_table(pending, counts, cfg)

    def read(self, reading: StoreReading) -> NoisyEmployerTable | None:
        return stored_employer_table(reading.store_path, reading.plan, reading.cfg)


class CellStatistics:
    """The cell statistics (`[mos]`, pseom_all.csv): their populations are the cells of
    their own moments (`planning_frames`)."""
    names = (CELL_STATISTICS_PRODUCT,)

    def enabled(self, cfg: ReleaseConfig) -> bool:
        return cfg.mos.enabled

    def questions(self, cfg: ReleaseConfig, frames: Mapping[str, CellFrame]) -> list[Question]:
        return list(cell_statistics_questions(cfg))

    def measure(self, pending: Pending, counts: TrueCounts, cfg: ReleaseConfig
                ) -> list[NoisyMeasurement]:
        return measure_cell_statistics(pending, counts, cfg)

    def read(self, reading: StoreReading) -> NoisyCellStatistics | None:
        return stored_cell_statistics(reading.store_path, reading.plan, reading.cfg)


EARNINGS = EarningsHistograms()
FLOWS = EmploymentFlows()
EMPLOYER_TABLE = EmployerTable()
CELL_STATISTICS = CellStatistics()
# The registry, in ledger order.
PRODUCTS: tuple[Product[Any], ...] = (EARNINGS, FLOWS, EMPLOYER_TABLE, CELL_STATISTICS)


def planned_questions(cfg: ReleaseConfig, frames: Mapping[str, CellFrame],
                      products: Sequence[Product[Any]] = PRODUCTS) -> list[Question]:
    """Every measured tabulation of a release: the enabled products' questions, in ledger
    order."""
    return [question for product in products if product.enabled(cfg)
            for question in product.questions(cfg, frames)]


def planning_frames(counts: TrueCounts) -> dict[str, CellFrame]:
    """The cell frames the planner finds populations in: by CIP level, and the cell
    statistics' own (the cells of their moments) when they were counted."""
    moments = {CELL_STATISTICS_PRODUCT: counts.moments.frame} if counts.moments else {}
    return counts.frames | moments


def by_years_after(pending: Iterable[PendingMeasurement], names: Collection[str]) -> Pending:
    """The pending measurements of the products named, by years after (ascending)."""
    grouped: Pending = {}
    for measurement in sorted(pending, key=lambda p: p.question.years_after):
        if measurement.question.product in names:
            grouped.setdefault(measurement.question.years_after, []).append(measurement)
    return grouped


def measure_pending(pending: Iterable[PendingMeasurement], counts: TrueCounts,
                    cfg: ReleaseConfig, products: Sequence[Product[Any]] = PRODUCTS
                    ) -> Iterator[NoisyMeasurement]:
    """Every pending measurement of a plan, measured by its product from the one counting
    pass, product by product in ledger order, as they are drawn: whoever keeps them
    (`stored_tables.keep_measurements`) holds one product's (the flows: one years-after's)
    at a time. Privacy cost: each product's (its questions' epsilon on the populations
    measured)."""
    pending = tuple(pending)
    for product in products:
        if product.enabled(cfg):
            yield from product.measure(by_years_after(pending, product.names), counts, cfg)
