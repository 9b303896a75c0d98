"""The product seam (tasks/measurements/products.py): the registry asks exactly the
questions releases asked before it (same tabulations, order and question SHA-256s, so the
plan, the ledger and every reuse of the store are unchanged), and a product plugged in
through the registry is planned, measured, kept and read back by the same planner and
measuring loop the flow uses, neither of them changed."""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from pseo_das.config import ReleaseConfig, load_config
from pseo_das.tasks.inputs.cells import CellFrame, cell_frame, cohort_attributes, in_populations
from pseo_das.tasks.inputs.cpi import read_cpi
from pseo_das.tasks.inputs.ingest import read_inputs
from pseo_das.tasks.inputs.true_counts import TrueCounts, read_counts
from pseo_das.tasks.measurements.products import (PRODUCTS, Pending, Product, StoreReading,
                                                  measure_pending, planned_questions,
                                                  planning_frames)
from pseo_das.tasks.measurements.release_plan import plan_release
from pseo_das.tasks.privacy.geometric import measure_with_geometric_noise
from pseo_das.tasks.privacy.ledger import NoisyMeasurement
from pseo_das.tasks.privacy.question import Question
from pseo_das.tasks.privacy.release_seed import ReleaseSeed
from pseo_das.tasks.privacy.store import PrivacyStore, init_store
from test_ingest import valid_graduates, valid_outcomes, write

SEED = ReleaseSeed.from_hex("ef" * 32)
# Every optional product on: the employer-side table, the cell statistics (mos) and an
# employer-protecting flows mechanism.
EVERY_PRODUCT = """\
[flows]
mechanism = "smooth-laplace"
employer_delta = 1e-3
epsilon_per_tabulation = 1.5

[employer_table]
enabled = true
mechanism = "smooth-laplace"
alpha = 0.01
epsilon = 0.5
delta = 1e-3

[mos]
enabled = true
acknowledge_not_formally_dp = true

[privacy]
epsilon_cap = 12
"""
# The questions main asked before the registry (release_questions, then the employer-side
# table's, then the cell statistics'), of the frames below: their number and the SHA-256 of
# their "tabulation_id question_sha256" lines, in order.
QUESTIONS_BEFORE = {
    "default": (9, "8a73ad0a6122b2007b1ecd2b68329495ab8c73c035f88daa9fd663fc507ea148"),
    "every product": (25, "3bc1efff5d7c043fb578ea5896f0793699d6849488f07a9bd77eccaf568760f5"),
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("data"), valid_graduates(), valid_outcomes())


def frames_of(data_dir: Path, cfg: ReleaseConfig) -> dict[str, CellFrame]:
    inputs = read_inputs(data_dir, 2001, 2022)
    attributes = cohort_attributes(inputs.graduates, cfg.cells)
    return {level: cell_frame(attributes, level) for level in ("4", "2")}


def questions_digest(questions: list[Question]) -> tuple[int, str]:
    lines = "".join(f"{q.tabulation_id} {q.sha256}\n" for q in questions)
    return len(questions), hashlib.sha256(lines.encode()).hexdigest()


@pytest.mark.parametrize("name", QUESTIONS_BEFORE)
def test_the_registry_asks_the_questions_releases_asked_before(name, data_dir, tmp_path):
    config = tmp_path / "release.toml"
    # as releases asked them before the frame check: cells.frame_not_in_ipeds = "withhold"
    # (the default) adds the frame parameter to every question (products.frame_parameter)
    config.write_text((EVERY_PRODUCT if name == "every product" else "")
                      + '\n[cells]\nframe_not_in_ipeds = "flag"\n')
    cfg = load_config(config)
    questions = planned_questions(cfg, frames_of(data_dir, cfg))
    assert questions_digest(questions) == QUESTIONS_BEFORE[name]
    products = [q.product for q in questions]   # grouped by product, in ledger order
    assert sorted(set(products), key=products.index) == [
        name for product in PRODUCTS if product.enabled(cfg) for name in product.names
        if name in products]


class GraduatesPerCell:
    """A product made up for this test: the graduates with earnings per cell of CIP level
    4, one question per years after, geometric noise."""
    names = ("graduates per cell (test)",)

    def enabled(self, cfg: ReleaseConfig) -> bool:
        return True

    def questions(self, cfg: ReleaseConfig, frames: Mapping[str, CellFrame]) -> list[Question]:
        return [Question(f"test.graduates.cip4.y{k}", self.names[0], "4", k, Fraction(1, 4), 1,
                         {"table": "graduates with earnings per cell",
                          "cohorts": cfg.cells.cohort_definition()})
                for k in cfg.cells.years_after]

    def measure(self, pending: Pending, counts: TrueCounts, cfg: ReleaseConfig
                ) -> list[NoisyMeasurement]:
        measured = []
        for years_after, mine in pending.items():
            for measurement in mine:
                cells, histograms = counts.histograms(measurement.question.cip_level,
                                                      years_after, cfg.cells.last_earnings_year,
                                                      measurement.populations)
                (statement,) = measurement.question.statements(measurement.measurement_id)
                measured.append(measure_with_geometric_noise(
                    measurement.seed.bits, statement, cells,
                    histograms.sum(axis=1, keepdims=True)))
        return measured

    def read(self, reading: StoreReading) -> dict[str, np.ndarray]:
        mine = reading.plan[reading.plan["tabulation_id"].str.startswith("test.")]
        with PrivacyStore.open(reading.store_path) as store:
            read = {}
            for measurement_id, members in mine.groupby("measurement_id", sort=True):
                cells, values = store.measured_values(measurement_id)
                read[measurement_id] = values[in_populations(cells, members)]
        return read


def test_a_product_plugged_into_the_registry_is_planned_measured_and_read_back(data_dir,
                                                                                tmp_path):
    """The planner and the flow's measuring loop take the extended registry as they are:
    the new product's questions are planned after the others, charged, measured from the
    same counting pass, kept and read back; the other products' measurements are the ones
    the registry alone draws."""
    cfg = load_config()
    plugin: Product[dict[str, np.ndarray]] = GraduatesPerCell()
    counts = read_counts(data_dir, cfg, None, read_cpi())
    drawn = {}
    for name, products in (("registry", PRODUCTS), ("extended", PRODUCTS + (plugin,))):
        store_path = init_store(tmp_path / name)
        with PrivacyStore.open(store_path) as store:
            plan = plan_release(store, "R1", SEED, "inputs", "config", cfg,
                                planning_frames(counts), products=products)
            measured = list(measure_pending(plan.pending, counts, cfg, products))
            for m in measured:
                store.store_measurement(m.measurement_id, m.cells, m.values)
        drawn[name] = {m.measurement_id: m.values for m in measured}
        assert sorted(drawn[name]) == sorted(p.measurement_id for p in plan.pending)
    added = sorted(set(drawn["extended"]) - set(drawn["registry"]))
    asked = [f"test.graduates.cip4.y{k}" for k in cfg.cells.years_after]
    assert added == sorted(f"{tabulation}@R1/1" for tabulation in asked)
    tabulations = list(dict.fromkeys(plan.plan["tabulation_id"]))
    assert tabulations[-len(asked):] == asked   # planned after the registry's products
    for measurement_id, values in drawn["registry"].items():
        np.testing.assert_array_equal(drawn["extended"][measurement_id], values)
    assert plan.new_epsilon == Fraction(15, 2) + len(added) * Fraction(1, 4)
    read = plugin.read(StoreReading(tmp_path / "extended", plan.plan, cfg))
    assert sorted(read) == added
    for measurement_id in added:
        np.testing.assert_array_equal(read[measurement_id], drawn["extended"][measurement_id])
        assert read[measurement_id].shape[1] == 1 and len(read[measurement_id]) > 0
