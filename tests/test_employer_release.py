"""A real release with an employer-protecting flows mechanism (flows.mechanism): the
ledger, the DRB report and the published flows."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from conftest import SEED_A, public_table, run_release, small_data_set, without_extras
from pseo_das.synth import write_synthetic
from pseo_das.tasks.publication.flows_files import read_flows_state

pytestmark = pytest.mark.slow  # a real release


def test_a_release_measures_the_flows_with_smooth_laplace(tmp_path, tracking_uri):
    whole = tmp_path / "whole"
    write_synthetic(whole, graduates=30_000, seed=7, progress=lambda _: None, employers=True)
    data = small_data_set(whole, tmp_path / "data")     # the claims do not depend on its size
    extra = without_extras(tmp_path / "release.toml", '[flows]\nmechanism = "smooth-laplace"\n'
                           'employer_alpha = 0.05\nemployer_delta = 1e-3\n')
    out = tmp_path / "release"
    assert run_release(data, out, SEED_A, tracking_uri, extra=extra) == 0
    ledger = pd.read_csv(out / "internal" / "ledger.csv", dtype=str, keep_default_na=False)
    flows = ledger[ledger["tabulation_id"].str.match(r"^flows\.I\.cip2\.y\d+$")]
    assert len(flows) == 3 and flows["mechanism"].str.startswith("smooth Laplace").all()
    assert (flows["alpha"] == "0.05").all() and (flows["delta"] == "0.001").all()
    assert (flows["employer_notion"] == "weak").all()
    assert [Fraction(e) for e in flows["employer_epsilon"]] == \
        [int(n) * Fraction("1.2") for n in flows["n_cells"]]
    totals = ledger[ledger["tabulation_id"].str.match(r"^flows_total\.I\.cip2\.y\d+$")]
    assert (totals["mechanism"] == "two-sided geometric").all()
    assert (totals["employer_notion"] == "").all()
    report = (out / "internal" / "drb_report.md").read_text()
    assert "Employers as well as graduates" in report and "except with probability at most delta" in report
    assert "smooth Laplace" in report and "weak" in report
    # (epsilon, delta), not pure epsilon-DP: 3 x 1 + 3 x (1.2 + 0.3) = 7.5, delta 3 x 1e-3
    summary = json.loads((out / "internal" / "release_summary.json").read_text())
    guarantee = summary["guarantee"]
    assert (guarantee["pure_epsilon_dp"], guarantee["epsilon"], guarantee["delta"]) == \
        (False, "7.5", "0.003")
    assert not guarantee["sampled_exactly"]
    stated = "(epsilon, delta) = (7.5, 0.003) for each graduate, NOT pure epsilon-DP"
    notes = (out / "public" / "release_notes.md").read_text()
    for document in (notes, report):
        assert stated in document and "pure epsilon-DP for each graduate" not in document
        assert "floating-point samplers (smooth Laplace" in document
        assert "covering pseof_all.csv" in document
        assert "pseoe_all.csv, pseoh_all.csv, pseof_all.csv's origin counts are measured for " \
               "the graduates only" in document
    assert "total delta **0.003**" in report
    assert "capped per graduate by the store's lifetime delta cap 0.01" in report   # a new store's
    # the store records the delta: each population 1e-3 per flows tabulation it is in
    lifetime = pd.read_csv(out / "internal" / "lifetime_budget.csv", dtype=str)
    assert [Fraction(d) for d in lifetime["delta_after"]] == \
        [Fraction(d) for d in lifetime["delta_this_release"]]
    assert max(map(Fraction, lifetime["delta_after"])) == Fraction(3, 1000)
    assert summary["max_lifetime_delta"] == "0.003" and summary["new_delta"] == "0.003"
    # the same correction and publication: non-negative flows summing to the origin counts
    state = read_flows_state(out / "internal")
    keys = ["institution", "degree_level", "cipcode", "grad_cohort", "years_after"]
    summed = state.astype({"corrected_count": np.int64, "origin_total": np.int64}) \
        .groupby(keys).agg(corrected=("corrected_count", "sum"), target=("origin_total", "first"))
    assert (summed["corrected"] == summed["target"].clip(lower=0)).all()
    pseof = pd.read_csv(public_table(out, "pseof_all.csv"), dtype=str)
    values = pseof.filter(regex=r"^y\d+_grads").apply(pd.to_numeric).to_numpy(dtype=float)
    assert np.nanmin(values) >= 0
