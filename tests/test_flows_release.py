"""Employment flows in a real release: the invariants hold on the files as published."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pseo_das.config import load_config
from pseo_das.schemas.codes import DIVISION_OF_STATE, NONEMPLOYED_INDUSTRY
from pseo_das.schemas.pseo_layout import Product, check_public_folder, layout

pytestmark = pytest.mark.slow  # system tests: real releases (make test-fast leaves them out)

CFG = load_config()
YEARS = tuple(CFG.cells.years_after)
TEXT = {c: str for c in [*layout(Product.PSEOF).identifiers, "state"]} | {
    "agg_level_pseo": np.int64, "grad_cohort_years": np.int64}
ORIGIN = ["institution", "degree_level", "cip_level", "cipcode", "grad_cohort", "grad_cohort_years"]
DESTINATION = ["geo_level", "geography", "ind_level", "industry"]


@pytest.fixture(scope="module")
def published(releases):
    root, _ = releases
    pseof = pd.read_csv(root / "a" / "public" / "pseof_all.csv", dtype=TEXT)
    pseof = pseof.astype({c: "Int64" for c in pseof.columns if c.startswith("y")})
    state = pd.read_csv(root / "a" / "internal" / "flows_state.csv", dtype=TEXT)
    return pseof, state.assign(grad_cohort=state["grad_cohort"].str.zfill(4))


def test_pseof_follows_the_schema_and_has_every_status(releases, published):
    root, _ = releases
    report = check_public_folder(root / "a" / "public")
    assert report.ok, "\n".join(map(str, report.problems))
    pseof, _ = published
    assert set(pseof["cip_level"]) == {"2", "A"} and set(pseof["geo_level"]) == {"N", "D"}
    assert set(pseof["inst_level"]) == {"I", "S"} and "0000" in set(pseof["grad_cohort"])
    statuses = set(pd.unique(pseof.filter(like="status_").to_numpy().ravel()))
    assert statuses == {1, -1, 5}  # published, not yet observable, division-suppressed


def test_no_published_flow_is_negative(published):
    pseof, _ = published
    values = pseof.filter(regex=r"^y\d+_").to_numpy(dtype=np.float64, na_value=np.nan)
    assert np.nanmin(values) >= 0


def test_correction_keeps_noisy_totals_and_never_adds(published):
    _, state = published
    totals = state.groupby(ORIGIN + ["years_after"])[["noisy_count", "corrected_count"]].sum()
    assert (totals["corrected_count"] == totals["noisy_count"].clip(lower=0)).all()
    assert (totals["noisy_count"] < 0).any()  # some cells exercise the zeroing rule
    assert (state["corrected_count"] >= 0).all()
    assert (state["corrected_count"] <= state["noisy_count"].clip(lower=0)).all()
    assert (state["corrected_count"] < state["noisy_count"]).any()  # the correction removed units


def test_division_and_national_flows_are_sums_of_state_flows(published):
    pseof, state = published
    pseof = pseof[(pseof["inst_level"] == "I") & (pseof["grad_cohort"] != "0000")]
    employed = state[state["industry"] != NONEMPLOYED_INDUSTRY]
    division = employed["state"].map(DIVISION_OF_STATE)
    sums = {
        "D": pd.concat([employed.assign(geography=division, industry="00"),
                        employed.assign(geography=division)]),
        "N": pd.concat([employed.assign(geography="00", industry="00"),
                        employed.assign(geography="00")]),
    }
    for k in YEARS:
        for geo_level, rows in sums.items():
            expected = (rows[rows["years_after"] == k]
                        .groupby(ORIGIN + ["geography", "industry"])["corrected_count"].sum())
            shown = pseof[(pseof["geo_level"] == geo_level) & (pseof[f"status_y{k}_grads_emp"] == 1)]
            got = shown.set_index(ORIGIN + ["geography", "industry"])[f"y{k}_grads_emp"]
            assert len(got) > 0
            assert (got.astype(np.int64) == expected.reindex(got.index).fillna(0).astype(np.int64)).all()
        nonemployed = state[(state["industry"] == NONEMPLOYED_INDUSTRY) & (state["years_after"] == k)]
        national = pseof[(pseof["geo_level"] == "N") & (pseof["ind_level"] == "A")
                         & (pseof[f"status_y{k}_grads_nme"] == 1)].set_index(ORIGIN)[f"y{k}_grads_nme"]
        expected_nme = nonemployed.set_index(ORIGIN)["corrected_count"].reindex(national.index).fillna(0)
        assert (national.astype(np.int64) == expected_nme.astype(np.int64)).all()


def _sums(rows: pd.DataFrame, keys: list[str], k: int) -> pd.Series:
    published = rows[rows[f"status_y{k}_grads_emp"] == 1]
    return published.groupby(keys)[f"y{k}_grads_emp"].sum().astype(np.int64)


def test_state_and_all_cohort_rows_sum_the_institution_cohort_rows(published, synthetic_dir):
    """Nation-wide destinations are never suppressed, so the derived rows there are exact
    sums of the published institution x cohort rows."""
    pseof, _ = published
    national = pseof[pseof["geo_level"] == "N"]
    graduates = pd.read_parquet(synthetic_dir / "graduates.parquet",
                                columns=["institution", "inst_state"]).drop_duplicates()
    state_of = graduates.astype(str).set_index("institution")["inst_state"]
    cells = national[(national["inst_level"] == "I") & (national["grad_cohort"] != "0000")]
    by_state = cells.assign(institution=cells["institution"].map(state_of))
    every_cohort = cells.assign(grad_cohort="0000")
    derived = {("S", False): by_state, ("I", True): every_cohort}
    keys = ORIGIN + DESTINATION
    for k in YEARS:
        for (inst_level, all_cohorts), source in derived.items():
            shown = national[(national["inst_level"] == inst_level)
                             & ((national["grad_cohort"] == "0000") == all_cohorts)]
            got = _sums(shown, keys, k)
            assert len(got) > 0
            assert (got == _sums(source, keys, k).reindex(got.index)).all()


def test_release_documents_report_the_flows(releases):
    root, _ = releases
    notes = (root / "a" / "public" / "release_notes.md").read_text()
    drb = (root / "a" / "internal" / "drb_report.md").read_text()
    assert "## Employment flows" in notes and "pseof_all.csv" in notes
    assert "## Employment flows" in drb and "Division suppression" in drb
    assert "recomputed from flows_state.csv" in drb
    assert "FAILED" not in drb


def test_bad_reference_file_stops_the_release_before_any_noise(synthetic_dir, tmp_path,
                                                                 tracking_uri, capsys):
    import shutil

    import mlflow

    from conftest import SEED_A, run_release
    from pseo_das.tasks.inputs.reference_inputs import default_reference_dir

    reference = tmp_path / "reference"
    shutil.copytree(default_reference_dir(), reference)
    coverage = reference / "state_coverage.csv"
    coverage.write_text(coverage.read_text().replace("\n04,2012,2022", "\n04,2023,2012"))
    out = tmp_path / "release"
    assert run_release(synthetic_dir, out, SEED_A, tracking_uri,
                       extra=("--reference", str(reference))) == 2
    err = capsys.readouterr().err
    assert "nothing was published" in err and "state_coverage.csv" in err and "first_year" in err
    assert not out.exists() and list(tmp_path.glob(".release*")) == []
    client = mlflow.MlflowClient(tracking_uri)
    run = client.search_runs([client.get_experiment_by_name("pseo-das quarterly release").experiment_id])[0]
    assert run.info.status == "FAILED"
    assert not any(k.startswith("epsilon") for k in run.data.metrics)
