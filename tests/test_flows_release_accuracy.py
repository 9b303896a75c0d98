"""The DRB report's expected accuracy of the published flows (simulated around a stand-in
truth) and the consistency of grads_emp with grads_earn, on hand-made tables."""
import math

import numpy as np
import pandas as pd
import pytest

from pseo_das.config import load_config
from pseo_das.tasks.codes.destinations import NONEMPLOYED, N_DESTINATIONS
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir, load_reference_inputs
from pseo_das.tasks.privacy.geometric import geometric_variance
from pseo_das.tasks.study.flows_release_accuracy import (grads_consistency,
                                                         simulate_flows_accuracy)
from pseo_das.tasks.study.flows_study_sample import TrueFlows

CFG = load_config()
SEED = b"flows release accuracy tests"


@pytest.fixture(scope="module")
def reference():
    return load_reference_inputs(default_reference_dir())


def _stand_in(years_after: int, seed: int) -> TrueFlows:
    """Three institutions x two degree levels x two cohorts x three 2-digit CIP fields:
    sparse flows of 0 to 60 graduates per cell, some non-employed."""
    rng = np.random.default_rng(seed)
    rows = [(inst, state, degree, cip, cohort)
            for inst, state in (("00123400", "08"), ("00234500", "48"), ("00345600", "26"))
            for degree in ("05", "07") for cohort in (2001, 2006) for cip in ("11", "14", "52")]
    cells = pd.DataFrame(rows, columns=["institution", "inst_state", "degree_level", "cipcode",
                                        "grad_cohort"]).assign(grad_cohort_years=5)
    flows = np.zeros((len(cells), N_DESTINATIONS), dtype=np.int64)
    for i in range(len(cells)):
        n = int(rng.integers(0, 60))
        destinations = rng.choice(N_DESTINATIONS, size=8, replace=False)
        flows[i] = np.bincount(rng.choice(destinations, size=n), minlength=N_DESTINATIONS)
        flows[i, NONEMPLOYED] += int(rng.integers(0, 5))
    return TrueFlows.of_field_flows(years_after, cells, flows)


def test_a_stand_in_sums_its_fields_into_all_fields_cells():
    t = _stand_in(1, 0)
    assert len(t.all_fields_cells) == 12 and set(t.all_fields_cells["cipcode"]) == {"00"}
    first = t.all_fields_cells.iloc[0]
    mine = ((t.field_cells["institution"] == first["institution"])
            & (t.field_cells["degree_level"] == first["degree_level"])
            & (t.field_cells["grad_cohort"] == first["grad_cohort"])).to_numpy()
    assert mine.sum() == 3
    assert np.array_equal(t.all_fields_flows[0], t.field_flows[mine].sum(axis=0))
    assert t.all_fields_flows.sum() == t.field_flows.sum()


@pytest.mark.parametrize("total_epsilon", [None, 40.0])
def test_without_noise_the_simulation_publishes_the_stand_in(reference, total_epsilon):
    """At epsilon 40 the geometric noise is 0 (P(not 0) ~ 1e-17 per value): the simulated
    release corrects nothing and publishes the stand-in exactly, with either total."""
    stand_in = [_stand_in(1, 1), _stand_in(5, 2)]
    summary, errors = simulate_flows_accuracy(stand_in, reference, 40.0, total_epsilon,
                                              CFG.flows.nonemployed_weight, 2, SEED)
    assert set(summary["years_after"]) == {1, 5}
    assert set(summary["quantity"]) == {"employed", "not employed", "in-state",
                                        "division x sector"}
    measures = summary[["bias", "mean_abs_error", "zero_share"]]
    assert (measures.fillna(0) == 0).all().all()       # NaN: nothing true in the group
    all_cells = summary[summary["stratum"] == "all cells"]
    assert all_cells[["bias", "mean_abs_error", "zero_share"]].notna().all().all()
    for k, frame in errors.items():
        assert list(frame.columns) == ["institution", "degree_level", "grad_cohort",
                                       "error_0", "error_1"]
        assert len(frame) == 12 and (frame[["error_0", "error_1"]] == 0).all().all()


def test_the_simulation_is_noisy_and_reproducible_for_a_seed(reference):
    stand_in = [_stand_in(1, 3)]
    first = simulate_flows_accuracy(stand_in, reference, 1.2, 0.3, CFG.flows.nonemployed_weight,
                                    1, SEED)
    again = simulate_flows_accuracy(stand_in, reference, 1.2, 0.3, CFG.flows.nonemployed_weight,
                                    1, SEED)
    other = simulate_flows_accuracy(stand_in, reference, 1.2, 0.3, CFG.flows.nonemployed_weight,
                                    1, b"another seed")
    pd.testing.assert_frame_equal(first[0], again[0])
    pd.testing.assert_frame_equal(first[1][1], again[1][1])
    assert not first[1][1]["error_0"].equals(other[1][1]["error_0"])
    all_cells = first[0][first[0]["stratum"] == "all cells"].set_index("quantity")
    assert all_cells.loc["employed", "mean_abs_error"] > 0
    assert 0 < all_cells.loc["division x sector", "zero_share"] < 1


def _consistency_tables():
    """pseoe/pseof rows of three all-fields institution cells by cohort at 1 year after
    (one suppressed in pseoe), a state row and a 2-digit row that must be left out, and the
    earnings cell summary with their noise terms."""
    ids = pd.DataFrame({"inst_level": ["I", "I", "I", "S", "I"],
                        "institution": ["00123400", "00234500", "00345600", "00000008", "00123400"],
                        "degree_level": ["05", "05", "07", "05", "05"],
                        "cip_level": ["A", "A", "A", "A", "2"],
                        "cipcode": ["00", "00", "00", "00", "11"],
                        "grad_cohort": ["2001", "2001", "2006", "2001", "2001"]})
    pseoe = ids.assign(y1_grads_earn=pd.array([100, 40, None, 900, 20], dtype="Int64"),
                       status_y1_grads_earn=[1, 1, 5, 1, 1])
    pseof = ids.assign(geo_level="N", geography="00", ind_level="A", industry="00",
                       y1_grads_emp=pd.array([104, 35, 50, 880, 22], dtype="Int64"),
                       status_y1_grads_emp=[1, 1, 1, 1, 1])
    pseof = pd.concat([pseof, ids.assign(geo_level="D", geography="8", ind_level="A",
                                         industry="00", y1_grads_emp=pd.array([3] * 5, dtype="Int64"),
                                         status_y1_grads_emp=[1] * 5)], ignore_index=True)
    cells = ids.assign(years_after=1, noise_terms=[4, 9, 2, 30, 1])
    errors = {1: pd.DataFrame({"institution": ["00123400", "00234500", "00345600"],
                               "degree_level": ["05", "05", "07"],
                               "grad_cohort": ["2001", "2001", "2006"],
                               "error_0": [2.0, -4.0, 7.0], "error_1": [0.0, 6.0, 1.0]})}
    return pseoe, pseof, cells, errors


def test_grads_consistency_of_hand_made_tables():
    pseoe, pseof, cells, errors = _consistency_tables()
    cfg = CFG.model_copy(update={"cells": CFG.cells.model_copy(update={"years_after": [1]})})
    row, = grads_consistency(cfg, pseoe, pseof, cells, errors)
    assert row["years_after"] == 1 and row["cells"] == 2          # published in both files
    assert row["mean"] == pytest.approx((4 - 5) / 2)
    assert row["sd"] == pytest.approx(np.std([4, -5], ddof=1))
    earn = CFG.earnings.n_bins * geometric_variance(CFG.privacy.epsilon_per_tabulation) * (4 + 9) / 2
    assert row["earnings_noise_sd"] == pytest.approx(math.sqrt(earn))
    simulated = np.array([2.0, 0.0, -4.0, 6.0])                  # the two cells' draws
    assert row["expected_mean"] == pytest.approx(simulated.mean())
    assert row["employed_error_sd"] == pytest.approx(simulated.std())
    assert row["implied_sd"] == pytest.approx(math.sqrt(earn + simulated.var()))


def test_a_years_after_without_origin_cells_gives_empty_measures(reference):
    empty = _stand_in(10, 4)
    empty = TrueFlows.of_field_flows(10, empty.field_cells.iloc[:0], empty.field_flows[:0])
    summary, errors = simulate_flows_accuracy([_stand_in(1, 5), empty], reference, 1.2, 0.3,
                                              CFG.flows.nonemployed_weight, 1, SEED)
    ten = summary[summary["years_after"] == 10]
    assert set(ten["stratum"]) == {"all cells"} and (ten["cells"] == 0).all()
    assert len(errors[10]) == 0 and len(errors[1]) == 12


def test_a_large_table_is_simulated_on_whole_all_fields_cells_of_a_sample(monkeypatch):
    """Above STAND_IN_MAX_CELLS origin cells the stand-in is a seeded sample of all-fields
    cells, each with every field it sums; at or below it, the whole table."""
    import pseo_das.tasks.study.flows_release_accuracy as accuracy
    from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows
    whole = _stand_in(1, 3)
    table = NoisyFlows("flows.I.cip2.y1", "2", 1, whole.field_cells, whole.field_flows,
                       ("flows.I.cip2.y1",), corrected=whole.field_flows)
    assert len(accuracy.stand_in_flows([table], SEED)[0].field_cells) == 36
    monkeypatch.setattr(accuracy, "STAND_IN_MAX_CELLS", 18)   # keep each of 12 with p = 1/2
    sizes = set()
    for seed in (b"a", b"b", b"c", b"d"):
        sample = accuracy.stand_in_flows([table], seed)[0]
        kept = sample.field_cells.groupby(["institution", "degree_level", "grad_cohort"]).size()
        assert (kept == 3).all()                     # whole all-fields cells only
        assert len(sample.all_fields_cells) == len(kept)
        assert sample.all_fields_flows.sum() == sample.field_flows.sum()
        sizes.add(len(kept))
        again = accuracy.stand_in_flows([table], seed)[0]
        assert again.field_cells.equals(sample.field_cells)   # the seed's sample, every time
    assert len(sizes) > 1 and all(0 < n < 12 for n in sizes)


def test_a_national_stand_in_is_one_sample_of_all_fields_cells_for_every_years_after(monkeypatch):
    """Above STAND_IN_MAX_CELLS origin cells over all years-after, one seeded sample of
    all-fields cells is kept in every years-after (the simulation's size follows the cells,
    not the number of years-after); at or below it, every table whole."""
    import pseo_das.tasks.study.flows_release_accuracy as accuracy
    from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows
    tables = []
    for k, seed in ((1, 3), (5, 4)):
        whole = _stand_in(k, seed)
        tables.append(NoisyFlows(f"flows.I.cip2.y{k}", "2", k, whole.field_cells,
                                 whole.field_flows, (f"flows.I.cip2.y{k}",),
                                 corrected=whole.field_flows))
    assert [len(t.field_cells) for t in accuracy.stand_in_flows(tables, SEED)] == [36, 36]
    monkeypatch.setattr(accuracy, "STAND_IN_MAX_CELLS", 36)   # 72 cells: each of 12 with p = 1/2
    sizes = set()
    for seed in (b"a", b"b", b"c", b"d"):
        y1, y5 = accuracy.stand_in_flows(tables, seed)
        kept = [set(map(tuple, t.all_fields_cells[["institution", "degree_level", "grad_cohort"]]
                        .astype(str).to_numpy())) for t in (y1, y5)]
        assert kept[0] == kept[1]                    # the same all-fields cells in both
        assert len(y1.field_cells) == 3 * len(kept[0])
        sizes.add(len(kept[0]))
    assert len(sizes) > 1 and all(0 < n < 12 for n in sizes)
