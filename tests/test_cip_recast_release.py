"""The CIP recast as a release task, on a release of synthetic data with mixed vintages
(graduates before 2020 coded in CIP-2010, later ones in CIP-2020): only CIP-2020 codes are
published, each one a code of the LEHD schema at its level; the recast keeps every
population's totals value by value, spends nothing, and is recorded in the ledger and the
documents; `republish --cip-vintage 2020` recasts a release published as measured."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import (SMALL_INSTITUTIONS, public_table, run_release, small_data_set, store_beside,
                      without_extras)
from pseo_das.config import load_config
from pseo_das.tasks.cip_recast.recast import (RecastError, check_recastable, recast_context,
                                              recast_notes, recast_plan)
from pseo_das.tasks.cip_recast.recast_inputs import load_recast_inputs
from pseo_das.tasks.inputs.cells import CIP_2020, POPULATION_KEYS, cell_frame, cohort_attributes
from pseo_das.tasks.measurements.publication_record import read_publication_record
from pseo_das.tasks.privacy.store import PrivacyStore, measurement_bytes, read_measurement
from pseo_das.tasks.measurements.products import earnings_questions, flows_questions
from pseo_das.tasks.measurements.stored_tables import stored_tables

LABELS = Path(__file__).resolve().parent.parent / "pseo_das" / "reference" / \
    "lehd-schema-v4.14.0" / "label_cipcode.csv"


def test_a_mixed_vintage_release_publishes_only_schema_cip_2020_codes(releases, synthetic_dir):
    graduates = pd.read_parquet(synthetic_dir / "graduates.parquet")
    before = graduates[graduates["grad_year"] < 2020]["cipcode"].astype(str)
    after = graduates[graduates["grad_year"] >= 2020]["cipcode"].astype(str)
    inputs = load_recast_inputs(None, 2020)
    moved = {old for old, new in zip(inputs.crosswalk["cip2010"], inputs.crosswalk["cip2020"])
             if old != new}
    assert set(before) & moved, "the data have CIP-2010 codes that CIP-2020 moved"
    assert not set(after) & (moved - set(inputs.crosswalk["cip2020"]))
    labels = pd.read_csv(LABELS, dtype=str)
    valid = set(zip(labels["cipcode"], labels["cip_level"]))
    root, _ = releases
    for name in ("pseoe_all.csv", "pseoh_all.csv", "pseof_all.csv"):
        table = pd.read_csv(public_table(root / "a", name), dtype=str,
                            usecols=["cipcode", "cip_level"]).drop_duplicates()
        published = set(zip(table["cipcode"], table["cip_level"]))   # as the schema writes them
        assert published and published <= valid, (name, sorted(published - valid)[:5])
    pseoe = pd.read_csv(public_table(root / "a", "pseoe_all.csv"), dtype=str)
    assert not set(pseoe["cipcode"]) & {c[:5] for c in moved
                                        if c[:5] not in set(inputs.transitions(4)["cip2020"])}


def _tables(store: Path, release_id: str, recast: bool):
    with PrivacyStore.open(store) as privacy_store:
        attempt, record = read_publication_record(privacy_store, release_id)
        plan = privacy_store.get_frame(attempt.plan_sha256)
    cfg = record.config
    contexts = None
    if recast:
        inputs = load_recast_inputs(None, cfg.cip.switch_year)
        contexts = {level: recast_context(inputs, cfg.cells, level,
                                          cfg.cip.unseen_transition_weight)
                    for level in ("4", "2")}
    return stored_tables.fn(store, plan, contexts, earnings_questions(cfg) + flows_questions(cfg))


def test_the_recast_plan_keeps_the_contexts_and_notes_not_the_completions():
    """Post-processing takes the recast plan (each measured level's context and what the
    documents say), and the IPEDS completions go once the plan is made."""
    import gc
    import weakref
    cfg = load_config()
    inputs = load_recast_inputs(None, cfg.cip.switch_year)
    completions = weakref.ref(inputs.completions)
    years = sorted({int(y) for y in inputs.completions["grad_year"]})
    plan = recast_plan(inputs, cfg)
    assert set(plan.contexts) == set(cfg.measured_cip_levels())
    assert recast_notes(plan, []) == {
        "published_vintage": CIP_2020, "tabulations": [],
        "packaged_inputs": list(inputs.packaged), "ipeds_years": years,
        "hard_coded": len(inputs.hard_coded)}
    del inputs
    gc.collect()
    assert completions() is None
    assert recast_plan(None, cfg) is None and recast_notes(None, [])["tabulations"] == []


def test_earnings_and_flows_read_apart_are_the_tables_read_together(releases):
    """The release reads the earnings and the flows measurements in two steps: together
    they are the one reading's tables, ledger entries and recast summaries, in order."""
    root, uri = releases
    store = store_beside(uri)
    with PrivacyStore.open(store) as privacy_store:
        attempt, record = read_publication_record(privacy_store, "2026Q4-test")
        plan = privacy_store.get_frame(attempt.plan_sha256)
    cfg = record.config
    inputs = load_recast_inputs(None, cfg.cip.switch_year)
    contexts = {level: recast_context(inputs, cfg.cells, level, cfg.cip.unseen_transition_weight)
                for level in ("4", "2")}
    earnings_asked, flows_asked = earnings_questions(cfg), flows_questions(cfg)
    together = stored_tables.fn(store, plan, contexts, earnings_asked + flows_asked)
    earnings = stored_tables.fn(store, plan, contexts, earnings_asked)
    flows = stored_tables.fn(store, plan, contexts, flows_asked)
    assert earnings[1] == [] and flows[0] == [] and len(earnings[0]) == len(together[0]) > 0
    assert earnings[2] + flows[2] == together[2] and earnings[3] + flows[3] == together[3]
    for mine, theirs in zip(earnings[0], together[0]):
        assert np.array_equal(mine.counts, theirs.counts) and mine.cells.equals(theirs.cells)
    for mine, theirs in zip(flows[1], together[1]):
        assert np.array_equal(mine.noisy, theirs.noisy) and np.array_equal(mine.total, theirs.total)
        assert mine.noisy.dtype == np.int32   # counts of graduates, read as 32-bit integers


def test_the_recast_keeps_every_population_total_value_by_value(releases):
    root, uri = releases
    as_measured = _tables(store_beside(uri), "2026Q4-test", recast=False)
    recast = _tables(store_beside(uri), "2026Q4-test", recast=True)
    assert as_measured[3] == [] and len(recast[3]) == 9   # earnings, flows, origin counts
    for kind in (0, 1):
        for old, new in zip(as_measured[kind], recast[kind]):
            values = old.counts if kind == 0 else old.noisy
            recast_values = new.counts if kind == 0 else new.noisy

            def totals(cells, array):
                keys = cells[POPULATION_KEYS].astype(str).agg("|".join, axis=1)
                return pd.DataFrame(array).groupby(keys.to_numpy()).sum().sort_index()
            pd.testing.assert_frame_equal(totals(old.cells, values),
                                          totals(new.cells, recast_values))
            if kind == 0:    # 4-digit CIP-2010 series that CIP-2020 does not have are gone
                assert set(old.cells["cipcode"].astype(str)) - set(new.cells["cipcode"].astype(str))
    routes = pd.DataFrame([s["routes"] for s in recast[3]]).fillna(0)
    assert (routes["direct"] > 0).all() and (routes["IPEDS shares"] > 0).all()
    assert routes.get("hard-coded", pd.Series([0])).sum() > 0


def test_the_recast_spends_nothing_and_is_in_the_ledger_and_documents(releases):
    root, _ = releases
    ledger = pd.read_csv(root / "a" / "internal" / "ledger.csv", dtype={"epsilon": str})
    recast = ledger[ledger["tabulation_id"].str.startswith("cip-recast.")]
    assert len(recast) == 9 and (recast["epsilon"] == "0").all()   # 3 x (earnings, flows, counts)
    assert set(recast["derived_from"]) == set(ledger.loc[ledger["mechanism"] ==
                                                         "two-sided geometric", "tabulation_id"])
    assert recast["noise_stream"].str.fullmatch(r"[0-9a-f]{64}(;[0-9a-f]{64})*").all()
    summary = json.loads((root / "a" / "internal" / "release_summary.json").read_text())
    assert summary["new_epsilon"] == "7.5"        # the measurements' epsilon only
    for document in ("public/release_notes.md", "internal/drb_report.md"):
        text = (root / "a" / document).read_text()
        assert "Every year is published in **CIP-2020** codes" in text
        assert "| cip-recast" not in text and "| earnings.I.cip4.y1 |" in text
        assert "SYNTHETIC demo files" in text


def test_old_measurements_without_a_vintage_read_as_cip_2010():
    cells = pd.DataFrame({"institution": ["00100000"], "inst_state": ["26"],
                          "degree_level": ["05"], "cipcode": ["5108"], "grad_cohort": [2001],
                          "grad_cohort_years": [3]})
    read, values = read_measurement(measurement_bytes(cells, np.array([[1, -2]])))
    assert read["cip_vintage"].tolist() == ["2010"] and values.tolist() == [[1, -2]]


def test_a_code_without_destination_is_refused_before_any_noise(synthetic_dir):
    graduates = pd.read_parquet(synthetic_dir / "graduates.parquet")
    frame = cell_frame(cohort_attributes(graduates, load_config().cells, 2020), "4")
    inputs = load_recast_inputs(None, 2020)
    check_recastable({"4": frame}, inputs)
    codes = frame.cells["cipcode"].cat.add_categories(["6004", "9801"])
    frame.cells["cipcode"] = codes
    old = frame.cells.index[frame.cells["cip_vintage"] == "2010"]
    frame.cells.loc[old[:2], "cipcode"] = "6004"     # residencies: crosswalk and hard-coded
    check_recastable({"4": frame}, inputs)
    frame.cells.loc[old[2:4], "cipcode"] = "9801"    # no such CIP-2010 family
    with pytest.raises(RecastError, match=r"refused before any noise.* 98\.01 \(4-digit\) "
                                          r"have no CIP-2020 destination"):
        check_recastable({"4": frame}, inputs)


@pytest.mark.slow
def test_republish_recasts_a_release_published_as_measured(synthetic_dir, tmp_path,
                                                            tracking_uri, monkeypatch):
    """A release of an earlier version has no recast inputs in its record: republished as
    it was (codes as measured), or in CIP-2020 with --cip-vintage 2020, which gives the
    files a release of this version publishes. Of the small data set and 02541200, whose
    graduates before 2020 include 51.2501 (the 4-digit series 51.25 is not in CIP-2020)."""
    import pseo_das.flows.quarterly_release as release_flow
    from pseo_das.cli import main
    from pseo_das.tasks.measurements import stored_tables as kept

    def legacy_record(store_path, fields, inputs):
        full = kept.keep_publication_record.fn(store_path, fields, inputs)
        return full.model_copy(update={"recast": None, "ipeds": None})
    monkeypatch.setattr(release_flow, "keep_publication_record", legacy_record)
    data = small_data_set(synthetic_dir, tmp_path / "data", SMALL_INSTITUTIONS + ("02541200",))
    assert run_release(data, tmp_path / "legacy", "ab" * 32, tracking_uri, "2026Q4-legacy",
                       without_extras(tmp_path / "lean.toml")) == 0
    for vintage, out in ((None, "as-measured"), ("2020", "recast")):
        with pytest.raises(SystemExit) as stop:
            main(["republish", "--store", str(store_beside(tracking_uri)), "--release",
                  "2026Q4-legacy", "--out", str(tmp_path / out)]
                 + (["--cip-vintage", vintage, "--reference", str(data)]   # its IPEDS
                    if vintage else []))
        assert stop.value.code == 0
    public = {name: pd.read_csv(public_table(tmp_path / name, "pseoe_all.csv"), dtype=str)
              for name in ("legacy", "as-measured", "recast")}
    pd.testing.assert_frame_equal(public["recast"], public["legacy"])
    assert set(public["as-measured"]["cipcode"]) - set(public["recast"]["cipcode"])
    assert "CIP codes the measurements were taken in" in \
        (tmp_path / "as-measured" / "public" / "release_notes.md").read_text()
